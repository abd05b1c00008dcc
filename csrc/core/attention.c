/* attention.c — the flash-attention forward: its variants (string, parse,
 * validation against the device for either direction, default, list) and one
 * call (upload, poison O, dispatch with optional GPU timing, download) in one
 * submission. The backward's call is attention_bwd.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SCALAR_THREADS 64u /* attention_scalar.comp: one query row per invocation */

void hl_attn_variant_format(const hl_attn_variant *v, char *out, size_t cap) {
    hl_schema_format(&hl_attn_variant_schema, v, out, cap);
}

hl_status hl_attn_variant_parse(const char *s, hl_attn_variant *out, hl_error *err) {
    return hl_schema_parse(&hl_attn_variant_schema, s, out, err);
}

/* Whether the forward at head dimension d folds each row's running max into its
 * score product (attention_coop.comp's FOLD; HELIOS_DISABLE_ATTENTION_FOLD=1 turns
 * it off). Measured on the H100 (benchmarks/results/h100-attn-fold-05f8336/): at
 * d <= 64 it wins wherever it leaves the workgroups per SM as they were (6-19%);
 * at d = 128 the two-row-tile variants, at 255 registers already, spill with it
 * (0.50 against 0.32 ms at 1x32x2048x128) and one row tile gains nothing. */
#define FOLD_MAX_HEAD_DIM 64u
static hl_status fold_forward(uint32_t d, int *on, hl_error *err) {
    int off = 0;
    hl_status st = hl_env_flag("HELIOS_DISABLE_ATTENTION_FOLD", &off, err);
    *on = !off && d <= FOLD_MAX_HEAD_DIM;
    return st;
}

/* Whether the forward's rows in registers may hand P to P V as A operands converted in
 * registers (attention_coop.comp's P_IN_REGISTERS build) rather than through the
 * subgroup's shared scratch: on a device with NV cooperative matrix 2's conversions, in a
 * build whose glslc had them, on a fragment shape with TN == TK, at d <= 128;
 * HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS=1 turns it off. Read for every coop variant (a
 * bad value is refused wherever the switch could apply). Measured on the H100
 * (benchmarks/results/h100-attn-p-regs-56c7eb7/, the switch at 1 and 0 in one process):
 * 32x8x512x64 0.0815 against 0.0877 ms, 16x16x640x64 0.1185 against 0.1266, causal
 * 8x16x1024x64 0.1175 against 0.1268 (bf16 0.1161 against 0.1234). At d = 128 it loses
 * with two row tiles a subgroup (causal 1x32x2048x128 0.2640 against 0.2421, 255 registers
 * either way) but frees the scratch for 64-key tiles, which win with one
 * (h100-attn-wide-rows-9ceaea2/: see preferred()). */
#define P_REGS_MAX_HEAD_DIM 128u
static hl_status p_regs_possible(const hl_device *dev, const hl_attn_variant *v, uint32_t d, int *on, hl_error *err) {
    int off = 0;
    hl_status st = hl_env_flag("HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS", &off, err);
    *on = st == HL_OK && !off && v->path == HL_PATH_COOP && d <= P_REGS_MAX_HEAD_DIM && v->tn == v->tk &&
          dev->coop_enabled && dev->caps.coop2_conversions && HL_BUILT_GL_NV_COOPERATIVE_MATRIX2;
    return st;
}

/* The forward keeps its softmax rows in registers (attention_coop.comp's ROWS):
 * on a fragment shape whose accumulator layout allows it (layout.c), at d <= 64, causal at
 * any d, and at any d where P can stay in registers too (p_regs_possible);
 * HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS=1 turns it off (the fold or the row-wise path
 * through shared memory, as before). Measured on the H100
 * (benchmarks/results/h100-attn-rows-session19/, models against the kernel in one call):
 * 32x8x512x64 0.0886 against the fold's 0.0961 ms, 16x16x640x64 0.1283 against 0.1390;
 * causal 1x32x2048x128 0.2482 (16x16x16) against the row-wise 16x8x16 path's ~0.26. Not
 * at d = 128 without a mask with P through shared memory: 0.3055 against 0.2991 (255
 * registers either way). */
#define ROWS_MAX_HEAD_DIM 64u

/* The forward kernel variant v runs at head dimension d: whether it folds its running max
 * (fold_forward), keeps its rows in registers (`rows`: their layout, as above) and P too
 * (`p_regs`: a variant with its rows in registers where p_regs_possible). The one place the
 * check, the default and the pipeline learn it from; it reads the three switches. */
typedef struct {
    int fold, p_regs;
    const hl_rows_layout *rows;
} forward_kernel;

static hl_status forward_kernel_of(const hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal,
                                   forward_kernel *k, hl_error *err) {
    int rows_off = 0, possible = 0;
    *k = (forward_kernel){0};
    hl_status st = fold_forward(d, &k->fold, err);
    if (st == HL_OK) st = hl_env_flag("HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS", &rows_off, err);
    if (st == HL_OK) st = p_regs_possible(dev, v, d, &possible, err);
    if (st != HL_OK) return st;
    if (!rows_off && v->path == HL_PATH_COOP && (d <= ROWS_MAX_HEAD_DIM || causal || possible)) {
        const hl_rows_layout *L = hl_rows_layout_find(dev, v->tm, v->tn, v->tk);
        if (L && L->ok) k->rows = L;
    }
    k->p_regs = k->rows != NULL && possible;
    return HL_OK;
}

/* Shared memory of a forward coop variant at head dimension d: two streamed tiles of bc
 * padded rows, then per subgroup its scratch (attention_coop.comp: the fp32 scores,
 * or P, the rescale tile and with the fold the rows' max pieces; with P in registers
 * (`compact`) only the tail rows' O tile and the ids tile). The backward's:
 * hl_attn_bwd_kernels_of. */
static uint32_t coop_shared_bytes(const hl_attn_variant *v, uint32_t d, int fold, int compact) {
    const uint32_t rq = v->wq * v->tm;
    const uint32_t s_vecs = rq * (v->bc / 4 + 1), p_vecs = rq * (v->bc / 8 + 1);
    const uint32_t tiles = 16u * 2u * v->bc * (d / 8 + 1);
    if (compact) return tiles + 16u * v->nsg * (v->tm * (v->tn / 8) + v->tm * (v->tn / 4));
    const uint32_t pa_vecs = p_vecs + rq * (v->tn / 4) + (fold ? rq * (v->tk / 8) : 0);
    return tiles + 16u * v->nsg * (s_vecs > pa_vecs ? s_vecs : pa_vecs);
}

/* The forward's count for a variant, causal or not: P and the rows in registers without a
 * mask (a mask only widens the rows path) take the compact scratch whether causal or not.
 * What the check holds against the device's limit, and what the kernel checks its own
 * declarations against (SHARED_BYTES). */
static hl_status forward_shared_bytes(const hl_device *dev, const hl_attn_variant *v, uint32_t d, uint32_t *out,
                                      hl_error *err) {
    forward_kernel k;
    hl_status st = forward_kernel_of(dev, v, d, 0, &k, err);
    if (st == HL_OK) *out = coop_shared_bytes(v, d, k.fold, k.p_regs);
    return st;
}

hl_status hl_attn_variant_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in,
                                hl_error *err) {
    return hl_attn_check(dev, v, d, in, 0, err);
}

hl_status hl_attn_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in, int backward,
                        hl_error *err) {
    char vs[HL_VARIANT_STR_MAX];
    hl_attn_variant_format(v, vs, sizeof vs);
    if (d == 0 || d > HL_ATTENTION_MAX_HEAD_DIM)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "attention: head dimension %u is outside 1..%u", d,
                       HL_ATTENTION_MAX_HEAD_DIM);
    if (in != HL_F16 && in != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "attention: Q, K and V must be f16 or bf16, got %s",
                       hl_dtype_name(in));
    if (in == HL_BF16 && !dev->caps.has_int16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE,
                       "bfloat16 attention needs shaderInt16 (16-bit stores); device '%s' lacks it", dev->caps.name);
    if (v->path == HL_PATH_SCALAR) return HL_OK;
    if (in == HL_BF16 && v->path == HL_PATH_COOP && hl_bf16_coop_unavailable(dev))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: no bfloat16 cooperative-matrix kernels on '%s': %s (fa-scalar runs "
                       "bfloat16 there)",
                       vs, dev->caps.name, hl_bf16_coop_unavailable(dev));
    if (v->path != HL_PATH_COOP)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "attention variant %s: unknown path", vs);
    const hl_caps *c = &dev->caps;
    if (!dev->coop_enabled)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s needs cooperative matrices, "
                       "which are %s on '%s'",
                       vs, c->has_coop ? "disabled" : "absent", c->name);
    if (!hl_find_coop_shape(c, v->tm, v->tn, v->tk, in, HL_F32))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: '%s' offers no %ux%ux%u "
                       "%s x %s -> f32 subgroup cooperative matrix",
                       vs, c->name, v->tm, v->tn, v->tk, hl_dtype_name(in), hl_dtype_name(in));
    const uint32_t sg = c->subgroup_size, rq = v->wq * v->tm;
    const uint32_t lpr = sg >= rq ? sg / rq : 1;
    if (d % v->tk || d % v->tn || d % 8)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: head dimension %u is not "
                       "a multiple of %u, %u and 8",
                       vs, d, v->tk, v->tn);
    if (v->tk % 8 || v->tn % 8 || v->bc % v->tn || v->bc % v->tk || (2 * v->bc) % v->tm)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: the key tile must be a "
                       "multiple of TN and TK (themselves multiples of 8), twice it a multiple of TM",
                       vs);
    if ((sg >= rq ? sg % rq : rq % sg) || (v->bc / lpr) % 8 || v->bc % lpr)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: %u rows per subgroup of "
                       "%u invocations do not split the %u-key tile into 8-column parts",
                       vs, rq, sg, v->bc);
    if (v->nsg * sg > c->max_workgroup_invocations)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: %u invocations per "
                       "workgroup; '%s' allows %u",
                       vs, v->nsg * sg, c->name, c->max_workgroup_invocations);
    if (!backward && v->dq_bc)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention variant %s: dq%u (the backward dQ kernel's key tile) belongs to backward variants; "
                       "the forward takes the same variant without ':dq%u'",
                       vs, v->dq_bc, v->dq_bc);
    uint32_t smem;
    if (backward) {
        if (v->bc > v->nsg * sg)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                           "attention backward variant %s: the %u-query tile needs at least as many invocations (%u)",
                           vs, v->bc, v->nsg * sg);
        hl_attn_bwd_kernels k;
        hl_status st = hl_attn_bwd_kernels_of(dev, v, d, &k, err);
        if (st != HL_OK) return st;
        if (v->dq_bc && k.dq_regs_why)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                           "attention backward variant %s: a dQ key tile of its own (dq%u) hands dS over in registers, "
                           "which needs %s",
                           vs, v->dq_bc, k.dq_regs_why);
        if (v->dq_bc % v->tn || v->dq_bc % v->tk || (v->dq_bc / lpr) % 8 || v->dq_bc % lpr)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                           "attention backward variant %s: the dQ key tile (dq%u) must be a multiple of TN and TK "
                           "that splits into 8-column parts over a row's %u invocation(s)",
                           vs, v->dq_bc, lpr);
        smem = k.dq_shared_bytes > k.dkdv_shared_bytes ? k.dq_shared_bytes : k.dkdv_shared_bytes;
    } else {
        hl_status st = forward_shared_bytes(dev, v, d, &smem, err);
        if (st != HL_OK) return st;
    }
    if (smem > c->shared_memory_bytes)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention %svariant %s at head dimension %u needs "
                       "%u bytes of shared memory; '%s' has %u",
                       backward ? "backward " : "", vs, d, smem, c->name, c->shared_memory_bytes);
    return HL_OK;
}

/* Every coop variant valid here for head dimension d (either direction): per
 * f16 -> f32 shape the device offers, key tiles x subgroups x row tiles per subgroup. */
size_t hl_attn_candidates(const hl_device *dev, uint32_t d, hl_dtype in, int backward, hl_attn_variant *out,
                          size_t cap) {
    static const uint32_t nsgs[] = {4, 8}, wqs[] = {1, 2, 4}, bcs[] = {32, 16, 64};
    const hl_caps *c = &dev->caps;
    size_t n = 0;
    hl_error err;
    for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
        const hl_coop_shape *s = &c->coop_shapes[i];
        if (hl_find_coop_shape(c, s->m, s->n, s->k, in, HL_F32) != s) continue;
        for (size_t a = 0; a < sizeof bcs / sizeof *bcs; a++)
            for (size_t b = 0; b < sizeof nsgs / sizeof *nsgs; b++)
                for (size_t w = 0; w < sizeof wqs / sizeof *wqs; w++) {
                    hl_attn_variant v = {HL_PATH_COOP, s->m, s->n, s->k, bcs[a], nsgs[b], wqs[w]};
                    if (hl_attn_check(dev, &v, d, in, backward, &err) != HL_OK) continue;
                    if (n < cap) out[n] = v;
                    n++;
                }
    }
    return n;
}

/* Measured on the H100 (benchmarks/results/h100-attn-c39e6dc, the shapes
 * and seed 004's): two row tiles per subgroup and four subgroups (128 query rows
 * per workgroup) won every shape; 16x16x16 fragments without a mask, 16x8x16
 * with the causal one; 16-key tiles, except 32 at d <= 64 and S_kv <= 256
 * (short rows: fewer, larger tiles). With the running max folded (d <= 64):
 * 32-key tiles and 16x16x16 fragments, causal too (h100-attn-fold-05f8336 and
 * -6113411: the fold's registers cost 16-key tiles a third workgroup per SM,
 * 32-key tiles had two either way; causal 16x16x16 beat 16x8x16 by 3-6% there).
 * The rows in registers (`fast`, as the fold): the same, and 16x16x16 causal at d=128 too
 * (0.2482 against 0.2553 ms for 16x8x16 at 1x32x2048x128, h100-attn-rows-session19).
 * With P in registers (`p_regs`: its scratch freed, so 64-key tiles fit;
 * h100-attn-wide-rows-28a852b, every 16x16x16 variant in one call): at d <= 64 two row
 * tiles and 64-key tiles (32x8x512x64 0.0762 against bc32's 0.0812 ms, 16x16x640x64 0.1104
 * against 0.1182), causal one row tile and 32-key tiles (8x16x1024x64 0.1087 against
 * 0.1189); at d = 128 one row tile, eight subgroups and 64-key tiles, causal or not
 * (1x32x4096x128 0.9892 against the two-row-tile 16-key default's 1.1507, causal 0.6595
 * against 0.7565), and causal at 64 < d < 128; non-causal there two row tiles still fit
 * beside P and take 16-key tiles (h100-attn-mid-d-9b9da2a: 1x32x2048x96 0.1991 against
 * eight subgroups' 0.2117, d=80 0.1759 / 0.1905, 4x16x1024x112 0.1227 / 0.1381; causal
 * the other way: 0.1905 / 0.1723 at d=96). Where none of these fits, the first valid
 * candidate. */
static int preferred(const hl_device *dev, uint32_t d, uint32_t skv, int causal, int fast, int p_regs, hl_dtype in,
                     hl_attn_variant *out) {
    const uint32_t bc = d <= 64 && (skv <= 256 || fast) ? 32 : 16, tn = causal && !fast ? 8 : 16;
    /* with P in registers: one row tile, eight subgroups, 64 keys (d > 64; causal, or d = 128) */
    hl_attn_variant p_regs_pick = {HL_PATH_COOP, 16, 16, 16, 64, 8, 1};
    if (d <= ROWS_MAX_HEAD_DIM)
        p_regs_pick = causal ? (hl_attn_variant){HL_PATH_COOP, 16, 16, 16, 32, 4, 1}
                             : (hl_attn_variant){HL_PATH_COOP, 16, 16, 16, 64, 4, 2};
    else if (d <= 112 && !causal)
        p_regs_pick = (hl_attn_variant){HL_PATH_COOP, 16, 16, 16, 16, 4, 2};
    const hl_attn_variant list[] = {
        p_regs_pick, /* p_regs only */
        {HL_PATH_COOP, 16, tn, 16, bc, 4, 2},
        {HL_PATH_COOP, 16, 24 - tn, 16, bc, 4, 2},
        {HL_PATH_COOP, 16, 8, 16, 16, 4, 1},
    };
    hl_error err;
    for (size_t i = p_regs ? 0 : 1; i < sizeof list / sizeof *list; i++)
        if (hl_attn_variant_check(dev, &list[i], d, in, &err) == HL_OK) {
            *out = list[i];
            return 1;
        }
    return hl_attn_candidates(dev, d, in, 0, out, 1) > 0;
}

hl_status hl_attn_variant_default(const hl_device *dev, uint32_t d, uint32_t skv, int causal, hl_dtype in,
                                  hl_attn_variant *out, hl_error *err) {
    int off = 0;
    forward_kernel k;
    const hl_attn_variant shape16 = {HL_PATH_COOP, 16, 16, 16, 16, 4, 2}; /* the defaults' fragment shape */
    hl_status st = hl_env_flag("HELIOS_DISABLE_COOP_ATTENTION", &off, err);
    /* the switches the checks below read (and whose failures they drop) */
    if (st == HL_OK) st = forward_kernel_of(dev, &shape16, d, causal, &k, err);
    if (st != HL_OK) return st;
    memset(out, 0, sizeof *out);
    out->path = HL_PATH_SCALAR;
    /* bfloat16 without its cooperative kernels: the scalar fp32 path, never fp16 */
    if (!off && dev->coop_enabled && (in != HL_BF16 || !hl_bf16_coop_unavailable(dev)))
        preferred(dev, d, skv, causal, k.fold || k.rows, k.p_regs, in, out);
    return hl_attn_variant_check(dev, out, d, in, err);
}

size_t hl_attn_variant_list(const hl_device *dev, uint32_t d, hl_dtype in, hl_attn_variant *out, size_t cap) {
    size_t n = dev->coop_enabled ? hl_attn_candidates(dev, d, in, 0, out, cap) : 0;
    if (d >= 1 && d <= HL_ATTENTION_MAX_HEAD_DIM) {
        if (n < cap) out[n] = (hl_attn_variant){.path = HL_PATH_SCALAR};
        n++;
    }
    return n < cap ? n : cap;
}

/* The pipeline of a (checked) variant for head dimension d and operands laid out
 * as layout (NULL: packed), and the query rows one workgroup covers. */
static hl_status attn_pipeline(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, int lse, hl_dtype in,
                               const hl_attn_layout *layout, hl_pipeline **out, uint32_t *rows, hl_error *err) {
    hl_spec_env e = {.subgroup = dev->caps.subgroup_size,
                     .d = d,
                     .causal = causal ? 1u : 0u,
                     .lse = lse ? 1u : 0u,
                     .qkv_rs = layout ? layout->qkv_rs : 0u,
                     .o_rs = layout ? layout->o_rs : 0u};
    uint32_t spec[HL_MAX_SPEC];
    if (v->path != HL_PATH_COOP) {
        *rows = SCALAR_THREADS;
        hl_spec_attention_scalar(spec, v, &e);
        return hl_pipeline_get(dev, hl_shader_attention_scalar(in), spec, HL_SPEC_ATTENTION_SCALAR_COUNT, 0, out, err);
    }
    forward_kernel k;
    hl_status st = forward_kernel_of(dev, v, d, causal, &k, err);
    if (st == HL_OK) st = forward_shared_bytes(dev, v, d, &e.shared_bytes, err);
    if (st != HL_OK) return st;
    e.fold = k.fold && !k.rows ? 1u : 0u;
    if (k.rows) {
        e.rows = 1;
        e.rows_slots = k.rows->slots;
        e.rows_shift = k.rows->shift;
        e.rows_lanes = k.rows->lanes;
    }
    *rows = v->nsg * v->wq * v->tm;
    hl_spec_attention_coop(spec, v, &e);
    return hl_pipeline_get(dev, hl_shader_attention_coop(in, k.p_regs), spec, HL_SPEC_ATTENTION_COOP_COUNT, e.subgroup,
                           out, err);
}

hl_status hl_attn_kernel_stats(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, hl_dtype in,
                               hl_kernel_stats *out, hl_error *err) {
    hl_status st = hl_attn_variant_check(dev, v, d, in, err);
    if (st != HL_OK) return st;
    hl_pipeline *p;
    uint32_t rows;
    st = attn_pipeline(dev, v, d, causal, 0, in, NULL, &p, &rows, err);
    if (st != HL_OK) return st;
    *out = p->stats;
    return HL_OK;
}

hl_status hl_attn_check_call(const hl_device *dev, const char *who, uint64_t bh, uint64_t sq, uint64_t skv, uint64_t d,
                             int causal, float scale, uint32_t warmup, uint32_t iters, const double *samples_ms,
                             hl_error *err) {
    const hl_caps *caps = &dev->caps;
    if (!bh || !sq || !skv || !d)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: batch*heads=%llu, S_q=%llu, S_kv=%llu, d=%llu; every dimension must be >= 1", who,
                       (unsigned long long)bh, (unsigned long long)sq, (unsigned long long)skv, (unsigned long long)d);
    if (iters && !samples_ms) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters > 0 needs a samples buffer");
    if (iters && !dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' has no usable timestamps on its compute queue",
                       caps->name);
    if (iters > HL_MAX_LAUNCHES || warmup > HL_MAX_LAUNCHES)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters and warmup must be <= %u", HL_MAX_LAUNCHES);
    if (!isfinite(scale)) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: scale must be finite", who);
    if (causal && sq != skv)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "%s: causal masking needs S_q == S_kv (got %llu and %llu)", who,
                       (unsigned long long)sq, (unsigned long long)skv);
    const uint64_t q_elems = bh * sq * d, kv_elems = bh * skv * d, lim = HL_MAX_OPERAND_ELEMENTS;
    const uint64_t q_bytes = q_elems * 2, kv_bytes = kv_elems * 2;
    if (q_elems >= lim || kv_elems >= lim || q_bytes > caps->max_storage_buffer_range ||
        kv_bytes > caps->max_storage_buffer_range)
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "%s %llux%llux%llu (S_kv %llu): an operand spans %llu bytes; kernels index with 32 bits and "
                       "the device allows %llu bytes per buffer",
                       who, (unsigned long long)bh, (unsigned long long)sq, (unsigned long long)d,
                       (unsigned long long)skv, (unsigned long long)(q_bytes > kv_bytes ? q_bytes : kv_bytes),
                       (unsigned long long)caps->max_storage_buffer_range);
    return HL_OK;
}

hl_status hl_attn_layout_check(const hl_device *dev, const char *who, const hl_attn_layout *l, uint64_t bh, uint64_t sq,
                               uint64_t skv, uint64_t d, hl_attn_spans *out, hl_error *err) {
    out->q = out->o = bh * sq * d * 2;
    out->kv = bh * skv * d * 2;
    if (!l->qkv_rs && !l->o_rs) {
        if (l->q_off || l->k_off || l->v_off)
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: q/k/v offsets need a row layout (qkv_rs > 0)", who);
        return HL_OK;
    }
    const uint64_t nh = l->heads, width = nh * d;
    if (!nh || bh % nh)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: heads %u must divide batch*heads %llu (a row layout)", who,
                       l->heads, (unsigned long long)bh);
    if (d % 8)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: a row layout needs a head dimension that is a multiple of 8, "
                       "got %llu",
                       who, (unsigned long long)d);
    const uint64_t batch = bh / nh, rs[2] = {l->qkv_rs, l->o_rs};
    static const char *names[2] = {"qkv_rs", "o_rs"};
    for (int i = 0; i < 2; i++)
        if (rs[i] && (rs[i] % 8 || rs[i] < width))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "%s: %s %llu must be a multiple of 8 and hold the %llu x %llu heads of a row", who, names[i],
                           (unsigned long long)rs[i], (unsigned long long)nh, (unsigned long long)d);
    const uint32_t offs[3] = {l->q_off, l->k_off, l->v_off};
    static const char *off_names[3] = {"q_off", "k_off", "v_off"};
    for (int i = 0; i < 3; i++)
        if (offs[i] && (!l->qkv_rs || offs[i] % 8 || offs[i] + width > l->qkv_rs))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "%s: %s %u must be a multiple of 8 with its %llu heads inside a row of qkv_rs %u", who,
                           off_names[i], offs[i], (unsigned long long)width, l->qkv_rs);
    if (l->qkv_rs) {
        out->q = batch * sq * l->qkv_rs * 2;
        out->kv = batch * skv * l->qkv_rs * 2;
    }
    if (l->o_rs) out->o = batch * sq * l->o_rs * 2;
    const uint64_t most =
        out->q > out->kv ? (out->q > out->o ? out->q : out->o) : (out->kv > out->o ? out->kv : out->o);
    if (most / 2 >= HL_MAX_OPERAND_ELEMENTS || most > dev->caps.max_storage_buffer_range)
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "%s: an operand's rows span %llu bytes; kernels index with 32 bits and the device allows %llu "
                       "bytes per buffer",
                       who, (unsigned long long)most, (unsigned long long)dev->caps.max_storage_buffer_range);
    return HL_OK;
}

void hl_attn_layout_push(const hl_attn_layout *l, uint32_t *pc) {
    pc[0] = l->heads ? l->heads : 1u;
    pc[1] = l->q_off;
    pc[2] = l->k_off;
    pc[3] = l->v_off;
}

hl_status hl_attention(hl_device *dev, const hl_attention_args *args, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *caps = &dev->caps;
    const uint64_t bh = args->batch_heads, sq = args->sq, skv = args->skv, d = args->d;
    HL_TRY(hl_attn_check_call(dev, "attention", bh, sq, skv, d, args->causal, args->scale, args->warmup, args->iters,
                              args->samples_ms, err));
    if ((!args->q && !args->t_q) || (!args->k && !args->t_k) || (!args->v && !args->t_v))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "attention: q, k and v are required");
    hl_attn_variant v;
    if (args->variant)
        v = *args->variant;
    else
        HL_TRY(hl_attn_variant_default(dev, (uint32_t)d, (uint32_t)skv, args->causal, args->dtype, &v, err));
    HL_TRY(hl_attn_variant_check(dev, &v, (uint32_t)d, args->dtype, err));
    hl_attn_spans span;
    HL_TRY(hl_attn_layout_check(dev, "attention", &args->layout, bh, sq, skv, d, &span, err));
    const int rows_layout = args->layout.qkv_rs || args->layout.o_rs;
    if (rows_layout && (!args->t_q || !args->t_k || !args->t_v || !args->t_o))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "attention: a row layout takes tensors (q, k, v and o), not "
                       "host arrays");
    const uint64_t q_bytes = span.q, kv_bytes = span.kv;
    const hl_tensor *ts[4] = {args->t_q, args->t_k, args->t_v, args->t_o};
    for (int i = 0; i < 3; i++)
        if (hl_tensors_share(args->t_o, ts[i]) || hl_tensors_share(args->t_lse, ts[i]))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "attention: the output tensor is also an input; "
                           "attention does not run in place");
    HL_TRY(hl_check_tensor(dev, args->t_q, q_bytes, "attention", "q", err));
    HL_TRY(hl_check_tensor(dev, args->t_k, kv_bytes, "attention", "k", err));
    HL_TRY(hl_check_tensor(dev, args->t_v, kv_bytes, "attention", "v", err));
    HL_TRY(hl_check_output_tensor(dev, args->t_o, span.o, "attention", "o", err));

    hl_dispatch_plan pl = {0};
    uint32_t rows;
    hl_pipeline *pipe;
    const int want_lse = args->lse || args->t_lse;
    HL_TRY(hl_check_output_tensor(dev, args->t_lse, bh * sq * 4, "attention", "lse", err));
    HL_TRY(attn_pipeline(dev, &v, (uint32_t)d, args->causal, want_lse, args->dtype, &args->layout, &pipe, &rows, err));
    const uint64_t gx = (sq + rows - 1) / rows;
    if (gx > caps->max_group_count[0] || bh > caps->max_group_count[1])
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "attention: %llu query blocks x %llu heads exceed the "
                       "device's %ux%u workgroup grid",
                       (unsigned long long)gx, (unsigned long long)bh, caps->max_group_count[0],
                       caps->max_group_count[1]);
    pl.pipe = pipe->pipeline;
    pl.grid[0] = (uint32_t)gx;
    pl.grid[1] = (uint32_t)bh;
    const float scale_log2 = args->scale * 1.4426950408889634f;
    pl.pc[0] = (uint32_t)bh;
    pl.pc[1] = (uint32_t)sq;
    pl.pc[2] = (uint32_t)skv;
    memcpy(&pl.pc[3], &scale_log2, 4);
    hl_attn_layout_push(&args->layout, &pl.pc[4]);

    /* Host operands go through the scratch buffers: Q, K, O, V in buf_a, buf_b,
     * buf_c, buf_w. O is poisoned; an O tensor is never a view (offset 0). */
    hl_operand ops[HL_BIND_ATTENTION_COUNT] = {
        [HL_BIND_ATTENTION_Q] = {.tensor = args->t_q,
                                 .scratch = &dev->buf_a,
                                 .upload = args->t_q ? NULL : args->q,
                                 .bytes = q_bytes,
                                 .slot = HL_BIND_ATTENTION_Q,
                                 .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_K] = {.tensor = args->t_k,
                                 .scratch = &dev->buf_b,
                                 .upload = args->t_k ? NULL : args->k,
                                 .bytes = kv_bytes,
                                 .slot = HL_BIND_ATTENTION_K,
                                 .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_O] = {.tensor = args->t_o,
                                 .scratch = &dev->buf_c,
                                 .download = args->o,
                                 .bytes = span.o,
                                 .poison = 1,
                                 .slot = HL_BIND_ATTENTION_O},
        [HL_BIND_ATTENTION_V] = {.tensor = args->t_v,
                                 .scratch = &dev->buf_w,
                                 .upload = args->t_v ? NULL : args->v,
                                 .bytes = kv_bytes,
                                 .slot = HL_BIND_ATTENTION_V,
                                 .access = HL_ACCESS_READ},
        /* the log-sum-exp per row, when asked for; else an unread placeholder */
        [HL_BIND_ATTENTION_LSE] = {.tensor = args->t_lse,
                                   .scratch = &dev->buf_rows,
                                   .download = args->lse,
                                   .bytes = want_lse ? bh * sq * 4 : 16,
                                   .poison = want_lse,
                                   .slot = HL_BIND_ATTENTION_LSE},
    };
    const hl_exec_timing timing = {args->warmup,   args->iters,      args->flush_bytes, args->samples_ms,
                                   args->batch_ms, args->wait_value, args->signal_value};
    char vs[HL_VARIANT_STR_MAX];
    hl_attn_variant_format(&v, vs, sizeof vs);
    HL_TRY(hl_exec_kernel(dev, ops, HL_BIND_ATTENTION_COUNT, hl_record_dispatch, &pl, &timing, vs, args->info, err));
    dev->tel.attentions++;
    if (v.path == HL_PATH_COOP) dev->tel.coop_attentions++;
    return HL_OK;
fail:
    return st;
}

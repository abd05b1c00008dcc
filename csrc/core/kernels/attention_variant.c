/* attention_variant.c — what both directions of attention share: the variant
 * (string, parse, the device's rules for it, the candidates), which kernels a
 * variant runs and the shared memory each declares, and the checks of a call's
 * sizes and row layout. attention.c (the forward) and attention_bwd.c (the
 * backward) build on it; it calls neither. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void hl_attn_variant_format(const hl_attn_variant *v, char *out, size_t cap) {
    hl_schema_format(&hl_attn_variant_schema, v, out, cap);
}

hl_status hl_attn_variant_parse(const char *s, hl_attn_variant *out, hl_error *err) {
    return hl_schema_parse(&hl_attn_variant_schema, s, out, err);
}

/* Whether the forward at head dimension d folds each row's running max into its
 * score product (attention_coop.comp's FOLD; HELIOS_DISABLE_ATTENTION_FOLD=1 turns
 * it off). Measured on the H100 (results/h100-attn-fold-05f8336/): at
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
 * (results/h100-attn-p-regs-56c7eb7/, the switch at 1 and 0 in one process):
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

/* HL_ATTN_ROWS_MAX_HEAD_DIM (internal.h): the forward keeps its softmax rows in
 * registers (attention_coop.comp's ROWS):
 * on a fragment shape whose accumulator layout allows it (layout.c), at d <= 64, causal at
 * any d, and at any d where P can stay in registers too (p_regs_possible);
 * HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS=1 turns it off (the fold or the row-wise path
 * through shared memory, as before). Measured on the H100
 * (results/h100-attn-rows-session19/, models against the kernel in one call):
 * 32x8x512x64 0.0886 against the fold's 0.0961 ms, 16x16x640x64 0.1283 against 0.1390;
 * causal 1x32x2048x128 0.2482 (16x16x16) against the row-wise 16x8x16 path's ~0.26. Not
 * at d = 128 without a mask with P through shared memory: 0.3055 against 0.2991 (255
 * registers either way). */

/* The forward kernel variant v runs at head dimension d (hl_attn_fwd_kernel, internal.h):
 * the one place the check, the default and the pipeline learn it from; it reads the three
 * switches. */
hl_status hl_attn_fwd_kernel_of(const hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal,
                                hl_attn_fwd_kernel *k, hl_error *err) {
    int rows_off = 0, possible = 0;
    *k = (hl_attn_fwd_kernel){0};
    hl_status st = fold_forward(d, &k->fold, err);
    if (st == HL_OK) st = hl_env_flag("HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS", &rows_off, err);
    if (st == HL_OK) st = p_regs_possible(dev, v, d, &possible, err);
    if (st != HL_OK) return st;
    if (!rows_off && v->path == HL_PATH_COOP && (d <= HL_ATTN_ROWS_MAX_HEAD_DIM || causal || possible)) {
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
hl_status hl_attn_fwd_shared_bytes(const hl_device *dev, const hl_attn_variant *v, uint32_t d, uint32_t *out,
                                   hl_error *err) {
    hl_attn_fwd_kernel k;
    hl_status st = hl_attn_fwd_kernel_of(dev, v, d, 0, &k, err);
    if (st == HL_OK) *out = coop_shared_bytes(v, d, k.fold, k.p_regs);
    return st;
}

hl_status hl_attn_variant_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in,
                                hl_error *err) {
    return hl_attn_check(dev, v, d, in, 0, err);
}

/* The backward's own rules (its query tile, a dQ key tile of its own) and the shared
 * memory of its larger kernel into *smem. lpr: invocations a row. */
static hl_status backward_rules(const hl_device *dev, const hl_attn_variant *v, uint32_t d, const char *vs,
                                uint32_t lpr, uint32_t *smem, hl_error *err) {
    const uint32_t sg = dev->caps.subgroup_size;
    if (v->bc > v->nsg * sg)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "attention backward variant %s: the %u-query tile needs at least as many invocations (%u)", vs,
                       v->bc, v->nsg * sg);
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
    *smem = k.dq_shared_bytes > k.dkdv_shared_bytes ? k.dq_shared_bytes : k.dkdv_shared_bytes;
    return HL_OK;
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
    const hl_status st =
        backward ? backward_rules(dev, v, d, vs, lpr, &smem, err) : hl_attn_fwd_shared_bytes(dev, v, d, &smem, err);
    if (st != HL_OK) return st;
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

hl_status hl_attn_bwd_variant_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in,
                                    hl_error *err) {
    return hl_attn_check(dev, v, d, in, 1, err);
}

/* Shared memory of one backward coop kernel (attention_bwd_common.glsl) streaming bc rows:
 * the two streamed tiles, then per subgroup an fp32 and a 16-bit tile side by side, or
 * with dS in registers (`compact`) only the fold's pieces and the tail's store tile, and
 * one ids tile; the dK/dV kernel also keeps the streamed rows' lse and delta (floats, and
 * with the fold their pieces as B fragments). */
static uint32_t bwd_shared_bytes(const hl_attn_variant *v, uint32_t d, uint32_t bc, int compact, int dkdv, int fold) {
    const uint32_t rq = v->wq * v->tm, tiles = 16u * 2u * bc * (d / 8 + 1);
    if (compact) {
        const uint32_t pieces = 2u * rq * (v->tk / 8), store = v->tm * (v->tn / 8);
        return tiles + 16u * v->nsg * (pieces > store ? pieces : store) + 16u * v->tm * (v->tn / 4);
    }
    uint32_t bytes = tiles + 16u * v->nsg * (rq * (bc / 4 + 1) + rq * (bc / 8 + 1));
    if (dkdv) bytes += 8u * bc + (fold ? 16u * 2u * bc * (v->tk / 8) : 0u);
    return bytes;
}

/* The dQ kernel with a key tile of its own hands dS to dS K as A operands converted in
 * registers (attention_bwd_dq.comp's P_IN_REGISTERS build; its scratch compact, so 64-key
 * tiles fit at d=128): on a device with NV cooperative matrix 2's conversions, in a build
 * whose glslc had them, on a fragment shape with TN == TK, folded;
 * HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS=1 turns it off (the default then takes dS
 * through shared memory; a variant naming a dQ tile is refused). Where it pays: see
 * hl_attn_bwd_variant_default. */
hl_status hl_attn_bwd_kernels_of(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_attn_bwd_kernels *k,
                                 hl_error *err) {
    int unfolded = 0, off = 0;
    *k = (hl_attn_bwd_kernels){0};
    hl_status st = hl_env_flag("HELIOS_DISABLE_ATTENTION_BWD_FOLD", &unfolded, err);
    if (st == HL_OK) st = hl_env_flag("HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS", &off, err);
    if (st != HL_OK) return st;
    k->fold = !unfolded;
    if (off)
        k->dq_regs_why = "HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS unset";
    else if (!k->fold)
        k->dq_regs_why = "the folded statistics (HELIOS_DISABLE_ATTENTION_BWD_FOLD is set)";
    else if (v->tn != v->tk)
        k->dq_regs_why = "a fragment shape with TN == TK";
    else if (!dev->caps.coop2_conversions || !HL_BUILT_GL_NV_COOPERATIVE_MATRIX2)
        k->dq_regs_why = dev->caps.coop2_conversions
                             ? "a build whose glslc has GL_NV_cooperative_matrix2"
                             : "NV cooperative matrix 2's accumulator-to-operand conversions, which this device lacks";
    k->dq_regs = v->path == HL_PATH_COOP && v->dq_bc && !k->dq_regs_why;
    /* the dQ kernel's streamed tile, as its BC constant says (shaders/families.py) */
    const uint32_t dq_bc = v->dq_bc ? v->dq_bc : v->bc;
    k->dq_shared_bytes = bwd_shared_bytes(v, d, dq_bc, k->dq_regs, 0, k->fold);
    k->dkdv_shared_bytes = bwd_shared_bytes(v, d, v->bc, 0, 1, k->fold);
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

hl_attn_rows hl_attn_layout_rows(const hl_attn_layout *l) {
    return (hl_attn_rows){.nh = l->heads ? l->heads : 1u, .q_off = l->q_off, .k_off = l->k_off, .v_off = l->v_off};
}

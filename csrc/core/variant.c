/* variant.c — the kernel variant: canonical string, parsing, validation
 * against a device's cooperative-matrix table and limits, the default (with
 * the HELIOS_* environment switches applied), and the list a device offers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define SCALAR_BM 64u
#define SCALAR_BN 64u
#define SCALAR_BK 16u

void hl_variant_format(const hl_variant *v, char *out, size_t cap) {
    hl_schema_format(&hl_variant_schema, v, out, cap);
}

hl_status hl_variant_parse(const char *s, hl_variant *out, hl_error *err) {
    return hl_schema_parse(&hl_variant_schema, s, out, err);
}

const hl_coop_shape *hl_find_coop_shape(const hl_caps *c, uint32_t m, uint32_t n, uint32_t k, hl_dtype in,
                                        hl_dtype acc) {
    for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
        const hl_coop_shape *s = &c->coop_shapes[i];
        if (s->m == m && s->n == n && s->k == k && s->a == in && s->b == in && s->c == acc && s->result == acc &&
            s->scope == VK_SCOPE_SUBGROUP_KHR)
            return s;
    }
    return NULL;
}

/* A slab's padded rows in shared memory (matmul_coop.comp): a row per stored row of
 * the operand, 8 elements a vector and one vector of padding, so a transposed operand's
 * slab (bk rows of bm or bn) can need more than a plain one: the count is the larger,
 * whatever layout a call brings (it counted the plain layouts only until the kernels'
 * SHARED_BYTES check found tile16x32x32 with A transposed over it). */
static uint32_t slab_bytes(uint32_t rows, uint32_t cols) {
    const uint32_t plain = rows * (cols / 8 + 1) * 16, transposed = cols * (rows / 8 + 1) * 16;
    return plain > transposed ? plain : transposed;
}

uint32_t hl_coop_shared_bytes(const hl_variant *v) {
    const uint32_t subgroups = (v->bm / (v->sg_m * v->tm)) * (v->bn / (v->sg_n * v->tn));
    return slab_bytes(v->bm, v->bk) + slab_bytes(v->bk, v->bn) + subgroups * v->tm * v->tn * 4;
}

/* The opt-in NV cooperative matrix 2 family: workgroup-scope matrices whose
 * sizes must be multiples of a flexible-dimension row's granularity for this
 * workgroup size and accumulator type. */
static hl_status coop2_check(const hl_device *dev, const hl_variant *v, const char *name, hl_error *err) {
    const hl_caps *c = &dev->caps;
    if (!dev->coop2_enabled)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s' needs VK_NV_cooperative_matrix2 with workgroup scope, flexible "
                       "dimensions and tensor addressing; %s",
                       name,
                       !c->coop2_usable     ? "this device does not offer them"
                       : !dev->coop_enabled ? "cooperative matrices are disabled (HELIOS_DISABLE_COOP=1)"
                                            : "it is disabled (HELIOS_DISABLE_COOP2=1 or disable_coop2=True)");
    const hl_status ranges = hl_schema_check_ranges(&hl_variant_schema, v, name, err);
    if (ranges != HL_OK) return ranges;
    if (!v->threads || v->threads % c->subgroup_size || v->threads > c->max_workgroup_invocations ||
        (c->coop2_workgroup_scope_max_invocations && v->threads > c->coop2_workgroup_scope_max_invocations))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': wg must be a multiple of the "
                       "subgroup size %u and at most %u",
                       name, c->subgroup_size, c->coop2_workgroup_scope_max_invocations);
    for (uint32_t i = 0; i < c->n_coop2_flex_f16; i++) {
        const struct hl_coop2_flex *f = &c->coop2_flex[i];
        if (f->scope == VK_SCOPE_WORKGROUP_KHR && f->invocations == v->threads && f->c == v->acc &&
            f->result == v->acc && f->m_gran && f->n_gran && f->k_gran && v->bm % f->m_gran == 0 &&
            v->bn % f->n_gran == 0 && v->bk % f->k_gran == 0)
            return HL_OK;
    }
    return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                   "variant '%s': no workgroup-scope flexible-dimension "
                   "row for %u invocations, f16 inputs and %s accumulators whose granularity divides "
                   "%ux%ux%u (see helios info --json)",
                   name, v->threads, hl_dtype_name(v->acc), v->bm, v->bn, v->bk);
}

hl_status hl_variant_check(const hl_device *dev, const hl_variant *v, hl_dtype in, hl_error *err) {
    const hl_caps *c = &dev->caps;
    char name[HL_VARIANT_STR_MAX];
    hl_variant_format(v, name, sizeof name);
    if (in != HL_F16 && in != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "variant '%s': inputs must be f16 or bf16, got %s", name,
                       hl_dtype_name(in));
    if (in == HL_BF16 && !c->has_int16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE,
                       "bfloat16 products need shaderInt16 (16-bit stores); device '%s' lacks it", c->name);
    if (in == HL_BF16 && v->path == HL_PATH_COOP2)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': the coop2 family takes f16 inputs; bfloat16 runs on coop or scalar variants",
                       name);
    if (in == HL_BF16 && v->path == HL_PATH_COOP && hl_bf16_coop_unavailable(dev))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': no bfloat16 cooperative-matrix kernels on '%s': %s (bfloat16 runs on the "
                       "scalar fp32 path there)",
                       name, c->name, hl_bf16_coop_unavailable(dev));
    if (v->path == HL_PATH_SCALAR) {
        if (v->bm != SCALAR_BM || v->bn != SCALAR_BN || v->bk != SCALAR_BK || v->acc != HL_F32 || v->splitk != 1 ||
            v->raster != 1)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                           "variant '%s': the scalar path exists only as scalar:tile64x64x16:acc=f32", name);
        return HL_OK;
    }
    if (v->path == HL_PATH_COOP2) return coop2_check(dev, v, name, err);
    if (!c->has_coop)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s' needs VK_KHR_cooperative_matrix with fp16, the Vulkan memory "
                       "model and subgroup size control; device '%s' lacks them",
                       name, c->name);
    if (!dev->coop_enabled)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': cooperative matrices are disabled (HELIOS_DISABLE_COOP=1 or "
                       "disable_coop=True)",
                       name);
    if (!hl_find_coop_shape(c, v->tm, v->tn, v->tk, in, v->acc))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': device '%s' has no subgroup cooperative matrix %ux%ux%u with "
                       "%s inputs and %s accumulators (see helios info)",
                       name, c->name, v->tm, v->tn, v->tk, hl_dtype_name(in), hl_dtype_name(v->acc));
    if (v->bm % (v->sg_m * v->tm) || v->bn % (v->sg_n * v->tn))
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': tile %ux%u is not a multiple of the subgroup tile %ux%u "
                       "(sg x coop shape)",
                       name, v->bm, v->bn, v->sg_m * v->tm, v->sg_n * v->tn);
    if (v->bk % v->tk || v->bk % 8 || v->bn % 8 || v->tn % 8 || v->tk % 8)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': tile K and N and the coop N and K must be multiples of 8 "
                       "(and tile K of coop K)",
                       name);
    const hl_status ranges = hl_schema_check_ranges(&hl_variant_schema, v, name, err);
    if (ranges != HL_OK) return ranges;
    uint32_t subgroups = (v->bm / (v->sg_m * v->tm)) * (v->bn / (v->sg_n * v->tn));
    uint32_t threads = subgroups * c->subgroup_size;
    if (threads > c->max_workgroup_invocations)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s' needs %u invocations per workgroup; device allows %u", name, threads,
                       c->max_workgroup_invocations);
    uint32_t shared = hl_coop_shared_bytes(v);
    if (shared > c->shared_memory_bytes)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "variant '%s' needs %u bytes of shared memory; device has %u",
                       name, shared, c->shared_memory_bytes);
    return HL_OK;
}

/* Preference among the table's shapes, from measurement, never from the
 * device's name: on an H100 (2026-11-22, h100-sweep-round2-bc2b5b1.json) with
 * 64x64 subgroup blocks 16x16x16 beat 16x8x16 (290.7 vs 285.5 TF/s at 4096^3)
 * and 16x8x8. Other shapes (lavapipe's 8x8x8) rank by size. */
static int shape_rank(const hl_coop_shape *s) {
    if (s->m == 16 && s->n == 16 && s->k == 16) return 1 << 30;
    if (s->m == 16 && s->n == 8 && s->k == 16) return (1 << 30) - 1;
    if (s->m == 16 && s->n == 8 && s->k == 8) return (1 << 30) - 2;
    return (int)(s->m * s->n * s->k);
}

/* Coop tiles per subgroup that make a 64x64 subgroup block: the register-
 * resident block that measured fastest on the H100. Coop shapes under 16 (a
 * CPU driver's 8x8x8) get 2x2 tiles: their JIT compiles unrolled tiles slowly. */
static uint32_t wide_tiles(uint32_t t) { return t >= 16 ? 64 / t : 2; }

/* WM x WN subgroups per workgroup, each sg_m x sg_n coop tiles; BK = 32 (or
 * the coop K when larger). */
static void fill_tiling(hl_variant *v, uint32_t wm, uint32_t wn, uint32_t sg_m, uint32_t sg_n) {
    v->sg_m = sg_m;
    v->sg_n = sg_n;
    v->bm = wm * sg_m * v->tm;
    v->bn = wn * sg_n * v->tn;
    v->bk = v->tk > 32 ? v->tk : 32 / v->tk * v->tk;
}

/* The fastest loop measured on the H100 (h100-sweep-round2-bc2b5b1.json):
 * 2x2 subgroups of 64x64, BK=64 with register prefetch (255 registers),
 * 290.7 TF/s at 4096^3 and 319.9 at 8192^3 vs 269.0 / 289.5 with BK=32.
 * A CPU driver's small coop shapes keep BK=32 and 2x2 tiles (compile time). */
static void fill_wide(hl_variant *v, uint32_t wm, uint32_t wn) {
    fill_tiling(v, wm, wn, wide_tiles(v->tm), wide_tiles(v->tn));
    if (v->tm >= 16 && v->tk <= 64 && 64 % v->tk == 0) v->bk = 64;
    v->stages = 2;
}

/* The fallback for devices without cooperative matrices (and the kill switch). */
static const hl_variant scalar_variant = {.path = HL_PATH_SCALAR,
                                          .bm = SCALAR_BM,
                                          .bn = SCALAR_BN,
                                          .bk = SCALAR_BK,
                                          .acc = HL_F32,
                                          .stages = 1,
                                          .splitk = 1,
                                          .raster = 1};

hl_status hl_variant_default(const hl_device *dev, hl_variant *out, hl_error *err) {
    const hl_caps *c = &dev->caps;
    const char *forced = getenv("HELIOS_VARIANT");
    if (forced && *forced) {
        hl_status st = hl_variant_parse(forced, out, err);
        if (st != HL_OK) return hl_fail(err, st, "HELIOS_VARIANT: %s", err->message);
        st = hl_variant_check(dev, out, HL_F16, err);
        if (st != HL_OK) return hl_fail(err, st, "HELIOS_VARIANT: %s", err->message);
        return HL_OK;
    }
    memset(out, 0, sizeof *out);
    if (!dev->coop_enabled) {
        *out = scalar_variant;
        return HL_OK;
    }
    out->path = HL_PATH_COOP;
    int f16acc, direct;
    hl_status st = hl_env_flag("HELIOS_COOP_F16_ACCUM", &f16acc, err);
    if (st == HL_OK) st = hl_env_flag("HELIOS_COOP_DIRECT_LOAD", &direct, err);
    if (st != HL_OK) return st;
    out->acc = f16acc ? HL_F16 : HL_F32;
    const char *tile = getenv("HELIOS_COOP_TILE");
    if (tile && *tile) {
        uint32_t d[3];
        if (!hl_parse_uints(tile, d, 3, 4096))
            return hl_fail(err, HL_ERR_INVALID_VARIANT,
                           "HELIOS_COOP_TILE='%s': expected MxNxK, "
                           "e.g. 16x8x16",
                           tile);
        out->tm = d[0];
        out->tn = d[1];
        out->tk = d[2];
    } else {
        const hl_coop_shape *best = NULL;
        for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
            const hl_coop_shape *s = &c->coop_shapes[i];
            if (hl_find_coop_shape(c, s->m, s->n, s->k, HL_F16, out->acc) != s) continue;
            if (!best || shape_rank(s) > shape_rank(best)) best = s;
        }
        if (!best)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                           "device '%s' has no subgroup cooperative matrix with f16 inputs and %s "
                           "accumulators",
                           c->name, hl_dtype_name(out->acc));
        out->tm = best->m;
        out->tn = best->n;
        out->tk = best->k;
    }
    /* 2x2 subgroups, each a 64x64 block, register prefetch, raster groups of 8
     * block rows: the loop that measured fastest on the H100 (docs/perf-notes.md at 89c21a3). */
    fill_wide(out, 2, 2);
    uint32_t sg[2];
    const char *sgs = getenv("HELIOS_COOP_F16IN_SUBGROUP_TILES");
    if (sgs && *sgs) {
        if (!hl_parse_uints(sgs, sg, 2, 4096))
            return hl_fail(err, HL_ERR_INVALID_VARIANT, "HELIOS_COOP_F16IN_SUBGROUP_TILES='%s': expected AxB, e.g. 2x2",
                           sgs);
        fill_tiling(out, 2, 2, sg[0], sg[1]);
    }
    out->direct_load = direct;
    out->splitk = 1;
    out->raster = 8;
    st = hl_variant_check(dev, out, HL_F16, err);
    if (st != HL_OK) return hl_fail(err, st, "default variant from HELIOS_COOP_* switches: %s", err->message);
    return HL_OK;
}

/* The switches that choose the kernel. While one is set it decides for every
 * shape: no tuned pick (Python asks this function) and no shape heuristic. */
static const char *const override_switches[] = {"HELIOS_VARIANT", "HELIOS_COOP_TILE",
                                                "HELIOS_COOP_F16IN_SUBGROUP_TILES", "HELIOS_COOP_DIRECT_LOAD",
                                                "HELIOS_COOP_F16_ACCUM"};

const char *hl_variant_override(const hl_device *dev) {
    static const char *const off[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof override_switches / sizeof override_switches[0]; i++) {
        const char *s = getenv(override_switches[i]);
        if (!s || !*s) continue;
        int is_off = 0;
        for (size_t j = 0; j < 4; j++) is_off |= strcasecmp(s, off[j]) == 0;
        if (!is_off) return override_switches[i];
    }
    if (dev->caps.has_coop && !dev->coop_enabled) return "disable_coop";
    return NULL;
}

/* Split-K for grids still too small to fill the device: the fewest splits
 * that give about one workgroup per SM, keeping >= 1024 of K per split. A grid
 * with a block for nearly every SM (>= 3/4) gains only what a second block on
 * each SM adds (16%), which the partials' reduction eats unless each part is
 * long: there >= 4096 of K per split (H100, h100-fill-facb484: 512x4096x4096,
 * 128 blocks, 255 TF/s whole against 221 split in two; 512x4096x14336 277
 * against 284). Needs the SM count (NVIDIA's VK_NV_shader_sm_builtins); without
 * it, no split. */
static uint32_t splitk_for_shape(const hl_caps *c, const hl_variant *v, uint32_t m, uint32_t n, uint32_t k) {
    if (v->path != HL_PATH_COOP || !c->sm_count) return 1;
    uint64_t tiles = (uint64_t)((m + v->bm - 1) / v->bm) * ((n + v->bn - 1) / v->bn);
    const uint32_t min_part = tiles * 4 >= 3ull * c->sm_count ? 4096u : 1024u;
    uint32_t s = 1;
    while (tiles * s < c->sm_count && s < 8 && k / (s + 1) >= min_part) s++;
    return s;
}

/* The grid's last wave. An SM runs two of the default's 255-register workgroups
 * at once, and two together do 1.16x what one does (perf notes at 89c21a3, session 10), so
 * the busiest SM's time is its blocks in pairs plus one alone, in units of a
 * block's work. Few waves of 128-row (or -column) blocks can leave the last one
 * thin (3072^3: 576 blocks, 4.45 units on the busiest SM); blocks of 96 rows that
 * divide the shape even it out (768 blocks, 3.88 units at 3/4 the work each).
 * Measured on the H100 (h100-fill-4e126b8/), 128x128 against 96x128 TF/s, the
 * model's gain in brackets: 3072^3 244 / 281 (+15%), 3072x1024x8192 243 / 280
 * (+33%), 1536^3 167 / 191 (+33%), 768x3072x4096 and 3072x768x4096 178 / 206
 * (+33%), 1536x4096x2048 228 / 270 (+5%): the model ranks the two right, not by
 * how much. Only short grids switch: with many waves the scheduler evens the SMs
 * out by itself and the model overstates the last wave (2048x13824x5120: 128x96
 * modelled +4%, measured -12%). */
#define PAIR_RATE 1.16
#define FILL_MAX_WAVES 3u /* of two blocks an SM */
#define FILL_MIN_GAIN 0.03
static double busiest_sm(uint64_t blocks, uint32_t sms, double block_work) {
    const uint64_t per = (blocks + sms - 1) / sms;
    return ((double)(per / 2) * 2.0 / PAIR_RATE + (double)(per % 2)) * block_work;
}

static void fill_last_wave(const hl_device *dev, uint32_t m, uint32_t n, hl_variant *v) {
    const uint32_t sms = dev->caps.sm_count, wide = wide_tiles(v->tm);
    if (v->tm < 16 || v->sg_m != wide || v->sg_n != wide_tiles(v->tn)) return; /* not the wide default */
    const uint64_t blocks = (uint64_t)((m + v->bm - 1) / v->bm) * ((n + v->bn - 1) / v->bn);
    if (blocks > 2ull * FILL_MAX_WAVES * sms) return;
    double best = busiest_sm(blocks, sms, 1.0) * (1.0 - FILL_MIN_GAIN);
    const hl_variant base = *v;
    for (int rows = 1; rows >= 0; rows--) { /* 96-row blocks first (the better of the two measured) */
        hl_variant t = base;
        if (rows)
            t.sg_m = base.sg_m * 3 / 4;
        else
            t.sg_n = base.sg_n * 3 / 4;
        t.bm = base.bm / base.sg_m * t.sg_m;
        t.bn = base.bn / base.sg_n * t.sg_n;
        if (m % t.bm || n % t.bn) continue; /* edge blocks take the slow path: only exact fits */
        const uint64_t tb = (uint64_t)(m / t.bm) * (n / t.bn);
        const double time = busiest_sm(tb, sms, (double)(t.bm * t.bn) / (double)(base.bm * base.bn));
        hl_error scratch;
        if (time < best && hl_variant_check(dev, &t, HL_F16, &scratch) == HL_OK) {
            best = time;
            *v = t;
        }
    }
}

/* The default for one shape. Smaller blocks fill an H100 where 128x128 ones
 * leave SMs idle: 1024^3 ran at 107 TF/s with 64x64x32 blocks vs 16-32 with
 * 128x128 (h100-sweep-round2-bc2b5b1.json), while 512x4096x4096 (128 blocks of
 * 128x128 on 132 SMs) kept 128x128x64 (239 vs 160). Of the smaller blocks, the
 * 128x64 half of the wide block (4x2 fragments a subgroup, BK=64) beats 64x64x32
 * on every short grid measured (h100-fill-4e126b8/sweep_small.json, TF/s, 128x64x64
 * / 64x64x64 / 64x64x32: 1024^3 147 / 141 / 122, 1024x1024x2048 183 / 169 / 144,
 * 512x2048x2048 178 / 168 / 144, 768^3 74 / 72 / 63) although it makes half as
 * many. So: 128x64 blocks below 3/4 of a 128x128 block per SM, then split-K if
 * those are too few. Except
 * with a long K (>= 4096): there the big blocks split K instead, in parts of
 * at least 2048, at most 4 (a training step's weight gradients, fp16 on the
 * H100, h100-sweep-splitk-95ef367/: 1024x1024x8192 224 TF/s with 128x128 split 4
 * vs 112 with 64x64; 1024x1024x4096 184 split 2 vs 159). */
#define LONG_K 4096u
hl_status hl_variant_for_shape(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, hl_variant *out,
                               hl_error *err) {
    hl_status st = hl_variant_default(dev, out, err);
    if (st != HL_OK) return st;
    if (out->path != HL_PATH_COOP || !dev->caps.sm_count) return HL_OK;
    if (hl_variant_override(dev)) return HL_OK; /* a switch chose the kernel: it runs as chosen */
    uint64_t tiles = (uint64_t)((m + out->bm - 1) / out->bm) * ((n + out->bn - 1) / out->bn);
    if (tiles * 4 < 3ull * dev->caps.sm_count && k >= LONG_K) {
        uint32_t s = 1;
        while (s < 4 && k / (2 * s) >= 2048) s *= 2;
        out->splitk = s;
        return HL_OK;
    }
    if (tiles * 4 < 3ull * dev->caps.sm_count && out->tm >= 16) {
        hl_variant small = *out; /* the wide block's upper half: BK, stages and fragments a row kept */
        small.sg_n = out->sg_n / 2 ? out->sg_n / 2 : 1;
        small.bn = out->bn / out->sg_n * small.sg_n;
        hl_error scratch;
        if (hl_variant_check(dev, &small, HL_F16, &scratch) == HL_OK) *out = small;
    }
    fill_last_wave(dev, m, n, out);
    out->splitk = splitk_for_shape(&dev->caps, out, m, n, k);
    return HL_OK;
}

static int listed(const hl_variant *vs, size_t n, const hl_variant *v) {
    char a[HL_VARIANT_STR_MAX], b[HL_VARIANT_STR_MAX];
    hl_variant_format(v, a, sizeof a);
    for (size_t i = 0; i < n; i++) {
        hl_variant_format(&vs[i], b, sizeof b);
        if (strcmp(a, b) == 0) return 1;
    }
    return 0;
}

size_t hl_variant_list(const hl_device *dev, hl_variant *out, size_t cap) {
    /* Tiles per subgroup for the 2x2-subgroup family; then the wide family's
     * alternatives (stages, load path, split-K, raster, BK, 8 subgroups, store path). */
    static const uint32_t sgs[][2] = {{1, 2}, {2, 1}, {2, 2}, {3, 4}, {4, 1}, {4, 4}};
    enum {
        WIDE_DEFAULT,
        WIDE_STAGES1,
        WIDE_DIRECT,
        WIDE_SPLIT2,
        WIDE_NORASTER,
        WIDE_BK32,
        WIDE_2X4,
        WIDE_4X2,
        WIDE_DIRECT_STORE,
        N_WIDE
    };
    const hl_caps *c = &dev->caps;
    size_t n = 0;
    hl_error scratch;
    if (dev->coop_enabled) {
        for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
            const hl_coop_shape *s = &c->coop_shapes[i];
            for (int acc = HL_F16; acc <= HL_F32; acc++) {
                /* first table row of each (shape, acc) only */
                if (hl_find_coop_shape(c, s->m, s->n, s->k, HL_F16, (hl_dtype)acc) != s) continue;
                hl_variant base = {.path = HL_PATH_COOP,
                                   .tm = s->m,
                                   .tn = s->n,
                                   .tk = s->k,
                                   .acc = (hl_dtype)acc,
                                   .stages = 1,
                                   .splitk = 1,
                                   .raster = 8};
                for (size_t t = 0; t < sizeof sgs / sizeof sgs[0] + N_WIDE; t++) {
                    hl_variant v = base;
                    if (t < sizeof sgs / sizeof sgs[0]) {
                        fill_tiling(&v, 2, 2, sgs[t][0], sgs[t][1]);
                    } else {
                        int w = (int)(t - sizeof sgs / sizeof sgs[0]);
                        uint32_t wm = w == WIDE_4X2 ? 4 : 2, wn = w == WIDE_2X4 ? 4 : 2;
                        fill_wide(&v, wm, wn);
                        if (w == WIDE_STAGES1) v.stages = 1;
                        v.direct_load = w == WIDE_DIRECT;
                        v.splitk = w == WIDE_SPLIT2 ? 2 : 1;
                        v.raster = w == WIDE_NORASTER ? 1 : 8;
                        v.direct_store = w == WIDE_DIRECT_STORE;
                        if (w == WIDE_BK32) {
                            if (v.bk == 32) continue;
                            v.bk = 32;
                        }
                    }
                    if (hl_variant_check(dev, &v, HL_F16, &scratch) != HL_OK || listed(out, n < cap ? n : cap, &v))
                        continue;
                    if (n < cap) out[n] = v;
                    n++;
                }
            }
        }
    }
    /* The opt-in coop2 family: never a default, listed where the device takes it. */
    static const uint32_t c2[][4] = {{128, 128, 32, 256}, {128, 128, 64, 256}, {64, 64, 32, 128}};
    for (int acc = HL_F16; dev->coop2_enabled && acc <= HL_F32; acc++) {
        for (size_t t = 0; t < sizeof c2 / sizeof c2[0]; t++) {
            hl_variant v = {.path = HL_PATH_COOP2,
                            .bm = c2[t][0],
                            .bn = c2[t][1],
                            .bk = c2[t][2],
                            .threads = c2[t][3],
                            .acc = (hl_dtype)acc,
                            .stages = 1,
                            .splitk = 1,
                            .raster = 8};
            if (hl_variant_check(dev, &v, HL_F16, &scratch) != HL_OK) continue;
            if (n < cap) out[n] = v;
            n++;
        }
    }
    if (n < cap) out[n] = scalar_variant;
    n++;
    return n < cap ? n : cap;
}

hl_status hl_variant_for_product(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                 hl_variant *out, hl_error *err) {
    /* A batch stacks its products' blocks: pick as for one product of batch * M
     * rows (the same block count), without split-K (its reduction is per product). */
    const uint64_t rows = batch > 1 ? (batch * m < UINT32_MAX ? batch * m : UINT32_MAX) : m;
    hl_status st = hl_variant_for_shape(dev, (uint32_t)rows, n, k, out, err);
    if (st == HL_OK && batch > 1) out->splitk = 1;
    return st;
}

/* bfloat16: the fp16 choice for the shape moved onto a bf16 x bf16 -> f32 shape
 * with the same subgroup blocks (the H100 offers bf16 at 16x16x16 only, the shape
 * the fp16 defaults prefer). A switch that forces a variant (HELIOS_VARIANT...) is
 * kept as forced, so an fp16-only pick fails with its reason rather than changing. */
hl_status hl_variant_for_input(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch, hl_dtype in,
                               hl_variant *out, hl_error *err) {
    hl_status st = hl_variant_for_product(dev, m, n, k, batch, out, err);
    if (st != HL_OK || in == HL_F16) return st;
    if (hl_variant_override(dev) && strcmp(hl_variant_override(dev), "disable_coop") != 0)
        return hl_variant_check(dev, out, in, err);
    if (out->path != HL_PATH_SCALAR && hl_bf16_coop_unavailable(dev)) {
        *out = scalar_variant;
        return hl_variant_check(dev, out, in, err);
    }
    if (out->path == HL_PATH_COOP) {
        const hl_caps *c = &dev->caps;
        hl_variant v = *out;
        v.acc = HL_F32;
        if (!hl_find_coop_shape(c, v.tm, v.tn, v.tk, in, HL_F32)) {
            const hl_coop_shape *best = NULL;
            for (uint32_t i = 0; i < c->n_coop_shapes; i++) {
                const hl_coop_shape *s = &c->coop_shapes[i];
                if (hl_find_coop_shape(c, s->m, s->n, s->k, in, HL_F32) != s) continue;
                if (!best || shape_rank(s) > shape_rank(best)) best = s;
            }
            if (!best) return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "no bf16 cooperative matrix shape");
            const uint32_t blk_m = v.sg_m * v.tm, blk_n = v.sg_n * v.tn;
            v.tm = best->m;
            v.tn = best->n;
            v.tk = best->k;
            v.sg_m = blk_m / v.tm ? blk_m / v.tm : 1;
            v.sg_n = blk_n / v.tn ? blk_n / v.tn : 1;
            if (v.bk % v.tk) v.bk = v.tk > v.bk ? v.tk : v.bk / v.tk * v.tk;
        }
        hl_error scratch;
        if (hl_variant_check(dev, &v, in, &scratch) == HL_OK) {
            *out = v;
            return HL_OK;
        }
        *out = scalar_variant; /* no bf16 tiling fits: the correct slow path, named in the variant */
    }
    return hl_variant_check(dev, out, in, err);
}

/* variant.c — the kernel variant: canonical string, parsing, validation
 * against a device's cooperative-matrix table and limits, the default (with
 * the HELIOS_* environment switches applied), and the list a device offers.
 * The default for one shape's grid: variant_shape.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "product.h"

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

/* The matrix-vector kernel: full subgroups of the device's size (subgroupAdd over a
 * column's lanes), and shared memory for each subgroup's partial sums. */
static hl_status gemv_check(const hl_device *dev, const hl_variant *v, const char *name, hl_error *err) {
    const hl_caps *c = &dev->caps;
    if (!dev->gemv_enabled)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "variant '%s': %s", name,
                       c->has_subgroup_size_control
                           ? "the matrix-vector kernel is disabled (HELIOS_DISABLE_GEMV=1)"
                           : "the matrix-vector kernel needs subgroup size control; the device lacks it");
    const hl_status ranges = hl_schema_check_ranges(&hl_variant_schema, v, name, err);
    if (ranges != HL_OK) return ranges;
    if (v->threads % c->subgroup_size || v->threads > c->max_workgroup_invocations ||
        v->threads * HL_GEMV_MAX_ROWS * 4 > c->shared_memory_bytes)
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "variant '%s': wg must be a multiple of the subgroup size %u and at most %u", name,
                       c->subgroup_size, c->max_workgroup_invocations);
    return HL_OK;
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
    if (v->path == HL_PATH_GEMV) return gemv_check(dev, v, name, err);
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
int hl_coop_shape_rank(const hl_coop_shape *s) {
    if (s->m == 16 && s->n == 16 && s->k == 16) return 1 << 30;
    if (s->m == 16 && s->n == 8 && s->k == 16) return (1 << 30) - 1;
    if (s->m == 16 && s->n == 8 && s->k == 8) return (1 << 30) - 2;
    return (int)(s->m * s->n * s->k);
}

/* Coop tiles per subgroup that make a 64x64 subgroup block: the register-
 * resident block that measured fastest on the H100. Coop shapes under 16 (a
 * CPU driver's 8x8x8) get 2x2 tiles: their JIT compiles unrolled tiles slowly. */
uint32_t hl_wide_tiles(uint32_t t) { return t >= 16 ? 64 / t : 2; }

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
    fill_tiling(v, wm, wn, hl_wide_tiles(v->tm), hl_wide_tiles(v->tn));
    if (v->tm >= 16 && v->tk <= 64 && 64 % v->tk == 0) v->bk = 64;
    v->stages = 2;
}

/* The fallback for devices without cooperative matrices (and the kill switch). */
const hl_variant hl_scalar_variant = {.path = HL_PATH_SCALAR,
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
        *out = hl_scalar_variant;
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
            if (!best || hl_coop_shape_rank(s) > hl_coop_shape_rank(best)) best = s;
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
     * block rows: the loop that measured fastest on the H100. */
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

static int listed(const hl_variant *vs, size_t n, const hl_variant *v) {
    char a[HL_VARIANT_STR_MAX], b[HL_VARIANT_STR_MAX];
    hl_variant_format(v, a, sizeof a);
    for (size_t i = 0; i < n; i++) {
        hl_variant_format(&vs[i], b, sizeof b);
        if (strcmp(a, b) == 0) return 1;
    }
    return 0;
}

/* Appends v to out (up to cap; *n counts every one) where the device takes it and it is not there yet. */
static void offer(const hl_device *dev, const hl_variant *v, hl_variant *out, size_t cap, size_t *n) {
    hl_error scratch;
    if (hl_variant_check(dev, v, HL_F16, &scratch) != HL_OK || listed(out, *n < cap ? *n : cap, v)) return;
    if (*n < cap) out[*n] = *v;
    (*n)++;
}

/* The coop family for one (coop shape, accumulator): tiles per subgroup for the 2x2-subgroup
 * family, then the wide family's alternatives (stages, load path, split-K, raster, BK, 8
 * subgroups, store path). */
static void list_coop(const hl_device *dev, const hl_variant *base, hl_variant *out, size_t cap, size_t *n) {
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
    for (size_t t = 0; t < sizeof sgs / sizeof sgs[0] + N_WIDE; t++) {
        hl_variant v = *base;
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
        offer(dev, &v, out, cap, n);
    }
}

size_t hl_variant_list(const hl_device *dev, hl_variant *out, size_t cap) {
    const hl_caps *c = &dev->caps;
    size_t n = 0;
    for (uint32_t i = 0; dev->coop_enabled && i < c->n_coop_shapes; i++) {
        const hl_coop_shape *s = &c->coop_shapes[i];
        for (int acc = HL_F16; acc <= HL_F32; acc++) {
            /* first table row of each (shape, acc) only */
            if (hl_find_coop_shape(c, s->m, s->n, s->k, HL_F16, (hl_dtype)acc) != s) continue;
            const hl_variant base = {.path = HL_PATH_COOP,
                                     .tm = s->m,
                                     .tn = s->n,
                                     .tk = s->k,
                                     .acc = (hl_dtype)acc,
                                     .stages = 1,
                                     .splitk = 1,
                                     .raster = 8};
            list_coop(dev, &base, out, cap, &n);
        }
    }
    /* The opt-in coop2 family: never a default, listed where the device takes it. */
    static const uint32_t c2[][4] = {{128, 128, 32, 256}, {128, 128, 64, 256}, {64, 64, 32, 128}};
    for (int acc = HL_F16; dev->coop2_enabled && acc <= HL_F32; acc++)
        for (size_t t = 0; t < sizeof c2 / sizeof c2[0]; t++) {
            const hl_variant v = {.path = HL_PATH_COOP2,
                                  .bm = c2[t][0],
                                  .bn = c2[t][1],
                                  .bk = c2[t][2],
                                  .threads = c2[t][3],
                                  .acc = (hl_dtype)acc,
                                  .stages = 1,
                                  .splitk = 1,
                                  .raster = 8};
            offer(dev, &v, out, cap, &n);
        }
    /* The matrix-vector kernel: what products of M <= 8 run by default (variant_shape.c). */
    static const uint32_t gemv_threads[] = {64, 256};
    for (size_t t = 0; t < sizeof gemv_threads / sizeof gemv_threads[0]; t++) {
        const hl_variant v = {
            .path = HL_PATH_GEMV, .threads = gemv_threads[t], .acc = HL_F32, .stages = 1, .splitk = 1, .raster = 1};
        offer(dev, &v, out, cap, &n);
    }
    if (n < cap) out[n] = hl_scalar_variant;
    n++;
    return n < cap ? n : cap;
}

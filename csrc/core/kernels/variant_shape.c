/* variant_shape.c — the default variant for one product: the device's default
 * (variant.c) with its block size and split-K chosen for the grid the shape makes
 * (from measurements on the H100 named beside each rule), for a batch, and moved
 * onto bfloat16's fragment shapes. */
#include <string.h>

#include "product.h"

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
    const uint32_t sms = dev->caps.sm_count, wide = hl_wide_tiles(v->tm);
    if (v->tm < 16 || v->sg_m != wide || v->sg_n != hl_wide_tiles(v->tn)) return; /* not the wide default */
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

hl_status hl_variant_for_product(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                 hl_variant *out, hl_error *err) {
    /* A batch stacks its products' blocks: pick as for one product of batch * M
     * rows (the same block count), without split-K (its reduction is per product). */
    const uint64_t rows = batch > 1 ? (batch * m < UINT32_MAX ? batch * m : UINT32_MAX) : m;
    hl_status st = hl_variant_for_shape(dev, (uint32_t)rows, n, k, out, err);
    if (st == HL_OK && batch > 1) out->splitk = 1;
    return st;
}

/* A product of a few rows reads each weight once and multiplies it by at most 8
 * values: the tiles of the products above would waste 15 of every 16 rows, so the
 * matrix-vector kernel streams B instead. With B as N x K (a subgroup per column)
 * the workgroup shrinks until the grid gives every SM 4 workgroups; with B as
 * K x N (a lane per column) its subgroups split K. A switch that chooses the
 * kernel (hl_variant_override) keeps it. 1 and *out set where it applies. */
static int gemv_for_rows(const hl_device *dev, uint32_t m, uint32_t n, int trans_b, hl_variant *out) {
    if (m > HL_GEMV_MAX_ROWS || !dev->gemv_enabled || hl_variant_override(dev)) return 0;
    hl_variant v = {.path = HL_PATH_GEMV, .threads = 256, .acc = HL_F32, .stages = 1, .splitk = 1, .raster = 1};
    const uint32_t sg = dev->caps.subgroup_size, sms = dev->caps.sm_count;
    while (trans_b && sms && v.threads > 64 && v.threads > sg &&
           (uint64_t)(n + v.threads / sg - 1) / (v.threads / sg) < 4ull * sms)
        v.threads /= 2;
    hl_error scratch;
    if (hl_variant_check(dev, &v, HL_F16, &scratch) != HL_OK) return 0;
    *out = v;
    return 1;
}

/* bfloat16: the fp16 choice for the shape moved onto a bf16 x bf16 -> f32 shape
 * with the same subgroup blocks (the H100 offers bf16 at 16x16x16 only, the shape
 * the fp16 defaults prefer). A switch that forces a variant (HELIOS_VARIANT...) is
 * kept as forced, so an fp16-only pick fails with its reason rather than changing. */
hl_status hl_variant_for_input(const hl_device *dev, uint32_t m, uint32_t n, uint32_t k, uint64_t batch, hl_dtype in,
                               int trans_b, hl_variant *out, hl_error *err) {
    if (gemv_for_rows(dev, m, n, trans_b, out)) return hl_variant_check(dev, out, in, err);
    hl_status st = hl_variant_for_product(dev, m, n, k, batch, out, err);
    if (st != HL_OK || in == HL_F16) return st;
    if (hl_variant_override(dev) && strcmp(hl_variant_override(dev), "disable_coop") != 0)
        return hl_variant_check(dev, out, in, err);
    if (out->path != HL_PATH_SCALAR && hl_bf16_coop_unavailable(dev)) {
        *out = hl_scalar_variant;
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
                if (!best || hl_coop_shape_rank(s) > hl_coop_shape_rank(best)) best = s;
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
        *out = hl_scalar_variant; /* no bf16 tiling fits: the correct slow path, named in the variant */
    }
    return hl_variant_check(dev, out, in, err);
}

/* attention.c — the flash-attention forward: its default variant and list, its
 * pipeline, and one call (upload, poison O, dispatch with optional GPU timing,
 * download) in one submission. What both directions share (the variant and its
 * checks): attention_variant.c; the backward: attention_bwd.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SCALAR_THREADS 64u /* attention_scalar.comp: one query row per invocation */

/* Measured on the H100 (results/h100-attn-c39e6dc, the shapes
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
    if (d <= HL_ATTN_ROWS_MAX_HEAD_DIM)
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
    hl_attn_fwd_kernel k;
    const hl_attn_variant shape16 = {HL_PATH_COOP, 16, 16, 16, 16, 4, 2}; /* the defaults' fragment shape */
    hl_status st = hl_env_flag("HELIOS_DISABLE_COOP_ATTENTION", &off, err);
    /* the switches the checks below read (and whose failures they drop) */
    if (st == HL_OK) st = hl_attn_fwd_kernel_of(dev, &shape16, d, causal, &k, err);
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
    hl_attn_fwd_kernel k;
    hl_status st = hl_attn_fwd_kernel_of(dev, v, d, causal, &k, err);
    if (st == HL_OK) st = hl_attn_fwd_shared_bytes(dev, v, d, &e.shared_bytes, err);
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

/* The call's checks: sizes, the variant (the default where none is given), the row
 * layout, the tensors and their spans (into *span). */
static hl_status check_call(hl_device *dev, const hl_attention_args *args, hl_attn_variant *v, hl_attn_spans *span,
                            hl_error *err) {
    hl_status st = HL_OK;
    const uint64_t bh = args->batch_heads, sq = args->sq, skv = args->skv, d = args->d;
    HL_TRY(hl_attn_check_call(dev, "attention", bh, sq, skv, d, args->causal, args->scale, args->warmup, args->iters,
                              args->samples_ms, err));
    if ((!args->q && !args->t_q) || (!args->k && !args->t_k) || (!args->v && !args->t_v))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "attention: q, k and v are required");
    if (args->variant)
        *v = *args->variant;
    else
        HL_TRY(hl_attn_variant_default(dev, (uint32_t)d, (uint32_t)skv, args->causal, args->dtype, v, err));
    HL_TRY(hl_attn_variant_check(dev, v, (uint32_t)d, args->dtype, err));
    HL_TRY(hl_attn_layout_check(dev, "attention", &args->layout, bh, sq, skv, d, span, err));
    const int rows_layout = args->layout.qkv_rs || args->layout.o_rs;
    if (rows_layout && (!args->t_q || !args->t_k || !args->t_v || !args->t_o))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "attention: a row layout takes tensors (q, k, v and o), not "
                       "host arrays");
    const hl_tensor *ts[4] = {args->t_q, args->t_k, args->t_v, args->t_o};
    for (int i = 0; i < 3; i++)
        if (hl_tensors_share(args->t_o, ts[i]) || hl_tensors_share(args->t_lse, ts[i]))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "attention: the output tensor is also an input; "
                           "attention does not run in place");
    HL_TRY(hl_check_tensor(dev, args->t_q, span->q, "attention", "q", err));
    HL_TRY(hl_check_tensor(dev, args->t_k, span->kv, "attention", "k", err));
    HL_TRY(hl_check_tensor(dev, args->t_v, span->kv, "attention", "v", err));
    HL_TRY(hl_check_output_tensor(dev, args->t_o, span->o, "attention", "o", err));
    HL_TRY(hl_check_output_tensor(dev, args->t_lse, bh * sq * 4, "attention", "lse", err));
fail:
    return st;
}

/* The forward's pipeline for the variant, its grid (query blocks x heads) and push constants. */
static hl_status dispatch_of(hl_device *dev, const hl_attention_args *args, const hl_attn_variant *v,
                             hl_dispatch_plan *pl, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *caps = &dev->caps;
    const uint64_t bh = args->batch_heads, sq = args->sq;
    uint32_t rows;
    hl_pipeline *pipe;
    const int want_lse = args->lse || args->t_lse;
    HL_TRY(attn_pipeline(dev, v, (uint32_t)args->d, args->causal, want_lse, args->dtype, &args->layout, &pipe, &rows,
                         err));
    const uint64_t gx = (sq + rows - 1) / rows;
    if (gx > caps->max_group_count[0] || bh > caps->max_group_count[1])
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "attention: %llu query blocks x %llu heads exceed the "
                       "device's %ux%u workgroup grid",
                       (unsigned long long)gx, (unsigned long long)bh, caps->max_group_count[0],
                       caps->max_group_count[1]);
    memset(pl, 0, sizeof *pl);
    pl->pipe = pipe->pipeline;
    pl->grid[0] = (uint32_t)gx;
    pl->grid[1] = (uint32_t)bh;
    const float scale_log2 = args->scale * 1.4426950408889634f;
    const hl_attn_rows at = hl_attn_layout_rows(&args->layout);
    pl->pc.attention = (hl_push_attention){.heads = (uint32_t)bh,
                                           .sq = (uint32_t)sq,
                                           .skv = (uint32_t)args->skv,
                                           .scale_log2 = scale_log2,
                                           .nh = at.nh,
                                           .q_off = at.q_off,
                                           .k_off = at.k_off,
                                           .v_off = at.v_off};
fail:
    return st;
}

hl_status hl_attention(hl_device *dev, const hl_attention_args *args, hl_error *err) {
    hl_status st = HL_OK;
    hl_attn_variant v;
    hl_attn_spans span;
    hl_dispatch_plan pl;
    HL_TRY(check_call(dev, args, &v, &span, err));
    HL_TRY(dispatch_of(dev, args, &v, &pl, err));
    const uint64_t bh = args->batch_heads, sq = args->sq, q_bytes = span.q, kv_bytes = span.kv;
    const int want_lse = args->lse || args->t_lse;

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

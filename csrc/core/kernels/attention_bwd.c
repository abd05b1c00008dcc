/* attention_bwd.c — the flash-attention backward: its default variant and one
 * call (two dispatches in one submission: delta and dQ per query block, then dK
 * and dV per key block, a barrier between), timed and ordered like the forward.
 * Tensors only: the forward's O and log-sum-exp come from a previous call. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define SCALAR_THREADS 64u /* attention_bwd_scalar.comp: one row per invocation */

/* Measured on the H100 (results/h100-attn-bwd-2ad617a, every backward
 * variant at 1x32x2048x128 causal and not, and 4x16x1024x64): 16x16x16 fragments,
 * four subgroups; two row tiles per subgroup at d <= 64 with 32-query tiles, one
 * at larger d (two spill there: the dK/dV kernel holds K and V fragments and two
 * accumulators per row tile), there with eight subgroups and 32-query tiles since
 * h100-attn-bwd-bc3446f (1x32x2048x128 1.0864 against four subgroups' 16-query
 * 1.1547 ms, 1x32x4096x128 4.0872 against 4.2938, causal 0.6859 / 0.7137 and 2.2298 /
 * 2.3746). With dS in registers (hl_attn_bwd_kernels_of) the dQ kernel streams 64 keys a
 * tile at 64 < d < 128: `helios bench --backward` with the switch each way
 * (h100-bwd-dq-8773961, -139779d), ms: 1x32x2048x80 0.7605 -> 0.7453, 1x32x2048x96 0.8567 ->
 * 0.8359, 4x16x1024x112 0.5160 -> 0.5051, 1x32x2048x112 0.9412 -> 0.9377 (causal 0.5211 ->
 * 0.4943, 0.3783 -> 0.3760, 0.6524 -> 0.6403); not at d = 128, where the 64-key kernel sits
 * at 255 registers and loses (1x32x2048x128 1.1145 against 1.0905, h100-bwd-dq-673aeac; its
 * model without masks had 251 and won, h100-bwd-models-03a3c4e) and 32-key tiles tie; not at
 * d <= 64, where no model beat the scratch path (8x16x1024x64 causal bf16, dQ alone 0.156
 * against 0.153). Then the first valid candidate. */
hl_status hl_attn_bwd_variant_default(const hl_device *dev, uint32_t d, uint32_t skv, int causal, hl_dtype in,
                                      hl_attn_variant *out, hl_error *err) {
    (void)skv;
    (void)causal;
    int off = 0;
    hl_attn_bwd_kernels k;
    const hl_attn_variant shape16 = {HL_PATH_COOP, 16, 16, 16, 32, 8, 1, 64}; /* the pick below */
    hl_status st = hl_env_flag("HELIOS_DISABLE_COOP_ATTENTION_BACKWARD", &off, err);
    if (st == HL_OK) st = hl_attn_bwd_kernels_of(dev, &shape16, d, &k, err); /* its switches' values */
    if (st != HL_OK) return st;
    memset(out, 0, sizeof *out);
    out->path = HL_PATH_SCALAR;
    if (!off && dev->coop_enabled && (in != HL_BF16 || !hl_bf16_coop_unavailable(dev))) {
        const uint32_t wq = d <= 64 ? 2 : 1, nsg = d <= 64 ? 4 : 8;
        /* 64 < d < 128 with dS in registers: the dQ kernel streams 64 keys a tile (see
         * hl_attn_bwd_kernels_of; at d = 128 it gains nothing) */
        const uint32_t dq = d > 64 && d < 128 && k.dq_regs ? 64 : 0;
        const hl_attn_variant list[] = {
            {HL_PATH_COOP, 16, 16, 16, 32, nsg, wq, dq},
            {HL_PATH_COOP, 16, 16, 16, 32, nsg, wq},
            {HL_PATH_COOP, 16, 8, 16, 32, nsg, wq},
            {HL_PATH_COOP, 16, 16, 16, 16, 4, 1},
        };
        hl_error e;
        int found = 0;
        for (size_t i = 0; i < sizeof list / sizeof *list && !found; i++)
            if (hl_attn_check(dev, &list[i], d, in, 1, &e) == HL_OK) {
                *out = list[i];
                found = 1;
            }
        if (!found) hl_attn_candidates(dev, d, in, 1, out, 1);
    }
    return hl_attn_check(dev, out, d, in, 1, err);
}

size_t hl_attn_bwd_variant_list(const hl_device *dev, uint32_t d, hl_dtype in, hl_attn_variant *out, size_t cap) {
    size_t n = dev->coop_enabled ? hl_attn_candidates(dev, d, in, 1, out, cap) : 0;
    /* the candidates name no dQ key tile of their own; the default may (helios tune sees it) */
    hl_attn_variant dflt;
    hl_error e;
    if (n && hl_attn_bwd_variant_default(dev, d, 0, 0, in, &dflt, &e) == HL_OK && dflt.dq_bc) {
        if (n < cap) out[n] = dflt;
        n++;
    }
    if (d >= 1 && d <= HL_ATTENTION_MAX_HEAD_DIM) {
        if (n < cap) out[n] = (hl_attn_variant){.path = HL_PATH_SCALAR};
        n++;
    }
    return n < cap ? n : cap;
}

typedef struct bwd_plan {
    uint32_t passes;    /* bit i: record pass i */
    VkPipeline pipe[2]; /* dQ pass, dK/dV pass */
    uint32_t grid[2][2];
    hl_push pc; /* pc.attention_bwd */
} bwd_plan;

static void record_backward(hl_device *dev, const void *ctx, VkDescriptorSet ds) {
    const bwd_plan *pl = ctx;
    for (int i = 0; i < 2; i++) {
        if (!(pl->passes & (1u << i))) continue;
        if (i && (pl->passes & 1u)) hl_compute_barrier(dev); /* delta written by the first, read by the second */
        vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl->pipe[i]);
        vkCmdBindDescriptorSets(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
        vkCmdPushConstants(dev->cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HL_PUSH_BYTES, pl->pc.words);
        vkCmdDispatch(dev->cmd, pl->grid[i][0], pl->grid[i][1], 1);
        dev->tel.dispatches++;
    }
}

/* The two pipelines of a (checked) variant for operands laid out as layout (NULL:
 * packed) and the rows one workgroup of each owns. */
static hl_status bwd_pipelines(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, hl_dtype in,
                               const hl_attn_layout *layout, hl_pipeline **out, uint32_t *rows, hl_error *err) {
    hl_status st = HL_OK;
    uint32_t spec[HL_MAX_SPEC];
    hl_attn_bwd_kernels k;
    HL_TRY(hl_attn_bwd_kernels_of(dev, v, d, &k, err));
    hl_spec_env e = {.subgroup = dev->caps.subgroup_size,
                     .d = d,
                     .causal = causal ? 1u : 0u,
                     .fold = (uint32_t)k.fold,
                     .qkv_rs = layout ? layout->qkv_rs : 0u,
                     .o_rs = layout ? layout->o_rs : 0u};
    if (v->path != HL_PATH_COOP) {
        *rows = SCALAR_THREADS;
        for (uint32_t pass = 0; pass < 2; pass++) {
            e.pass = pass;
            hl_spec_attention_bwd_scalar(spec, v, &e);
            HL_TRY(hl_pipeline_get(dev, hl_shader_attention_bwd_scalar(in), spec, HL_SPEC_ATTENTION_BWD_SCALAR_COUNT, 0,
                                   &out[pass], err));
        }
        return HL_OK;
    }
    *rows = v->nsg * v->wq * v->tm;
    e.shared_bytes = k.dq_shared_bytes; /* each kernel checks its declarations against its count */
    hl_spec_attention_bwd_dq(spec, v, &e);
    HL_TRY(hl_pipeline_get(dev, hl_shader_attention_bwd_dq(in, k.dq_regs), spec, HL_SPEC_ATTENTION_BWD_DQ_COUNT,
                           e.subgroup, &out[0], err));
    e.shared_bytes = k.dkdv_shared_bytes;
    hl_spec_attention_bwd_dkdv(spec, v, &e);
    HL_TRY(hl_pipeline_get(dev, hl_shader_attention_bwd_dkdv(in), spec, HL_SPEC_ATTENTION_BWD_DKDV_COUNT, e.subgroup,
                           &out[1], err));
fail:
    return st;
}

hl_status hl_attn_bwd_kernel_stats(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, hl_dtype in,
                                   hl_kernel_stats out[2], hl_error *err) {
    hl_status st = HL_OK;
    hl_pipeline *pipes[2];
    uint32_t rows;
    HL_TRY(hl_attn_check(dev, v, d, in, 1, err));
    HL_TRY(bwd_pipelines(dev, v, d, causal, in, NULL, pipes, &rows, err));
    out[0] = pipes[0]->stats;
    out[1] = pipes[1]->stats;
fail:
    return st;
}

static const char *const in_names[6] = {"q", "k", "v", "o", "do", "lse"}, *const out_names[3] = {"dq", "dk", "dv"};

/* The outputs: whole tensors of their spans, none of them an input, and none sharing
 * memory unless a row layout puts them a row's heads apart in one tensor. */
static hl_status check_outputs(hl_device *dev, const hl_attention_bwd_args *args, hl_tensor *const ins[6],
                               hl_tensor *const outs[3], const uint64_t out_bytes[3], hl_error *err) {
    hl_status st = HL_OK;
    for (int i = 0; i < 3; i++) {
        HL_TRY(hl_check_output_tensor(dev, outs[i], out_bytes[i], "attention backward", out_names[i], err));
        for (int j = 0; j < 6; j++)
            if (hl_tensors_share(outs[i], ins[j]))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                               "attention backward: %s is also the input %s; the backward does not run in place",
                               out_names[i], in_names[j]);
        /* In a row layout dQ, dK and dV may be one tensor: their columns differ by
         * their offsets (a head's width apart at least). */
        const uint32_t offs[3] = {args->layout.q_off, args->layout.k_off, args->layout.v_off};
        for (int j = 0; j < i; j++) {
            const uint32_t gap = offs[i] > offs[j] ? offs[i] - offs[j] : offs[j] - offs[i];
            const int apart = args->layout.qkv_rs && gap >= (uint64_t)args->layout.heads * args->d;
            if (hl_tensors_share(outs[i], outs[j]) && (!apart || outs[i] != outs[j]))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                               "attention backward: %s and %s are the same memory (one tensor only in a row layout, "
                               "at offsets a row's heads apart)",
                               out_names[j], out_names[i]);
        }
    }
fail:
    return st;
}

/* The call's checks: sizes, every operand a tensor, the variant (the default where none
 * is given), the layout's spans (into *span), inputs and outputs. */
static hl_status check_call(hl_device *dev, const hl_attention_bwd_args *args, hl_attn_variant *v, hl_attn_spans *span,
                            hl_error *err) {
    hl_status st = HL_OK;
    const uint64_t bh = args->batch_heads, sq = args->sq, skv = args->skv, d = args->d;
    HL_TRY(hl_attn_check_call(dev, "attention backward", bh, sq, skv, d, args->causal, args->scale, args->warmup,
                              args->iters, args->samples_ms, err));
    hl_tensor *const ins[6] = {args->t_q, args->t_k, args->t_v, args->t_o, args->t_do, args->t_lse};
    hl_tensor *const outs[3] = {args->t_dq, args->t_dk, args->t_dv};
    for (int i = 0; i < 6; i++)
        if (!ins[i])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "attention backward: %s is required (a tensor)", in_names[i]);
    for (int i = 0; i < 3; i++)
        if (!outs[i])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "attention backward: %s is required (a tensor)", out_names[i]);
    if (args->variant)
        *v = *args->variant;
    else
        HL_TRY(hl_attn_bwd_variant_default(dev, (uint32_t)d, (uint32_t)skv, args->causal, args->dtype, v, err));
    HL_TRY(hl_attn_check(dev, v, (uint32_t)d, args->dtype, 1, err));
    HL_TRY(hl_attn_layout_check(dev, "attention backward", &args->layout, bh, sq, skv, d, span, err));
    const uint64_t in_bytes[6] = {span->q, span->kv, span->kv, span->o, span->o, bh * sq * 4};
    const uint64_t out_bytes[3] = {span->q, span->kv, span->kv};
    for (int i = 0; i < 6; i++)
        HL_TRY(hl_check_tensor(dev, ins[i], in_bytes[i], "attention backward", in_names[i], err));
    HL_TRY(check_outputs(dev, args, ins, outs, out_bytes, err));
    if (args->passes > 3)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "attention backward: passes must be 0..3, got %u", args->passes);
fail:
    return st;
}

/* The two kernels' pipelines, grids (query blocks, key blocks; x heads) and push constants. */
static hl_status plan_of(hl_device *dev, const hl_attention_bwd_args *args, const hl_attn_variant *v, bwd_plan *pl,
                         hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *caps = &dev->caps;
    const uint64_t bh = args->batch_heads, sq = args->sq, skv = args->skv;
    *pl = (bwd_plan){.passes = args->passes ? args->passes : 3u};
    hl_pipeline *pipes[2];
    uint32_t rows;
    HL_TRY(bwd_pipelines(dev, v, (uint32_t)args->d, args->causal, args->dtype, &args->layout, pipes, &rows, err));
    const uint64_t gq = (sq + rows - 1) / rows, gk = (skv + rows - 1) / rows;
    if (gq > caps->max_group_count[0] || gk > caps->max_group_count[0] || bh > caps->max_group_count[1])
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "attention backward: %llu row blocks x %llu heads exceed the device's %ux%u workgroup grid",
                       (unsigned long long)(gq > gk ? gq : gk), (unsigned long long)bh, caps->max_group_count[0],
                       caps->max_group_count[1]);
    for (int i = 0; i < 2; i++) {
        pl->pipe[i] = pipes[i]->pipeline;
        pl->grid[i][0] = (uint32_t)(i ? gk : gq);
        pl->grid[i][1] = (uint32_t)bh;
    }
    const float scale = args->scale, scale_log2 = args->scale * 1.4426950408889634f;
    const hl_attn_rows at = hl_attn_layout_rows(&args->layout);
    pl->pc.attention_bwd = (hl_push_attention_bwd){.heads = (uint32_t)bh,
                                                   .sq = (uint32_t)sq,
                                                   .skv = (uint32_t)skv,
                                                   .scale_log2 = scale_log2,
                                                   .scale = scale,
                                                   .nh = at.nh,
                                                   .q_off = at.q_off,
                                                   .k_off = at.k_off,
                                                   .v_off = at.v_off};
fail:
    return st;
}

hl_status hl_attention_backward(hl_device *dev, const hl_attention_bwd_args *args, hl_error *err) {
    hl_status st = HL_OK;
    hl_attn_variant v;
    hl_attn_spans span;
    bwd_plan pl;
    HL_TRY(check_call(dev, args, &v, &span, err));
    HL_TRY(plan_of(dev, args, &v, &pl, err));
    const uint64_t q_bytes = span.q, kv_bytes = span.kv, row_bytes = args->batch_heads * args->sq * 4;
    /* Outputs are poisoned: an element a kernel fails to write cannot pass a check. */
    hl_operand ops[HL_BIND_ATTENTION_BWD_COUNT] = {
        [HL_BIND_ATTENTION_BWD_Q] = {.tensor = args->t_q,
                                     .bytes = q_bytes,
                                     .slot = HL_BIND_ATTENTION_BWD_Q,
                                     .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_K] = {.tensor = args->t_k,
                                     .bytes = kv_bytes,
                                     .slot = HL_BIND_ATTENTION_BWD_K,
                                     .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_V] = {.tensor = args->t_v,
                                     .bytes = kv_bytes,
                                     .slot = HL_BIND_ATTENTION_BWD_V,
                                     .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_O] = {.tensor = args->t_o,
                                     .bytes = span.o,
                                     .slot = HL_BIND_ATTENTION_BWD_O,
                                     .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_DO] = {.tensor = args->t_do,
                                      .bytes = span.o,
                                      .slot = HL_BIND_ATTENTION_BWD_DO,
                                      .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_LSE] = {.tensor = args->t_lse,
                                       .bytes = row_bytes,
                                       .slot = HL_BIND_ATTENTION_BWD_LSE,
                                       .access = HL_ACCESS_READ},
        [HL_BIND_ATTENTION_BWD_DELTA] = {.scratch = &dev->buf_rows,
                                         .bytes = row_bytes,
                                         .slot = HL_BIND_ATTENTION_BWD_DELTA},
        [HL_BIND_ATTENTION_BWD_DQ] = {.tensor = args->t_dq,
                                      .bytes = q_bytes,
                                      .poison = 1,
                                      .slot = HL_BIND_ATTENTION_BWD_DQ},
        [HL_BIND_ATTENTION_BWD_DK] = {.tensor = args->t_dk,
                                      .bytes = kv_bytes,
                                      .poison = 1,
                                      .slot = HL_BIND_ATTENTION_BWD_DK},
        [HL_BIND_ATTENTION_BWD_DV] = {.tensor = args->t_dv,
                                      .bytes = kv_bytes,
                                      .poison = 1,
                                      .slot = HL_BIND_ATTENTION_BWD_DV},
    };
    const hl_exec_timing timing = {args->warmup,   args->iters,      args->flush_bytes, args->samples_ms,
                                   args->batch_ms, args->wait_value, args->signal_value};
    char vs[HL_VARIANT_STR_MAX];
    hl_attn_variant_format(&v, vs, sizeof vs);
    HL_TRY(hl_exec_kernel(dev, ops, HL_BIND_ATTENTION_BWD_COUNT, record_backward, &pl, &timing, vs, args->info, err));
    dev->tel.attentions++;
    if (v.path == HL_PATH_COOP) dev->tel.coop_attentions++;
    return HL_OK;
fail:
    return st;
}

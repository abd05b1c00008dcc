/* elementwise.c — the ops a model runs between its products and attention, on
 * the device so that a layer's work can stay one ordered group: layout copies
 * (copy_strided.comp), activations with their backward (activation.comp),
 * LayerNorm with its backward (layernorm.comp), and AdamW as a plan's step
 * (optim.comp). Memory-bound and small next to the products; one dispatch each. */
#include <stdio.h>
#include <string.h>

#include "plan_ops.h"

#define ELEMENTWISE_THREADS 256u /* both shaders' workgroup size */
#define VEC_ELEMS 8u             /* copy_strided.comp, activation.comp: 16 bytes per invocation where aligned */

/* A 2-D grid of workgroups covering `invocations` (the shaders flatten it). */
static hl_status grid_for(const hl_device *dev, uint64_t invocations, const char *who, uint32_t groups[2],
                          hl_error *err) {
    const uint64_t total = (invocations + ELEMENTWISE_THREADS - 1) / ELEMENTWISE_THREADS;
    const uint64_t gx = total < dev->caps.max_group_count[0] ? total : dev->caps.max_group_count[0];
    const uint64_t gy = gx ? (total + gx - 1) / gx : 0;
    if (gy > dev->caps.max_group_count[1] || invocations > UINT32_MAX)
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %llu invocations exceed the device's workgroup grid", who,
                       (unsigned long long)invocations);
    groups[0] = (uint32_t)(gx ? gx : 1);
    groups[1] = (uint32_t)(gy ? gy : 1);
    return HL_OK;
}

static hl_status run_plan(hl_device *dev, hl_dispatch_plan *pl, hl_operand *ops, uint32_t n_slots, const char *what,
                          uint64_t wait_value, uint64_t signal_value, hl_error *err) {
    const hl_exec_timing timing = {.wait_value = wait_value, .signal_value = signal_value};
    return hl_exec_kernel(dev, ops, n_slots, hl_record_dispatch, pl, &timing, what, NULL, err);
}

hl_status hl_copy_strided(hl_device *dev, const hl_copy_args *a, hl_error *err) {
    hl_status st = HL_OK;
    static const char *who = "copy_strided";
    if (!a->src || !a->dst) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: src and dst are required tensors", who);
    if (hl_tensors_share(a->src, a->dst))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: src and dst are the same memory; the copy is not in place",
                       who);
    uint64_t count = 1, src_last = a->src_offset, dst_last = a->dst_offset;
    for (int i = 0; i < 4; i++) {
        if (!a->sizes[i])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: sizes (%u, %u, %u, %u) must all be positive", who,
                           a->sizes[0], a->sizes[1], a->sizes[2], a->sizes[3]);
        count *= a->sizes[i];
        src_last += (uint64_t)(a->sizes[i] - 1) * (i < 3 ? a->src_strides[i] : 1u);
        dst_last += (uint64_t)(a->sizes[i] - 1) * (i < 3 ? a->dst_strides[i] : 1u);
    }
    if (src_last >= UINT32_MAX || dst_last >= UINT32_MAX)
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: element index %llu is beyond the kernel's 32-bit indexing", who,
                       (unsigned long long)(src_last > dst_last ? src_last : dst_last));
    HL_TRY(hl_check_tensor(dev, a->src, (src_last + 1) * 2, who, "src", err));
    HL_TRY(hl_check_tensor(dev, a->dst, (dst_last + 1) * 2, who, "dst", err));
    int vec = a->sizes[3] % VEC_ELEMS == 0 && a->src_offset % VEC_ELEMS == 0 && a->dst_offset % VEC_ELEMS == 0;
    for (int i = 0; i < 3; i++) vec = vec && a->src_strides[i] % VEC_ELEMS == 0 && a->dst_strides[i] % VEC_ELEMS == 0;
    hl_dispatch_plan pl = {0};
    HL_TRY(grid_for(dev, vec ? count / VEC_ELEMS : count, who, pl.grid, err));
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_copy_strided(), NULL, 0, 0, &pipe, err));
    pl.pipe = pipe->pipeline;
    pl.pc.copy_strided = (hl_push_copy_strided){.size0 = a->sizes[0],
                                                .size1 = a->sizes[1],
                                                .size2 = a->sizes[2],
                                                .size3 = a->sizes[3],
                                                .src_s0 = a->src_strides[0],
                                                .src_s1 = a->src_strides[1],
                                                .src_s2 = a->src_strides[2],
                                                .dst_s0 = a->dst_strides[0],
                                                .dst_s1 = a->dst_strides[1],
                                                .dst_s2 = a->dst_strides[2],
                                                .src_off = a->src_offset,
                                                .dst_off = a->dst_offset,
                                                .vec = (uint32_t)vec};
    hl_operand ops[HL_BIND_COPY_COUNT] = {
        [HL_BIND_COPY_SRC] = {.tensor = a->src,
                              .bytes = (src_last + 1) * 2,
                              .slot = HL_BIND_COPY_SRC,
                              .access = HL_ACCESS_READ},
        [HL_BIND_COPY_DST] = {.tensor = a->dst, .bytes = (dst_last + 1) * 2, .slot = HL_BIND_COPY_DST},
    };
    return run_plan(dev, &pl, ops, HL_BIND_COPY_COUNT, vec ? "copy_strided:vec8" : "copy_strided", a->wait_value,
                    a->signal_value, err);
fail:
    return st;
}

hl_status hl_activate(hl_device *dev, const hl_activation_args *a, hl_error *err) {
    hl_status st = HL_OK;
    static const char *who = "activation";
    if (!a->z || !a->y) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: z and y are required tensors", who);
    if (a->dtype != HL_F16 && a->dtype != HL_BF16)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: dtype must be float16 or bfloat16, got %s", who,
                       hl_dtype_name(a->dtype));
    if (a->act < HL_ACT_RELU || a->act > HL_ACT_SILU)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: act must be 1 (relu), 2 (gelu) or 3 (silu), got %u", who,
                       a->act);
    if (!a->n || a->n >= UINT32_MAX)
        return hl_fail(err, a->n ? HL_ERR_TOO_LARGE : HL_ERR_INVALID_ARGUMENT, "%s: n must be 1..2^32-2, got %llu", who,
                       (unsigned long long)a->n);
    if (hl_tensors_share(a->y, a->z) || hl_tensors_share(a->y, a->grad))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: y is also an input; the activation does not run in place",
                       who);
    const uint64_t bytes = a->n * 2;
    HL_TRY(hl_check_tensor(dev, a->z, bytes, who, "z", err));
    HL_TRY(hl_check_tensor(dev, a->grad, bytes, who, "grad", err));
    HL_TRY(hl_check_tensor(dev, a->y, bytes, who, "y", err));
    /* 8 elements an invocation where every operand starts on 16 bytes */
    const int vec = a->n % VEC_ELEMS == 0 && a->z->offset % 16 == 0 && a->y->offset % 16 == 0 &&
                    (!a->grad || a->grad->offset % 16 == 0);
    hl_dispatch_plan pl = {.pc.activation = {.n = (uint32_t)a->n, .vec = (uint32_t)vec}};
    HL_TRY(grid_for(dev, vec ? a->n / VEC_ELEMS : (a->n + 1) / 2, who, pl.grid, err));
    const hl_spec_env e = {.act = (uint32_t)a->act, .pass = a->grad ? 1u : 0u};
    uint32_t spec[HL_SPEC_ACTIVATION_COUNT];
    hl_spec_activation(spec, &e);
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_activation(a->dtype), spec, HL_SPEC_ACTIVATION_COUNT, 0, &pipe, err));
    pl.pipe = pipe->pipeline;
    /* Without grad, z is bound at G too (the forward pass never reads it). */
    hl_operand ops[HL_BIND_ACTIVATION_COUNT] = {
        [HL_BIND_ACTIVATION_Z] = {.tensor = a->z,
                                  .bytes = bytes,
                                  .slot = HL_BIND_ACTIVATION_Z,
                                  .access = HL_ACCESS_READ},
        [HL_BIND_ACTIVATION_G] = {.tensor = a->grad ? a->grad : a->z,
                                  .bytes = bytes,
                                  .slot = HL_BIND_ACTIVATION_G,
                                  .access = HL_ACCESS_READ},
        [HL_BIND_ACTIVATION_Y] = {.tensor = a->y, .bytes = bytes, .poison = 1, .slot = HL_BIND_ACTIVATION_Y},
    };
    static const char *names[2][2] = {{"activation", "activation:vec8"},
                                      {"activation:backward", "activation:backward:vec8"}};
    return run_plan(dev, &pl, ops, HL_BIND_ACTIVATION_COUNT, names[a->grad != NULL][vec], a->wait_value,
                    a->signal_value, err);
fail:
    return st;
}

#define LAYERNORM_MAX_D 8192u /* 32 columns per invocation held in registers */

/* Whether t (absent: trivially) starts on an `align`-byte boundary. */
static int starts_on(const hl_tensor *t, uint64_t align) { return !t || t->offset % align == 0; }

static hl_status layernorm_common(hl_device *dev, const char *who, uint32_t rows, uint32_t d, hl_dtype dtype,
                                  hl_error *err) {
    if (dtype != HL_F16 && dtype != HL_BF16)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: dtype must be float16 or bfloat16, got %s", who,
                       hl_dtype_name(dtype));
    if (!rows || !d || d > LAYERNORM_MAX_D)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: rows >= 1 and d in 1..%u, got %u x %u", who, LAYERNORM_MAX_D,
                       rows, d);
    if ((uint64_t)rows * d * 4 > dev->caps.max_storage_buffer_range)
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %u x %u fp32 elements exceed the device's buffer range", who, rows,
                       d);
    return HL_OK;
}

static hl_status layernorm_pipeline(hl_device *dev, uint32_t pass, uint32_t d, int residual, uint32_t rms,
                                    hl_dtype dtype, VkPipeline *out, hl_error *err) {
    hl_status st = HL_OK;
    const hl_spec_env e = {.pass = pass,
                           .cols_per_thread = (d + ELEMENTWISE_THREADS - 1) / ELEMENTWISE_THREADS,
                           .residual = residual ? 1u : 0u,
                           .rows_per_group = HL_LAYERNORM_ROWS,
                           .rms = rms ? 1u : 0u};
    uint32_t spec[HL_SPEC_LAYERNORM_COUNT];
    hl_spec_layernorm(spec, &e);
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_layernorm(dtype), spec, HL_SPEC_LAYERNORM_COUNT, 0, &pipe, err));
    *out = pipe->pipeline;
fail:
    return st;
}

hl_status hl_layernorm_prepare(hl_device *dev, const hl_layernorm_args *a, hl_dispatch_plan *pl,
                               hl_operand ops[HL_BIND_LAYERNORM_COUNT], int *vec, hl_error *err) {
    hl_status st = HL_OK;
    static const char *who = "layernorm";
    HL_TRY(layernorm_common(dev, who, a->rows, a->d, a->dtype, err));
    if (!a->x || !a->gamma || (!a->beta && !a->rms) || !a->h || !a->stats || (a->r && !a->x_out))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: x, gamma, beta (but for RMSNorm), h and stats are required (and x_out with r)", who);
    if (!(a->eps > 0.0f))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: eps must be positive, got %g", who, (double)a->eps);
    const uint64_t n = (uint64_t)a->rows * a->d;
    hl_tensor *const outs[3] = {a->h, a->stats, a->x_out};
    hl_tensor *const ins[4] = {a->x, a->r, a->gamma, a->beta};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            if (outs[i] && hl_tensors_share(outs[i], ins[j]))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: an output is also an input; it does not run in place",
                               who);
    HL_TRY(hl_check_tensor(dev, a->x, n * 4, who, "x", err));
    HL_TRY(hl_check_tensor(dev, a->r, n * 2, who, "r", err));
    HL_TRY(hl_check_tensor(dev, a->gamma, (uint64_t)a->d * 4, who, "gamma", err));
    HL_TRY(hl_check_tensor(dev, a->beta, (uint64_t)a->d * 4, who, "beta", err));
    HL_TRY(hl_check_tensor(dev, a->x_out, a->r ? n * 4 : 0, who, "x_out", err));
    HL_TRY(hl_check_tensor(dev, a->h, n * 2, who, "h", err));
    HL_TRY(hl_check_tensor(dev, a->stats, (uint64_t)a->rows * 8, who, "stats", err));
    memset(pl, 0, sizeof *pl);
    HL_TRY(grid_for(dev, (uint64_t)a->rows * ELEMENTWISE_THREADS, who, pl->grid, err));
    HL_TRY(layernorm_pipeline(dev, 0, a->d, a->r != NULL, a->rms, a->dtype, &pl->pipe, err));
    /* 4 columns an access where every row and tensor starts where the moves need */
    *vec = a->d % 4 == 0 && starts_on(a->x, 16) && starts_on(a->r, 8) && starts_on(a->gamma, 16) &&
           starts_on(a->beta, 16) && starts_on(a->x_out, 16) && starts_on(a->h, 8);
    pl->pc.layernorm = (hl_push_layernorm){.rows = a->rows, .d = a->d, .eps = a->eps, .vec = (uint32_t)*vec};
    /* Slots the pass does not touch are bound to x (declared, never read or written). */
    for (uint32_t i = 0; i < HL_BIND_LAYERNORM_COUNT; i++)
        ops[i] = (hl_operand){.tensor = a->x, .bytes = n * 4, .slot = (int)i, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_R] = (hl_operand){.tensor = a->r ? a->r : a->x,
                                            .bytes = a->r ? n * 2 : n * 4,
                                            .slot = HL_BIND_LAYERNORM_R,
                                            .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_GAMMA] =
        (hl_operand){.tensor = a->gamma, .bytes = a->d * 4u, .slot = HL_BIND_LAYERNORM_GAMMA, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_BETA] = (hl_operand){.tensor = a->beta ? a->beta : a->gamma, /* RMSNorm: never read */
                                               .bytes = a->d * 4u,
                                               .slot = HL_BIND_LAYERNORM_BETA,
                                               .access = HL_ACCESS_READ};
    if (a->x_out)
        ops[HL_BIND_LAYERNORM_XOUT] = (hl_operand){.tensor = a->x_out, .bytes = n * 4, .slot = HL_BIND_LAYERNORM_XOUT};
    ops[HL_BIND_LAYERNORM_H] = (hl_operand){.tensor = a->h, .bytes = n * 2, .poison = 1, .slot = HL_BIND_LAYERNORM_H};
    ops[HL_BIND_LAYERNORM_STATS] =
        (hl_operand){.tensor = a->stats, .bytes = (uint64_t)a->rows * 8, .poison = 1, .slot = HL_BIND_LAYERNORM_STATS};
    return HL_OK;
fail:
    return st;
}

hl_status hl_layernorm(hl_device *dev, const hl_layernorm_args *a, hl_error *err) {
    hl_status st = HL_OK;
    hl_dispatch_plan pl;
    hl_operand ops[HL_BIND_LAYERNORM_COUNT];
    int vec;
    HL_TRY(hl_layernorm_prepare(dev, a, &pl, ops, &vec, err));
    return run_plan(dev, &pl, ops, HL_BIND_LAYERNORM_COUNT, vec ? "layernorm:vec4" : "layernorm", a->wait_value,
                    a->signal_value, err);
fail:
    return st;
}

hl_status hl_layernorm_backward(hl_device *dev, const hl_layernorm_bwd_args *a, hl_error *err) {
    hl_status st = HL_OK;
    static const char *who = "layernorm backward";
    HL_TRY(layernorm_common(dev, who, a->rows, a->d, a->dtype, err));
    if (!a->grad_h || !a->x || !a->stats || !a->gamma || !a->gx || !a->gx16 || !a->partial)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: grad_h, x, stats, gamma, gx, gx16 and partial are required tensors", who);
    const uint64_t n = (uint64_t)a->rows * a->d;
    const uint64_t groups = (a->rows + HL_LAYERNORM_ROWS - 1) / HL_LAYERNORM_ROWS;
    hl_tensor *const outs[3] = {a->gx, a->gx16, a->partial};
    hl_tensor *const ins[5] = {a->grad_h, a->x, a->stats, a->gamma, a->grad_res};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            if (hl_tensors_share(outs[i], ins[j]))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: an output is also an input; it does not run in place",
                               who);
    HL_TRY(hl_check_tensor(dev, a->grad_h, n * 2, who, "grad_h", err));
    HL_TRY(hl_check_tensor(dev, a->x, n * 4, who, "x", err));
    HL_TRY(hl_check_tensor(dev, a->stats, (uint64_t)a->rows * 8, who, "stats", err));
    HL_TRY(hl_check_tensor(dev, a->gamma, (uint64_t)a->d * 4, who, "gamma", err));
    HL_TRY(hl_check_tensor(dev, a->grad_res, a->grad_res ? n * 4 : 0, who, "grad_res", err));
    HL_TRY(hl_check_tensor(dev, a->gx, n * 4, who, "gx", err));
    HL_TRY(hl_check_tensor(dev, a->gx16, n * 2, who, "gx16", err));
    HL_TRY(hl_check_tensor(dev, a->partial, groups * 2 * a->d * 4, who, "partial", err));
    hl_dispatch_plan pl = {0};
    HL_TRY(grid_for(dev, groups * ELEMENTWISE_THREADS, who, pl.grid, err));
    HL_TRY(layernorm_pipeline(dev, 1, a->d, a->grad_res != NULL, 0, a->dtype, &pl.pipe, err));
    const int vec = a->d % 4 == 0 && starts_on(a->grad_h, 8) && starts_on(a->x, 16) && starts_on(a->gamma, 16) &&
                    starts_on(a->grad_res, 16) && starts_on(a->gx, 16) && starts_on(a->gx16, 8) &&
                    starts_on(a->partial, 16);
    pl.pc.layernorm = (hl_push_layernorm){
        .rows = a->rows, .d = a->d, .vec = (uint32_t)vec}; /* no eps: it reads the forward's stats */
    hl_operand ops[HL_BIND_LAYERNORM_COUNT];
    for (uint32_t i = 0; i < HL_BIND_LAYERNORM_COUNT; i++)
        ops[i] = (hl_operand){.tensor = a->x, .bytes = n * 4, .slot = (int)i, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_H] =
        (hl_operand){.tensor = a->grad_h, .bytes = n * 2, .slot = HL_BIND_LAYERNORM_H, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_STATS] = (hl_operand){
        .tensor = a->stats, .bytes = (uint64_t)a->rows * 8, .slot = HL_BIND_LAYERNORM_STATS, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_GAMMA] =
        (hl_operand){.tensor = a->gamma, .bytes = a->d * 4u, .slot = HL_BIND_LAYERNORM_GAMMA, .access = HL_ACCESS_READ};
    if (a->grad_res)
        ops[HL_BIND_LAYERNORM_GRES] = (hl_operand){
            .tensor = a->grad_res, .bytes = n * 4, .slot = HL_BIND_LAYERNORM_GRES, .access = HL_ACCESS_READ};
    ops[HL_BIND_LAYERNORM_GX] =
        (hl_operand){.tensor = a->gx, .bytes = n * 4, .poison = 1, .slot = HL_BIND_LAYERNORM_GX};
    ops[HL_BIND_LAYERNORM_GX16] =
        (hl_operand){.tensor = a->gx16, .bytes = n * 2, .poison = 1, .slot = HL_BIND_LAYERNORM_GX16};
    ops[HL_BIND_LAYERNORM_PARTIAL] = (hl_operand){
        .tensor = a->partial, .bytes = groups * 2 * a->d * 4, .poison = 1, .slot = HL_BIND_LAYERNORM_PARTIAL};
    return run_plan(dev, &pl, ops, HL_BIND_LAYERNORM_COUNT, vec ? "layernorm:backward:vec4" : "layernorm:backward",
                    a->wait_value, a->signal_value, err);
fail:
    return st;
}

hl_status hl_adamw_step(hl_device *dev, const hl_adamw_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                        hl_error *err) {
    hl_status st = HL_OK;
    if (!a->p || !a->m || !a->v || !a->g)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: p, m, v and g are required tensors", who);
    if (a->copy && a->dtype != HL_F16 && a->dtype != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "%s: the copy's dtype must be float16 or bfloat16, got %s", who,
                       hl_dtype_name(a->dtype));
    if (!a->n) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: n must be >= 1", who);
    if (a->step_slot >= n_params || a->lr_slot >= n_params)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: step word %u and lr word %u; the plan has %u parameter words",
                       who, a->step_slot, a->lr_slot, n_params);
    if (!(a->beta1 >= 0.0f && a->beta1 < 1.0f && a->beta2 >= 0.0f && a->beta2 < 1.0f && a->eps > 0.0f &&
          a->weight_decay >= 0.0f))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: betas in [0, 1), eps > 0 and weight_decay >= 0", who);
    hl_tensor *const all[5] = {a->p, a->m, a->v, a->g, a->copy};
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (all[i] && all[j] && hl_tensors_share(all[i], all[j]))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: p, m, v, g and copy must not overlap", who);
    const uint64_t bytes = (uint64_t)a->n * 4;
    HL_TRY(hl_check_output_tensor(dev, a->p, bytes, who, "p", err));
    HL_TRY(hl_check_output_tensor(dev, a->m, bytes, who, "m", err));
    HL_TRY(hl_check_output_tensor(dev, a->v, bytes, who, "v", err));
    HL_TRY(hl_check_tensor(dev, a->g, bytes, who, "g", err));
    HL_TRY(hl_check_output_tensor(dev, a->copy, (uint64_t)a->n * 2, who, "copy", err));
    memset(s, 0, sizeof *s);
    HL_TRY(grid_for(dev, a->n, who, s->grid[0], err));
    s->grid[0][2] = 1;
    hl_pipeline *pipe;
    HL_TRY(hl_pipeline_get(dev, hl_shader_optim(a->copy ? a->dtype : HL_F16), NULL, 0, 0, &pipe, err));
    s->n_dispatch = 1;
    s->pipe[0] = pipe->pipeline;
    s->pc[0].optim = (hl_push_optim){.n = a->n,
                                     .step_slot = a->step_slot,
                                     .lr_slot = a->lr_slot,
                                     .copy = a->copy != NULL,
                                     .beta1 = a->beta1,
                                     .beta2 = a->beta2,
                                     .eps = a->eps,
                                     .weight_decay = a->weight_decay};
    s->n_binds = HL_BIND_OPTIM_COUNT;
    hl_tensor *const slots[HL_BIND_OPTIM_COUNT] = {a->p, a->p, a->m, a->v, a->g, a->copy ? a->copy : a->g};
    for (uint32_t i = 0; i < HL_BIND_OPTIM_COUNT; i++) s->binds[i] = hl_tensor_or_scratch(slots[i], NULL);
    s->params_slot = HL_BIND_OPTIM_PARAMS;
    s->work_slot = s->param_write = -1;
    const hl_tensor *reads[4] = {a->p, a->m, a->v, a->g};
    const hl_tensor *writes[4] = {a->p, a->m, a->v, a->copy};
    memcpy(s->reads, reads, sizeof reads);
    memcpy(s->writes, writes, sizeof writes);
    hl_tensor *keep[5] = {a->p, a->m, a->v, a->g, a->copy};
    memcpy(s->keep, keep, sizeof keep);
fail:
    return st;
}

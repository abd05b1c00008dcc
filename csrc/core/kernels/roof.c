/* roof.c — the cooperative-matrix MMA roof (mma_roof.comp): the TF/s a device's
 * matrix units give a register-only loop, per fragment shape and accumulator
 * type. It is the ceiling Helios's kernels are judged against on any GPU. */
#include "internal.h"

typedef struct roof_plan {
    VkPipeline pipe;
    uint32_t groups;
} roof_plan;

static void record_roof(hl_device *dev, const void *ctx, VkDescriptorSet ds) {
    const roof_plan *p = ctx;
    vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
    vkCmdBindDescriptorSets(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
    vkCmdDispatch(dev->cmd, p->groups, 1, 1);
    dev->tel.dispatches++;
}

#define ROOF_SUBGROUPS 4u /* per workgroup (the family's workgroup size) */
#define ROOF_CHAINS 4u    /* independent accumulators per subgroup (mma_roof.comp) */

hl_status hl_mma_roof(hl_device *dev, const hl_roof_args *a, double *flops, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *c = &dev->caps;
    if (!dev->coop_enabled)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "the MMA roof needs cooperative matrices, which are %s on '%s'",
                       c->has_coop ? "disabled" : "absent", c->name);
    if (!dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' has no usable timestamps on its compute queue", c->name);
    if (!hl_find_coop_shape(c, a->tm, a->tn, a->tk, HL_F16, a->acc))
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "'%s' has no subgroup cooperative matrix %ux%ux%u with f16 inputs and %s accumulators", c->name,
                       a->tm, a->tn, a->tk, hl_dtype_name(a->acc));
    if (!a->iters || a->iters > (1u << 24) || !a->groups || a->groups > c->max_group_count[0] || !a->reps ||
        a->reps > HL_MAX_LAUNCHES || a->warmup > HL_MAX_LAUNCHES || !a->samples_ms)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "roof: iters 1..2^24, groups 1..%u, reps 1..%u, warmup <= %u and a samples buffer "
                       "(got %u, %u, %u, %u)",
                       c->max_group_count[0], HL_MAX_LAUNCHES, HL_MAX_LAUNCHES, a->iters, a->groups, a->reps,
                       a->warmup);
    const hl_variant v = {.path = HL_PATH_COOP, .tm = a->tm, .tn = a->tn, .tk = a->tk, .acc = a->acc};
    const hl_spec_env e = {.subgroup = c->subgroup_size, .iters = a->iters};
    uint32_t spec[HL_SPEC_MMA_ROOF_COUNT];
    hl_spec_mma_roof(spec, &v, &e);
    hl_pipeline *pipe;
    HL_TRY(
        hl_pipeline_get(dev, hl_shader_mma_roof(a->acc), spec, HL_SPEC_MMA_ROOF_COUNT, c->subgroup_size, &pipe, err));
    const roof_plan plan = {pipe->pipeline, a->groups};
    hl_operand out = {.scratch = &dev->buf_c,
                      .bytes = (uint64_t)a->groups * ROOF_SUBGROUPS * a->tm * a->tn * hl_dtype_size(a->acc),
                      .slot = HL_BIND_ROOF_OUT};
    hl_exec x = {.operands = &out,
                 .n_operands = 1,
                 .n_slots = HL_BIND_ROOF_COUNT,
                 .record = record_roof,
                 .ctx = &plan,
                 .warmup = a->warmup,
                 .iters = a->reps,
                 .samples_ms = a->samples_ms};
    HL_TRY(hl_exec_run(dev, &x, err));
    *flops = 2.0 * a->tm * a->tn * a->tk * (double)a->iters * ROOF_CHAINS * ROOF_SUBGROUPS * a->groups;
    return HL_OK;
fail:
    return st;
}

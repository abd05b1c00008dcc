/* plan_ops.h — what a plan records for each operation (plan.c): its dispatches, the
 * tensors it binds, reads and writes, the parameter words it reads or writes and the
 * workspace it needs. Operations become steps in plan_steps.c: products (product.h)
 * and LayerNorm (elementwise.c) are validated where their calls are; the decode ops
 * live in decode.c. */
#ifndef HELIOS_PLAN_OPS_H
#define HELIOS_PLAN_OPS_H

#include "helios_plan.h"
#include "product.h"

#define HL_STEP_READS 6u
#define HL_STEP_WRITES 4u

typedef struct hl_plan_step {
    uint32_t n_dispatch; /* 1, or 2: the second behind a barrier (split-K's sum, attention's combine) */
    VkPipeline pipe[2];
    uint32_t grid[2][3];
    uint32_t pc[2][HL_PUSH_WORDS];
    hl_binding binds[HL_BINDINGS]; /* the plan fills the workspace and parameter slots */
    uint32_t n_binds;
    int work_slot, params_slot; /* binding slots of the workspace and the parameter words, -1: none */
    uint64_t work_bytes;        /* of the plan's workspace (0: none) */
    const hl_tensor *reads[HL_STEP_READS], *writes[HL_STEP_WRITES];
    uint32_t param_read[2], param_bound[2], n_param_reads; /* words read, each below its bound */
    int param_write;                                       /* the word written, -1: none */
    uint32_t counter_words; /* words of its own the plan zeroes before each replay (arrival counters) */
    int counter_slot;       /* their binding slot, where counter_words > 0 */
    hl_tensor *keep[8];     /* every tensor bound */
    /* grid_div > 0: the first dispatch's grid is read at replay from arguments the host
     * writes before the submission, {grid[0][0], params[grid_slot] / grid_div + 1, 1},
     * where no step writes that word (plan.c); 0: the grid as recorded. */
    uint32_t grid_slot, grid_div;
    hl_product product; /* a product's plan, as its step was made from it */
} hl_plan_step;

/* Operation i of a plan with n_params parameter words as a step. */
hl_status hl_plan_op_step(hl_device *dev, const hl_plan_op *op, uint32_t i, uint32_t n_params, hl_plan_step *s,
                          hl_error *err);
/* ops[0..1] a LayerNorm and the product after it: where the product reads the norm's
 * output on the matrix-vector kernel, the norm runs as that kernel's head (s then
 * records both, norm_s nothing); otherwise both stay as they are. */
hl_status hl_plan_fuse_norm(hl_device *dev, const hl_plan_op *ops, hl_plan_step *norm_s, hl_plan_step *s,
                            hl_error *err);

/* LayerNorm's forward as a dispatch and its operands (hl_layernorm runs the same). */
hl_status hl_layernorm_prepare(hl_device *dev, const hl_layernorm_args *a, hl_dispatch_plan *pl,
                               hl_operand ops[HL_BIND_LAYERNORM_COUNT], int *vec, hl_error *err);

/* decode.c: each op validated into its step (the parameter words' slots < n_params). */
hl_status hl_embed_step(hl_device *dev, const hl_embed_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                        hl_error *err);
hl_status hl_attn_decode_step(hl_device *dev, const hl_attn_decode_args *a, uint32_t n_params, const char *who,
                              hl_plan_step *s, hl_error *err);
hl_status hl_top1_step(hl_device *dev, const hl_top1_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                       hl_error *err);

#endif

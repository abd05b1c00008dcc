/* plan_ops.h — what a plan records for each operation (plan.c): its dispatches, the
 * tensors it binds, reads and writes, the parameter words it reads or writes and the
 * workspace it needs. Operations become steps in plan_steps.c: products (product.h)
 * and LayerNorm (elementwise.c) are validated where their calls are; the decode ops
 * live in decode.c. */
#ifndef HELIOS_PLAN_OPS_H
#define HELIOS_PLAN_OPS_H

#include "helios_plan.h"
#include "product.h"

#define HL_PLAN_MAX_OPS 4096
#define HL_STEP_READS 6u
#define HL_STEP_WRITES 5u /* a normed product's four, and a run member's SwiGLU row (plan_persist.c's glu_pair) */
#define HL_PLAN_FAULT_WORD HL_PLAN_MAX_PARAMS /* set by a persistent run's grid barrier that gave up */

/* A persistent run's members (their steps), their table rows and their buffers
 * (plan_persist.c), held by the step that heads the run and freed with the steps. */
typedef struct hl_persist_run {
    uint32_t member[HL_PERSIST_MEMBERS];
    const hl_tensor *glu[HL_PERSIST_MEMBERS]; /* FLAG_PERSIST_GLU: the SwiGLU's row member k writes, k + 1 reads */
    hl_persist_row table[HL_PERSIST_MEMBERS];
    hl_binding slots[HL_PERSIST_SLOTS];
} hl_persist_run;

typedef struct hl_plan_step {
    uint32_t n_dispatch; /* 1, or 2: the second behind a barrier (split-K's sum, attention's combine) */
    VkPipeline pipe[2];
    uint32_t grid[2][3];
    hl_push pc[2];
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
    hl_product product;        /* a product's plan, as its step was made from it */
    const hl_tensor *a_swiglu; /* FLAG_A_SWIGLU: the row [g | u] bound as A (hl_plan_fuse_swiglu) */
    /* A persistent run's first step (plan_persist.c): the steps the run spans (its members
     * and the norms they head; 0: none), its members and the run's rows and buffers. */
    uint32_t persist_len, persist_members;
    hl_persist_run *run;
    uint32_t trace_at; /* HELIOS_PLAN_TRACE: the run's header word in the parameter buffer */
} hl_plan_step;

/* plan_hazards.c: what the steps since the last barrier touched: their tensors' buffers
 * (hazard.h's model, a set over read and written), the shared workspace and the
 * parameter words; whether a step must wait for them behind a barrier. */
typedef struct hl_plan_hazards {
    hl_range read[HL_STEP_READS * HL_PLAN_MAX_OPS], written[HL_STEP_READS * HL_PLAN_MAX_OPS];
    hl_hazard_set set;
    int workspace, params_written, params_read;
} hl_plan_hazards;
int hl_plan_needs_barrier(const hl_plan_hazards *h, const hl_plan_step *s);
void hl_plan_note(hl_plan_hazards *h, const hl_plan_step *s); /* s recorded since the last barrier */
void hl_plan_hazards_clear(hl_plan_hazards *h);               /* a barrier recorded */

/* plan_ops_table.c (generated from shaders/ops.py): an op kind's name as the API spells
 * it (plan.py's methods), and operation i of a plan with n_params parameter words as a
 * step, through its step function (hl_plan_steps.h: plan_steps.c's and decode.c's, the
 * parameter words' slots < n_params). */
const char *hl_plan_kind_name(hl_plan_kind kind);
hl_status hl_plan_op_step(hl_device *dev, const hl_plan_op *op, uint32_t i, uint32_t n_params, hl_plan_step *s,
                          hl_error *err);
#include "hl_plan_steps.h"
/* ops[0..1] a LayerNorm and the product after it: where the product reads the norm's
 * output on the matrix-vector kernel, the norm runs as that kernel's head (s then
 * records both, norm_s nothing); otherwise both stay as they are. */
/* A one-row SwiGLU whose only reader is the next op, a one-row product on the
 * matrix-vector kernel: that product reads the row [g | u] as its A (FLAG_A_SWIGLU), the
 * SwiGLU's step records nothing (HELIOS_DISABLE_PLAN_SWIGLU_FUSION=1 keeps them apart). */
hl_status hl_plan_fuse_swiglu(hl_device *dev, const hl_plan_op *ops, uint32_t n, uint32_t i, hl_plan_step *steps);
/* Every fusion of a step into the next (a norm as a product's head, a SwiGLU as its A). */
hl_status hl_plan_fuse(hl_device *dev, const hl_plan_op *ops, uint32_t n, hl_plan_step *steps, hl_error *err);
/* A product step's buffers (its A the SwiGLU's row where one was fused). */
void hl_plan_product_bindings(const hl_plan_op *op, hl_plan_step *s, VkBuffer workspace);
hl_status hl_plan_fuse_norm(hl_device *dev, const hl_plan_op *ops, hl_plan_step *norm_s, hl_plan_step *s,
                            hl_error *err);

/* A plan's persistent runs: how many, their grid barriers (a run's members less one),
 * their grid (the smallest run's), the most registers a thread of their kernels takes
 * (0: the driver reports none), and of the attentions they hold the one of most heads:
 * its heads, head dimension, ATT_FIT and its position's parameter word. */
typedef struct hl_plan_runs {
    uint32_t n, grid_barriers, grid, registers, attentions, heads, head_dim, fit, pos_slot;
    uint32_t trace_base, trace_words; /* HELIOS_PLAN_TRACE: the stamps' words in the parameter buffer */
} hl_plan_runs;

/* plan_persist.c: the runs of consecutive one-row products, and decode attentions where
 * `attention` allows (none where persist_grid is 0), each recorded as its first step's
 * dispatch, the other steps recording none. */
hl_status hl_plan_persist_runs(hl_device *dev, const hl_plan_op *ops, hl_plan_step *steps, uint32_t n_ops,
                               int attention, hl_plan_runs *runs, hl_error *err);
/* HELIOS_PLAN_TRACE: each run's stamps from word `base` of the plan's parameter buffer,
 * a header of HL_TRACE_HEADER words and then HL_TRACE_STAMP a member and workgroup
 * (shaders/layouts.py; persist_runtime.glsl's stamp). The kernel writes them past the
 * run's counters (device memory: the parameter words are host memory, where each stamp
 * would cross the bus): each run's counter words grow by its stamps, its push block
 * takes the first's word there and its trace_at the header's word in the parameter
 * buffer. Returns the words of all runs. */
uint32_t hl_plan_persist_trace(hl_plan_step *steps, uint32_t n_ops, uint32_t base);
/* Each run's header at its trace_at in the mapped parameter buffer, its stamps zeroed. */
void hl_plan_persist_trace_headers(const hl_plan_step *steps, uint32_t n_ops, uint32_t *mapped);
/* HELIOS_PLAN_TRACE, at the end of the recording: each run's stamps copied from its
 * counters into the parameter buffer after its header, for the host to read. */
void hl_plan_persist_trace_copy(hl_device *dev, VkCommandBuffer cmd, const hl_plan_step *steps, uint32_t n_ops,
                                VkBuffer params);
/* The runs' tables side by side, each on `align` (offset[i]: step i's, where it heads a
 * run), in *host (*bytes; NULL and 0: no run). */
hl_status hl_plan_persist_tables(const hl_plan_step *steps, uint32_t n_ops, uint64_t align, VkDeviceSize *offset,
                                 uint32_t **host, uint32_t *bytes, hl_error *err);
/* Run `head`'s buffers, its members' binds complete: theirs into its array, the plan's
 * workspace as an attention's partials and in the slots no member has; the table at
 * its slot. */
void hl_plan_persist_bind(hl_plan_step *steps, uint32_t head, hl_binding table, hl_binding workspace);
/* A run's members' set (HL_PERSIST_SET): its one array binding. */
void hl_plan_persist_write(hl_device *dev, VkDescriptorSet ds, const hl_plan_step *s);

/* LayerNorm's forward as a dispatch and its operands (hl_layernorm runs the same). */
hl_status hl_layernorm_prepare(hl_device *dev, const hl_layernorm_args *a, hl_dispatch_plan *pl,
                               hl_operand ops[HL_BIND_LAYERNORM_COUNT], int *vec, hl_error *err);

/* A decode attention's splits a head at position pos, `fit` its step's ATT_FIT: the
 * rule the shader runs (shaders/layouts.py's SPLIT_RULES, generated for both). */
uint32_t hl_decode_splits(uint32_t pos, uint32_t fit, uint32_t head_dim);
/* A decode attention step s of a that rotates q and the new k itself (a rope fused into
 * it): its push words say so, its pipelines keep that path. */
hl_status hl_attn_decode_rope(hl_device *dev, const hl_attn_decode_args *a, hl_plan_step *s, hl_error *err);

#endif

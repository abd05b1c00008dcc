/* helios_plan.h — replayable plans: operations on tensors (shaders/ops.py: products,
 * LayerNorm and a decode step's embedding, attention over a KV cache and top-1) recorded once into a
 * command buffer of their own and submitted again for each replay (one vkQueueSubmit,
 * one wait), what a decode step replays per token. What changes between replays is
 * the tensors' contents and the plan's parameter words, never the recording. */
#ifndef HELIOS_PLAN_H
#define HELIOS_PLAN_H

#include "helios_core.h"

typedef struct hl_plan hl_plan;

/* A plan's parameter words: uint32 values in host-visible memory that the decode ops
 * read (a token id, a position) and the top-1 writes, so that what changes from token
 * to token is written before a replay, never recorded again. */
#define HL_PLAN_MAX_PARAMS 16u

/* The operations a plan records: their argument structs, kinds (hl_plan_kind), the
 * hl_plan_op union and how the binding reads them (hl_plan_op_schemas), generated from
 * shaders/ops.py. */
#include "hl_plan_ops.h"

/* One replay, timed by the engine: host_ms from the call to vkQueueSubmit's return
 * (what the CPU pays to launch the plan), wall_ms to the wait's end, gpu_ms between
 * two timestamps around the plan (0 where the queue has none). */
typedef struct hl_plan_run {
    double host_ms, wall_ms, gpu_ms;
} hl_plan_run;

/* n_ops operations on tensors only (products: every t_a, t_b, t_c set; host pointers
 * and timing fields ignored), in order, a barrier only before an operation that
 * touches what an earlier one since the last barrier wrote (or writes what it read);
 * n_params parameter words (0..HL_PLAN_MAX_PARAMS), zero at first. */
hl_status hl_plan_create(hl_device *dev, const hl_plan_op *ops, uint32_t n_ops, uint32_t n_params, hl_plan **out,
                         hl_error *err);
/* Write or read parameter words first..first+n (host memory, no submission). A replay
 * first checks every word an op reads against that op's bound (a position past the
 * cache, a token past the table: HL_ERR_INVALID_ARGUMENT naming both). */
hl_status hl_plan_params_write(hl_plan *p, uint32_t first, const uint32_t *words, uint32_t n, hl_error *err);
hl_status hl_plan_params_read(const hl_plan *p, uint32_t first, uint32_t *words, uint32_t n, hl_error *err);
hl_status hl_plan_replay(hl_plan *p, hl_plan_run *run, hl_error *err);
/* As recorded (not its long-context twin's); grid: the barriers inside its persistent runs. */
void hl_plan_counts(const hl_plan *p, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers, uint32_t *grid);
/* Its persistent runs as recorded: how many, their grid in workgroups (the smallest run's;
 * 0 without runs) and the most registers a thread of their kernels takes (0 where the
 * driver reports none): a grid under two workgroups an SM says the kernel went over 128. */
void hl_plan_run_shape(const hl_plan *p, uint32_t *runs, uint32_t *grid, uint32_t *registers);
/* HELIOS_PLAN_TRACE: the words the last replay's persistent runs stamped (plan_persist.c's
 * hl_plan_persist_trace lays them out), valid until the next replay; their count, 0
 * where the plan has no trace. */
uint32_t hl_plan_trace(const hl_plan *p, const uint32_t **words);
int hl_plan_alive(const hl_plan *p); /* 0 once its device closed */
void hl_plan_destroy(hl_plan *p);
/* The device's side (device.c): at close, every live plan's objects released (or,
 * for a device left to process exit, only detached). */
void hl_plans_release(hl_device *dev);
void hl_plans_detach(hl_device *dev);
/* A persistent run's grid where its kernel takes `registers` a thread (0: unknown) on
 * sm_count SMs of 65,536 registers: at most the workgroups of 256 that are resident at
 * once, and `grid` where that is fewer (0: none fits). */
uint32_t hl_plan_resident_grid(uint32_t grid, uint32_t sm_count, uint32_t registers);

#endif

/* helios_plan.h — replayable plans: products on tensors recorded once into a
 * command buffer of their own and submitted again for each replay (one
 * vkQueueSubmit, one wait), what a decode step replays per token. What changes
 * between replays is the tensors' contents, never the recording. */
#ifndef HELIOS_PLAN_H
#define HELIOS_PLAN_H

#include "helios_core.h"

typedef struct hl_plan hl_plan;

/* One replay, timed by the engine: host_ms from the call to vkQueueSubmit's return
 * (what the CPU pays to launch the plan), wall_ms to the wait's end, gpu_ms between
 * two timestamps around the plan (0 where the queue has none). */
typedef struct hl_plan_run {
    double host_ms, wall_ms, gpu_ms;
} hl_plan_run;

/* n_ops products on tensors only (every t_a, t_b, t_c set; host pointers and timing
 * fields ignored), in order, a barrier only before an operation that touches what
 * an earlier one since the last barrier wrote (or writes what it read). */
hl_status hl_plan_create(hl_device *dev, const hl_matmul_args *ops, uint32_t n_ops, hl_plan **out, hl_error *err);
hl_status hl_plan_replay(hl_plan *p, hl_plan_run *run, hl_error *err);
void hl_plan_counts(const hl_plan *p, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers);
int hl_plan_alive(const hl_plan *p); /* 0 once its device closed */
void hl_plan_destroy(hl_plan *p);
/* The device's side (device.c): at close, every live plan's objects released (or,
 * for a device left to process exit, only detached). */
void hl_plans_release(hl_device *dev);
void hl_plans_detach(hl_device *dev);

#endif

/* plan_policy.h — what plans do with their steps (struct hl_device's `plan_policy`),
 * owned by csrc/core/plan/. */
#ifndef HELIOS_PLAN_POLICY_H
#define HELIOS_PLAN_POLICY_H

/* What a plan does with its steps (csrc/core/plan/ reads it; device.c sets it when the
 * device opens, from the switches and the device's SMs). */
typedef struct hl_plan_policy {
    int decode_grid_sized;                    /* a decode attention's grid holds the splits up to the position */
    int decode_attention_fused;               /* its splits and their combine as one dispatch */
    int norm_fused, swiglu_fused, rope_fused; /* each in the step that reads its output */
    int swiglu_in_run;             /* a run's gate and up product writes the SwiGLU's row for the down product */
    int persist_grid, split_width; /* runs' grid (0: none); what decode.c sizes splits for */
    int trace;                     /* runs stamp each member with the device clock (HELIOS_PLAN_TRACE) */
} hl_plan_policy;

#endif

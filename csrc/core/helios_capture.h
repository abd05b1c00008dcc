/* helios_capture.h — captures: every ordered operation called between hl_capture_begin
 * and hl_capture_end (products, attention either direction, LayerNorm either
 * direction, activations, the training ops; exec.c's ordered path) recorded once into
 * a command buffer of their own, descriptor sets and scratch buffers of their own, and
 * submitted again for each replay: a whole training step as one submission, the Vulkan
 * counterpart of a captured CUDA graph. A plan (helios_plan.h) records the ops its table
 * declares and may fuse them; a capture replays what the ops recorded, as recorded. What
 * changes between replays is the tensors' contents, never the recording. */
#ifndef HELIOS_CAPTURE_H
#define HELIOS_CAPTURE_H

#include "helios_plan.h"

typedef struct hl_capture hl_capture;

/* From now on this device's ordered operations are recorded into a new capture, not
 * run (refused while a group is open, a capture is recording or per-op profiling is
 * on). Operations there take tensors only, untimed, with no wait/signal values. */
hl_status hl_capture_begin(hl_device *dev, hl_error *err);
/* The capture ended and handed over (*out: NULL when none was recorded: an error). */
hl_status hl_capture_end(hl_device *dev, hl_capture **out, hl_error *err);
/* Recording abandoned (a failed operation, an exception): nothing kept. */
void hl_capture_abort(hl_device *dev);
/* One replay, submitted and waited for, timed as a plan's. */
hl_status hl_capture_replay(hl_capture *c, hl_plan_run *run, hl_error *err);
/* One replay ordered with CUDA: waits for wait_value on the device's timeline, signals
 * signal_value, returns without waiting (values from hl_async_values, each pair once). */
hl_status hl_capture_submit(hl_capture *c, uint64_t wait_value, uint64_t signal_value, hl_error *err);
/* The GPU time of the last replay that has finished (waits for it; 0 without timestamps). */
hl_status hl_capture_gpu_ms(hl_capture *c, double *ms, hl_error *err);
void hl_capture_counts(const hl_capture *c, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers);
int hl_capture_alive(const hl_capture *c); /* 0 once its device closed */
void hl_capture_destroy(hl_capture *c);
/* The device's side (device.c): at close, every live capture's objects released (or,
 * for a device left to process exit, only detached). */
void hl_captures_release(hl_device *dev);
void hl_captures_detach(hl_device *dev);

#endif

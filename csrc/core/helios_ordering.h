/* helios_ordering.h — work ordered without host waits: against a CUDA stream or the
 * host through the device's timeline semaphore, ordered operations grouped into one
 * submission, and a profile of them (csrc/core/runtime/: async.c, exec.c, profile.c,
 * cuda.c). */
#ifndef HELIOS_ORDERING_H
#define HELIOS_ORDERING_H

#include "helios_core.h"

/* Ordering with CUDA without host waits (async.c): a pair of values of the timeline
 * semaphore the device shares with CUDA. CUDA stream work signals `wait` once the
 * inputs are ready (hl_device_cuda_signal), the operation (args' wait_value and
 * signal_value) waits for it and signals `signal`, and the stream waits for `signal`
 * (hl_device_cuda_wait) before reading the output. One stream at a time. */
hl_status hl_async_values(hl_device *dev, uint64_t *wait, uint64_t *signal, hl_error *err);
/* Ordered operations as one submission: after hl_async_group_begin(wait, signal)
 * (a pair from hl_async_values), every operation called on this device is recorded
 * into one command buffer, each after the one before (tensors only, untimed, no
 * wait/signal values of its own), and hl_async_group_end submits them: one wait for
 * `wait` and one signal of `signal` for the whole group, not waited for. End always
 * submits what was recorded (also after an operation failed), so `signal` is
 * reached. At most HL_GROUP_MAX_OPS (256) operations per group. */
hl_status hl_async_group_begin(hl_device *dev, uint64_t wait_value, uint64_t signal_value, hl_error *err);
hl_status hl_async_group_end(hl_device *dev, hl_error *err);
/* A profile of ordered work (profile.c): after hl_profile_start every ordered
 * operation runs alone (a barrier before and after it) and writes a GPU timestamp
 * when done, every submission one when it starts; hl_profile_stop, once that work is
 * finished, hands back the timestamps in recording order, in ms after the first
 * (out: room for `capacity`), and how many did not fit. */
#define HL_PROFILE_MAX 16384 /* timestamps per profile at most */
typedef enum hl_profile_kind { HL_PROFILE_SUBMISSION = 0, HL_PROFILE_OP = 1 } hl_profile_kind;
typedef struct hl_profile_entry {
    hl_profile_kind kind;
    double ms;
} hl_profile_entry;
hl_status hl_profile_start(hl_device *dev, uint32_t capacity, hl_error *err);
hl_status hl_profile_stop(hl_device *dev, hl_profile_entry *out, uint32_t *n, uint32_t *dropped, hl_error *err);
hl_status hl_device_cuda_signal(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err);
hl_status hl_device_cuda_wait(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err);
hl_status hl_device_cuda_ordinal(hl_device *dev, int *ordinal, hl_error *err);
/* The same ordering driven by the host instead of a CUDA stream (tests, and
 * devices without CUDA): hl_async_open_host makes the ring over a timeline
 * semaphore of this device alone (UNSUPPORTED without timeline semaphores, or
 * once the CUDA-shared one is open); hl_device_host_signal sets the semaphore to
 * value (what the CUDA stream's signal does), hl_device_host_wait waits for it
 * (HL_ERR_TIMEOUT after timeout_ns). */
hl_status hl_async_open_host(hl_device *dev, hl_error *err);
hl_status hl_device_host_signal(hl_device *dev, uint64_t value, hl_error *err);
hl_status hl_device_host_wait(hl_device *dev, uint64_t value, uint64_t timeout_ns, hl_error *err);
/* The ordering semaphore's current value (vkGetSemaphoreCounterValue): what a host
 * polling for the CUDA stream's signal reads. */
hl_status hl_device_semaphore_value(hl_device *dev, uint64_t *value, hl_error *err);

#endif

/* telemetry.c — counters the engine keeps per device; read and reset by callers. */
#include <string.h>

#include "internal.h"

void hl_telemetry_get(const hl_device *dev, hl_telemetry *out) { *out = dev->tel; }

void hl_telemetry_collect(hl_device *dev, hl_telemetry *out) {
    hl_async_collect(dev);
    *out = dev->tel;
}

void hl_telemetry_reset(hl_device *dev) {
    /* Pipelines already compiled stay compiled; their count restarts at 0. The
     * live-object counts describe what exists, so they survive a reset. */
    uint64_t b = dev->tel.live_buffers, m = dev->tel.live_memory, p = dev->tel.live_pipelines;
    uint64_t bytes = dev->tel.device_bytes, tensors = dev->tel.tensors, imports = dev->tel.cuda_imports;
    memset(&dev->tel, 0, sizeof dev->tel);
    dev->tel.device_bytes = bytes;
    dev->tel.peak_device_bytes = bytes; /* the peak restarts from what is held now */
    dev->tel.tensors = tensors;
    dev->tel.live_buffers = b;
    dev->tel.live_memory = m;
    dev->tel.live_pipelines = p;
    dev->tel.cuda_imports = imports;
}

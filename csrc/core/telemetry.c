/* telemetry.c — counters the engine keeps per device; read and reset by callers. */
#include <string.h>

#include "internal.h"

void hl_telemetry_get(const hl_device *dev, hl_telemetry *out) { *out = dev->tel; }

void hl_telemetry_reset(hl_device *dev) {
    /* Pipelines already compiled stay compiled; their count restarts at 0. The
     * live-object counts describe what exists, so they survive a reset. */
    uint64_t b = dev->tel.live_buffers, m = dev->tel.live_memory, p = dev->tel.live_pipelines;
    memset(&dev->tel, 0, sizeof dev->tel);
    dev->tel.live_buffers = b;
    dev->tel.live_memory = m;
    dev->tel.live_pipelines = p;
}

/* telemetry.c — counters the engine keeps per device; read and reset by callers. */
#include <string.h>

#include "internal.h"

void hl_telemetry_get(const hl_device *dev, hl_telemetry *out) { *out = dev->tel; }

void hl_telemetry_reset(hl_device *dev) {
    /* Pipelines already compiled stay compiled; their count restarts at 0. */
    memset(&dev->tel, 0, sizeof dev->tel);
}

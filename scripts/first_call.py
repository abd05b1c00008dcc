#!/usr/bin/env python3
"""First-call latency: one fresh process opens a Device and runs its first
products (and attention), timed on the host from before the Device opens to
the results in hand, with the pipeline-cache directory given (HELIOS_PIPELINE_CACHE,
or whatever this Helios does without one). Prints one JSON line. Run it twice
with the same cache directory: cold (empty) and warm."""

import json
import sys
import time

import numpy as np

t0 = time.perf_counter()
import helios  # noqa: E402

t_import = time.perf_counter()
dev = helios.Device()
t_open = time.perf_counter()
a = np.ones((4096, 4096), np.float16)
dev.matmul(a, a)
t_mm = time.perf_counter()
q = np.ones((1, 8, 512, 128), np.float16)
dev.attention(q, q, q)
t_attn = time.perf_counter()
tel = dev.telemetry()
pc = dict(dev.info.get("pipeline_cache") or {})
dev.close()
t_close = time.perf_counter()
print(
    json.dumps(
        {
            "label": sys.argv[1] if len(sys.argv) > 1 else "",
            "import_s": t_import - t0,
            "open_s": t_open - t_import,
            "first_matmul_s": t_mm - t_open,
            "first_attention_s": t_attn - t_mm,
            "close_s": t_close - t_attn,
            "pipeline_compiles": tel["pipeline_compiles"],
            "pipeline_compile_ms": tel["pipeline_compile_ms"],
            "pipeline_cache": pc,
        }
    )
)

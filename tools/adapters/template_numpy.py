#!/usr/bin/env python3
"""A template for bringing another stack onto `helios suite`'s table, runnable
as it is: it runs the workload in NumPy on the CPU (so it works anywhere, and
CI uses it). Copy it, replace `build` and `forward` with your compiler's, and
keep the contract:

  input   the workload as arguments (--workload mlp --batch T --d-model D --hidden H
          --dtype float16 --iters N --warmup W --seed S --device-uuid U --json) and as a
          JSON document on stdin (helios-adapter-request/1: the same fields, plus
          `inputs`, an .npz with x, w1, b1, w2, b2, and `output`, a path for y)
  output  one JSON object on stdout: status ("ok" or why not), latency_ms {mean, p50,
          p95, min, max}, throughput_tokens_per_sec, peak_memory_bytes; optional
          samples_ms (every timed forward: `helios compare` reads them) and gpu_uuid
  gate    save y (tokens x d, any float dtype) to `output` with numpy.save: Helios
          checks sampled rows against float64, as for its own adapters

Run it:  helios suite mlp --tokens 32 --d-model 64 --hidden 256 \\
             --adapter-cmd numpy="python3 tools/adapters/template_numpy.py"
"""

import json
import math
import sys
import time

import numpy as np


def build(x, w1, b1, w2, b2):
    """Compile / load / upload whatever the stack needs, once (not timed)."""
    return tuple(a.astype(np.float32) for a in (w1, b1, w2, b2))


def forward(state, x):
    """One forward: y = gelu_tanh(x @ W1 + b1) @ W2 + b2 (the hidden activation rounded to fp16)."""
    w1, b1, w2, b2 = state
    h = x.astype(np.float32) @ w1 + b1
    h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    return (h.astype(np.float16).astype(np.float32) @ w2 + b2).astype(np.float16)


def main() -> int:
    req = json.load(sys.stdin)
    data = np.load(req["inputs"])
    x = data["x"]
    state = build(x, data["w1"], data["b1"], data["w2"], data["b2"])
    y = forward(state, x)
    np.save(req["output"], y)  # the gate
    for _ in range(req["warmup"]):
        forward(state, x)
    samples = []
    for _ in range(req["iters"]):
        t0 = time.perf_counter()
        forward(state, x)
        samples.append((time.perf_counter() - t0) * 1e3)
    s = np.asarray(samples)
    p50 = float(np.median(s))
    print(
        json.dumps(
            {
                "status": "ok",
                "latency_ms": {
                    "mean": float(s.mean()),
                    "p50": p50,
                    "p95": float(np.percentile(s, 95)),
                    "min": float(s.min()),
                    "max": float(s.max()),
                },
                "throughput_tokens_per_sec": req["tokens"] / (p50 * 1e-3),
                "peak_memory_bytes": int(sum(a.nbytes for a in state) + x.nbytes + y.nbytes),
                "samples_ms": samples,
                "timer": "host clock (CPU): NOT a GPU time",
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

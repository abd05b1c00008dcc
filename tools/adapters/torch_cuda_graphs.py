#!/usr/bin/env python3
"""An external adapter for `helios suite`: the MLP block through torch on CUDA,
captured once into a CUDA graph and timed by replays (CUDA events around each
replay) — a stack the built-in adapters (eager, torch.compile) do not cover.
It runs on the CUDA device whose UUID is the one under test and reports it.

  helios suite mlp --adapter-cmd torch_graphs="python3 tools/adapters/torch_cuda_graphs.py"

The contract is in tools/adapters/template_numpy.py and the README.
"""

import json
import sys

import numpy as np


def fail(status: str) -> int:
    print(json.dumps({"status": status}))
    return 0


def main() -> int:
    req = json.load(sys.stdin)
    try:
        import torch
    except ImportError:
        return fail("skipped: torch is not installed")
    if not torch.cuda.is_available():
        return fail("skipped: torch sees no CUDA device")
    want = str(req["device_uuid"]).lower().removeprefix("gpu-")
    index = None
    for i in range(torch.cuda.device_count()):
        got = str(getattr(torch.cuda.get_device_properties(i), "uuid", "")).lower().removeprefix("gpu-")
        if got.replace("-", "") == want.replace("-", ""):
            index = i
    if index is None:
        return fail(f"skipped: no CUDA device has UUID {req['device_uuid']}")
    torch.cuda.set_device(index)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda", index)
    data = np.load(req["inputs"])
    x, w1, w2 = (torch.from_numpy(data[k]).to(dev) for k in ("x", "w1", "w2"))
    b1, b2 = (torch.from_numpy(data[k]).to(dev, torch.float16) for k in ("b1", "b2"))

    def mlp():
        h = torch.nn.functional.gelu(torch.addmm(b1, x, w1), approximate="tanh")
        return torch.addmm(b2, h, w2)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up the kernels before capture, as CUDA graphs require
        for _ in range(3):
            mlp()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = mlp()
    graph.replay()
    torch.cuda.synchronize()
    np.save(req["output"], y.float().cpu().numpy())  # the gate
    for _ in range(max(req["warmup"], 1)):
        graph.replay()
    torch.cuda.reset_peak_memory_stats()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(req["iters"])]
    for s, e in ev:
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) for s, e in ev]
    a = np.asarray(samples)
    p50 = float(np.median(a))
    print(
        json.dumps(
            {
                "status": "ok",
                "latency_ms": {
                    "mean": float(a.mean()),
                    "p50": p50,
                    "p95": float(np.percentile(a, 95)),
                    "min": float(a.min()),
                    "max": float(a.max()),
                },
                "throughput_tokens_per_sec": req["tokens"] / (p50 * 1e-3),
                "peak_memory_bytes": int(torch.cuda.max_memory_allocated(index)),
                "samples_ms": samples,
                "gpu_uuid": str(torch.cuda.get_device_properties(index).uuid),
                "timer": "CUDA events around each graph replay",
                "torch": torch.__version__,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

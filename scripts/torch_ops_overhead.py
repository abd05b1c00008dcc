#!/usr/bin/env python3
"""Host overhead of helios.torch.linear on resident torch CUDA tensors: wall time
per call (the call returns a torch tensor whose memory Helios wrote; each call
ends with the GPU done, so wall time = host work + GPU time) against the Helios
kernel's own GPU time for the same product (GPU timestamps), and torch's
F.linear (CUDA events) for scale. Also the MLP block gelu(x W1^T + b1) W2^T + b2
per forward. Prints one JSON object; p50/p95 over --reps."""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import numpy as np
import torch
import torch.nn.functional as F

import helios.torch as ht


def pct(xs: list[float]) -> dict:
    a = np.asarray(xs) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p95_ms": float(np.percentile(a, 95)), "n": len(a)}


def wall(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        a = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - a)
    return out


def events(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1e3)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", default="512,4096", help="token counts (default 512,4096)")
    p.add_argument("--d", type=int, default=4096, help="model width (default 4096)")
    p.add_argument("--hidden", type=int, default=14336, help="MLP hidden width (default 14336)")
    p.add_argument("--reps", type=int, default=50, help="timed calls per row (default 50)")
    p.add_argument(
        "--pool",
        action="store_true",
        help="allocate weights and inputs in helios.torch.memory_pool() (read in place) instead of "
        "torch's default allocator (copied device to device per call)",
    )
    p.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16", help="tensor dtype")
    args = p.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    dt = getattr(torch, args.dtype)
    pool = ht.memory_pool() if args.pool else contextlib.nullcontext()
    with pool:
        w1 = (torch.randn(args.hidden, args.d, device=dev) / args.d**0.5).to(dt)
        b1 = torch.randn(args.hidden, device=dev).to(dt)
        w2 = (torch.randn(args.d, args.hidden, device=dev) / args.hidden**0.5).to(dt)
        b2 = torch.randn(args.d, device=dev).to(dt)
    rows = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        with pool:
            x = torch.randn(tokens, args.d, device=dev).to(dt)
        for _ in range(5):  # warm: pipelines, staging tensors, clocks
            ht.linear(x, w1, b1, activation="gelu_tanh")
        hdev = ht.device_for(x)
        kernel = hdev.time_matmul(tokens, args.hidden, args.d, iters=args.reps, warmup=5, dtype=args.dtype)
        helios_wall = wall(lambda: ht.linear(x, w1, b1, activation="gelu_tanh"), args.reps)
        torch_ev = events(lambda: F.gelu(F.linear(x, w1, b1), approximate="tanh"), args.reps)

        def mlp_helios():
            return ht.linear(ht.linear(x, w1, b1, activation="gelu_tanh"), w2, b2)

        def mlp_torch():
            return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)

        for _ in range(3):
            mlp_helios()
        rows.append(
            {
                "tokens": tokens,
                "linear_1": f"{tokens}x{args.d} @ ({args.hidden}x{args.d})^T + bias, gelu_tanh",
                "helios_torch_linear_wall": pct(helios_wall),
                "helios_kernel_gpu_ms_p50": float(np.median(kernel.samples_ms)),
                "torch_linear_gelu_events": pct(torch_ev),
                "mlp_helios_torch_wall": pct(wall(mlp_helios, args.reps)),
                "mlp_torch_eager_events": pct(events(mlp_torch, args.reps)),
            }
        )
        r = rows[-1]
        r["linear_overhead_p50_ms"] = r["helios_torch_linear_wall"]["p50_ms"] - r["helios_kernel_gpu_ms_p50"]
    out = {"device": torch.cuda.get_device_name(), "pool": args.pool, "dtype": args.dtype, "rows": rows}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

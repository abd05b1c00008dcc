#!/usr/bin/env python3
"""Where the host time of one helios.torch.linear call goes: cProfile over N calls
on resident torch CUDA tensors (weights in helios.torch.memory_pool() with --pool),
the top functions by own time and by cumulative time, and the wall time per call
with the GPU's share taken out (the kernel's GPU time from time_matmul)."""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import time

import torch

import helios.torch as ht


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", type=int, default=512, help="rows of x (default 512)")
    p.add_argument("--d", type=int, default=4096, help="in_features (default 4096)")
    p.add_argument("--out", type=int, default=4096, help="out_features (default 4096)")
    p.add_argument("--calls", type=int, default=300, help="profiled calls (default 300)")
    p.add_argument("--pool", action="store_true", help="weights and input in helios.torch.memory_pool()")
    p.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    args = p.parse_args()
    pool = ht.memory_pool() if args.pool else contextlib.nullcontext()
    with pool:
        x = torch.randn(args.tokens, args.d, device="cuda").half()
        w = (torch.randn(args.out, args.d, device="cuda") / args.d**0.5).half()
        b = torch.randn(args.out, device="cuda").half()
    for _ in range(10):
        ht.linear(x, w, b)
    torch.cuda.synchronize()
    hdev = ht.device_for(x)
    hdev.reset_telemetry()
    t0 = time.perf_counter()
    for _ in range(args.calls):
        ht.linear(x, w, b)
    host = (time.perf_counter() - t0) / args.calls  # enqueue only: calls return before the GPU is done
    tel = hdev.telemetry()
    torch.cuda.synchronize()
    parts = ("plan_ms", "async_slot_ms", "async_descriptor_ms", "record_ms", "async_submit_ms", "cuda_call_ms")
    print("engine host time per call (us): " + ", ".join(f"{k[:-3]} {tel[k] / args.calls * 1e3:.1f}" for k in parts))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        ht.linear(x, w, b)
    prof.disable()
    torch.cuda.synchronize()
    print(f"host time per call (returns without waiting for the GPU): {host * 1e6:.1f} us")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Host cost of handing a Helios Tensor to torch on the same GPU: the first
zero-copy export (CUDA imports and maps the Vulkan memory), later exports of the
same Tensor (mapped once), and the copy through the host it replaces
(t.numpy() then .cuda()). Prints one JSON object; times are host wall clock,
p50/p95 over --reps."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import helios


def pct(xs: list[float]) -> dict:
    a = np.sort(np.asarray(xs) * 1e6)
    return {"p50_us": float(np.percentile(a, 50)), "p95_us": float(np.percentile(a, 95)), "n": len(a)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--shape", default="4096x4096", help="Tensor shape RxC, float32 (default 4096x4096)")
    p.add_argument("--reps", type=int, default=200, help="repetitions per measurement (default 200)")
    args = p.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    out: dict = {"shape": list(shape), "dtype": "float32", "bytes": int(np.prod(shape)) * 4}
    with helios.Device() as d:
        out["device"] = d.info["name"]
        first, again, fresh = [], [], []
        for _ in range(args.reps):
            t = d.empty(shape, "float32", exportable=True)
            a = time.perf_counter()
            v = torch.from_dlpack(t)
            first.append(time.perf_counter() - a)
            a = time.perf_counter()
            w = torch.from_dlpack(t)
            again.append(time.perf_counter() - a)
            del v, w, t
        t = d.upload(np.ones(shape, np.float32), dtype="float32")
        for _ in range(args.reps // 10 or 1):
            a = time.perf_counter()
            x = torch.from_numpy(t.numpy()).cuda()
            torch.cuda.synchronize()
            fresh.append(time.perf_counter() - a)
            del x
        out["first_export"] = pct(first)
        out["repeat_export"] = pct(again)
        out["host_round_trip"] = pct(fresh)
        out["live_exports_after"] = d.telemetry()["live_exports"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""What an op costs inside a group against alone: one product shape (bf16, the
training step's), timed (1) alone with the engine's timed call, (2) repeated N
times in one group, each behind a barrier (the same output), with the per-op
profile, (3) the same group unprofiled, (4) N independent copies of it (distinct
outputs: overlapped, no barriers) and (5) the same as (3) with
HELIOS_DISABLE_GROUP_OVERLAP=1 (a barrier before and after every op). Groups are
host-ordered (Device._async_host: no CUDA, no context switches); (3)-(5) are the
submissions' GPU spans over N. Prints one line per shape and mode."""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

import helios

MS = 1_000_000  # ns


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="8192x4096x1024,8192x1024x1024,8192x1024x4096", help="MxNxK list (x @ W^T)")
    p.add_argument("--n", type=int, default=24, help="ops per group (default 24)")
    p.add_argument("--rounds", type=int, default=5, help="groups per mode, the median taken (default 5)")
    a = p.parse_args()
    dev = helios.Device()
    dev._async_host()
    rng = np.random.default_rng(0)

    def group(ops, profile: bool = False) -> tuple[float, list[float]]:
        """(GPU span sum, per-op profile times) of ops as one host-ordered group."""
        t0 = dev.telemetry()["async_gpu_ms"]
        if profile:
            dev._profile_start(4 * len(ops) + 64)
        w, s = dev._async_values()
        dev._group_begin(w, s)
        try:
            for op in ops:
                op()
        finally:
            dev._group_end()
            dev._host_signal(w)
        dev._host_wait(s, 60_000 * MS)
        per: list[float] = []
        if profile:
            marks, _ = dev._profile_stop()
            prev = 0.0
            for kind, ms in marks:
                if kind == "op":
                    per.append(ms - prev)
                prev = ms
        return dev.telemetry()["async_gpu_ms"] - t0, per

    for spec in a.shapes.split(","):
        m, n, k = (int(x) for x in spec.split("x"))
        x = dev.upload(rng.standard_normal((m, k), dtype=np.float32).astype(helios.bfloat16))
        wt = dev.upload(rng.standard_normal((n, k), dtype=np.float32).astype(helios.bfloat16))
        outs = [dev.empty((m, n), "bfloat16") for _ in range(a.n)]
        fields = dict(a=x, b=wt, m=m, n=n, k=k, trans_a=False, trans_b=True, lda=k, ldb=k)
        fields |= dict(in_dtype="bfloat16", out_dtype="bfloat16", variant=dev._pick(None, m, n, k, "bfloat16"))

        def op(out):
            return lambda: dev._gemm(**fields, out=out)

        same = [op(outs[0])] * a.n
        apart = [op(o) for o in outs]
        for _ in range(3):  # clocks up
            group(same)
        _, alone, _, _ = dev._gemm(**fields, out=outs[0], warmup=10, iters=30)
        res = {"alone": statistics.median(alone)}
        res["profiled"] = statistics.median(t for _ in range(a.rounds) for t in group(same, True)[1])
        res["same, spans/n"] = statistics.median(group(same)[0] for _ in range(a.rounds)) / a.n
        res["apart, spans/n"] = statistics.median(group(apart)[0] for _ in range(a.rounds)) / a.n
        os.environ["HELIOS_DISABLE_GROUP_OVERLAP"] = "1"
        res["barriers, spans/n"] = statistics.median(group(same)[0] for _ in range(a.rounds)) / a.n
        os.environ.pop("HELIOS_DISABLE_GROUP_OVERLAP")
        print(f"{spec} bf16 x@W^T: " + ", ".join(f"{k} {v * 1e3:.1f} us" for k, v in res.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

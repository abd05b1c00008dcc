#!/usr/bin/env python3
"""One measurement for issue 60: products of M <= 8 rows (a decode step's), the
matrix-vector kernel against the tiled default and cuBLAS, as GB/s of weights read.

Per (M, N, K) and layout of B (N x K as a Linear keeps its weight, or K x N), R
products over R distinct weights (together >= 256 MB, past the L2: each weight is
read once, as in a decode step) are recorded into one Helios plan, or captured in
one CUDA graph of torch.matmul / F.linear. GPU time: the engine's timestamps around
the replay, CUDA events around the graph; median over --reps replays after warm-up,
divided by R. Outputs are checked against torch's first (allclose). The memory roof
is a read of 1 GiB (torch's sum of float16 elements into float32) timed the same way
in the same run. Writes JSON (argv[1]) and prints a table.

Usage: python3 tools/gemv_sweep.py OUT.json [--reps 30] [--dtype float16]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

import numpy as np

import helios
from helios.harness.workloads.decode.runners import capture_graph

SHAPES = [(1, 1024, 1024), (1, 3072, 1024), (1, 4096, 1024), (1, 1024, 4096), (1, 4096, 4096), (1, 14336, 4096),
          (1, 4096, 14336), (8, 4096, 4096), (8, 1024, 4096)]  # fmt: skip
WEIGHTS_BYTES = 256 << 20


def cuda_ms(torch, fn, reps: int) -> float:
    g = capture_graph(torch, fn)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(reps + 5):
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        if i >= 5:
            out.append(e0.elapsed_time(e1))
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args()
    import torch

    tdt = getattr(torch, args.dtype)
    big = torch.ones(1 << 29, dtype=torch.float16, device="cuda")
    read_ms = cuda_ms(torch, lambda: big.sum(dtype=torch.float32), args.reps)
    roof = big.numel() * 2 / read_ms / 1e6  # GB/s read
    rows = []
    dev = helios.Device()
    for m, n, k in SHAPES:
        wbytes = n * k * 2
        r = max(4, min(64, math.ceil(WEIGHTS_BYTES / wbytes)))
        tw = [torch.randn(n, k, device="cuda").to(tdt) / math.sqrt(k) for _ in range(r)]
        tx = torch.randn(m, k, device="cuda").to(tdt)
        x = dev.upload(tx.float().cpu().numpy().astype(np.float16) if args.dtype == "float16" else tx.cpu())
        for layout in ("NxK", "KxN"):
            tws = tw if layout == "NxK" else [w.t().contiguous() for w in tw]
            W = [dev.upload(w.cpu() if args.dtype == "bfloat16" else w.cpu().numpy()) for w in tws]
            tb = layout == "NxK"
            ref = torch.nn.functional.linear(tx, tw[0]).float().cpu().numpy()
            row = {"m": m, "n": n, "k": k, "layout": layout, "weights": r, "dtype": args.dtype}
            variants = {"default": None, "tiles": dev.default_variant(9, n, k, trans_b=tb, dtype=args.dtype)}
            for name, variant in variants.items():
                outs = [dev.empty((m, n), args.dtype) for _ in range(r)]
                with dev.plan() as p:
                    for w, o in zip(W, outs):
                        p.matmul(x, w, trans_b=tb, out=o, variant=variant)
                p.replay()
                got = outs[0].numpy().astype(np.float32)
                np.testing.assert_allclose(got, ref, atol=0.02, rtol=0.02, err_msg=f"{name} {m}x{n}x{k} {layout}")
                t = p.time(args.reps, 5)
                ms = t.median("gpu_ms") / r
                row[name] = {"variant": p.variants[0], "gpu_ms": ms, "gb_s": wbytes / ms / 1e6}
                p.close()
            tmm = (lambda: [torch.nn.functional.linear(tx, w) for w in tw]) if tb else (lambda: [tx @ w for w in tws])
            ms = cuda_ms(torch, tmm, args.reps) / r
            row["cublas"] = {"gpu_ms": ms, "gb_s": wbytes / ms / 1e6}
            rows.append(row)
    doc = {
        "tool": "tools/gemv_sweep.py",
        "reps": args.reps,
        "read_roof_gb_s": roof,
        "gpu": torch.cuda.get_device_name(0),
        "helios_device": dev.info["name"],
        "torch": torch.__version__,
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"{args.dtype}; memory roof (a 1 GiB read): {roof:.0f} GB/s; GB/s of weights (% of roof)")
    print("| M x N x K | B | gemv | tiles | cuBLAS | gemv variant |")
    print("|---|---|---|---|---|---|")
    for r_ in rows:
        cells = [f"{r_[c]['gb_s']:.0f} ({100 * r_[c]['gb_s'] / roof:.0f}%)" for c in ("default", "tiles", "cublas")]
        print(
            f"| {r_['m']}x{r_['n']}x{r_['k']} | {r_['layout']} | "
            + " | ".join(cells)
            + f" | {r_['default']['variant']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

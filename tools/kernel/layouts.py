#!/usr/bin/env python3
"""GPU time of one product per operand layout, batch form and epilogue, each
gated against float64 on sampled rows first; torch (cuBLAS) on the same GPU
beside it where CUDA is here. Helios is timed as a one-operation chain
(device-resident operands, Vulkan timestamps), torch with CUDA events.

    python3 tools/kernel/layouts.py --shape 4096x4096x4096 --batch 8x1024x1024x1024 --out layouts.json
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import helios
from helios.check import check_close
from helios.gemm import gelu_tanh

CASES = [  # name, trans_a, trans_b, bias, activation
    ("NN", False, False, False, None),
    ("NT", False, True, False, None),
    ("TN", True, False, False, None),
    ("TT", True, True, False, None),
    ("NN+bias+gelu", False, False, True, "gelu"),
    ("NN+bias", False, False, True, None),
]


def torch_time(fn, iters, warmup):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(np.median([s.elapsed_time(e) for s, e in ev]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="4096x4096x4096", help="MxNxK of the 2-D cases")
    p.add_argument("--batch", default="8x1024x1024x1024", help="BxMxNxK of the batched case")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    m, n, k = (int(x) for x in args.shape.split("x"))
    B, bm, bn, bk = (int(x) for x in args.batch.split("x"))
    rng = np.random.default_rng(0)
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    rows = []
    with helios.Device() as dev:
        a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
        b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
        bias = rng.standard_normal(n).astype(np.float32)
        sample = rng.choice(m, size=min(64, m), replace=False)
        for name, ta, tb, use_bias, act in CASES:
            A = dev.upload(np.ascontiguousarray(a.T) if ta else a)
            Bt = dev.upload(np.ascontiguousarray(b.T) if tb else b)
            ch = dev.chain()
            out = ch.matmul(A, Bt, trans_a=ta, trans_b=tb, bias=bias if use_bias else None, activation=act)
            ch.run()
            ref = a[sample].astype(np.float64) @ b.astype(np.float64) + (bias if use_bias else 0)
            ref = gelu_tanh(ref) if act else ref
            chk = check_close(out.numpy()[sample], ref)
            row = {"case": name, "shape": [m, n, k], "variant": ch._variants[0], "check_passed": chk.passed}
            if chk.passed:
                t = ch.time(iters=args.iters, warmup=args.warmup)
                row["helios_ms"] = t.median_ms
                row["helios_tflops"] = 2 * m * n * k / t.median_ms / 1e9
            if cuda:
                ta_ = torch.from_numpy(a).cuda()
                tb_ = torch.from_numpy(b).cuda()
                tbias = torch.from_numpy(bias).cuda().half()
                A_ = ta_.t().contiguous().t() if ta else ta_  # the same stored layout
                B_ = tb_.t().contiguous().t() if tb else tb_
                if use_bias and act:
                    fn = lambda: torch.nn.functional.gelu(torch.addmm(tbias, A_, B_), approximate="tanh")
                elif use_bias:
                    fn = lambda: torch.addmm(tbias, A_, B_)
                else:
                    fn = lambda: A_ @ B_
                row["torch_ms"] = torch_time(fn, args.iters, args.warmup)
                if "helios_ms" in row:
                    row["ratio"] = row["helios_ms"] / row["torch_ms"]
            print(json.dumps(row), flush=True)
            rows.append(row)
            del A, Bt, out, ch
        # batched: (B, M, K) @ (K, N) broadcast weight, and (B, M, K) @ (B, K, N)
        for name, shared_b in (("batched, shared B", True), ("batched", False)):
            X = rng.standard_normal((B, bm, bk), dtype=np.float32).astype(np.float16)
            W = rng.standard_normal((bk, bn) if shared_b else (B, bk, bn), dtype=np.float32).astype(np.float16)
            tx, tw = dev.upload(X), dev.upload(W)
            ch = dev.chain()
            out = ch.matmul(tx, tw)
            ch.run()
            ref = X[0, :64].astype(np.float64) @ (W if shared_b else W[0]).astype(np.float64)
            chk = check_close(out.numpy()[0, :64], ref)
            row = {"case": name, "shape": [B, bm, bn, bk], "variant": ch._variants[0], "check_passed": chk.passed}
            if chk.passed:
                t = ch.time(iters=args.iters, warmup=args.warmup)
                row["helios_ms"] = t.median_ms
                row["helios_tflops"] = 2 * B * bm * bn * bk / t.median_ms / 1e9
            if cuda:
                X_, W_ = torch.from_numpy(X).cuda(), torch.from_numpy(W).cuda()
                row["torch_ms"] = torch_time(lambda: torch.matmul(X_, W_), args.iters, args.warmup)
                if "helios_ms" in row:
                    row["ratio"] = row["helios_ms"] / row["torch_ms"]
            print(json.dumps(row), flush=True)
            rows.append(row)
        info = {k: dev.info[k] for k in ("name", "driver_info")}
    ok = all(r["check_passed"] for r in rows)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "schema": "helios-layouts/1",
                    "device": info,
                    "iters": args.iters,
                    "rows": rows,
                    "torch": __import__("torch").__version__ if cuda else None,
                },
                f,
                indent=1,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

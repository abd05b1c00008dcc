#!/usr/bin/env python3
"""The products of one `helios suite train` step, each timed alone on the GPU,
Helios against torch (cuBLAS) at the same shape, layout and dtype: what the GEMM
costs the step, and the step's bound were every Helios product as fast as cuBLAS's.

Per layer the forward's four products (QKV, output projection, MLP up, MLP down)
and the backward's eight (each product's input gradient, g @ W, and weight gradient,
g^T @ x, the layout helios.torch runs), then the LM head's three. Helios: the
engine's timed call (GPU timestamps, the variant helios.torch picks for the shape);
torch: CUDA events around torch.matmul on the same layouts (transposed views).
Both: warm-up, then --iters timings, the median. Prints and writes one JSON object.

--memory: where Helios's operands live, one timing per kind: plain (dev.upload,
the default), exportable (the memory helios.torch's results and staging copies
use) and pool (torch tensors made inside helios.torch.memory_pool(), read in place;
the output exportable); --cold: L2 flushed before every timed run (both sides):
the training step's products find their operands in DRAM, not in L2."""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np
import torch

import helios
import helios.torch as ht
from helios.harness.train import TrainConfig


def products(cfg: TrainConfig) -> list[tuple[str, int, int, int, bool, bool, int]]:
    """(name, m, n, k, trans_a, trans_b, count per step) of the step's products."""
    t, d, f, v = cfg.batch * cfg.seq, cfg.d_model, 4 * cfg.d_model, cfg.vocab
    out = []
    for name, n_out, n_in in (("qkv", 3 * d, d), ("proj", d, d), ("up", f, d), ("down", d, f)):
        out.append((f"{name} fwd", t, n_out, n_in, False, True, cfg.layers))  # x @ W^T
        out.append((f"{name} dx", t, n_in, n_out, False, False, cfg.layers))  # g @ W
        out.append((f"{name} dw", n_out, n_in, t, True, False, cfg.layers))  # g^T @ x
    out.append(("head fwd", t, v, d, False, True, 1))
    out.append(("head dx", t, d, v, False, False, 1))
    out.append(("head dw", v, d, t, True, False, 1))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=30, help="timed runs per product and side (default 30)")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    p.add_argument("--out", default=None, help="also write the JSON here")
    p.add_argument(
        "--memory",
        default="plain",
        help="comma-separated kinds of operand memory for Helios: plain, exportable, pool (default plain)",
    )
    p.add_argument("--cold", action="store_true", help="flush L2 (128 MiB) before every timed run, both sides")
    args = p.parse_args()
    kinds = [s for s in args.memory.split(",") if s]
    if not kinds or any(s not in ("plain", "exportable", "pool") for s in kinds):
        p.error(f"--memory takes plain, exportable, pool; got {args.memory!r}")
    flush = 128 << 20 if args.cold else 0
    scrub = torch.empty(flush // 4 or 1, device="cuda")
    cfg = TrainConfig()
    dev = ht.device_for(torch.zeros(1, device="cuda"))  # torch's GPU's device (pool imports land there)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    rng = np.random.default_rng(0)
    rows, tot_h, tot_t = [], 0.0, 0.0
    for name, m, n, k, ta, tb, count in products(cfg):
        a_shape = (k, m) if ta else (m, k)
        b_shape = (n, k) if tb else (k, n)
        a = rng.standard_normal(a_shape, dtype=np.float32).astype(helios.bfloat16)
        b = rng.standard_normal(b_shape, dtype=np.float32).astype(helios.bfloat16)
        ta_t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
        tb_t = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16).cuda()
        variant = dev._pick(None, m, n, k, "bfloat16")
        by_kind: dict[str, float] = {}
        for kind in kinds:
            if kind == "pool":
                with ht.memory_pool():
                    pa, pb = ta_t.clone(), tb_t.clone()
                ha, hb = ht.to_helios(pa, copy=False), ht.to_helios(pb, copy=False)
            else:
                ha, hb = dev.upload(a, exportable=kind == "exportable"), dev.upload(b, exportable=kind == "exportable")
            out = dev.empty((m, n), "bfloat16", exportable=kind != "plain")
            fields = dict(
                a=ha,
                b=hb,
                m=m,
                n=n,
                k=k,
                trans_a=ta,
                trans_b=tb,
                lda=a_shape[1],
                ldb=b_shape[1],
                in_dtype="bfloat16",
                out_dtype="bfloat16",
                out=out,
                variant=variant,
            )
            _, samples, _, used = dev._gemm(**fields, warmup=args.warmup, iters=args.iters, flush_bytes=flush)
            by_kind[kind] = statistics.median(samples)
        h_ms = by_kind[kinds[0]]
        opa, opb = (ta_t.T if ta else ta_t), (tb_t.T if tb else tb_t)
        for _ in range(args.warmup):
            torch.matmul(opa, opb)
        times = []
        for _ in range(args.iters):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if flush:
                scrub.zero_()
            e0.record()
            torch.matmul(opa, opb)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1))
        t_ms = statistics.median(times)
        flops = 2.0 * m * n * k
        row = {
            "product": name,
            "m": m,
            "n": n,
            "k": k,
            "trans_a": ta,
            "trans_b": tb,
            "per_step": count,
            "variant": used,
            "helios_ms": h_ms,
            "helios_ms_by_memory": by_kind,
            "torch_ms": t_ms,
            "helios_tflops": flops / h_ms / 1e9,
            "torch_tflops": flops / t_ms / 1e9,
        }
        rows.append(row)
        tot_h += h_ms * count
        tot_t += t_ms * count
        print(
            f"{name:10s} {m:6d}x{n:6d}x{k:6d} ta={int(ta)} tb={int(tb)} x{count}: helios {h_ms:.4f} ms "
            f"({row['helios_tflops']:.0f} TF/s)  torch {t_ms:.4f} ms ({row['torch_tflops']:.0f})  {used}  "
            + " ".join(f"{kd} {ms:.4f}" for kd, ms in by_kind.items()),
            flush=True,
        )
    res = {
        "device": dev.info["name"],
        "config": vars(cfg) | {"adapters": None, "command": None},
        "memory": kinds,
        "cold": bool(args.cold),
        "rows": rows,
        "helios_ms_per_step": tot_h,
        "torch_ms_per_step": tot_t,
    }
    print(f"products per step: helios {tot_h:.2f} ms, torch {tot_t:.2f} ms")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

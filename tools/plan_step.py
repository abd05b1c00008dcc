#!/usr/bin/env python3
"""One measurement for issue 60: what a batch-1 decode step's products cost per
token, five ways on the same GPU. The step is the training suite's decoder's
products at one token (8 layers, d=1024: per layer the QKV projection, the output
projection, the MLP's up (bias, GELU) and down products; attention and norms left
out), float16 with fp32 accumulation, weights (out, in) as torch's linear keeps them:

  helios per op   one Device.matmul on Tensors per product (a submission and a wait each)
  helios chain    Chain.run(): every product recorded afresh into one submission
  helios plan     Plan.replay(): recorded once, one submission and one wait per token
  torch eager     F.linear per product, the stream synchronized once per token
  torch graph     the step captured in a CUDA graph, replayed and synchronized

Each: warm-up, then the median over --tokens steps of the host's wall time per step
(perf_counter around it, the GPU's work waited for), and the GPU time where the
engine or CUDA events give it. The plan's output is checked against the per-op
path's (the same kernels: equal bits) and torch's (allclose) first. Writes JSON
(argv[1]) and prints a table.

Usage: python3 tools/plan_step.py OUT.json [--layers 8] [--d-model 1024] [--tokens 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import helios
from helios.harness.decode.runners import capture_graph


def products(layers: int, d: int) -> list[tuple[str, int, int, bool]]:
    """(name, in, out, gelu) per product, in the step's order."""
    out = []
    for i in range(layers):
        out += [(f"l{i}.qkv", d, 3 * d, False), (f"l{i}.out", d, d, False)]
        out += [(f"l{i}.up", d, 4 * d, True), (f"l{i}.down", 4 * d, d, False)]
    return out


def wall(fn, tokens: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(tokens):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    spec = products(args.layers, args.d_model)
    d = args.d_model
    w = {n: (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float16) for n, i, o, _ in spec}
    b = {n: (rng.standard_normal(o) * 0.1).astype(np.float32) for n, _, o, _ in spec}
    x0 = rng.standard_normal((1, d)).astype(np.float16)
    weight_bytes = sum(v.nbytes for v in w.values())
    rows: dict[str, dict] = {}

    dev = helios.Device()
    W = {n: dev.upload(v) for n, v in w.items()}
    B = {n: dev.upload(v, dtype="float32") for n, v in b.items()}
    x = dev.upload(x0)
    # the step's tensors: qkv, the attention stand-in (the output projection reads x), up, down
    outs = {n: dev.empty((1, o), "float16") for n, _, o, _ in spec}

    def step_ops(rec) -> None:
        cur = x
        for i in range(args.layers):
            rec(cur, f"l{i}.qkv", False)
            a = rec(cur, f"l{i}.out", False)
            u = rec(a, f"l{i}.up", True)
            cur = rec(u, f"l{i}.down", False)

    def per_op() -> None:
        step_ops(
            lambda a, n, g: dev.matmul(a, W[n], trans_b=True, bias=B[n], activation="gelu" if g else None, out=outs[n])
        )

    per_op()
    want = outs[f"l{args.layers - 1}.down"].numpy().copy()
    rows["helios per op"] = {"wall_ms": wall(per_op, args.tokens, args.warmup)}

    ch = dev.chain()
    step_ops(lambda a, n, g: ch.matmul(a, W[n], trans_b=True, bias=B[n], activation="gelu" if g else None, out=outs[n]))
    gpu: list[float] = []
    rows["helios chain"] = {"wall_ms": wall(lambda: gpu.append(ch.run()), args.tokens, args.warmup)}
    rows["helios chain"]["gpu_ms"] = gpu[args.warmup :]

    p = dev.plan()
    step_ops(lambda a, n, g: p.matmul(a, W[n], trans_b=True, bias=B[n], activation="gelu" if g else None, out=outs[n]))
    p.record()
    p.replay()
    got = outs[f"l{args.layers - 1}.down"].numpy()
    assert np.array_equal(got, want), "the plan's output differs from the per-op path's"
    runs: list = []
    rows["helios plan"] = {"wall_ms": wall(lambda: runs.append(p.replay()), args.tokens, args.warmup)}
    runs = runs[args.warmup :]
    rows["helios plan"].update(
        gpu_ms=[r.gpu_ms for r in runs],
        engine_host_ms=[r.host_ms for r in runs],
        engine_wall_ms=[r.wall_ms for r in runs],
    )
    rows["helios plan"]["counts"] = list(p.counts)

    import torch
    import torch.nn.functional as F

    if not torch.cuda.is_available():
        print("no CUDA here: the Helios rows only", file=sys.stderr)
        for name, r in rows.items():
            print(name, f"{statistics.median(r['wall_ms']):.4f} ms")
        return 0
    tw = {n: torch.from_numpy(v).cuda() for n, v in w.items()}
    tb = {n: torch.from_numpy(v).half().cuda() for n, v in b.items()}
    tx = torch.from_numpy(x0).cuda()

    def torch_step():
        cur = tx
        for i in range(args.layers):
            F.linear(cur, tw[f"l{i}.qkv"], tb[f"l{i}.qkv"])
            a = F.linear(cur, tw[f"l{i}.out"], tb[f"l{i}.out"])
            u = F.gelu(F.linear(a, tw[f"l{i}.up"], tb[f"l{i}.up"]), approximate="tanh")
            cur = F.linear(u, tw[f"l{i}.down"], tb[f"l{i}.down"])
        return cur

    with torch.no_grad():
        ref = torch_step().float().cpu().numpy()
        np.testing.assert_allclose(got.astype(np.float32), ref, atol=0.05, rtol=0.05)

        def eager():
            torch_step()
            torch.cuda.synchronize()

        rows["torch eager"] = {"wall_ms": wall(eager, args.tokens, args.warmup)}
        g = capture_graph(torch, torch_step)

        def graph():
            g.replay()
            torch.cuda.synchronize()

        rows["torch graph"] = {"wall_ms": wall(graph, args.tokens, args.warmup)}
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gms = []
        for _ in range(args.tokens):
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            gms.append(e0.elapsed_time(e1))
        rows["torch graph"]["gpu_ms"] = gms

    doc = {
        "tool": "tools/plan_step.py",
        "layers": args.layers,
        "d_model": args.d_model,
        "tokens": args.tokens,
        "warmup": args.warmup,
        "weight_bytes": weight_bytes,
        "gpu": torch.cuda.get_device_name(0),
        "helios_device": dev.info["name"],
        "helios_commit": helios._helios.BUILD_COMMIT,
        "torch": torch.__version__,
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(
        f"{args.layers} layers, d={d}, batch 1, float16: {len(spec)} products, {weight_bytes / 1e6:.1f} MB of weights"
    )
    print("| path | wall ms/token p50 | GPU ms p50 | tokens/s |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        p50 = statistics.median(r["wall_ms"])
        g = f"{statistics.median(r['gpu_ms']):.4f}" if r.get("gpu_ms") else "-"
        print(f"| {name} | {p50:.4f} | {g} | {1e3 / p50:.0f} |")
    if rows["helios plan"].get("engine_host_ms"):
        print(
            f"plan: engine host ms p50 {statistics.median(rows['helios plan']['engine_host_ms']):.4f}, counts {p.counts}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One measurement for issue 50: a small decoder built from helios.torch.linear and
attention, one training step (forward, backward) timed three ways on the same
GPU — eager, torch.compile with the Helios ops as graph breaks (the ops wrapped
in torch.compiler.disable, what helios.torch did before it registered custom
operators), and torch.compile(fullgraph=True) through the custom operators —
with CUDA events, after warm-up, the median over repeats; the compiled outputs
are checked against eager first. Writes JSON (argv[1]) and prints a table.

Usage: python3 tools/compile_step.py OUT.json [--dtype float16|bfloat16] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_torch_library import TinyDecoder  # noqa: E402

import helios  # noqa: E402
import helios.torch as ht  # noqa: E402


class Broken:
    """helios.torch's ops behind torch.compiler.disable: a graph break at each call."""

    linear = staticmethod(torch.compiler.disable(ht.linear))
    attention = staticmethod(torch.compiler.disable(ht.attention))


def step_fn(forward):
    """A training step around a forward (eager or compiled): the backward runs outside
    the compiled region, as AOT autograd compiles it."""

    def step(x):
        y = forward(x)
        y.float().pow(2).mean().backward()
        return y

    return step


def timed(fn, x, warmup: int, steps: int) -> list[float]:
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    out = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="the JSON file to write")
    p.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    p.add_argument("--steps", type=int, default=50, help="timed steps per way (default 50)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10; compiles happen here)")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    args = p.parse_args()
    dt = getattr(torch, args.dtype)
    torch.manual_seed(0)
    model = TinyDecoder(d=args.d_model, heads=args.d_model // 64, layers=2, dtype=dt)
    x = torch.randn(args.batch, args.seq, args.d_model, device="cuda", dtype=dt)
    forwards = {
        "eager": lambda x: model(x, ht),
        "compiled, graph breaks": torch.compile(lambda x: model(x, Broken)),
        "compiled, fullgraph": torch.compile(lambda x: model(x, ht), fullgraph=True),
    }
    with torch.no_grad():  # correct first: both compiled forwards against eager
        ref = forwards["eager"](x)
        for name in ("compiled, graph breaks", "compiled, fullgraph"):
            torch.testing.assert_close(forwards[name](x), ref, atol=3e-2, rtol=3e-2)
    explain = torch._dynamo.explain(lambda x: model(x, ht))(x)
    ways = {name: step_fn(f) for name, f in forwards.items()}
    rows = []
    for name, fn in ways.items():
        model.zero_grad(set_to_none=True)
        ms = timed(fn, x, args.warmup, args.steps)
        rows.append({"way": name, "median_ms": statistics.median(ms), "samples_ms": ms})
    doc = {
        "what": "training step (forward + backward) of tests/test_torch_library.py's TinyDecoder",
        "config": vars(args),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "helios": helios.__version__,
        "fullgraph_graph_breaks": explain.graph_break_count,
        "fullgraph_graphs": explain.graph_count,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(f"{'way':<24} {'median ms':>10}   (graph breaks in the fullgraph version: {explain.graph_break_count})")
    for r in rows:
        print(f"{r['way']:<24} {r['median_ms']:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where a decode step's time goes inside its persistent runs: a Llama shape's plan
(random weights, as step.py) opened with HELIOS_PLAN_TRACE=1 and replayed at each
position; of the replays past --warmup, the one whose runs took the median time is
read (`Plan.trace()`, `helios.plan_trace.summarize`). Per member kind (the products by
their N x K, the attention): what the members added to the step (span), what their
waits cost (release: from the last workgroup done with the member before to the first
one past the wait), a workgroup's work (the median, and the slowest's), and the
products' weights over their span; inside the work, a workgroup's time to its inputs
(A staged, or an attention's first scores) and to its first column (or first split
counted). --members prints every member; --roof-gbs R each kind's span a member beside
its bytes' time at R GB/s.

The stamps themselves cost a little: compare traced steps with traced steps (step.py
times the step untraced). --side LABEL:NAME=VALUE[,NAME=VALUE] (repeatable) as in
step.py.

Usage: python3 tools/probes/trace.py [--preset llama-3.2-1b] [--positions 100,1023]
       [--replays 20] [--warmup 300] [--members] [--side L:NAME=V ...] [--json]"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from typing import Any

import helios
from helios.models import LlamaDecoder

try:
    from .step import add_step_args, draw, step_args, switches
except ImportError:  # run as a script: step.py beside it
    from step import add_step_args, draw, step_args, switches  # type: ignore[no-redef]


def kinds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The members' rows by kind, in order of first appearance: their count and span,
    release, a workgroup's median and slowest work (what the grid's imbalance costs at
    the next wait) and the products' GB/s, summed or as medians over the members."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(str(r["kind"]), []).append(r)
    return [{"kind": k, "members": len(rs), "span_us": sum(r["span_us"] for r in rs),
             "release_us": sum(r["release_us"] for r in rs),
             "work_median_us": statistics.median(r["work_median_us"] for r in rs),
             "work_max_us": statistics.median(r["work_max_us"] for r in rs),
             "inputs_median_us": statistics.median(r["inputs_median_us"] for r in rs),
             "first_median_us": statistics.median(r["first_median_us"] for r in rs),
             "gbs_median": statistics.median(r["gbs"] for r in rs)} for k, rs in by.items()]  # fmt: skip


def member_bytes(kind: str, cfg: Any, pos: int, element_bytes: int = 2) -> int:
    """What one member of a kind must read: a product's N x K weights; an attention's
    K and V cache rows up to the position."""
    if kind == "attention":
        return 2 * cfg.kv_heads * cfg.head_dim * (pos + 1) * element_bytes
    n, k = (int(x) for x in kind.split("x"))
    return n * k * element_bytes


def measure(preset: str, positions: list[int], replays: int, warmup: int,
            sides: dict[str, dict[str, str]]) -> dict[str, Any]:  # fmt: skip
    cfg, weights = draw(preset)
    out: dict[str, Any] = {"preset": preset, "replays": replays, "warmup": warmup, "sides": {}}
    with contextlib.ExitStack() as stack:
        for label, env in sides.items():
            with switches({**env, "HELIOS_PLAN_TRACE": "1"}):
                dev = stack.enter_context(helios.Device())
            m = stack.enter_context(LlamaDecoder(dev, cfg, weights, max_len=max(positions) + 1, dtype="bfloat16"))
            side: dict[str, Any] = {"env": env, "device": dev.info.get("name", ""), "positions": []}
            for pos in positions:
                for _ in range(warmup):
                    m.plan.replay(params=[1, pos])
                seen = []
                for _ in range(replays):
                    gpu = m.plan.replay(params=[1, pos]).gpu_ms
                    traced = m.plan.trace()
                    rows = helios.plan_trace.summarize(traced)
                    seen.append((sum(r["span_us"] for r in rows), gpu, rows, max(t.before.size for t in traced)))
                seen.sort(key=lambda s: s[0])
                runs_us, gpu, rows, grid = seen[len(seen) // 2]
                by_kind = [{**k, "member_bytes": member_bytes(k["kind"], cfg, pos)} for k in kinds(rows)]
                side["positions"].append({"position": pos, "gpu_ms": gpu, "runs_us": runs_us, "grid": grid,
                                          "kinds": by_kind, "members": rows})  # fmt: skip
            out["sides"][label] = side
    return out


def print_roof(by_kind: list[dict[str, Any]], roof_gbs: float) -> None:
    """Each kind's span a member against its bytes at the roof, and the sums over kinds
    (a layer, where each kind is one member of every layer)."""
    spans = [k["span_us"] / k["members"] for k in by_kind]
    roofs = [k["member_bytes"] / roof_gbs / 1e3 for k in by_kind]
    for k, span, roof in zip(by_kind, spans, roofs):
        print(f"{k['kind']:>14}: {span:7.2f} us a member, {k['member_bytes'] / 1e6:7.2f} MB, "
              f"{roof:6.2f} us at {roof_gbs:.0f} GB/s")  # fmt: skip
    print(f"{'every kind':>14}: {sum(spans):7.2f} us against {sum(roofs):.2f} at the roof")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_args(ap, "100,1023", (20, "traced replays a position and side (the median read)"), 300)
    ap.add_argument("--members", action="store_true", help="print every member, not only the kinds")
    ap.add_argument("--roof-gbs", type=float, default=0.0, metavar="GB/S",
                    help="the card's memory roof (e.g. helios suite decode's): each kind's span a member beside "
                         "its bytes' time at the roof, and their sums")  # fmt: skip
    a = ap.parse_args(argv)
    sides, positions = step_args(ap, a)
    r = measure(a.preset, positions, a.replays, a.warmup, sides)
    if a.json:
        print(json.dumps(r))
        return 0
    for label, s in r["sides"].items():
        for p in s["positions"]:
            print(f"{label} {s['env'] or ''} on {s['device']}, {r['preset']} at {p['position']}: GPU "
                  f"{p['gpu_ms']:.3f} ms a step, {p['runs_us']:.1f} us in its runs of {p['grid']} workgroups "
                  f"(the median of {r['replays']})")  # fmt: skip
            print(
                f"{'kind':>14} {'members':>7} {'span us':>9} {'release us':>10} {'inputs us':>9} "
                f"{'first us':>8} {'work us':>8} {'max us':>7} {'GB/s':>6}"
            )
            for k in p["kinds"]:
                print(f"{k['kind']:>14} {k['members']:7d} {k['span_us']:9.1f} {k['release_us']:10.1f} "
                      f"{k['inputs_median_us']:9.2f} {k['first_median_us']:8.2f} "
                      f"{k['work_median_us']:8.2f} {k['work_max_us']:7.2f} {k['gbs_median']:6.0f}")  # fmt: skip
            print("  inputs: a workgroup's go to its A staged (a product) or its first task's scores (an attention);"
                  " first: to its first column stored, or its first task counted in (median)")  # fmt: skip
            if a.roof_gbs > 0:
                print_roof(p["kinds"], a.roof_gbs)
            for m in p["members"] if a.members else []:
                print(f"  run {m['run']:2d} member {m['member']:2d} {m['kind']:>12}: span {m['span_us']:7.2f}, "
                      f"release {m['release_us']:6.2f}, inputs {m['inputs_median_us']:6.2f}, "
                      f"first {m['first_median_us']:6.2f}, work {m['work_median_us']:6.2f} "
                      f"(max {m['work_max_us']:6.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

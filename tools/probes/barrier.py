#!/usr/bin/env python3
"""What a barrier costs: plans of chains of small one-row products (each reads the
last one's output, so each waits for it), replayed, GPU ms the median of --replays
after --warmup. The slope between the shortest and the longest chain is the cost of a
link: a grid barrier and a small product where they run as a persistent run, a
pipeline barrier and a dispatch where they run apart. The decode suite's step line
bounds the cost from above; this measures it.

--side LABEL:NAME=VALUE[,NAME=VALUE] (repeatable) as in step.py: e.g. `--side runs:
--side apart:HELIOS_DISABLE_PLAN_PERSISTENT=1`.

Usage: python3 tools/probes/barrier.py [--links 1,16] [--d 256] [--replays 300]
       [--warmup 30] [--side L:NAME=V ...] [--json]"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from typing import Any

import numpy as np

import helios

try:
    from .step import add_side_args, ints_of, sides_of, switches
except ImportError:  # run as a script: step.py beside it
    from step import add_side_args, ints_of, sides_of, switches  # type: ignore[no-redef]


def chain(dev: Any, links: int, d: int) -> Any:
    """A plan of `links` one-row products of d x d weights, each of the last one's output."""
    rng = np.random.default_rng(links)
    x = dev.upload((rng.standard_normal((1, d)) * 0.5).astype(np.float16))
    w = dev.upload((rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float16))
    with dev.plan() as p:
        y = x
        for _ in range(links):
            y = p.matmul(y, w, trans_b=True)
    return p


def measure(links: list[int], d: int, replays: int, warmup: int, sides: dict[str, dict[str, str]]) -> dict[str, Any]:
    out = {}
    for label, env in sides.items():
        with switches(env):
            dev = helios.Device()
        with contextlib.ExitStack() as stack:
            stack.enter_context(dev)
            rows = []
            for n in links:
                p = chain(dev, n, d)
                for _ in range(warmup):
                    p.replay()
                gpu = statistics.median(p.replay().gpu_ms for _ in range(replays))
                _, dispatches, barriers = p.counts
                rows.append({"links": n, "gpu_ms": gpu, "dispatches": dispatches, "barriers": barriers,
                             "grid_barriers": p.grid_barriers})  # fmt: skip
            first, last = rows[0], rows[-1]
            slope = (last["gpu_ms"] - first["gpu_ms"]) * 1e3 / (last["links"] - first["links"])
            out[label] = {"env": env, "device": dev.info.get("name", ""), "rows": rows, "us_per_link": slope}
    return {"d": d, "replays": replays, "warmup": warmup, "sides": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default="1,16", help="chain lengths, comma-separated, increasing (at least two)")
    ap.add_argument("--d", type=int, default=256, help="the products' width (d x d weights, a multiple of 8)")
    ap.add_argument("--replays", type=int, default=300, help="timed replays a chain (median)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed replays before them")
    add_side_args(ap)
    a = ap.parse_args(argv)
    sides = sides_of(ap, a.side)
    links = ints_of(ap, "--links", a.links)
    if len(links) < 2 or links != sorted(set(links)) or links[0] < 1:
        ap.error(f"--links {a.links!r}: two or more increasing lengths, from 1")
    if a.d < 8 or a.d % 8 or a.replays < 1 or a.warmup < 0:
        ap.error("--d a multiple of 8, --replays >= 1 and --warmup >= 0")
    r = measure(links, a.d, a.replays, a.warmup, sides)
    if a.json:
        print(json.dumps(r))
        return 0
    for label, s in r["sides"].items():
        print(f"{label} {s['env'] or ''} on {s['device']}: {s['us_per_link']:.2f} us a link (d={r['d']})")
        for row in s["rows"]:
            print(f"  {row['links']:4d} links  {row['gpu_ms']:.4f} GPU ms  {row['dispatches']} dispatches, "
                  f"{row['barriers']} barriers, {row['grid_barriers']} grid barriers")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

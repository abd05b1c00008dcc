"""`helios roof`: the device's cooperative-matrix MMA roof (the ceiling of the
instruction class the kernels use), per fragment shape and accumulator type."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import open_device, positive_int


def cmd_roof(args: argparse.Namespace) -> int:
    from ..harness.results import provenance
    from ..roof import mma_roof

    with open_device(args) as dev:
        rows = mma_roof(dev, iters=args.iters, reps=args.reps)
        result = {"schema": "helios-roof/1", **provenance(), "device": dev.info["name"], "rows": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"MMA roof on {result['device']} (register-only loop, GPU timestamps, {args.reps} dispatches each)")
    print(f"{'shape':>10} {'acc':>4} {'TF/s median':>12} {'TF/s best':>10}")
    for r in rows:
        print(f"{r['shape']:>10} {r['acc']:>4} {r['tflops']:12.1f} {r['tflops_max']:10.1f}")
    return 0


def register(sub: Any) -> None:
    pr = sub.add_parser(
        "roof",
        help="the device's cooperative-matrix MMA roof per fragment shape and accumulator (TF/s)",
        description=__doc__,
    )
    pr.add_argument("--iters", type=positive_int, default=4096, help="MMAs per chain per subgroup (default 4096)")
    pr.add_argument("--reps", type=positive_int, default=10, help="timed dispatches per row (default 10)")
    pr.add_argument("--json", action="store_true", help="print the result as JSON")
    pr.set_defaults(func=cmd_roof)

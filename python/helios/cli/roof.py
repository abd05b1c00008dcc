"""`helios roof`: the device's cooperative-matrix MMA roof (the ceiling of the
instruction class the kernels use), per fragment shape and accumulator type."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..harness.results.format import fmt_rate
from .common import open_device, positive_int, target
from .common_args import Grouped


def cmd_roof(args: argparse.Namespace) -> int:
    from ..harness.protocol.provenance import provenance
    from ..roof import cache_path, mma_roof, save_rows

    if not args.no_save:  # the cache must take the rows: checked before measuring
        target(cache_path(), "the roof cache (HELIOS_ROOF_CACHE)")
    with open_device(args) as dev:
        rows = mma_roof(dev, iters=args.iters, reps=args.reps)
        info = dev.info
    result = {"schema": "helios-roof/1", **provenance(), "device": info["name"], "rows": rows}
    status, saved = 0, None
    if not args.no_save:  # bench rows read it for their roofFraction
        try:
            saved = result["cache"] = str(save_rows(info, rows))
        except OSError as e:  # the rows are printed below either way
            print(f"helios: cannot write the roof cache ({e.strerror or e}); the rows follow", file=sys.stderr)
            status = 2
    if args.json:
        print(json.dumps(result, indent=2))
        return status
    print(f"MMA roof on {result['device']} (register-only loop, GPU timestamps, {args.reps} dispatches each)")
    print(f"{'shape':>10} {'acc':>4} {'TF/s median':>12} {'TF/s best':>10}")
    for r in rows:
        print(f"{r['shape']:>10} {r['acc']:>4} {fmt_rate(r['tflops']):>12} {fmt_rate(r['tflops_max']):>10}")
    if saved:
        print(f"stored in {saved} (helios bench rows report their fraction of it)")
    return status


def register(sub: Any) -> None:
    pr = Grouped(
        sub.add_parser(
            "roof",
            help="the device's cooperative-matrix MMA roof per fragment shape and accumulator (TF/s)",
            description=__doc__,
        )
    )
    pr.add_argument("--iters", type=positive_int, default=4096, help="MMAs per chain per subgroup (default 4096)")
    pr.add_argument("--reps", type=positive_int, default=10, help="timed dispatches per row (default 10)")
    pr.add_argument("--json", action="store_true", help="print the result as JSON")
    pr.add_argument(
        "--no-save",
        action="store_true",
        help="do not store the rows in the roof cache (HELIOS_ROOF_CACHE, else roof.json beside the tuning "
        "cache), which helios bench reads for each row's roofFraction",
    )
    pr.set_defaults(func=cmd_roof)

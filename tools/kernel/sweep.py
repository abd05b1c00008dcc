#!/usr/bin/env python3
"""A whole kernel round in one process: check every variant on odd shapes
against float64, read the driver's kernel statistics (registers, shared
memory), then GPU-time the variants that pass on every shape. One JSON.

  python3 tools/kernel/sweep.py --shapes 2048x2048x2048,llm --out sweep.json
  python3 tools/kernel/sweep.py --variants @variants.txt --shapes large --iters 30

Variants: every one the device lists (default), a comma-separated list, or
@FILE with one per line ('#' comments). Timing per (variant, shape): warm-up
of at least --warmup launches and 200 ms of that variant's own work (an idle
GPU drops its clocks), then --iters launches each between GPU timestamps;
the median is reported with the batch figure beside it. Before each timing the
SM clock is ramped with bursts of that variant's work (helios bench's rule: an
idle H100 stayed at 345 MHz through 200 ms of work); a timing whose clock read
low anyway is flagged `low_clock` and printed with '*'. --no-check times
without the check: only for timing models (tools/kernel/gemm_model.sh), whose
results are wrong by construction; their rows say `"checked": false`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import helios
from helios.harness.protocol.gpustate import gpu_state, low_clock, ramp_clocks, select_gpu
from helios.harness.protocol.shapes import parse_shapes, shape_str
from helios.harness.results.rows import SweepRow
from helios.harness.results.schema import written_row
from helios.matmul_timing import random_inputs, warmup_launches
from helios.tune import CHECK_SHAPES, check_candidate, read_variant_list

# The tuner's check shapes (tails, and whole blocks with whole slabs) and more tails.
ODD = CHECK_SHAPES + [(7, 17, 63), (130, 7, 1), (129, 255, 33)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--shapes",
        default="4096x4096x4096",
        help="shapes to time: MxNxK or named sets (canonical, large, llm, small), comma-separated",
    )
    p.add_argument(
        "--variants",
        default=None,
        help="variants to sweep: comma-separated strings or @FILE (default: all the device lists)",
    )
    p.add_argument("--iters", type=int, default=20, help="timed launches per variant and shape (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="minimum warm-up launches (default 5; also >= 200 ms)")
    p.add_argument("--out", default=None, help="JSON output file")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="time without checking against float64 (timing models only: their results are wrong by construction)",
    )
    p.add_argument(
        "--best",
        default=None,
        help="write the passing variant with the lowest summed time over the shapes to this file",
    )
    args = p.parse_args()
    shapes = parse_shapes(args.shapes)
    rows = []
    t_start = time.time()
    with helios.Device() as dev:
        variants = read_variant_list(args.variants) if args.variants else dev.variants()
        inputs = {s: random_inputs(*s, seed=1) for s in shapes}
        if dev.info.get("uuid"):
            select_gpu(dev.info["uuid"])
        print(f"{len(variants)} variants x {len(shapes)} shapes on {dev.info['name']}", flush=True)
        for v in variants:
            row: dict = {"variant": v, "checked": not args.no_check}
            try:
                row["variant"] = dev.check_variant(v)
                why = None if args.no_check else check_candidate(dev, v, shapes=ODD)
                row["check_fails"] = 0 if why is None else 1  # failing shapes checked: first one
                if why:
                    row["check_failure"] = why
                row["kernel_stats"] = dev.kernel_stats(v)
            except helios.HeliosError as e:
                row.update(check_fails=-1, error=f"{type(e).__name__}: {e}")
            rows.append(row)  # checked against SweepRow before the file is written
            if row["check_fails"] != 0:
                print(f"{v:<84} REJECTED {row.get('error') or row.get('check_failure')}", flush=True)
                continue
            row["timings"] = {}
            for s in shapes:
                a, b = inputs[s]
                est = dev.time_matmul(*s, iters=3, warmup=1, variant=v, inputs=(a, b))
                burst = warmup_launches(est.median_ms, 3, 50.0)
                ramp = ramp_clocks(lambda: dev.time_matmul(*s, iters=burst, warmup=0, variant=v, inputs=(a, b)))
                warm = warmup_launches(est.median_ms, args.warmup, 200.0)
                before = gpu_state()
                t = dev.time_matmul(*s, iters=args.iters, warmup=warm, variant=v, inputs=(a, b))
                after = gpu_state()
                row["timings"][shape_str(s)] = {
                    "clock_warmup": ramp,
                    "gpu_state": {"before": before, "after": after},
                    "low_clock": low_clock(before, after),
                    "median_ms": t.median_ms,
                    "tflops": t.tflops,
                    "batch_ms": t.batch_ms,
                    "cv": float(np.std(t.samples_ms) / np.mean(t.samples_ms)),
                    "samples_ms": t.samples_ms,
                }
            regs = row["kernel_stats"].get("Register Count", float("nan"))
            cells = " ".join(
                f"{row['timings'][shape_str(s)]['tflops']:6.1f}{'*' if row['timings'][shape_str(s)]['low_clock'] else ''}"
                for s in shapes
            )
            print(f"{v:<84} regs={regs:4.0f} TF/s {cells}", flush=True)
        info = dict(dev.info)
    doc = {
        "schema": "helios-sweep/2",
        "shapes": [shape_str(s) for s in shapes],
        "iters": args.iters,
        "warmup": args.warmup,
        "device": info,
        "seconds": time.time() - t_start,
        "rows": [written_row(SweepRow, r) for r in rows],
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    timed = [r for r in rows if r.get("timings")]
    if timed:
        print("\nbest per shape:")
        for s in shapes:
            k = shape_str(s)
            r = min(timed, key=lambda r: r["timings"][k]["median_ms"])
            print(
                f"  {k:<16} {r['timings'][k]['median_ms']:.4f} ms {r['timings'][k]['tflops']:6.1f} TF/s  {r['variant']}"
            )
    if args.best and timed:
        with open(args.best, "w") as f:
            f.write(min(timed, key=lambda r: sum(t["median_ms"] for t in r["timings"].values()))["variant"])
    return 0 if all(r["check_fails"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Check every variant the device lists on odd shapes, then GPU-time the ones
that pass at one shape. Used on GPU machines to choose defaults.

  python3 scripts/sweep.py --shape 4096x4096x4096 --iters 20 --out sweep.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

import helios
from helios.device import random_inputs, warmup_launches
from helios.shapes import parse_shape

ODD = [(1, 1, 1), (7, 17, 63), (65, 127, 129), (383, 384, 385), (130, 7, 1), (129, 255, 33)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="4096x4096x4096", help="shape to time (MxNxK)")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per variant")
    p.add_argument("--warmup", type=int, default=5, help="warm-up iterations per variant")
    p.add_argument("--out", default=None, help="JSON output file")
    p.add_argument("--best", default=None, help="write the fastest passing variant to this file")
    args = p.parse_args()
    m, n, k = parse_shape(args.shape)
    rows = []
    with helios.Device() as dev:
        a_big, b_big = random_inputs(m, n, k, seed=1)
        for v in dev.variants():
            fails = 0
            for (mm, nn, kk) in ODD:
                a, b = random_inputs(mm, nn, kk, seed=mm * 7 + nn)
                ref = helios.reference_matmul(a, b)
                for od in ("float32", "float16"):
                    c = dev.matmul(a, b, out_dtype=od, variant=v)
                    fails += helios.check_close(c, ref, atol=0.05 if od == "float16" else 0.02).fails
            row = {"variant": v, "check_fails": fails}
            if fails == 0:
                # The GPU idles while references are computed on the CPU and its
                # clocks drop: warm up for >= 200 ms of this variant's work first.
                est = dev.time_matmul(m, n, k, iters=3, warmup=1, variant=v, inputs=(a_big, b_big))
                warm = warmup_launches(est.median_ms, args.warmup, 200.0)
                t = dev.time_matmul(m, n, k, iters=args.iters, warmup=warm, variant=v,
                                    inputs=(a_big, b_big))
                row.update(median_ms=t.median_ms, tflops=t.tflops, batch_ms=t.batch_ms,
                           cv=float(np.std(t.samples_ms) / np.mean(t.samples_ms)))
            rows.append(row)
            print(f"{v:<62} fails={fails:<6} " + (f"{row['median_ms']:8.4f} ms {row['tflops']:7.1f} TF/s"
                  if fails == 0 else "REJECTED"), flush=True)
        info = dict(dev.info)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"schema": "helios-sweep/1", "shape": args.shape, "iters": args.iters,
                       "warmup": args.warmup, "device": info, "rows": rows}, f, indent=2)
    timed = [r for r in rows if "median_ms" in r]
    if args.best and timed:
        with open(args.best, "w") as f:
            f.write(min(timed, key=lambda r: r["median_ms"])["variant"])
    return 0 if all(r["check_fails"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

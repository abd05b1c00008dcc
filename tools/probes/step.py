#!/usr/bin/env python3
"""A decode step's time by position: a Llama shape's plan (random weights, as `helios
suite decode --model llama --preset P`) replayed at each position, GPU and wall ms the
median of --replays replays after --warmup, with the plan's ops, dispatches and
barriers. What an A/B of the step's kernels reads (the suite times a whole generation).

Usage: python3 tools/probes/step.py [--preset llama-3.2-1b] [--positions 256,1024,4096]
       [--replays 200] [--warmup 30] [--dtype bfloat16] [--json]"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import helios
from helios.harness.workloads.decode.llama import PRESETS, preset_weights
from helios.models import LlamaConfig, LlamaDecoder


def measure(preset: str, positions: list[int], replays: int, warmup: int, dtype: str) -> dict[str, Any]:
    cfg = LlamaConfig(**PRESETS[preset])
    torch: Any = None
    try:
        import torch
    except ImportError:
        pass
    weights = preset_weights(cfg, seed=0, torch=torch)
    rows = []
    with helios.Device() as dev, LlamaDecoder(dev, cfg, weights, max_len=max(positions) + 1, dtype=dtype) as m:
        del weights
        for pos in positions:
            runs = [m.plan.replay(params=[1, pos]) for _ in range(warmup + replays)][warmup:]
            rows.append(
                {
                    "position": pos,
                    "gpu_ms": statistics.median(r.gpu_ms for r in runs),
                    "wall_ms": statistics.median(r.wall_ms for r in runs),
                }
            )
        ops, dispatches, barriers = m.plan.counts
        grid_barriers = m.plan.grid_barriers
        device = dev.info.get("name", "")
    return {"preset": preset, "dtype": dtype, "device": device, "replays": replays, "warmup": warmup,
            "ops": ops, "dispatches": dispatches, "barriers": barriers, "grid_barriers": grid_barriers,
            "rows": rows}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="llama-3.2-1b", help="the model's shape")
    ap.add_argument("--positions", default="256,1024,4096", help="positions, comma-separated (each < 2^20)")
    ap.add_argument("--replays", type=int, default=200, help="timed replays a position (median)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed replays before them")
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16", help="the weights' type")
    ap.add_argument("--json", action="store_true", help="print the result as JSON, not a table")
    a = ap.parse_args(argv)
    try:
        positions = [int(x) for x in a.positions.split(",")]
    except ValueError:
        ap.error(f"--positions {a.positions!r}: integers, comma-separated")
    if not positions or min(positions) < 0 or max(positions) >= 2**20 or a.replays < 1 or a.warmup < 0:
        ap.error("positions in [0, 2^20), --replays >= 1 and --warmup >= 0")
    r = measure(a.preset, positions, a.replays, a.warmup, a.dtype)
    if a.json:
        print(json.dumps(r))
        return 0
    print(f"{r['preset']} {r['dtype']} on {r['device']}: {r['ops']} ops, {r['dispatches']} dispatches, "
          f"{r['barriers']} barriers and {r['grid_barriers']} grid barriers a step; median of {r['replays']} replays")  # fmt: skip
    print("position  gpu_ms  wall_ms")
    for row in r["rows"]:
        print(f"{row['position']:8d}  {row['gpu_ms']:6.3f}  {row['wall_ms']:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

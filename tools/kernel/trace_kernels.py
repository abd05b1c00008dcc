"""Where torch's GPU time goes in a `helios suite train --trace` file: every CUDA kernel
(and device copy or memset) summed by name, per traced step, largest first, with its
launches a step and its mean duration. Set beside a step profiled with `Device._profile_start`
(Helios's ops each alone), it splits a step between cuBLAS, SDPA, the elementwise work
and the optimizer on one side and Helios's products and attention on the other.

    python3 tools/kernel/trace_kernels.py TRACE.json [TRACE.json ...] [--top 40]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from helios.harness.workloads.train import TRACE_STEPS

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def kernel_table(events: list, steps: int) -> tuple[float, list[tuple[str, float, int, float]]]:
    """(GPU ms a step, [(name, ms a step, launches a step, mean us)] largest first)."""
    total_us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and "dur" in e:
            total_us[e["name"]] += float(e["dur"])
            count[e["name"]] += 1
    rows = [(n, t / steps / 1e3, count[n] // steps, t / count[n]) for n, t in total_us.items()]
    rows.sort(key=lambda r: -r[1])
    return sum(total_us.values()) / steps / 1e3, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+", help="Chrome trace JSON files written by helios suite train --trace")
    ap.add_argument(
        "--steps",
        type=int,
        default=TRACE_STEPS,
        help=f"training steps a trace holds (default {TRACE_STEPS}: what --trace records)",
    )
    ap.add_argument("--top", type=int, default=40, help="kernel names listed a trace (default 40)")
    args = ap.parse_args()
    if args.steps < 1 or args.top < 1:
        ap.error(f"--steps and --top must be at least 1, got {args.steps} and {args.top}")
    for path in args.traces:
        with open(path) as f:
            total, rows = kernel_table(json.load(f)["traceEvents"], args.steps)
        print(f"== {path}: GPU kernels {total:.3f} ms a step ({len(rows)} names)")
        for name, ms, launches, mean_us in rows[: args.top]:
            print(f"{ms:9.3f} ms/step {launches:5d}/step {mean_us:9.1f} us  {name[:90]}")


if __name__ == "__main__":
    main()

"""What CUDA ran while torch's stream waited for Helios, from a `helios suite train
--trace` file: the gaps of at least --gap-ms between consecutive kernels on the
stream that ran the most kernels (torch's: Helios's Vulkan work leaves such gaps),
and every kernel of another stream (NCCL's, under DDP) that overlaps one of them,
with how long. A kernel beside Helios's work shares the GPU with it by time slices.

    python3 tools/kernel/trace_overlap.py TRACE.json [--gap-ms 0.5]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="a Chrome trace JSON written by helios suite train --trace")
    ap.add_argument("--gap-ms", type=float, default=0.5, help="the shortest gap counted as Helios's (default 0.5)")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and "dur" in e]
    if not kernels:
        print(f"{args.trace}: no CUDA kernels (a trace without CUDA)")
        return
    streams = Counter(e.get("args", {}).get("stream") for e in kernels)
    main_stream = streams.most_common(1)[0][0]
    own = sorted((e["ts"], e["ts"] + e["dur"]) for e in kernels if e.get("args", {}).get("stream") == main_stream)
    gaps = [(a_end, b_start) for (_, a_end), (b_start, _) in zip(own, own[1:]) if b_start - a_end >= args.gap_ms * 1e3]
    print(
        f"{args.trace}: {len(kernels)} kernels on streams {dict(streams)}; torch's stream {main_stream}: "
        f"{len(gaps)} gaps >= {args.gap_ms} ms, {sum(b - a for a, b in gaps) / 1e3:.3f} ms in all"
    )
    beside = 0.0
    for e in sorted(kernels, key=lambda e: e["ts"]):
        if e.get("args", {}).get("stream") == main_stream:
            continue
        s, t = e["ts"], e["ts"] + e["dur"]
        over = sum(max(0.0, min(t, b) - max(s, a)) for a, b in gaps)
        if over > 0:
            beside += over
            print(
                f"  stream {e['args'].get('stream')}: {e['name'][:70]} at {s:.0f} us, {e['dur'] / 1e3:.3f} ms, "
                f"{over / 1e3:.3f} ms of it inside a gap"
            )
    print(f"other streams' kernels inside the gaps: {beside / 1e3:.3f} ms")


if __name__ == "__main__":
    main()

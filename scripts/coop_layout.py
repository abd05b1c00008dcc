"""Print the accumulator element layout of the attention forward's fragments, as
the MODEL_LAYOUT_PROBE build of attention_coop.comp writes it into O (run with
that build first on PYTHONPATH): for each lane, each element's (row, column).

  PYTHONPATH=/tmp/model-layout_probe-site python3 scripts/coop_layout.py [--causal] [--d 128]
"""

from __future__ import annotations

import argparse

import numpy as np

import helios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--causal", action="store_true", help="the causal default (its fragment shape)")
    ap.add_argument("--d", type=int, default=128, help="head dimension")
    a = ap.parse_args()
    dev = helios.Device()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 64, a.d)).astype(np.float16) for _ in range(3))
    variant = dev.attention_default(a.d, a.causal) if hasattr(dev, "attention_default") else None
    o = np.asarray(dev.attention(q, k, v, causal=a.causal))
    print(f"d={a.d} causal={a.causal} variant={variant}")
    for lane in range(32):
        cells = [float(x) for x in o[0, 0, lane, :8].astype(np.float32)]
        if not all(np.isfinite(cells)):
            break  # lanes past the subgroup's size
        print(f"lane {lane:2d}: " + " ".join("-" if x < 0 else f"({int(x) // 16},{int(x) % 16})" for x in cells))


if __name__ == "__main__":
    main()

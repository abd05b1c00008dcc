"""Two `helios suite train` results' loss curves side by side: per adapter in both,
the largest relative deviation of B's loss from A's at equal steps (after step
--after), and each run's last loss. For the issue's check that a DDP run over N GPUs
follows the single-GPU run with the same global batch (--micro-batch N x batch).

    python3 scripts/loss_curves.py A.json B.json [--after 20]
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="the reference run (helios-train/1 JSON)")
    ap.add_argument("b", help="the run compared with it")
    ap.add_argument("--after", type=int, default=20, help="steps left out at the start (default 20)")
    args = ap.parse_args()
    runs = [json.load(open(p)) for p in (args.a, args.b)]
    for p, r in zip((args.a, args.b), runs):
        c, dist = r["config"], r.get("distributed") or {}
        print(f"{p}: {r.get('device')}, {dist.get('world_size', 1)} GPU(s) x batch {c['batch']}, {c['steps']} steps")
    rows = [{x["adapter"]: x for x in r["rows"] if x.get("loss")} for r in runs]
    for name in [n for n in rows[0] if n in rows[1]]:
        la, lb = rows[0][name]["loss"], rows[1][name]["loss"]
        devs = [abs(y - x) / abs(x) for x, y in list(zip(la, lb))[args.after :]]
        worst = max(devs) if devs else float("nan")
        print(
            f"{name}: largest deviation after step {args.after} {worst:.2%} over {len(devs)} steps; "
            f"last loss {la[-1]:.4f} / {lb[-1]:.4f}"
        )


if __name__ == "__main__":
    main()

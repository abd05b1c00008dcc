"""The plain and the control-normalized verdicts of `helios compare` on a series
of identical bench runs (tools/aa_series.sh, issue 52): every A/A pair, and
planted slowdowns made by scaling one run's Helios samples by 1 + p (the real
noise of that run kept, the effect known exactly; the reference's samples
untouched). Prints a table per verdict kind (false alarms, detections, median
MDE) and writes JSON.

Usage: python3 tools/aa_control.py OUT.json RUN.json... [--planted 3,5,10]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import statistics
import sys
from pathlib import Path

from helios.harness.results.compare import compare
from helios.harness.results.compare_load import load


def planted(doc: dict, factor: float) -> dict:
    d = copy.deepcopy(doc)
    for row in d["rows"]:
        h = row["helios"]
        h["samples_ms"] = [[x * factor for x in rnd] for rnd in h["samples_ms"]]
    return d


def verdicts(old: dict, new: dict) -> list[dict]:
    out = []
    for v in compare([old], [new]):
        c = v.control
        out.append(
            {
                "shape": v.shape,
                "plain": v.verdict,
                "plain_pct": v.pct,
                "plain_mde_pct": v.mde * 100,
                "normalized": c.verdict if c else None,
                "normalized_pct": c.pct if c else None,
                "normalized_mde_pct": c.mde * 100 if c else None,
                "refused": v.control_refused,
            }
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="JSON file to write")
    p.add_argument("runs", nargs="+", help="helios-bench/1 files of identical runs (--runs 3 each)")
    p.add_argument("--planted", default="3,5,10", help="planted slowdowns in percent (default 3,5,10)")
    args = p.parse_args()
    docs = [load(f) for f in args.runs]
    cases: dict[str, list[dict]] = {"A/A": []}
    for i, j in itertools.combinations(range(len(docs)), 2):
        cases["A/A"] += verdicts(docs[i], docs[j])
    for pct in [float(x) for x in args.planted.split(",")]:
        key = f"planted +{pct:g}%"
        cases[key] = []
        for i, j in itertools.permutations(range(len(docs)), 2):
            cases[key] += verdicts(docs[i], planted(docs[j], 1 + pct / 100))
    summary = []
    for kind in ("plain", "normalized"):
        for case, rows in cases.items():
            n = len(rows)
            counts = {k: sum(r[kind] == k for r in rows) for k in ("SAME", "SLOWER", "FASTER", "INCONCLUSIVE")}
            mdes = [r[f"{kind}_mde_pct"] for r in rows if r[f"{kind}_mde_pct"] is not None]
            summary.append(
                {
                    "verdict": kind,
                    "case": case,
                    "comparisons": n,
                    **counts,
                    "median_mde_pct": statistics.median(mdes) if mdes else None,
                }
            )
    Path(args.out).write_text(json.dumps({"runs": args.runs, "summary": summary, "cases": cases}, indent=1))
    print("| verdict | case | comparisons | SAME | SLOWER | FASTER | INCONCLUSIVE | median MDE |")
    print("|---|---|---|---|---|---|---|---|")
    for s in summary:
        mde = "-" if s["median_mde_pct"] is None else f"{s['median_mde_pct']:.1f}%"
        print(
            f"| {s['verdict']} | {s['case']} | {s['comparisons']} | {s['SAME']} | {s['SLOWER']} | "
            f"{s['FASTER']} | {s['INCONCLUSIVE']} | {mde} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

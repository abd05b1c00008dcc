"""`helios compare`: per-shape verdicts between result files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..files import dumps
from .common import finite_float
from .common_args import Grouped, add_gate


def _compare_doc() -> str:
    from ..harness.results import compare

    return compare.__doc__ or ""


def cmd_compare(args: argparse.Namespace) -> int:
    from ..harness.results.compare import NOISE, CompareError, compare, distinct_runs, exit_status
    from ..harness.results.compare_load import load
    from ..harness.results.compare_table import commit_line, device_label, table, verdict_dict

    old_files = args.old or []
    new_files = args.new or []
    if args.files:
        if old_files or new_files or len(args.files) != 2:
            print("helios: error: give OLD.json NEW.json, or --old FILE... --new FILE...", file=sys.stderr)
            return 2
        old_files, new_files = [args.files[0]], [args.files[1]]
    if not old_files or not new_files:
        print("helios: error: give OLD.json NEW.json, or --old FILE... --new FILE...", file=sys.stderr)
        return 2
    try:
        old, old_notes = distinct_runs([load(p) for p in old_files], old_files)
        new, new_notes = distinct_runs([load(p) for p in new_files], new_files)
        for note in old_notes + new_notes:
            print(f"helios: note: {note}", file=sys.stderr)
        if not 0.5 <= args.level < 1.0:
            raise CompareError(f"--level must be in [0.5, 1), got {args.level}")
        verdicts = compare(
            old, new, ignore_device=args.ignore_device, run_noise=args.run_noise / 100.0, level=args.level
        )
    except CompareError as e:
        print(f"helios: cannot compare: {e}", file=sys.stderr)
        return 2
    status = exit_status(verdicts, args.fail_on_regression, args.gate)
    if args.json:
        doc = {
            "schema": "helios-compare/1",
            "old": old_files,
            "new": new_files,
            "notes": old_notes + new_notes,
            "rule": {
                "level": args.level,
                "noise_floor_pct": NOISE * 100,
                "same": "the whole interval within the noise floor (equivalence)",
                "assumed_run_noise_pct": args.run_noise,
                "gate": args.gate,
                "fail_on_regression_pct": args.fail_on_regression,
            },
            "exit": status,
            "verdicts": [verdict_dict(v) for v in verdicts],
        }
        print(dumps(doc, indent=1))
        return status
    print(table(verdicts))
    print()
    print(commit_line(verdicts, device_label(new[0]), args.summary))
    return status


def register(sub: Any) -> None:
    pc = Grouped(
        sub.add_parser(
            "compare",
            help="per-shape FASTER / SLOWER / SAME / INCONCLUSIVE between "
            "bench results, beyond run-to-run noise; exit 0 no confident regression, "
            "1 a confident regression (above --fail-on-regression), 2 bad input",
            description=_compare_doc(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    pc.add_argument("files", nargs="*", help="OLD.json NEW.json")
    pc.add_argument("--old", nargs="+", help="several OLD results, pooled")
    pc.add_argument("--new", nargs="+", help="several NEW results, pooled")
    pc.add_argument(
        "--ignore-device", action="store_true", help="compare results from different devices or drivers anyway"
    )
    pc.add_argument("--summary", default="<change summary>", help="change summary for the printed commit-message line")
    pc.add_argument(
        "--fail-on-regression",
        dest="fail_on_regression",
        type=finite_float(),
        default=None,
        metavar="PCT",
        help="CI gate: exit 1 only for a confident regression larger than "
        "PCT percent (default: any confident regression)",
    )
    pc.add_argument(
        "--level",
        type=finite_float(0.5, 1.0, hi_open=True),
        default=0.95,
        help="confidence level of the interval (default 0.95; a CI gate over many shapes "
        "or a noisy device may want 0.99)",
    )
    add_gate(pc, "the exit status reads")
    pc.add_argument(
        "--json", action="store_true", help="print every verdict as JSON (helios-compare/1) instead of tables"
    )
    pc.add_argument(
        "--run-noise",
        dest="run_noise",
        type=finite_float(0.0, 100.0),
        default=1.5,
        metavar="PCT",
        help="between-run noise (CV, percent) assumed for a side with a single run (default 1.5); "
        "with several runs their measured spread is taken, at least 0.25%%",
    )
    pc.set_defaults(func=cmd_compare)

"""`helios bisect GOOD BAD`: the first commit whose verdict against GOOD is SLOWER (helios/harness/bisect.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import flag_value, git_ref, nonneg_int, positive_int, target


def _doc() -> str:
    from ..harness import bisect

    return bisect.__doc__ or ""


def cmd_bisect(args: argparse.Namespace) -> int:
    from ..harness.bisect import run_bisect, summary, to_json
    from ..harness.ci import CiConfig, CiError
    from ..harness.shapes import parse_shapes

    flag_value("--shapes", parse_shapes, args.shapes)  # before any build
    out = Path(args.out)
    target(out / "bisect.json", "--out")
    cfg = CiConfig(
        repo=Path(args.repo).resolve(),
        out=out.resolve(),
        work=(Path(args.work) if args.work else out / "work").resolve(),
        shapes=args.shapes,
        runs=args.runs,
        iters=args.iters,
        warmup=args.warmup,
        repeats=args.repeats,
        ref=args.ref,
        python=args.python or sys.executable,
    )
    say = lambda s: print(f"helios bisect: {s}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        result = run_bisect(cfg, args.good, args.bad, args.max_steps, args.gate, say)
    except CiError as e:
        print(f"helios bisect: could not run: {e}", file=sys.stderr)
        return 2
    print(to_json(result) if args.json else summary(result))
    return (
        0
        if result["status"] == "found"
        else 1
        if result["status"].startswith("max steps")
        else 3
        if result["status"].startswith("INCONCLUSIVE")
        else 1
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bisect",
        help="the first commit between GOOD and BAD whose verdict against GOOD is SLOWER, measured as helios ci "
        "measures; exit 0 found, 1 not found (BAD not slower, stopped INCONCLUSIVE or --max-steps reached: "
        "the status says which), 2 could not run",
        description=_doc(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("good", type=git_ref, help="a commit known not to have the regression")
    p.add_argument("bad", type=git_ref, help="a commit that has it (a descendant of GOOD)")
    p.add_argument("--repo", default=".", help="the git checkout holding the commits (default .)")
    p.add_argument(
        "--out", default="build/bisect", help="where bisect.json and the bench files go (default build/bisect)"
    )
    p.add_argument("--work", default=None, help="build directory, reused across runs (default OUT/work)")
    p.add_argument("--shapes", default="canonical", help="helios bench --shapes (default canonical)")
    p.add_argument("--runs", type=positive_int, default=2, help="GOOD/commit pairs per step, ABBA (default 2)")
    p.add_argument("--iters", type=positive_int, default=50, help="timed launches per round (default 50)")
    p.add_argument("--warmup", type=nonneg_int, default=10, help="warm-up launches (default 10)")
    p.add_argument("--repeats", type=positive_int, default=2, help="rounds per run (default 2)")
    p.add_argument(
        "--ref", default="auto", choices=["auto", "torch", "cublas", "numpy"], help="the bench reference (default auto)"
    )
    p.add_argument(
        "--gate",
        choices=("plain", "normalized"),
        default="plain",
        help="the verdict a step reads: plain (default) or control-normalized where valid (see helios compare)",
    )
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=12,
        help="commits measured in this run at most (default 12); run again to resume from OUT/bisect.json",
    )
    p.add_argument("--python", default=None, help="the Python that builds and runs each commit (default this one)")
    p.add_argument("--json", action="store_true", help="print the record (bisect.json) instead of the summary")
    p.set_defaults(func=cmd_bisect)

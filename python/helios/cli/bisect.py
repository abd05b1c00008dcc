"""`helios bisect GOOD BAD`: the first commit whose verdict against GOOD is SLOWER (helios/harness/runs/bisect.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import signals
from .ci import add_measure_args, check_shapes, measure_config
from .common import git_ref, positive_int, target
from .common_args import Grouped, add_gate, add_out


def _doc() -> str:
    from ..harness.runs import bisect

    return bisect.__doc__ or ""


def cmd_bisect(args: argparse.Namespace) -> int:
    from ..harness.runs.bisect import run_bisect, summary, to_json
    from ..harness.runs.ci import CiError

    check_shapes(args)  # before any build
    out = Path(args.out)
    target(out / "bisect.json", "--out")
    cfg = measure_config(args, out.resolve())
    cfg.work = cfg.work.resolve()
    say = lambda s: print(f"helios bisect: {s}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        result = run_bisect(cfg, args.good, args.bad, args.max_steps, args.gate, say, replace=args.force)
    except CiError as e:
        print(f"helios bisect: could not run: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        record = out / "bisect.json"
        print(
            f"helios bisect: interrupted ({signals.stopped_by()}); every commit measured before it is in {record}: "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    print(to_json(result) if args.json else summary(result))
    return exit_status(result["status"])


def exit_status(status: str) -> int:
    """0 found; 3 stopped INCONCLUSIVE (more --runs may decide); 1 not found otherwise
    (BAD not slower, or --max-steps reached: rerun to resume)."""
    return 0 if status == "found" else 3 if status.startswith("INCONCLUSIVE") else 1


def register(sub: Any) -> None:
    p = Grouped(
        sub.add_parser(
            "bisect",
            help="the first commit between GOOD and BAD whose verdict against GOOD is SLOWER, measured as helios ci "
            "measures; exit 0 found, 1 not found (BAD not slower, or --max-steps reached: the status says which), "
            "3 stopped INCONCLUSIVE (rerun with more --runs), 2 could not run",
            description=_doc(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    p.add_argument("good", type=git_ref, help="a commit known not to have the regression")
    p.add_argument("bad", type=git_ref, help="a commit that has it (a descendant of GOOD)")
    p.add_argument("--repo", default=".", help="the git checkout holding the commits (default .)")
    add_out(
        p,
        "where bisect.json and the bench files go (default build/bisect)",
        default="build/bisect",
        force="OUT/bisect.json when it holds another bisection or cannot be read (without it: refused, before any "
        "build)",
    )
    add_measure_args(p, "GOOD/commit")
    add_gate(p, "each step reads")
    p.add_argument(
        "--max-steps",
        type=positive_int,
        default=12,
        help="commits measured in this run at most (default 12); run again to resume from OUT/bisect.json",
    )
    p.add_argument("--json", action="store_true", help="print the record (bisect.json) instead of the summary")
    p.set_defaults(func=cmd_bisect)

"""`helios ci`: base vs head on this GPU in one job (see helios/harness/runs/ci.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .common import UsageError, check_shared, finite_float, git_ref, nonneg_int, positive_int, target
from .common_args import (
    Flags,
    Grouped,
    add_budget,
    add_gate,
    add_launches,
    add_out,
    add_reference,
    add_rounds,
    add_shapes,
    shapes_of,
)


def _doc() -> str:
    from ..harness.runs import ci

    return ci.__doc__ or ""


def cmd_ci(args: argparse.Namespace) -> int:
    from ..harness.runs.ci import run_ci

    check_shapes(args)  # before either build: a bad set is refused now
    out = Path(args.out)
    for name in ("ci.json", "comment.md"):  # where the record goes: writable, before any build
        target(out / name, "--out")
    if args.history:
        target(Path(args.history), "--history")
    cfg = measure_config(
        args,
        out,
        base=args.base,
        head=args.head,
        main=args.main,
        fuzz=args.fuzz,
        attention_fuzz=args.attention_fuzz,
        fail_on_regression=args.fail_on_regression,
        gate=args.gate,
        strict=args.strict,
        rerun=not args.no_rerun,
        history=Path(args.history) if args.history else None,
    )
    stream = sys.stderr if args.json else sys.stdout  # --json: stdout holds the record alone
    rec = run_ci(cfg, say=lambda s: print(f"helios ci: {s}", file=stream, flush=True))
    if args.json:
        print((out / "ci.json").read_text(), end="")  # files: written by this run
        return int(rec["exit"])
    print((out / "comment.md").read_text())  # files: written by this run
    print(f"helios ci: exit {rec['exit']}: {rec.get('reason', '')}")
    return int(rec["exit"])


def check_shapes(args: argparse.Namespace) -> None:
    """--shapes in the workload's grammar (its default where not given), refused before any build."""
    from .bench import GPU_SHAPES

    args.shapes = args.shapes or GPU_SHAPES[args.workload]
    shapes_of(args.shapes, args.workload)


def add_measure_args(p: Flags, pairs: str) -> None:
    """How commits are built and measured, shared by `helios ci` and `helios bisect`."""
    p.add_argument("--work", default=None, help="build directory, reused across runs (default OUT/work)")
    p.add_argument(
        "--workload",
        choices=["matmul", "attention"],
        default="matmul",
        help="what each bench measures: matmul or attention (helios bench --workload; default matmul; "
        "attention's direction and mask: --bench-arg=--backward, --bench-arg=--causal)",
    )
    add_shapes(p, "canonical for matmul, short,baseline,long for attention", attention=True)
    add_rounds(p, 2, 2, repeats_help="rounds per run", runs_help=f"{pairs} pairs, alternating ABBA, each a process")
    add_launches(
        p, 50, 10, iters_help="timed launches per round (default 50)", warmup_help="warm-up launches (default 10)"
    )
    add_reference(
        p, ["auto", "torch", "cublas", "numpy"], "the bench reference: auto, torch, cublas or numpy (default auto)"
    )
    p.add_argument(
        "--max-pairs",
        type=positive_int,
        default=8,
        help=f"while a shape is INCONCLUSIVE, one more {pairs} pair is measured on the undecided shapes, up to "
        "this many pairs in all (default 8; --runs of them first)",
    )
    from ..harness.runs.ci import BENCH_BUDGET_S

    add_budget(
        p, BENCH_BUDGET_S, f"seconds of benches: a {pairs} pair starts only if it is expected (at the pace of the "
        "pairs so far) to end within them, with ci's rerun of the shapes that read SLOWER",
    )  # fmt: skip
    p.add_argument("--python", default=None, help="the Python that builds and runs each commit (default this one)")
    p.add_argument(
        "--energy",
        action="store_true",
        help="let each bench record its energy windows (helios bench's default; off here, where time is "
        "judged: ~4 s a row on an NVIDIA GPU); compare then also judges the energy change",
    )
    p.add_argument(
        "--bench-arg",
        action="append",
        metavar="ARG",
        help="an extra helios bench argument for both sides (repeatable), e.g. --bench-arg=--flush-l2",
    )


def measure_config(args: argparse.Namespace, out: Path, **extra: Any) -> Any:
    """The CiConfig of add_measure_args' flags (and the command's own, extra)."""
    from ..harness.runs.ci import CiConfig

    work = Path(args.work) if args.work else out / "work"
    check_work(work)
    return CiConfig(
        repo=Path(args.repo).resolve(),
        out=out,
        work=work,
        shapes=args.shapes,
        workload=args.workload,
        runs=args.runs,
        iters=args.iters,
        warmup=args.warmup,
        repeats=args.repeats,
        ref=args.ref,
        max_pairs=max(args.max_pairs, args.runs),
        max_time_s=args.max_time,
        python=args.python or sys.executable,
        energy=args.energy,
        bench_args=list(args.bench_arg or []),
        **extra,
    )


def check_work(work: Path) -> None:
    """--work: a directory that exists or can be made, and is writable; refused (exit 2)
    before any build."""
    check_shared(work, "--work")
    if work.exists() and not work.is_dir():
        raise UsageError(f"--work {str(work)!r} is not a directory")
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--work {str(work)!r}: cannot create it ({e.strerror or e})") from None
    if not os.access(work, os.W_OK | os.X_OK):
        raise UsageError(f"--work {str(work)!r}: not writable")


def register(sub: Any) -> None:
    p = Grouped(
        sub.add_parser(
            "ci",
            help="base vs head on this GPU in one job: build both, gate both, interleaved bench, "
            "verdicts, a PR comment; exit 0 no regression, 1 regression or failed head gate, 2 could not run",
            description=_doc(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    p.add_argument("--repo", default=".", help="the git checkout holding both commits (default .)")
    p.add_argument(
        "--base", type=git_ref, default=None, help="base ref (default: the merge-base of --head with --main)"
    )
    p.add_argument("--head", type=git_ref, default=None, help="head ref (default HEAD)")
    p.add_argument(
        "--main", type=git_ref, default="main", help="the branch the merge-base is taken with (default main)"
    )
    add_out(p, "where the results, ci.json and comment.md go (default build/ci)", default="build/ci")
    add_measure_args(p, "base/head")
    p.add_argument("--fuzz", type=positive_int, default=30, help="product fuzz cases in each side's gate (default 30)")
    p.add_argument(
        "--attention-fuzz", type=nonneg_int, default=10, help="attention fuzz cases in each gate (default 10; 0: none)"
    )
    p.add_argument(
        "--fail-on-regression",
        type=finite_float(0.0, 1000.0),
        default=0.0,
        metavar="PCT",
        help="a SLOWER shape fails the job only beyond this many percent (default 0: any confident regression)",
    )
    add_gate(p, "that fails the job")
    p.add_argument(
        "--strict",
        action="store_true",
        help="fail on a regression even where nothing that runs on the GPU changed (the same kernel code, "
        "driver and device, and the same engine build on both sides); by default such a row is reported "
        "as environment or noise",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the record (ci.json: every verdict, interval, MDE) instead of the comment",
    )
    p.add_argument("--no-rerun", action="store_true", help="do not measure a SLOWER shape again before it counts")
    p.add_argument(
        "--history", default=None, help="append the head's rows to this JSON-lines history (main-branch runs)"
    )
    p.set_defaults(func=cmd_ci)

"""`helios report`: tables and figures from result files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..harness.results.rows import read_result
from ..optional import MissingDependencyError
from .common import UsageError, expand_dirs, finite_float
from .common_args import Grouped

DEFAULT_STEP_PCT = 5.0


def cmd_report(args: argparse.Namespace) -> int:
    from ..harness.results.report import REPORT_SCHEMAS, report
    from ..harness.results.rows import FLEET_SCHEMA
    from ..harness.runs.fleet import fleet_from_files, fleet_markdown

    if args.html:
        from pathlib import Path

        from ..harness.results.history import read_history
        from ..harness.results.html import write_html

        try:
            hist = read_history(Path(args.history)) if args.history else None
            page = write_html(Path(args.html), expand_dirs(args.files) if args.files else [], hist)
        except BrokenPipeError:  # the reader went away: main's rule (exit 141, no message)
            raise
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"helios: error: {e}", file=sys.stderr)
            return 2
        print(f"wrote {page}")
        return 0
    if args.step is not None and not args.history:
        raise UsageError("--step flags steps in a --history; give --history FILE with it")
    if args.history:
        from pathlib import Path

        from ..harness.results.history import history_report, read_history

        try:
            print(
                history_report(
                    read_history(Path(args.history)),
                    step=(args.step if args.step is not None else DEFAULT_STEP_PCT) / 100.0,
                )
            )
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as e:
            print(f"helios: error: {e}", file=sys.stderr)
            return 2
        if not args.files:
            return 0
    if not args.files:
        print("helios report: error: give result files, or --history FILE", file=sys.stderr)
        return 2
    try:
        files = expand_dirs(args.files)
        files = [f for f in files if read_result(f).get("schema") != FLEET_SCHEMA] if len(files) > 1 else files
        print(report(files, markdown=args.md, png_dir=args.png))
        fleet = fleet_from_files(files) if len(files) > 1 else None
        if fleet and len(fleet["gpus"]) > 1:  # several GPUs, hosts or ranks: one fleet table
            print("\nfleet (GPU = host/PCI address or UUID/rank):\n" + fleet_markdown(fleet), end="")
    except MissingDependencyError as e:
        print(f"helios report: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise
    except (OSError, ValueError) as e:
        print(f"helios: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        print(
            f"helios: error: a result file is malformed ({type(e).__name__}: {e}); "
            f"expected {', '.join(REPORT_SCHEMAS)} files as written by helios",
            file=sys.stderr,
        )
        return 2
    return 0


def register(sub: Any) -> None:
    pr = Grouped(
        sub.add_parser(
            "report",
            help="tables and figures from result files: bench (helios-bench/1), time (helios-time/1), the suites "
            "(helios-suite/1 mlp, helios-decode/1, helios-train/1) and sweeps (helios-sweep/1, /2); "
            "exit 2 for unreadable or malformed files",
        )
    )
    pr.add_argument(
        "files",
        nargs="*",
        help="result JSON files, or directories of them (e.g. one "
        "result per rank from a Slurm job: merged into one fleet table)",
    )
    pr.add_argument("--md", action="store_true", help="print markdown tables instead of plain text")
    pr.add_argument(
        "--png",
        metavar="DIR",
        default=None,
        help="also write figures to DIR: TFLOP/s by shape, ratio vs the 1.25x parity line, "
        "run-to-run variance, a heatmap per sweep file, ms/token by context per decode file and the loss "
        "curves per train file",
    )
    pr.add_argument(
        "--history",
        metavar="FILE",
        default=None,
        help="print the trends of a JSON-lines history (helios ci --history): per GPU, driver, dtype and "
        "shape, Helios and CUDA ms over commits, with step changes flagged",
    )
    pr.add_argument(
        "--html",
        metavar="DIR",
        default=None,
        help="write DIR/index.html instead: one self-contained page (no network) with the --history charts, "
        "the bench tables of the files, the fleet spread, suites and helios ci records",
    )
    pr.add_argument(
        "--step",
        type=finite_float(0.01, 1000.0),
        default=None,
        metavar="PCT",
        help=f"with --history: flag a point this many percent from the median of the 3 before it (default {DEFAULT_STEP_PCT:g})",
    )
    pr.set_defaults(func=cmd_report)

"""`helios suite`: workload suites (the MLP block) across adapters."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..check import ATOL, RTOL
from .common import emit, finite_float, int_list, nonneg_int, out_paths, positive_int, warmup_count


def cmd_suite(args: argparse.Namespace) -> int:
    from ..harness.suite import SuiteConfig, run_suite, suite_markdown

    out = out_paths(args.out, args.force)
    adapters = [a.strip() for a in args.adapters.split(",") if a.strip()]
    cfg = SuiteConfig(
        tokens=args.tokens,
        d_model=args.d_model,
        hidden=args.hidden,
        iters=args.iters,
        warmup=args.warmup,
        adapters=adapters,
        seed=args.seed,
        atol=args.atol,
        rtol=args.rtol,
        device=args.device,
        tag=args.tag,
        command=["helios"] + list(sys.argv[1:]),
    )
    result = run_suite(cfg, log=print)
    return emit(result, suite_markdown(result), out, "suite rejected: an adapter failed its correctness gate")


def suite_doc() -> str:
    from ..harness import suite

    return suite.__doc__ or ""


def register(sub: Any) -> None:
    ps = sub.add_parser(
        "suite",
        help="workload suite, every stack on one table: a transformer MLP block "
        "(gelu(x@W1+b1)@W2+b2) through Helios (resident chain, and per call), torch eager "
        "and torch.compile; p50/p95 latency, tokens/s, peak memory; JSON + markdown",
        description=suite_doc(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ps.add_argument("workload", choices=["mlp"], help="the workload (mlp)")
    ps.add_argument(
        "--tokens",
        type=int_list,
        default=[512, 1024, 2048, 4096],
        help="token counts, comma-separated (default 512,1024,2048,4096)",
    )
    ps.add_argument("--d-model", dest="d_model", type=positive_int, default=4096, help="model width d (default 4096)")
    ps.add_argument("--hidden", type=positive_int, default=14336, help="MLP hidden size (default 14336)")
    ps.add_argument("--iters", type=positive_int, default=50, help="timed forwards per adapter (default 50)")
    ps.add_argument("--warmup", type=warmup_count, default=10, help="untimed forwards first (default 10)")
    ps.add_argument(
        "--adapters",
        default="helios,helios_per_call,torch_eager,torch_compile",
        help="comma-separated subset of helios, helios_per_call, torch_eager, torch_compile "
        "(default all; torch ones are recorded as skipped without CUDA)",
    )
    ps.add_argument("--seed", type=nonneg_int, default=0, help="seed of the inputs (default 0)")
    ps.add_argument("--atol", type=finite_float(), default=ATOL, help=f"gate absolute tolerance (default {ATOL})")
    ps.add_argument("--rtol", type=finite_float(), default=RTOL, help=f"gate relative tolerance (default {RTOL})")
    ps.add_argument(
        "--tag", default="mlp", help="label stored in the result, to tell runs of different ideas apart (default mlp)"
    )
    ps.add_argument("--out", default=None, help="write the JSON result here and the markdown table beside it (.md)")
    ps.add_argument("--force", action="store_true", help="replace existing --out files")
    ps.set_defaults(func=cmd_suite)

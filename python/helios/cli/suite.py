"""`helios suite`: workload suites (the MLP block) across adapters."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..check import ATOL, RTOL
from .common import (
    UsageError,
    emit,
    finite_float,
    flag_value,
    int_list,
    nonneg_int,
    out_paths,
    positive_int,
    warmup_count,
)


def cmd_suite(args: argparse.Namespace) -> int:
    from ..harness.external import external_adapters
    from ..harness.suite import ADAPTERS, SuiteConfig, run_suite, suite_markdown

    if args.suite_device is not None:  # the original suite's --device: "cuda" (the GPU) or an index
        if args.suite_device.strip().lower() != "cuda":
            args.device = flag_value("--device", int, args.suite_device)
    out = out_paths(args.out, args.force)
    adapters = [a.strip() for a in args.adapters.split(",") if a.strip()]
    try:
        external = external_adapters(args.adapter_cmd, ADAPTERS)
    except ValueError as e:  # the message names --adapter-cmd and the spec
        raise UsageError(str(e)) from None
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
        external=external,
        adapter_timeout_s=args.adapter_timeout,
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
        "--batch",
        type=int_list,
        default=[512, 1024, 2048, 4096],
        help="token counts, comma-separated (default 512,1024,2048,4096); --batch is the same",
    )
    ps.add_argument(
        "--device",
        dest="suite_device",
        default=None,
        help="'cuda' (the GPU under test: what the original suite's --device cuda meant) or a Vulkan "
        "device index (the same as `helios --device N suite`)",
    )
    ps.add_argument(
        "--adapter-cmd",
        dest="adapter_cmd",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="an external stack on the same table (repeatable): COMMAND gets the workload as arguments "
        "and as JSON on stdin and prints the JSON contract (README, 'External adapters'); "
        "TVM_BENCH_CMD, XLA_BENCH_CMD, TENSORRT_BENCH_CMD, PYC_GPU_BENCH_CMD and GLOW_BENCH_CMD add "
        "tvm, xla, tensorrt, pyc and glow the same way",
    )
    ps.add_argument(
        "--adapter-timeout",
        dest="adapter_timeout",
        type=finite_float(1.0),
        default=600.0,
        help="seconds an external command may run per token count before its row says 'timeout' (default 600)",
    )
    ps.add_argument("--d-model", dest="d_model", type=positive_int, default=4096, help="model width d (default 4096)")
    ps.add_argument("--hidden", type=positive_int, default=14336, help="MLP hidden size (default 14336)")
    ps.add_argument("--iters", type=positive_int, default=50, help="timed forwards per adapter (default 50)")
    ps.add_argument("--warmup", type=warmup_count, default=10, help="untimed forwards first (default 10)")
    ps.add_argument(
        "--adapters",
        default="helios,helios_per_call,helios_torch,torch_eager,torch_compile",
        help="comma-separated subset of helios, helios_per_call, helios_torch, torch_eager, torch_compile "
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

"""`helios time`: GPU-timed products per shape after one correctness check."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

import numpy as np

from ..check import check_close, reference_matmul
from ..files import dumps
from ..flops import matmul_flops
from ..harness.protocol.provenance import provenance
from ..harness.protocol.shapes import parse_shape, shape_str
from ..harness.results.format import fmt_tflops
from ..harness.results.rows import TIME_SCHEMA, TimeRow, reference_fields
from ..harness.results.schema import to_row
from ..matmul_timing import random_inputs
from .common import flag_value, open_device, out_paths
from .common_args import Grouped, add_launches, add_out, add_seed, add_shapes, add_tolerances, shapes_of


def _torch_reference(uuid: str) -> Optional[Any]:
    """torch.cuda on the Vulkan device's CUDA twin, timed by the references' one
    protocol (CUDA events per launch, queued behind a spin kernel); None where
    torch or CUDA is absent, or CUDA is on other GPUs only."""
    from ..harness.workloads.references import TorchReference

    try:
        return TorchReference(uuid)
    except (ImportError, RuntimeError):
        return None


def cmd_time(args: argparse.Namespace) -> int:
    shapes = shapes_of(args.shapes)
    out = out_paths(args.out, args.force)
    results = []
    with open_device(args) as dev:
        cm, cn, ck = flag_value("--check-shape", parse_shape, args.check_shape)
        a, b = random_inputs(cm, cn, ck, seed=args.seed + 1)
        c = dev.matmul(a, b, out_dtype=np.float32, variant=args.variant)
        chk = check_close(c, reference_matmul(a, b), atol=args.atol, rtol=args.rtol)
        print(f"check {args.check_shape}: {chk.line()} -> {'PASS' if chk.passed else 'FAIL'}")
        if not chk.passed:
            print("correctness check failed: no timings are reported", file=sys.stderr)
            return 1
        torch_ref = None if args.no_cuda else _torch_reference(dev.info["uuid"])
        print(f"{'shape':>16} {'helios ms':>10} {'TFLOP/s':>8} {'cuda ms':>9} {'TFLOP/s':>8} {'h/cuda':>6}  variant")
        for shape in shapes:
            m, n, k = shape
            a, b = random_inputs(m, n, k, seed=args.seed)
            t = dev.time_matmul(m, n, k, iters=args.iters, warmup=args.warmup, variant=args.variant, inputs=(a, b))
            ref = list(torch_ref.time(a, b, args.iters, args.warmup).samples_ms) if torch_ref else None
            cuda_ms = float(np.median(ref)) if ref else None
            row = to_row(
                TimeRow(
                    shape=shape_str(shape),
                    heliosMs=t.median_ms,
                    heliosTflops=t.tflops,
                    heliosBatchMs=t.batch_ms,
                    heliosSamplesMs=t.samples_ms,
                    **reference_fields(True, cuda_ms, matmul_flops(m, n, k)),
                    cudaSamplesMs=ref,
                    variant=t.variant,
                )
            )
            results.append(row)
            cuda_txt = (
                f"{cuda_ms:9.4f} {fmt_tflops(row['cudaTflops']):>8} {t.median_ms / cuda_ms:6.2f}"
                if cuda_ms
                else f"{'-':>9} {'-':>8} {'-':>6}"
            )
            print(
                f"{shape_str(shape):>16} {t.median_ms:10.4f} {fmt_tflops(t.tflops):>8} {cuda_txt}  {t.variant}",
                flush=True,
            )
        info = dict(dev.info)
    if out:
        written = out.json.write(
            dumps(
                {
                    "schema": TIME_SCHEMA,
                    **provenance(),
                    "device": info,
                    "reference": "torch" if torch_ref else None,
                    "iters": args.iters,
                    "warmup": args.warmup,
                    "check": chk.as_dict(),
                    "rows": results,
                },
                indent=2,
            ),
        )
        print(f"wrote {written}")
    return 0


def register(sub: Any) -> None:
    pt = Grouped(
        sub.add_parser(
            "time",
            help="GPU-timed matmul per shape, gated by a correctness check; torch.cuda timed the same way when available",
        )
    )
    add_shapes(pt, "small", default="small")
    add_launches(
        pt,
        20,
        5,
        iters_help="timed iterations per shape (default 20)",
        warmup_help="untimed warm-up iterations (default 5)",
    )
    pt.add_argument("--variant", default=None, help="kernel variant string (default: the device's default)")
    pt.add_argument(
        "--check-shape",
        "--checkShape",
        dest="check_shape",
        default="384x384x384",
        help="shape of the correctness check run first (default 384x384x384)",
    )
    add_tolerances(pt, "")
    add_seed(pt)
    pt.add_argument("--no-cuda", action="store_true", help="do not time torch.cuda even if present")
    add_out(
        pt,
        "write the results as JSON to this .json file (checked before timing starts)",
        force="an existing --out file",
    )
    pt.set_defaults(func=cmd_time)

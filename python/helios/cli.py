"""The `helios` command line: `helios info`, `helios time`."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

import numpy as np

from . import _helios
from .check import ATOL, RTOL, check_close, reference_matmul
from .device import Device, random_inputs
from .shapes import parse_shape, parse_shapes, shape_str


def _open(args: argparse.Namespace) -> Device:
    return Device(args.device, disable_coop=args.disable_coop)


def cmd_info(args: argparse.Namespace) -> int:
    with _open(args) as dev:
        info = dict(dev.info)
        info["default_variant"] = dev.default_variant()
        info["variants"] = dev.variants()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"device        {info['name']} ({info['device_type']}, vendor 0x{info['vendor_id']:04x})")
    print(f"driver        {info['driver_name']} {info['driver_info']} (raw {info['driver_version']})")
    print(f"vulkan        {info['api_version']}")
    print(f"subgroup      {info['subgroup_size']} (min {info['min_subgroup_size']}, max {info['max_subgroup_size']})")
    print(f"shared memory {info['shared_memory_bytes']} bytes; max workgroup {info['max_workgroup_invocations']}")
    print(f"timestamps    {info['timestamp_period_ns']} ns/tick, {info['timestamp_valid_bits']} valid bits")
    print(f"coopmat KHR   {info['cooperative_matrix']} (enabled: {info['cooperative_matrix_enabled']}); "
          f"NV coopmat2 {info['cooperative_matrix2']} "
          f"({info['cooperative_matrix2_flexible_dimensions']} flexible-dimension rows); "
          f"bf16 {info['bf16']}")
    rows = info["cooperative_matrix_properties"]
    if rows:
        print("cooperative matrix properties (MxNxK  A B -> C result  scope):")
        for r in rows:
            print(f"  {r['m']:>3}x{r['n']:<3}x{r['k']:<3} {r['a']:>4} {r['b']:>4} -> {r['c']:>4} "
                  f"{r['result']:>4}  {r['scope']}{'  saturating' if r['saturating'] else ''}")
    print(f"default       {info['default_variant']}")
    print(f"variants      {len(info['variants'])} (helios info --json lists them)")
    return 0


def _torch_time(a: np.ndarray, b: np.ndarray, iters: int, warmup: int) -> Optional[list[float]]:
    """torch.cuda timed like Helios: one CUDA event pair per iteration after warm-up."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    for _ in range(warmup):
        torch.matmul(ta, tb)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, end in events:
        start.record()
        torch.matmul(ta, tb)
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def cmd_time(args: argparse.Namespace) -> int:
    shapes = parse_shapes(args.shapes)
    results = []
    with _open(args) as dev:
        cm, cn, ck = parse_shape(args.check_shape)
        a, b = random_inputs(cm, cn, ck, seed=args.seed + 1)
        c = dev.matmul(a, b, out_dtype=np.float32, variant=args.variant)
        chk = check_close(c, reference_matmul(a, b), atol=args.atol, rtol=args.rtol)
        print(f"check {args.check_shape}: {chk.line()} -> {'PASS' if chk.passed else 'FAIL'}")
        if not chk.passed:
            print("correctness check failed: no timings are reported", file=sys.stderr)
            return 1
        print(f"{'shape':>16} {'helios ms':>10} {'TFLOP/s':>8} {'cuda ms':>9} {'TFLOP/s':>8} "
              f"{'ratio':>6}  variant")
        for shape in shapes:
            m, n, k = shape
            a, b = random_inputs(m, n, k, seed=args.seed)
            t = dev.time_matmul(m, n, k, iters=args.iters, warmup=args.warmup,
                                variant=args.variant, inputs=(a, b))
            ref = _torch_time(a, b, args.iters, args.warmup) if not args.no_cuda else None
            cuda_ms = float(np.median(ref)) if ref else None
            flops = 2.0 * m * n * k
            row = {"shape": shape_str(shape), "heliosMs": t.median_ms, "heliosTflops": t.tflops,
                   "heliosBatchMs": t.batch_ms, "heliosSamplesMs": t.samples_ms,
                   "cudaMs": cuda_ms, "cudaTflops": flops / (cuda_ms * 1e-3) / 1e12 if cuda_ms else None,
                   "cudaSamplesMs": ref, "variant": t.variant}
            results.append(row)
            cuda_txt = (f"{cuda_ms:9.4f} {row['cudaTflops']:8.1f} {t.median_ms / cuda_ms:6.2f}"
                        if cuda_ms else f"{'-':>9} {'-':>8} {'-':>6}")
            print(f"{shape_str(shape):>16} {t.median_ms:10.4f} {t.tflops:8.2f} {cuda_txt}  {t.variant}",
                  flush=True)
        info = dict(dev.info)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"schema": "helios-time/1", "device": info, "iters": args.iters,
                       "warmup": args.warmup, "check": chk.as_dict(), "rows": results}, f, indent=2)
        print(f"wrote {args.out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="helios", description="Vulkan cooperative-matrix matmul, "
                                "measured against CUDA.")
    p.add_argument("--device", type=int, default=None,
                   help="Vulkan device index (default: HELIOS_DEVICE, else the best GPU)")
    p.add_argument("--disable-coop", action="store_true",
                   help="use the scalar path only (like HELIOS_DISABLE_COOP=1)")
    sub = p.add_subparsers(dest="command", required=True)

    pi = sub.add_parser("info", help="print the device's capabilities and cooperative-matrix table")
    pi.add_argument("--json", action="store_true", help="print the full report as JSON, variants included")
    pi.set_defaults(func=cmd_info)

    pt = sub.add_parser("time", help="GPU-timed matmul per shape, gated by a correctness check; "
                        "torch.cuda timed the same way when available")
    pt.add_argument("--shapes", default="small",
                    help="comma list of MxNxK and/or named sets (small, canonical, large, llm); "
                         "default: small")
    pt.add_argument("--iters", type=int, default=20, help="timed iterations per shape (default 20)")
    pt.add_argument("--warmup", type=int, default=5, help="untimed warm-up iterations (default 5)")
    pt.add_argument("--variant", default=None, help="kernel variant string (default: the device's default)")
    pt.add_argument("--check-shape", "--checkShape", dest="check_shape", default="384x384x384",
                    help="shape of the correctness check run first (default 384x384x384)")
    pt.add_argument("--atol", type=float, default=ATOL, help=f"absolute tolerance (default {ATOL})")
    pt.add_argument("--rtol", type=float, default=RTOL, help=f"relative tolerance (default {RTOL})")
    pt.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    pt.add_argument("--no-cuda", action="store_true", help="do not time torch.cuda even if present")
    pt.add_argument("--out", default=None, help="write the results as JSON to this file")
    pt.set_defaults(func=cmd_time)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except _helios.NoDeviceError as e:
        print(f"helios: no Vulkan device: {e}", file=sys.stderr)
        return 2
    except (ValueError, _helios.HeliosError) as e:
        print(f"helios: error: {e}", file=sys.stderr)
        return 1

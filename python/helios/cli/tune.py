"""`helios tune`: time candidate variants and store the picks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from .. import _helios, signals
from ..harness.protocol.shapes import shape_str
from ..tune_cache import cache_path as tuner_cache_path
from .common import UsageError, finite_float, open_device, target
from .common_args import Grouped, add_launches, add_seed, add_shapes, shapes_of

# What a tune given no --shapes / --iters / --warmup / --warmup-ms times: on a GPU the
# sets the picks serve; on a CPU Vulkan device (lavapipe, ~16 GFLOP/s) those would
# take hours (2.5 minutes for the first 1024^3 row of 12), so small shapes briefly.
GPU_DEFAULTS = {"iters": 20, "warmup": 5, "warmup_ms": 200.0}
CPU_DEFAULTS = {"iters": 5, "warmup": 1, "warmup_ms": 0.0}
SHAPES = {"matmul": ("canonical,large,llm", "small"), "attention": ("anchor", "small")}


def scale_defaults(args: argparse.Namespace, attention: bool) -> None:
    """Fills the flags not given, sized to the device, and says so on a CPU device."""
    keys = ("shapes", "iters", "warmup", "warmup_ms")
    given = {k for k in keys if getattr(args, k) is not None}
    if given == set(keys):
        return
    with open_device(args) as d:
        cpu = d.info["device_type"] == "cpu"
        name = d.info["name"]
    gpu_shapes, cpu_shapes = SHAPES["attention" if attention else "matmul"]
    defaults = {"shapes": cpu_shapes if cpu else gpu_shapes, **(CPU_DEFAULTS if cpu else GPU_DEFAULTS)}
    for k in keys:
        if k not in given:
            setattr(args, k, defaults[k])
    if cpu:
        scaled = " ".join(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in keys if k not in given)
        print(
            f"helios tune: {name} is a CPU device: defaults scaled to {scaled} (give them to override)", file=sys.stderr
        )


class _Picks:
    """The picks of one tune, each stored in the cache as it is made: a signal or a
    failure later keeps what finished."""

    def __init__(self, tuner: Any, dev: Any, path: Optional[Path], dry_run: bool) -> None:
        self.tuner, self.dev, self.path, self.dry_run = tuner, dev, path, dry_run
        self.results: list = []
        self.status = 0

    @property
    def where(self) -> Path:
        return self.path or tuner_cache_path()

    def keep(self, pick: Any) -> None:
        self.results.append(pick)
        if self.dry_run or self.status:
            return
        try:
            with signals.finishing():
                self.path = self.tuner.store([pick], self.dev.info, self.path)
        except OSError as e:  # checked before timing; the picks are printed below either way
            print(
                f"helios tune: could not write the cache {self.where} ({e.strerror or e}); the picks follow",
                file=sys.stderr,
            )
            self.status = 2


def _run(tuner: Any, dev: Any, args: argparse.Namespace, attention: bool, shapes: list, keep: Any) -> None:
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    timing = {"iters": args.iters, "warmup": args.warmup, "warmup_ms": args.warmup_ms, "seed": args.seed}
    if attention:
        cands = tuner.read_variant_list(args.candidates) if args.candidates else None
        print(f"helios tune: attention, {len(shapes)} shapes on {dev.info['name']}", file=sys.stderr)
        kw = {"causal": args.causal, "backward": args.backward, "dtype": args.dtype}
        tuner.tune_attention(dev, shapes, variants=cands, log=log, on_pick=keep, **kw, **timing)
        return
    if args.candidates:
        cands = [dev.check_variant(v) for v in tuner.read_variant_list(args.candidates)]
    else:
        cands = tuner.candidates(dev)
    print(f"helios tune: {len(cands)} candidates x {len(shapes)} shapes on {dev.info['name']}", file=sys.stderr)
    tuner.tune(dev, shapes, variants=cands, log=log, on_pick=keep, **timing)


def _print_picks(results: list, as_json: bool) -> None:
    if as_json:
        picks = [
            {
                "shape": shape_str(r.shape),
                "bucket": r.bucket,
                "variant": r.variant,
                "median_ms": r.median_ms,
                "candidates": r.candidates,
            }
            for r in results
        ]
        print(json.dumps(picks, indent=1))
        return
    for r in results:
        print(f"{shape_str(r.shape):>16} {r.median_ms:9.4f} ms  {r.variant}")


def cmd_tune(args: argparse.Namespace) -> int:
    from .. import tune as tuner

    attention = args.workload == "attention"
    if not attention and (args.causal or args.backward or args.dtype != "float16"):
        raise UsageError("--causal, --backward and --dtype belong to --workload=attention (products tune float16)")
    scale_defaults(args, attention)
    shapes = shapes_of(args.shapes, "attention" if attention else "matmul")
    path = Path(args.cache) if args.cache else None
    if not args.dry_run:
        target(path or tuner_cache_path(), "--cache")
    with open_device(args) as dev:
        picks = _Picks(tuner, dev, path, args.dry_run)
        try:
            _run(tuner, dev, args, attention, shapes, picks.keep)
        except RuntimeError as e:
            if isinstance(e, _helios.HeliosError):
                raise
            print(f"helios: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            n = len(picks.results)
            kept = "not written (--dry-run)" if args.dry_run else f"in {picks.where}"
            print(
                f"helios tune: interrupted ({signals.stopped_by()}) after {n} of {len(shapes)} shapes; "
                f"the {n} picks finished are {kept}",
                file=sys.stderr,
            )
            picks.status = 130
        if args.dry_run:
            print("helios tune: --dry-run, cache not written", file=sys.stderr)
        elif picks.status == 0:
            print(f"helios tune: wrote {len(picks.results)} picks to {picks.where}", file=sys.stderr)
        _print_picks(picks.results, args.json)
    return picks.status


def register(sub: Any) -> None:
    pu = Grouped(
        sub.add_parser(
            "tune",
            help="time candidate variants per shape bucket and store the fastest "
            "that passed its check in the on-disk cache that variant=None/'auto' uses",
        )
    )
    pu.add_argument(
        "--workload",
        default="matmul",
        choices=["matmul", "attention"],
        help="matmul (default): product variants per shape bucket; attention: attention variants per "
        "head dimension, S_kv bucket (a power of two), mask, direction and dtype",
    )
    add_shapes(pu, "canonical,large,llm for matmul, anchor for attention (small on a CPU device); each pick serves "
               "its bucket (every dimension rounded up to a multiple of 128)", attention=True)  # fmt: skip
    pu.add_argument("--causal", action="store_true", help="attention: tune the causal kernels")
    pu.add_argument("--backward", action="store_true", help="attention: tune the backward's variants")
    pu.add_argument(
        "--dtype",
        default="float16",
        choices=["float16", "bfloat16"],
        help="attention: the input type tuned (default float16; products tune float16)",
    )
    pu.add_argument(
        "--candidates",
        default=None,
        help="comma-separated variant strings or @FILE (default: the built-in templates "
        "for this device's coop shapes, plus the default)",
    )
    add_launches(
        pu,
        None,
        None,
        iters_help="timed launches per candidate and shape (default 20; 5 on a CPU device)",
        warmup_help="minimum warm-up launches (default 5; 1 on a CPU device)",
    )
    pu.add_argument(
        "--warmup-ms",
        dest="warmup_ms",
        type=finite_float(),
        default=None,
        help="and at least this many ms of warm-up work per candidate (default 200; 0 on a CPU device)",
    )
    add_seed(pu, "the inputs and checks")
    pu.add_argument(
        "--cache", default=None, help="cache file (default: HELIOS_TUNE_CACHE, else ~/.cache/helios/tune.json)"
    )
    pu.add_argument("--dry-run", action="store_true", help="time and print, but do not write the cache")
    pu.add_argument("--json", action="store_true", help="print the picks and every candidate's time as JSON")
    pu.set_defaults(func=cmd_tune)

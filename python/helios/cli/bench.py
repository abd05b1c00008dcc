"""`helios bench`: the CUDA-parity protocol for the matmul and attention workloads, on one GPU or each of several."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

from ..harness.results.rows import read_result
from .common import (
    UsageError,
    child_argv,
    finite_float,
    open_device,
    out_paths,
    parse_bool,
    run_and_emit,
    shape_arg,
    write_results,
)
from .common_args import (
    Grouped,
    add_budget,
    add_launches,
    add_out,
    add_reference,
    add_rounds,
    add_seed,
    add_shapes,
    add_target_mde,
    add_tolerances,
    shapes_of,
)


def cmd_bench_devices(args: argparse.Namespace) -> int:
    """--devices: one child bench per GPU, then the fleet summary (helios/fleet.py)."""
    from ..harness.runs.fleet import device_indices, fleet_markdown, run_devices, summarize
    from ..launcher import identities

    if not args.out:
        raise UsageError(
            "--devices needs --out FILE.json: the fleet summary; each device's result "
            "is written beside it as FILE-dev<i>.json"
        )
    out = out_paths(args.out, args.force)
    assert out is not None  # --out was required above
    infos = identities()
    indices = device_indices(args.devices, infos)
    argv, child = child_argv(args, "bench", ["--devices", "--devices-serial", "--out", "--force"])
    entries = run_devices(child, indices, infos, out.json.path.with_suffix(""), args.devices_serial)
    results, labels = [], []
    for e in entries:
        path = Path(e["file"])
        if path.exists():
            res = read_result(path, "a device's bench result")
            results.append(res)
            labels.append(f"dev{e['index']} {res.get('helios', {}).get('pci_bus_id') or e['uuid'][:8]}")
    summary = summarize(results, labels)
    summary.update(
        devices=entries, serial=bool(args.devices_serial), command=["helios"] + argv, host=__import__("platform").node()
    )
    table = fleet_markdown(summary) if results else "no device produced a result\n"
    print(table, end="")
    written, moved = write_results(out, summary, table)
    if moved:
        print(f"helios: {moved}; the summary is in {written}", file=sys.stderr)
    print(f"wrote {written}" if moved else f"wrote {out.json.path} and {out.md.path}")
    rcs = [e["rc"] for e in entries]
    for e in entries:
        if e["rc"]:
            print(f"helios: device {e['index']} exited {e['rc']} (log: {e['log']})", file=sys.stderr)
    return 3 if 3 in rcs else 2 if 2 in rcs else 1 if any(rcs) else 0


# Each workload's default shapes on a GPU (a CPU device takes "small"); helios ci and
# bisect default to the same.
GPU_SHAPES = {"matmul": "canonical", "attention": "short,baseline,long"}


def scale_defaults(args: argparse.Namespace, gpu_shapes: str = GPU_SHAPES["matmul"], cpu_shapes: str = "small") -> None:
    """Defaults sized to the device: on a CPU Vulkan device (lavapipe) the
    canonical cubes at 100 iterations take many minutes, so a bench given no
    --shapes / --iters / --warmup there runs the small set briefly, and says so."""
    given = {k for k in ("shapes", "iters", "warmup") if getattr(args, k) is not None}
    with open_device(args) as d:
        cpu = d.info["device_type"] == "cpu"
        name = d.info["name"]
    defaults = (
        {"shapes": cpu_shapes, "iters": 10, "warmup": 3} if cpu else {"shapes": gpu_shapes, "iters": 100, "warmup": 10}
    )
    for k, v in defaults.items():
        if k not in given:
            setattr(args, k, v)
    if cpu and len(given) < 3:
        scaled = " ".join(f"--{k}={getattr(args, k)}" for k in ("shapes", "iters", "warmup") if k not in given)
        print(
            f"helios bench: {name} is a CPU device: defaults scaled to {scaled} (give them to override)",
            file=sys.stderr,
        )


def protocol_fields(args: argparse.Namespace, variant: Optional[str]) -> dict[str, Any]:
    """The protocol's configuration (harness/protocol/rounds.py ProtocolConfig), built once from
    the flags both workloads take."""
    keys = ("iters", "warmup", "warmup_ms", "dtype", "check", "atol", "rtol", "repeats", "runs", "flush_l2", "energy",
            "ref", "seed", "device", "target_mde")  # fmt: skip
    if args.max_time is not None and args.target_mde is None:
        raise UsageError("--max-time bounds the runs --target-mde adds: give --target-mde too")
    command = ["helios"] + list(sys.argv[1:] if args.argv is None else args.argv)
    return {**{k: getattr(args, k) for k in keys}, "max_time_s": args.max_time, "variant": variant, "command": command}


def cmd_bench(args: argparse.Namespace) -> int:
    from ..harness.workloads.matmul import BenchConfig, markdown, run_bench

    if args.devices:
        return cmd_bench_devices(args)
    if args.workload == "attention":
        return cmd_bench_attention(args)
    if args.causal or args.backward or args.sdpa_backends is not None:
        raise UsageError("--causal, --backward and --sdpa-backends belong to --workload=attention")
    if args.ref == "sdpa":
        raise UsageError("--ref=sdpa is the attention workload's reference; matmul takes auto, torch, cublas or numpy")
    scale_defaults(args)
    variant = None if args.variant in (None, "matmul", "default") else args.variant
    if args.out and "{" in args.out:  # {host}, {uuid}, {rank}, {local_rank}
        from ..launcher import expand_out, launcher_info

        with open_device(args) as d:
            uuid = d.info["uuid"]
        args.out = expand_out(args.out, uuid, launcher_info())
    out = out_paths(args.out, args.force)
    cfg = BenchConfig(shapes=shapes_of(args.shapes), check_shape=args.check_shape, **protocol_fields(args, variant))
    return run_and_emit(lambda: run_bench(cfg, log=print), markdown, out)


def cmd_bench_attention(args: argparse.Namespace) -> int:
    from ..harness.results.attention_table import attention_markdown
    from ..harness.workloads.attention import AttnBenchConfig, run_attention_bench
    from ..harness.workloads.sdpa import BACKENDS

    if args.ref in ("torch", "cublas"):
        raise UsageError(f"--ref={args.ref} is a matmul reference; attention takes auto, sdpa or numpy")
    backends = tuple(b.strip() for b in (args.sdpa_backends or ",".join(BACKENDS)).split(",") if b.strip())
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown or not backends:
        raise UsageError(
            f"--sdpa-backends: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(BACKENDS)}"
        )
    variant = None if args.variant in (None, "matmul", "default", "auto") else args.variant
    out = out_paths(args.out, args.force)
    scale_defaults(args, GPU_SHAPES["attention"], "small")
    cfg = AttnBenchConfig(
        shapes=shapes_of(args.shapes, "attention"),
        causal=args.causal,
        backward=args.backward,
        backends=backends,
        **protocol_fields(args, variant),
    )
    return run_and_emit(lambda: run_attention_bench(cfg, log=print), attention_markdown, out)


# Long: the command's flags, one declaration each in the order --help prints them.
def register(sub: Any) -> None:
    pb = Grouped(
        sub.add_parser(
            "bench",
            help="the CUDA-parity protocol: gate, interleaved GPU timing of Helios "
            "and a reference, statistics, JSON (also accepts the original `alpha bench --suite=cuda` flags)",
        )
    )
    pb.add_argument(
        "--suite", default="cuda", choices=["cuda"], help="benchmark suite; only 'cuda' (Helios vs a reference)"
    )
    pb.add_argument(
        "--workload",
        default="matmul",
        choices=["matmul", "attention"],
        help="matmul (default), or attention: Helios's flash-attention forward vs every torch SDPA backend",
    )
    add_shapes(pb, "canonical for matmul, short,baseline,long for attention (small on a CPU device)", attention=True)
    pb.add_argument(
        "--causal",
        action="store_true",
        help="attention: causal masking (torch's is_causal; FLOPs counted for the half computed)",
    )
    pb.add_argument(
        "--backward",
        action="store_true",
        help="attention: time the backward (dQ, dK, dV from the forward's O and log-sum-exp; FLOPs 2.5x "
        "the forward's) against each SDPA backend's backward (torch.autograd.grad); gradients of "
        "sampled heads checked against float64; --variant then names a backward variant",
    )
    pb.add_argument(
        "--sdpa-backends",
        dest="sdpa_backends",
        default=None,
        help="attention: torch SDPA backends to time, comma list of flash, cudnn, efficient, "
        "math (default all; one that refuses a shape is recorded as unavailable)",
    )
    add_launches(
        pb,
        None,
        None,
        iters_help="timed iterations per side, shape and round (default 100; 10 on a CPU device)",
        warmup_help="untimed warm-up launches before them, at least (default 10; 3 on a CPU device)",
    )
    pb.add_argument(
        "--warmup-ms",
        "--warmupMs",
        dest="warmup_ms",
        type=finite_float(),
        default=200.0,
        help="and at least this many ms of GPU work of warm-up, so an idle GPU's clocks "
        "ramp up first; the launches used are recorded per row (default 200)",
    )
    pb.add_argument(
        "--dtype",
        default="float16",
        choices=["float16", "bfloat16"],
        help="input and output dtype: float16 (default) or bfloat16 (bf16 cooperative matrices where the "
        "device has them, else the scalar fp32 kernels; the row's variant says which). bfloat16's gate: "
        "rtol at least 0.016 (two bf16 ulps); the torch reference runs bf16 with reduced-precision "
        "reductions off",
    )
    pb.add_argument(
        "--variant",
        "--heliosVariant",
        dest="variant",
        default="matmul",
        help="'matmul' or 'auto' (per shape: the `helios tune` pick for its bucket, else "
        "the built-in default for the shape) or one variant string from "
        "`helios info --json` for every shape",
    )
    pb.add_argument(
        "--check",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="gate the run on the check shape and check every timed output "
        "(default true; --check=false gives results marked untrusted)",
    )
    pb.add_argument(
        "--check-shape",
        "--checkShape",
        dest="check_shape",
        type=shape_arg,
        default=(384, 384, 384),
        help="shape of the gate (default 384x384x384)",
    )
    add_tolerances(pb)
    pb.add_argument(
        "--flush-l2",
        "--flushL2",
        dest="flush_l2",
        action="store_true",
        help="cold mode: overwrite 256 MiB before each sample, outside the timed region",
    )
    pb.add_argument(
        "--no-energy",
        dest="energy",
        action="store_false",
        help="skip the energy window each row runs per side after the rounds (NVML's energy "
        "counter: joules per operation, average watts, TF/s per watt; about 2 s a side and row where the GPU has the "
        "counter, nothing elsewhere; attention: Helios and the row's SDPA backend)",
    )
    add_reference(
        pb,
        ["auto", "torch", "cublas", "numpy", "sdpa"],
        "reference: torch.cuda, the built-in cuBLASLt module, or numpy on the CPU "
        "(labelled NOT CUDA); auto = torch, else cublas, else numpy. attention: sdpa "
        "(torch SDPA) or numpy; auto = sdpa, else numpy",
    )
    add_seed(pb)
    add_rounds(
        pb,
        1,
        1,
        repeats_help="rounds; each round times every shape on both sides, alternating which goes first",
        runs_help="independent runs in one invocation (3 for a comparison that can gate CI): each "
        "with its own clock ramp and warm-up, recorded per round "
        "(rows[].helios.round_runs) so compare sees run-to-run noise",
    )
    add_target_mde(pb)
    add_budget(pb, None, "with --target-mde: no run is added after this many seconds from the first round")
    add_out(
        pb,
        "write the helios-bench/1 JSON to this .json file, and the markdown table "
        "beside it (.md); checked before anything is timed, written atomically",
        force="existing --out files",
    )
    pb.add_argument(
        "--devices",
        default=None,
        metavar="all|I,J,...",
        help="one independent bench per Vulkan GPU ('all': every hardware GPU), run "
        "concurrently, each pinned to its GPU (--device, and CUDA_VISIBLE_DEVICES by "
        "UUID on NVIDIA); --out names the fleet summary, per-device results beside it",
    )
    pb.add_argument(
        "--devices-serial",
        dest="devices_serial",
        action="store_true",
        help="with --devices: one GPU after another instead of all at once",
    )
    pb.set_defaults(func=cmd_bench, argv=None)

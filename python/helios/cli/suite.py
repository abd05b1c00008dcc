"""`helios suite`: workload suites (the MLP block, training, decoding) across adapters."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..harness.workloads import mlp, train
from ..harness.workloads.decode import suite as decode
from ..harness.workloads.suites import AdapterChoice, Suite
from ..harness.workloads.train import DDP_COMM_HOOKS, GRAD_SYNCS
from .common import (
    UsageError,
    device_index,
    emit,
    finite_float,
    flag_value,
    int_list,
    nonneg_int,
    open_device,
    out_paths,
    positive_int,
    target,
)
from .common_args import Grouped, add_launches, add_out, add_seed, add_tolerances

SUITES: dict[str, Suite] = {s.name: s for s in (mlp.SUITE, train.SUITE, decode.SUITE)}
# Every flag's default, as the parser declares it (register): a flag of another suite
# counts as given when its value is not its default.
FLAG_DEFAULTS: dict[str, Any] = {}


def workload_base(args: argparse.Namespace, suite: Suite) -> dict[str, Any]:
    """The suite's fields from its flags: `small`'s values first with --tiny or on a CPU
    Vulkan device (the GPU-sized defaults would take hours there; the values not given
    are said on stderr), then every flag given."""
    given = {f: getattr(args, dest) for f, dest in suite.fields.items() if getattr(args, dest) is not None}
    missing = [f for f in suite.small if f not in given]
    why = "--tiny" if args.tiny else None
    if why is None and missing:
        with open_device(args) as d:
            if d.info["device_type"] == "cpu":
                why = f"{d.info['name']} is a CPU device"
    if why is None:
        return given
    if missing:
        shown = " ".join(f"--{suite.fields[f].replace('_', '-')}={_flag_text(suite.small[f])}" for f in missing)
        print(f"helios suite {suite.name}: {why}: defaults scaled to {shown} (give them to override)", file=sys.stderr)
    return {**suite.small, **given}


def _flag_text(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def adapter_list(text: Any, choice: AdapterChoice) -> list[str]:
    """--adapters as a list: the default where not given; UsageError for an empty list or
    a name not in the choices."""
    if text is None:
        return list(choice.default)
    names = [a.strip() for a in str(text).split(",") if a.strip()]
    if not names:
        raise UsageError(
            f"--adapters {text!r} names no adapter; choose from {', '.join(choice.choices or choice.default)}"
        )
    bad = [a for a in names if choice.choices is not None and a not in choice.choices]
    if bad:
        raise UsageError(
            f"--adapters: unknown {', '.join(bad)} for {choice.label}; choose from {', '.join(choice.choices or ())}"
        )
    return names


def refuse_foreign_flags(args: argparse.Namespace, suite: Suite) -> None:
    """UsageError naming a flag given that only other suites read (it would be ignored)."""
    for dest in sorted(set().union(*(s.own_flags for s in SUITES.values())) - suite.own_flags):
        if getattr(args, dest, None) != FLAG_DEFAULTS.get(dest):
            owners = " and ".join(f"`helios suite {s.name}`" for s in SUITES.values() if dest in s.own_flags)
            raise UsageError(f"--{dest.replace('_', '-')}: read by {owners} only; suite {suite.name} does not take it")


def cmd_suite(args: argparse.Namespace) -> int:
    """The one driver (harness/workloads/suites.py says the steps)."""
    suite = SUITES[args.workload]
    refuse_foreign_flags(args, suite)
    if args.suite_device is not None:  # the original suite's --device: "cuda" (the GPU) or an index
        if args.suite_device.strip().lower() != "cuda":
            args.device = flag_value("--device", device_index, args.suite_device)
    if args.device is not None and not suite.takes_device:
        raise UsageError(f"--device {args.device}: helios suite {suite.name} runs on torch's CUDA device and the Vulkan "
                         "device with its UUID (choose it with CUDA_VISIBLE_DEVICES), or without CUDA on HELIOS_DEVICE's")  # fmt: skip
    adapters = adapter_list(args.adapters, suite.adapters(args))
    out = out_paths(args.out, args.force)
    fields = workload_base(args, suite)
    fields.update(adapters=adapters, seed=args.seed, command=["helios"] + list(sys.argv[1:]))
    try:
        cfg = suite.configure(args, fields)
    except ValueError as e:  # the message names the flag
        raise UsageError(str(e)) from None
    for path, flag in suite.outputs(cfg):
        target(Path(path), flag)
    result = suite.run(cfg, print)
    return emit(result, suite.markdown(result), out if suite.writes_result(result) else None, suite.rejected)


def suite_doc() -> str:
    """--help's description: what the one driver does, then each suite's first paragraph."""
    head = (
        "One driver runs each suite (helios/harness/workloads/suites.py); the manual's\n"
        "guide/suites.md says more of each."
    )
    return "\n\n".join([head] + [s.doc.split("\n\n")[0] for s in SUITES.values()])


# Long: the command's flags, one declaration each in the order --help prints them.
def register(sub: Any) -> None:
    ps = Grouped(
        sub.add_parser(
            "suite",
            help="workload suites, every stack on one table: mlp (a transformer MLP block through Helios, "
            "torch eager and torch.compile: p50/p95 latency, tokens/s), train (a GPT-style decoder trained "
            "through each adapter: tokens/s, step split, loss curves) and decode (that decoder generating at "
            "batch 1: ms/token, tokens identical to eager); JSON + markdown",
            description=suite_doc(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    ps.add_argument(
        "workload",
        choices=["mlp", "train", "decode"],
        help="the workload: mlp (the MLP block per adapter), train (a GPT-style decoder trained "
        "through each adapter: tokens/s, step split, loss curves; helios/harness/workloads/train/) or decode (that "
        "decoder generating greedily at batch 1: ms/token, tokens identical to eager; helios/harness/workloads/decode/)",
    )
    pd = ps.add_argument_group("decode (helios suite decode; --layers, --heads, --d-model, --vocab as for train)")
    pd.add_argument("--prompt", type=positive_int, default=None, help="prompt tokens (default 16)")
    pd.add_argument("--new", type=positive_int, default=None, help="tokens generated greedily (default 256)")
    pd.add_argument(
        "--contexts",
        type=int_list,
        default=None,
        help="context lengths of the sweep: the cache filled to each, then --context-steps steps timed "
        "(default 256,1024,4096)",
    )
    pd.add_argument(
        "--context-steps", type=positive_int, default=None, help="timed steps per context length (default 32)"
    )
    pd.add_argument(
        "--train-steps",
        type=nonneg_int,
        default=None,
        help="torch AdamW steps on the token stream before decoding (default 100; 0: the initial, random weights)",
    )
    pd.add_argument(
        "--model",
        choices=("gpt", "llama"),
        default="gpt",
        help="gpt (default): the training suite's GPT, trained briefly; llama: a Llama-family model "
        "(helios.models), a --preset's shape with random weights or a --checkpoint",
    )
    pd.add_argument(
        "--preset",
        choices=("tiny", "llama-3.2-1b", "llama-3.1-8b"),
        default=None,
        help="--model llama: the shape (default llama-3.2-1b; tiny with --tiny or on a CPU device)",
    )
    pd.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="--model llama: a Hugging Face folder (config.json and safetensors) in place of a preset",
    )
    pd.add_argument(
        "--prefill",
        type=positive_int,
        default=None,
        metavar="N",
        help="--model llama: time a prompt of N tokens through each adapter's prefill, its first token included "
        "(helios_plan: the tile products in one capture; torch_eager: one forward): ms to the first token and "
        "prompt tokens/s (default 512; 16 with --tiny or on a CPU device)",
    )
    pt = ps.add_argument_group("train (helios suite train)")
    pt.add_argument("--layers", type=positive_int, default=None, help="decoder blocks (default 8)")
    pt.add_argument("--heads", type=positive_int, default=None, help="attention heads (default 16)")
    pt.add_argument("--seq", type=positive_int, default=None, help="sequence length (default 1024)")
    pt.add_argument("--micro-batch", type=positive_int, default=None, help="sequences per step (default 8)")
    pt.add_argument("--vocab", type=positive_int, default=None, help="vocabulary size (default 8192)")
    pt.add_argument("--steps", type=positive_int, default=None, help="training steps per adapter (default 200)")
    pt.add_argument("--train-warmup", type=nonneg_int, default=None, help="steps left out of the timing (default 10)")
    pt.add_argument(
        "--ddp-bucket-mb",
        type=finite_float(0.001),
        default=None,
        help="under torchrun: DistributedDataParallel's gradient bucket size in MiB (default: torch's, 25)",
    )
    pt.add_argument(
        "--grad-sync",
        choices=GRAD_SYNCS,
        default=None,
        help="under torchrun, how ranks average gradients: ddp (DistributedDataParallel, all-reduces "
        "per bucket as gradients become ready; the default), after-backward (one all-reduce of every "
        "gradient after the backward), none (no averaging: replicas drift apart; times what averaging costs)",
    )
    pt.add_argument(
        "--ddp-comm-hook",
        choices=DDP_COMM_HOOKS,
        default=None,
        help="under torchrun with --grad-sync ddp, DistributedDataParallel's communication hook: auto "
        "(the default: helios.torch.ddp_comm_hook for the Helios adapters, torch's own for the others), "
        "torch (torch's all-reduce hook for every adapter: NCCL beside Helios's work, which the GPU "
        "time-slices), helios (helios.torch.ddp_comm_hook for every adapter: each all-reduce ordered on "
        "torch's stream), none (a hook that sends nothing: DDP's buckets without collectives; replicas "
        "drift apart)",
    )
    pt.add_argument(
        "--trace",
        metavar="PREFIX",
        default=None,
        help="write a torch.profiler trace (Chrome JSON: CPU ops and every CUDA kernel with its stream) of "
        "the last 3 warm-up steps of each adapter to PREFIX-ADAPTER-rankR.json; timed steps are never traced",
    )
    pt.add_argument("--lr", type=finite_float(), default=3e-4, help="AdamW learning rate (default 3e-4)")
    ps.add_argument(
        "--tiny",
        action="store_true",
        help="a workload small enough for a CPU driver (lavapipe in CI): train a tiny model for few steps; "
        "mlp the small block a CPU device gets by default; decode a tiny model (2 layers, d=64, 32 new tokens)",
    )
    ps.add_argument(
        "--tokens",
        "--batch",
        type=int_list,
        default=None,
        help="token counts, comma-separated (default 512,1024,2048,4096; 16,64 on a CPU device or with --tiny); "
        "--batch is the same",
    )
    ps.add_argument(
        "--device",
        dest="suite_device",
        default=None,
        help="'cuda' (the GPU under test: what the original suite's --device cuda meant) or a Vulkan "
        "device index (the same as `helios --device N suite`); mlp only: train and decode run on torch's CUDA "
        "device (CUDA_VISIBLE_DEVICES) and the Vulkan device with its UUID",
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
    ps.add_argument(
        "--d-model",
        dest="d_model",
        type=positive_int,
        default=None,
        help="model width d (default 4096, 256 on a CPU device or with --tiny; train 1024)",
    )
    ps.add_argument(
        "--hidden",
        type=positive_int,
        default=None,
        help="MLP hidden size (default 14336; 896 on a CPU device or with --tiny)",
    )
    add_launches(
        ps,
        None,
        None,
        iters_help="timed forwards per adapter (default 50; 5 on a CPU device or with --tiny)",
        warmup_help="untimed forwards first (default 10; 1 on a CPU device or with --tiny)",
    )
    ps.add_argument(
        "--adapters",
        default=None,
        help="comma-separated subset of helios, helios_per_call, helios_torch, torch_eager, torch_compile "
        "(default all; torch ones are recorded as skipped without CUDA); for train: torch_eager, "
        "torch_compile, helios, helios_plan (the whole step one Helios capture) (default those four; torch_eager "
        "always runs: the reference), and helios_blocks (a block's attention and MLP one Helios group each) and "
        "helios_per_op (each linear and the attention a Helios op of its own): what grouping saves; for decode: "
        "torch_eager, torch_cuda_graphs, helios_torch, helios_plan (default all); with --model llama: "
        "torch_eager, torch_cuda_graphs, torch_compile (reduce-overhead, static caches), hf_transformers "
        "(transformers' generate with a static cache), helios_plan, llama_cpp (the command LLAMA_CPP_BENCH_CMD "
        "names: tools/adapters/llama_cpp/bench.py builds llama.cpp and runs the same protocol) (default all; the "
        "CUDA ones skipped without CUDA, hf_transformers without transformers, llama_cpp without its command)",
    )
    add_seed(ps, "the inputs")
    add_tolerances(ps)
    ps.add_argument(
        "--tag",
        default=None,
        help="mlp: a label stored in the result, to tell runs of different ideas apart (default mlp); "
        "train and decode refuse it",
    )
    add_out(ps, "write the JSON result here and the markdown table beside it (.md)", force="existing --out files")
    ps.set_defaults(func=cmd_suite)
    FLAG_DEFAULTS.update({a.dest: a.default for a in ps.parser._actions})

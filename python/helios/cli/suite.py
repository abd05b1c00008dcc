"""`helios suite`: workload suites (the MLP block, training, decoding) across adapters."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..harness.train import DDP_COMM_HOOKS, GRAD_SYNCS
from ..optional import require
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


def workload_base(args: argparse.Namespace, workload: str, small: dict[str, Any], **flags: str) -> dict[str, Any]:
    """A workload's configuration fields from its flags (field=the flag's dest): `small`'s
    values first with --tiny or on a CPU Vulkan device (the GPU-sized defaults would take
    hours there; the values not given are said on stderr), then every flag given."""
    given = {field: getattr(args, dest) for field, dest in flags.items() if getattr(args, dest) is not None}
    scaled = bool(args.tiny)
    if not scaled and any(f not in given for f in small):
        with open_device(args) as d:
            if d.info["device_type"] == "cpu":
                scaled = True
                shown = " ".join(
                    f"--{dest.replace('_', '-')}={_flag_text(small[f])}"
                    for f, dest in flags.items()
                    if f in small and f not in given
                )
                print(f"helios suite {workload}: {d.info['name']} is a CPU device: defaults scaled to {shown} "
                      "(give them to override)", file=sys.stderr)  # fmt: skip
    base: dict[str, Any] = dict(small) if scaled else {}
    base.update(given)
    return base


def _flag_text(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def adapter_list(text: Any, choices: Any, default: Any, workload: str) -> list[str]:
    """--adapters as a list: the default where not given; UsageError for an empty list or
    a name not in choices."""
    if text is None:
        return list(default)
    names = [a.strip() for a in str(text).split(",") if a.strip()]
    if not names:
        raise UsageError(f"--adapters {text!r} names no adapter; choose from {', '.join(choices or default)}")
    bad = [a for a in names if choices is not None and a not in choices]
    if bad:
        raise UsageError(f"--adapters: unknown {', '.join(bad)} for {workload}; choose from {', '.join(choices)}")
    return names


def no_tag(args: argparse.Namespace, workload: str) -> None:
    if args.tag is not None:
        raise UsageError(f"--tag is stored by `helios suite mlp` only; suite {workload} results have no tag")


def cmd_train(args: argparse.Namespace) -> int:
    require("torch", "helios suite train")
    from ..harness.train import DEFAULT_TRAIN_ADAPTERS, TINY, TRAIN_ADAPTERS, TrainConfig, train_markdown
    from ..harness.train.loop import run_train

    no_tag(args, "train")
    adapters = adapter_list(args.adapters, TRAIN_ADAPTERS, DEFAULT_TRAIN_ADAPTERS, "train")
    out = out_paths(args.out, args.force)
    base = workload_base(
        args,
        "train",
        TINY,
        layers="layers", d_model="d_model", heads="heads", seq="seq", batch="micro_batch", vocab="vocab",
        steps="steps", warmup_steps="train_warmup", ddp_bucket_mb="ddp_bucket_mb", grad_sync="grad_sync",
        ddp_comm_hook="ddp_comm_hook", trace="trace",
    )  # fmt: skip
    if "torch_eager" not in adapters:
        adapters.insert(0, "torch_eager")  # the reference every adapter is compared with
    if args.trace is not None:  # each adapter's trace file: writable, before any training
        for a in adapters:
            target(Path(f"{args.trace}-{a}-rank0.json"), "--trace")
    cfg = TrainConfig(**base, lr=args.lr, seed=args.seed, adapters=adapters, command=["helios"] + list(sys.argv[1:]))
    result = run_train(cfg, log=print)
    if result.get("distributed", {}).get("rank", 0) != 0:
        out = None  # under a launcher rank 0 writes the run (every rank holds the all-reduced curves)
    return emit(result, train_markdown(result), out, "training rejected: an adapter failed its gate or diverged")


# The MLP suite's workload where no flag names it: on a GPU the LLM-size block; on a
# CPU Vulkan device (lavapipe, ~16 GFLOP/s: hours for the GPU size) or with --tiny,
# a block small enough to finish in minutes.
MLP_GPU = {"tokens": [512, 1024, 2048, 4096], "d_model": 4096, "hidden": 14336, "iters": 50, "warmup": 10}
MLP_SMALL = {"tokens": [16, 64], "d_model": 256, "hidden": 896, "iters": 5, "warmup": 1}


def scale_mlp_defaults(args: argparse.Namespace) -> None:
    """Fills the MLP suite's flags not given: MLP_SMALL with --tiny or on a CPU device
    (said on stderr, naming the values), else MLP_GPU."""
    given = {k for k in MLP_GPU if getattr(args, k) is not None}
    small = bool(args.tiny)
    name = None
    if not small and len(given) < len(MLP_GPU):
        with open_device(args) as d:
            small, name = d.info["device_type"] == "cpu", d.info["name"]
    for k, v in (MLP_SMALL if small else MLP_GPU).items():
        if k not in given:
            setattr(args, k, v)
    if small and len(given) < len(MLP_GPU):
        why = "--tiny" if args.tiny else f"{name} is a CPU device"
        shown = " ".join(
            f"--{k.replace('_', '-')}={','.join(map(str, getattr(args, k))) if k == 'tokens' else getattr(args, k)}"
            for k in MLP_SMALL
            if k not in given
        )
        print(f"helios suite mlp: {why}: defaults scaled to {shown} (give them to override)", file=sys.stderr)


def cmd_decode(args: argparse.Namespace) -> int:
    from ..harness.results.suite_tables import decode_markdown
    from ..harness.workloads.decode import DECODE_ADAPTERS, LLAMA_ADAPTERS, TINY, DecodeConfig, check_config
    from ..harness.workloads.decode.run import run_decode, torch_or_none

    no_tag(args, "decode")
    choices = LLAMA_ADAPTERS if args.model == "llama" else DECODE_ADAPTERS
    adapters = adapter_list(args.adapters, choices, choices, f"decode --model {args.model}")
    out = out_paths(args.out, args.force)
    base = workload_base(
        args,
        "decode",
        TINY,
        layers="layers", d_model="d_model", heads="heads", vocab="vocab", prompt="prompt", new="new",
        contexts="contexts", context_steps="context_steps", train_steps="train_steps",
    )  # fmt: skip
    base["adapters"] = adapters
    llama_model_flags(args, base)
    if adapters != ["helios_plan"] or (args.train_steps and args.model == "gpt"):
        require("torch", "helios suite decode (its model is the training suite's torch GPT, trained by torch)")
    elif torch_or_none() is None:
        base["train_steps"] = 0
        print("helios suite decode: torch is not installed: --adapters helios_plan decodes the model's initial "
              "(random) weights, --train-steps=0 (install 'helios-vulkan[torch]' to train and judge them)",
              file=sys.stderr)  # fmt: skip
    cfg = DecodeConfig(**base, seed=args.seed, command=["helios"] + list(sys.argv[1:]))
    try:
        check_config(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    result = run_decode(cfg, log=print)
    return emit(result, decode_markdown(result), out, "decode rejected: an adapter failed or left eager's tokens")


def llama_model_flags(args: argparse.Namespace, base: dict[str, Any]) -> None:
    """--model, --preset and --checkpoint into base; UsageError for flags the model does not take."""
    base["model"] = args.model
    if args.model == "gpt":
        given = [f for f, v in (("--preset", args.preset), ("--checkpoint", args.checkpoint),
                                ("--prefill", args.prefill)) if v is not None]  # fmt: skip
        if given:
            raise UsageError(f"{', '.join(given)}: for --model llama; the GPT's shape is --layers, --d-model, ...")
        return
    shape = [f"--{k.replace('_', '-')}" for k in ("layers", "d_model", "heads", "vocab", "train_steps")
             if getattr(args, k) is not None]  # fmt: skip
    if shape or (args.preset and args.checkpoint):
        raise UsageError(f"--model llama: the preset or the checkpoint sets the shape, not {', '.join(shape)}"
                         if shape else "--preset and --checkpoint: one of them")  # fmt: skip
    scaled = args.layers is None and "layers" in base  # the CPU or --tiny defaults
    for k in ("layers", "d_model", "heads", "vocab", "train_steps"):
        base.pop(k, None)
    base["checkpoint"] = args.checkpoint
    base["preset"] = None if args.checkpoint else args.preset or ("tiny" if scaled else "llama-3.2-1b")
    base["prefill"] = args.prefill if args.prefill is not None else (16 if scaled else 512)


def cmd_suite(args: argparse.Namespace) -> int:
    if args.workload == "train":
        return cmd_train(args)
    if args.workload == "decode":
        return cmd_decode(args)
    if args.suite_device is not None:  # the original suite's --device: "cuda" (the GPU) or an index
        if args.suite_device.strip().lower() != "cuda":
            args.device = flag_value("--device", device_index, args.suite_device)
    scale_mlp_defaults(args)
    from ..harness.results.suite_tables import suite_markdown
    from ..harness.workloads.external import external_adapters
    from ..harness.workloads.suite import ADAPTERS, SuiteConfig, run_suite

    out = out_paths(args.out, args.force)
    adapters = adapter_list(args.adapters, None, ADAPTERS, "mlp")  # names checked with the external ones
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
        tag=args.tag if args.tag is not None else "mlp",
        command=["helios"] + list(sys.argv[1:]),
        external=external,
        adapter_timeout_s=args.adapter_timeout,
    )
    result = run_suite(cfg, log=print)
    return emit(
        result, suite_markdown(result), out, "suite rejected: an adapter failed (its correctness gate or its run)"
    )


def suite_doc() -> str:
    from ..harness.workloads import suite

    return suite.__doc__ or ""


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
        "through each adapter: tokens/s, step split, loss curves; helios/harness/train/) or decode (that "
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

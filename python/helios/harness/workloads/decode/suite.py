"""`helios suite decode` as a plug-in of the suites' driver (../suites.py): its flags
into a DecodeConfig, its run and its table."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ....optional import require
from ...results.rows import DecodeRow
from ...results.suite_tables import decode_markdown
from ..suites import AdapterChoice, Suite
from . import DECODE_ADAPTERS, LLAMA_ADAPTERS, TINY, DecodeConfig, check_config
from . import __doc__ as decode_doc
from .run import run_decode, torch_or_none


def model_fields(args: Any, fields: dict) -> None:
    """--model, --preset and --checkpoint into fields; ValueError for flags the model
    does not take."""
    fields["model"] = args.model
    if args.model == "gpt":
        given = [f for f, v in (("--preset", args.preset), ("--checkpoint", args.checkpoint),
                                ("--prefill", args.prefill)) if v is not None]  # fmt: skip
        if given:
            raise ValueError(f"{', '.join(given)}: for --model llama; the GPT's shape is --layers, --d-model, ...")
        return
    shape = [f"--{k.replace('_', '-')}" for k in ("layers", "d_model", "heads", "vocab", "train_steps")
             if getattr(args, k) is not None]  # fmt: skip
    if shape or (args.preset and args.checkpoint):
        raise ValueError(f"--model llama: the preset or the checkpoint sets the shape, not {', '.join(shape)}"
                         if shape else "--preset and --checkpoint: one of them")  # fmt: skip
    scaled = args.layers is None and "layers" in fields  # the CPU or --tiny defaults
    for k in ("layers", "d_model", "heads", "vocab", "train_steps"):
        fields.pop(k, None)
    fields["checkpoint"] = args.checkpoint
    fields["preset"] = None if args.checkpoint else args.preset or ("tiny" if scaled else "llama-3.2-1b")
    fields["prefill"] = args.prefill if args.prefill is not None else (16 if scaled else 512)


def configure(args: Any, fields: dict) -> DecodeConfig:
    """The run from `helios suite decode`'s flags. torch trains the GPT and runs every
    adapter but helios_plan: without it, helios_plan alone decodes the initial weights."""
    model_fields(args, fields)
    if fields["adapters"] != ["helios_plan"] or (args.train_steps and args.model == "gpt"):
        require("torch", "helios suite decode (its model is the training suite's torch GPT, trained by torch)")
    elif torch_or_none() is None:
        fields["train_steps"] = 0
        print("helios suite decode: torch is not installed: --adapters helios_plan decodes the model's initial "
              "(random) weights, --train-steps=0 (install 'helios-vulkan[torch]' to train and judge them)",
              file=sys.stderr)  # fmt: skip
    cfg = DecodeConfig(**fields)
    check_config(cfg)
    return cfg


def run(cfg: DecodeConfig, log: Callable[[str], None]) -> dict:
    return run_decode(cfg, log=log)


def adapter_choice(args: Any) -> AdapterChoice:
    choices = LLAMA_ADAPTERS if args.model == "llama" else DECODE_ADAPTERS
    return AdapterChoice(choices, choices, f"decode --model {args.model}")


SUITE = Suite(
    name="decode",
    doc=decode_doc,
    fields={
        k: k
        for k in ("layers", "d_model", "heads", "vocab", "prompt", "new", "contexts", "context_steps", "train_steps")
    },  # fmt: skip
    small=TINY,
    flags=("model", "preset", "checkpoint", "prefill"),
    adapters=adapter_choice,
    configure=configure,
    run=run,
    markdown=decode_markdown,
    row=DecodeRow,
    rejected="decode rejected: an adapter failed or left eager's tokens",
)

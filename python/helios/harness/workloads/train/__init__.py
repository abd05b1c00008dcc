"""`helios suite train`: a GPT-style decoder trained through each adapter on the
same synthetic token stream, from the same initial weights, with the same
batches: tokens/s, the step split, the loss curve and its deviation from torch.

Model: token and position embeddings (the LM head tied to the token embedding),
`layers` pre-LayerNorm blocks of causal multi-head attention and a GELU (tanh)
MLP (4x). Parameters and optimizer state are fp32 (AdamW); every product and the
attention run in bfloat16 with fp32 accumulation (the weights cast per step),
LayerNorm, the residual stream and the loss in fp32: the same arithmetic on
every adapter, so their loss curves are comparable step for step.

Data: a fixed random Markov chain over the vocabulary (from each token four
successors with probabilities 0.6, 0.2, 0.1, 0.1; seeded), so the loss falls from
log(vocab) towards the chain's entropy (~1.1 nats) as the model learns it.

Adapters:
  torch_eager    F.linear and F.scaled_dot_product_attention (cuBLAS, the SDPA
                 backends)
  torch_compile  the same forward through torch.compile
  helios         the whole stack through helios.torch.decoder: every linear
                 (QKV, output projection, MLP up and down, LM head), attention
                 (forward and backward kernels), the layout copies and GELU
                 between them, the LayerNorms and the fp32 residual stream on
                 Helios, the forward one group of Helios submissions and the
                 backward one (one CUDA <-> Vulkan hop pair each; embeddings,
                 the loss, bias/LayerNorm gradient sums and AdamW stay torch); on
                 a machine without CUDA (the --tiny CI run on lavapipe) the same
                 products through helios.Device on host arrays
  helios_blocks  (by name only) a block's attention (helios.torch.self_attention)
                 and its MLP (helios.torch.mlp) each one group per direction,
                 LayerNorm and the residual adds in torch between them
  helios_per_op  (by name only) each linear and the attention a helios.torch op
                 of its own, torch's reshapes and GELU between them: with
                 helios_blocks, what grouping saves
Before timing, each adapter's first step (loss and every gradient) is checked
against torch_eager's; a run with a non-finite loss or gradient fails.
Per adapter: tokens/s (median step after the warm-up steps), forward / backward /
optimizer time (CUDA events; host clock on CPU), the GPU time spent in Helios
kernels per step (helios with CUDA: timestamps around each ordered submission),
how long the forward and backward calls hold the host (a step the GPU waits on
the host for shows it here), peak memory, the loss per step,
gradient norms, and the largest relative deviation of its loss from torch_eager's
at equal steps (after step 20, or after the warm-up steps in shorter runs).
--trace PREFIX also writes a torch.profiler trace of each adapter's last 3 warm-up
steps (CPU ops and every CUDA kernel with its stream; Helios's own Vulkan work is
not in it: it shows as the gap it leaves on torch's stream).

Many GPUs: under `torchrun --nproc_per_node=N` (or Slurm, mpirun: the launcher
variables helios.launcher reads) each rank trains a DistributedDataParallel
replica (NCCL) on its own GPU, its Helios device the Vulkan GPU with that CUDA
device's UUID; rank r takes rows r*batch.. of each global batch of N*batch rows
of the same stream, so the run's loss (all-reduced every step) follows a
single-GPU run with --micro-batch N*batch. Rows then say the world size,
tokens/s in all and per GPU; rank 0 writes the result.

The package: ``config`` (the run's configuration, checks and token stream),
``model`` (the GPT and greedy decoding), ``adapters`` (each adapter's ops),
``ddp`` (many GPUs), ``loop`` (the gated, timed run: ``run_train``, which needs
torch) and ``report`` (the markdown). Importing the package loads no torch.
"""

from __future__ import annotations

from typing import Any, Callable

from ....optional import require
from ...results.rows import TRAIN_SCHEMA, TrainRow
from ..suites import AdapterChoice, Suite
from .config import (
    DDP_COMM_HOOKS,
    DEFAULT_TRAIN_ADAPTERS,
    GRAD_SYNCS,
    TINY,
    TRACE_STEPS,
    TRAIN_ADAPTERS,
    TrainConfig,
    check_config,
    markov_stream,
)
from .report import train_markdown


def configure(args: Any, fields: dict) -> TrainConfig:
    """The run from `helios suite train`'s flags (torch_eager always runs: the reference
    every adapter is compared with)."""
    require("torch", "helios suite train")
    if "torch_eager" not in fields["adapters"]:
        fields["adapters"].insert(0, "torch_eager")
    return TrainConfig(**fields, lr=args.lr)


def run(cfg: TrainConfig, log: Callable[[str], None]) -> dict:
    from .loop import run_train  # torch

    return run_train(cfg, log=log)


SUITE = Suite(
    name="train",
    doc=__doc__ or "",
    fields={
        "layers": "layers",
        "d_model": "d_model",
        "heads": "heads",
        "seq": "seq",
        "batch": "micro_batch",
        "vocab": "vocab",
        "steps": "steps",
        "warmup_steps": "train_warmup",
        "ddp_bucket_mb": "ddp_bucket_mb",
        "grad_sync": "grad_sync",
        "ddp_comm_hook": "ddp_comm_hook",
        "trace": "trace",
    },  # fmt: skip
    small=TINY,
    flags=("lr",),
    adapters=lambda args: AdapterChoice(TRAIN_ADAPTERS, DEFAULT_TRAIN_ADAPTERS, "train"),
    configure=configure,
    run=run,
    markdown=train_markdown,
    row=TrainRow,
    rejected="training rejected: an adapter failed its gate or diverged",
    # each adapter's trace file, checked writable before any training
    outputs=lambda cfg: [(f"{cfg.trace}-{a}-rank0.json", "--trace") for a in cfg.adapters] if cfg.trace else [],
    # under a launcher rank 0 writes the run (every rank holds the all-reduced curves)
    writes_result=lambda result: result.get("distributed", {}).get("rank", 0) == 0,
)

__all__ = [
    "DDP_COMM_HOOKS",
    "DEFAULT_TRAIN_ADAPTERS",
    "SUITE",
    "GRAD_SYNCS",
    "TINY",
    "TRACE_STEPS",
    "TRAIN_ADAPTERS",
    "TRAIN_SCHEMA",
    "TrainConfig",
    "check_config",
    "markov_stream",
    "train_markdown",
]

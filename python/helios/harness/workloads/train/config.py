"""What a `helios suite train` run is: its configuration, the checks made
before any work, and the synthetic token stream it trains on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .... import _helios
from ..suites import SuiteConfig

TRAIN_ADAPTERS = ("torch_eager", "torch_compile", "helios", "helios_plan", "helios_blocks", "helios_per_op")
DEFAULT_TRAIN_ADAPTERS = TRAIN_ADAPTERS[:4]  # helios_blocks, helios_per_op: asked for by name (grouping's comparison)
HELIOS_ADAPTERS = {"helios", "helios_plan", "helios_blocks", "helios_per_op"}
TINY = {"layers": 2, "d_model": 64, "heads": 2, "seq": 32, "batch": 2, "vocab": 96, "steps": 6, "warmup_steps": 2}
GATE_LOSS_RTOL = 0.02  # bf16 products: a first-step loss within 2% of torch's
GATE_GRAD_RTOL = 0.10  # and every gradient within 10% (relative norm of the difference)


@dataclass
class TrainConfig(SuiteConfig):
    layers: int = 8
    d_model: int = 1024
    heads: int = 16
    seq: int = 1024
    batch: int = 8
    vocab: int = 8192
    steps: int = 200
    warmup_steps: int = 10
    lr: float = 3e-4
    # DistributedDataParallel's gradient bucket size in MiB (None: torch's default, 25)
    ddp_bucket_mb: Optional[float] = None
    # how ranks average gradients (GRAD_SYNCS)
    grad_sync: str = "ddp"
    # DistributedDataParallel's communication hook (DDP_COMM_HOOKS)
    ddp_comm_hook: str = "auto"
    # a torch.profiler trace (Chrome JSON) of the last TRACE_STEPS warm-up steps of each
    # adapter, written as {trace}-{adapter}-rank{rank}.json; None: no trace
    trace: Optional[str] = None
    adapters: list[str] = field(default_factory=lambda: list(DEFAULT_TRAIN_ADAPTERS))


# Gradient averaging under a launcher: "ddp" (DistributedDataParallel: all-reduces per
# bucket as gradients become ready), "after-backward" (one all-reduce of every gradient,
# flattened, after loss.backward() returns, on torch's stream), "none" (no averaging: the
# replicas drift apart; for timing what the averaging costs).
GRAD_SYNCS = ("ddp", "after-backward", "none")
# DistributedDataParallel's communication hook (grad_sync "ddp"): "auto" (helios.torch's
# ddp_comm_hook for the Helios adapters, torch's own for the others), "torch" (torch's
# default all-reduce hook, every adapter), "helios" (helios.torch.ddp_comm_hook, every
# adapter: each all-reduce ordered on torch's stream), "none" (a hook that sends nothing:
# DDP's buckets, copies and hooks without collectives; the replicas drift apart).
DDP_COMM_HOOKS = ("auto", "torch", "helios", "none")

MAX_HEAD_DIM = _helios.ATTENTION_MAX_HEAD_DIM  # the attention kernels' limit (helios_core.h)
TRACE_STEPS = 3  # warm-up steps a --trace records (the last ones: pipelines and caches warm)


def check_config(cfg: TrainConfig, max_buffer_bytes: Optional[int] = None) -> None:
    """ValueError naming the problem before any work: heads that do not split d_model,
    a head dimension the attention kernels do not take, warm-up steps that leave none
    timed, and (max_buffer_bytes: the Helios device's per-buffer limit) an attention
    operand, MLP activation or logits tensor larger than one buffer."""
    for name in ("layers", "d_model", "heads", "seq", "batch", "steps"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"train: {name} {getattr(cfg, name)}: must be at least 1")
    if cfg.vocab < 4:  # each token of the Markov stream has four distinct successors
        raise ValueError(f"train: vocab {cfg.vocab}: the token stream gives every token 4 successors: vocab >= 4")
    if cfg.d_model % cfg.heads:
        raise ValueError(
            f"train: d_model {cfg.d_model} is not a multiple of heads {cfg.heads}: heads x head_dim must equal d_model"
        )
    hd = cfg.d_model // cfg.heads
    if hd > MAX_HEAD_DIM:
        raise ValueError(
            f"train: head_dim {hd} (d_model {cfg.d_model} / heads {cfg.heads}) exceeds the attention "
            f"kernels' {MAX_HEAD_DIM}"
        )
    if cfg.grad_sync not in GRAD_SYNCS:
        raise ValueError(f"train: grad_sync {cfg.grad_sync!r}: choose from {', '.join(GRAD_SYNCS)}")
    if cfg.ddp_comm_hook not in DDP_COMM_HOOKS:
        raise ValueError(f"train: ddp_comm_hook {cfg.ddp_comm_hook!r}: choose from {', '.join(DDP_COMM_HOOKS)}")
    if cfg.trace is not None and cfg.warmup_steps < 1:
        raise ValueError("train: --trace records warm-up steps (never timed ones): give --train-warmup >= 1")
    if cfg.warmup_steps >= cfg.steps:
        raise ValueError(f"train: {cfg.warmup_steps} warm-up steps leave none of the {cfg.steps} steps to time")
    if max_buffer_bytes is None:
        return
    tokens = cfg.batch * cfg.seq
    for what, n in (
        (
            f"an attention operand (batch {cfg.batch} x heads {cfg.heads} x seq {cfg.seq} x head_dim {hd})",
            tokens * cfg.d_model,
        ),
        (f"the MLP activation (batch x seq {tokens} x 4 d_model {4 * cfg.d_model})", tokens * 4 * cfg.d_model),
        (f"the logits (batch x seq {tokens} x vocab {cfg.vocab})", tokens * cfg.vocab),
    ):
        if 2 * n > max_buffer_bytes:
            raise ValueError(
                f"train: {what} spans {2 * n} bytes in bfloat16; the Helios device allows {max_buffer_bytes} per "
                f"buffer: lower seq, batch or vocab"
            )


def markov_stream(vocab: int, chains: int, length: int, seed: int) -> np.ndarray:
    """`chains` token sequences of `length` from one seeded random Markov chain."""
    rng = np.random.default_rng(seed)
    succ = np.stack([rng.choice(vocab, size=4, replace=False) for _ in range(vocab)])  # successors of each token
    probs = np.cumsum([0.6, 0.2, 0.1, 0.1])
    out = np.empty((chains, length), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, size=chains)
    for t in range(1, length):
        pick = np.searchsorted(probs, rng.random(chains), side="right").clip(max=3)
        out[:, t] = succ[out[:, t - 1], pick]
    return out

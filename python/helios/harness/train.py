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
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from .. import _helios
from ..launcher import launcher_info
from .results import provenance

TRAIN_SCHEMA = "helios-train/1"
TRAIN_ADAPTERS = ("torch_eager", "torch_compile", "helios", "helios_blocks", "helios_per_op")
DEFAULT_TRAIN_ADAPTERS = TRAIN_ADAPTERS[:3]  # helios_blocks, helios_per_op: asked for by name (grouping's comparison)
HELIOS_ADAPTERS = {"helios", "helios_blocks", "helios_per_op"}
TINY = {"layers": 2, "d_model": 64, "heads": 2, "seq": 32, "batch": 2, "vocab": 96, "steps": 6, "warmup_steps": 2}
GATE_LOSS_RTOL = 0.02  # bf16 products: a first-step loss within 2% of torch's
GATE_GRAD_RTOL = 0.10  # and every gradient within 10% (relative norm of the difference)


@dataclass
class TrainConfig:
    layers: int = 8
    d_model: int = 1024
    heads: int = 16
    seq: int = 1024
    batch: int = 8
    vocab: int = 8192
    steps: int = 200
    warmup_steps: int = 10
    lr: float = 3e-4
    seed: int = 0
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
    command: list[str] = field(default_factory=list)


# Gradient averaging under a launcher: "ddp" (DistributedDataParallel: all-reduces per
# bucket as gradients become ready), "after-backward" (one all-reduce of every gradient,
# flattened, after loss.backward() returns, on torch's stream), "none" (no averaging: the
# replicas drift apart; for timing what the averaging costs).
GRAD_SYNCS = ("ddp", "after-backward", "none")
GRAD_SYNC_WORDS = {
    "ddp": "DistributedDataParallel",
    "after-backward": "one all-reduce of the gradients after the backward",
    "none": "no gradient averaging (the replicas drift apart)",
}
# DistributedDataParallel's communication hook (grad_sync "ddp"): "auto" (helios.torch's
# ddp_comm_hook for the Helios adapters, torch's own for the others), "torch" (torch's
# default all-reduce hook, every adapter), "helios" (helios.torch.ddp_comm_hook, every
# adapter: each all-reduce ordered on torch's stream), "none" (a hook that sends nothing:
# DDP's buckets, copies and hooks without collectives; the replicas drift apart).
DDP_COMM_HOOKS = ("auto", "torch", "helios", "none")

MAX_HEAD_DIM = 256  # the attention kernels' limit (csrc/core/attention.c)


def check_config(cfg: TrainConfig, max_buffer_bytes: Optional[int] = None) -> None:
    """ValueError naming the problem before any work: heads that do not split d_model,
    a head dimension the attention kernels do not take, warm-up steps that leave none
    timed, and (max_buffer_bytes: the Helios device's per-buffer limit) an attention
    operand, MLP activation or logits tensor larger than one buffer."""
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


def build(torch: Any) -> tuple:
    """The model and the two kinds of ops (torch, Helios) as torch modules/functions."""
    import torch.nn as nn
    import torch.nn.functional as F

    bf16 = torch.bfloat16

    class ComposedOps:
        """A block's attention and MLP composed from the adapter's linear and attention
        ops (torch's reshapes and activation between them)."""

        linear: Callable[..., Any]  # each adapter's own (TorchOps, HeliosOps, ...)
        attention: Callable[..., Any]

        def attention_block(self, blk, h, cache=None):
            """Self-attention of the normalised input h (B, S, D), projected; cache: the
            block's [K, V] of earlier positions (decoding), filled in place."""
            b, t, d = h.shape
            qkv = self.linear(h, blk.qkv.weight, blk.qkv.bias)
            q, k, v = qkv.reshape(b, t, 3, blk.heads, d // blk.heads).permute(2, 0, 3, 1, 4)
            causal = True
            if cache is not None:
                if cache:  # a new position attends every cached one and itself: no mask needed
                    k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
                    causal = t > 1
                cache[:] = [k, v]
            a = self.attention(q, k, v, causal=causal).transpose(1, 2).reshape(b, t, d)
            return self.linear(a, blk.proj.weight, blk.proj.bias)

        def mlp_block(self, blk, h):
            return self.linear(self.linear(h, blk.up.weight, blk.up.bias, act=True), blk.down.weight, blk.down.bias)

        def stack(self, model, x):
            """The blocks, the final LayerNorm and the tied LM head on the stream x: fp32 logits."""
            for blk in model.blocks:
                x = blk(x, self)
            return self.linear(model.lnf(x), model.tok.weight).float()

    class TorchOps(ComposedOps):
        name = "torch"

        def linear(self, x, w, b=None, act=None):
            y = F.linear(x.to(bf16), w.to(bf16), None if b is None else b.to(bf16))
            return F.gelu(y, approximate="tanh") if act else y

        def attention(self, q, k, v, causal=True):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    class HeliosPerOpOps(ComposedOps):
        """Each linear and the attention a helios.torch op of its own (one CUDA <->
        Vulkan hop pair each way per op)."""

        name = "helios per op"

        def __init__(self) -> None:
            from .. import torch as ht

            self.ht = ht

        def linear(self, x, w, b=None, act=None):
            lead = x.shape[:-1]
            y = self.ht.linear(
                x.reshape(-1, x.shape[-1]).to(bf16).contiguous(),
                w.to(bf16).contiguous(),
                None if b is None else b.to(bf16),
                activation="gelu_tanh" if act else None,
            )
            return y.reshape(*lead, w.shape[0])

        def attention(self, q, k, v, causal=True):
            return self.ht.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=causal)

    class HeliosBlockOps(HeliosPerOpOps):
        """A block's attention (QKV product, heads, attention, projection) and its MLP
        each one helios.torch op, one group of Helios submissions per direction
        (helios.torch.self_attention, helios.torch.mlp); decoding with a KV cache and
        the LM head go op by op."""

        name = "helios blocks"

        def attention_block(self, blk, h, cache=None):
            if cache is not None:
                return super().attention_block(blk, h, cache)
            return self.ht.self_attention(
                h.to(bf16).contiguous(),
                blk.qkv.weight.to(bf16),
                blk.qkv.bias.to(bf16),
                blk.proj.weight.to(bf16),
                blk.proj.bias.to(bf16),
                blk.heads,
                causal=True,
            )

        def mlp_block(self, blk, h):
            return self.ht.mlp(
                h.to(bf16).contiguous(),
                blk.up.weight.to(bf16),
                blk.up.bias.to(bf16),
                blk.down.weight.to(bf16),
                blk.down.bias.to(bf16),
                activation="gelu_tanh",
            )

    class HeliosOps(HeliosBlockOps):
        """The whole stack (every block, the final LayerNorm, the LM head) one
        helios.torch.decoder op: one group of Helios submissions per direction, the
        residual stream and LayerNorms on the device too; decoding with a KV cache
        goes block by block (HeliosBlockOps). The fp32 master weights go to the
        decoder as they are (compute_dtype=bf16: it casts them inside its own
        autograd function); fused_casts = False casts them here with a .to() each
        (65 autograd nodes, ~1.2 ms of host time before the first Helios op), for an
        A/B."""

        name = "helios"
        pool = None  # the memory_pool the weight casts go in (made on first use)
        fused_casts = True

        def _casts(self):
            """Where the bf16 weight casts are allocated: inside helios.torch.memory_pool()
            Helios reads them in place (no staging copy, forward or backward)."""
            if self.pool is None:
                try:
                    self.pool = self.ht.memory_pool()
                except Exception:  # no VMM export here: the casts are copied in, as any torch tensor
                    self.pool = contextlib.nullcontext()
            return self.pool

        def stack(self, model, x):
            cast_in = [
                t for b in model.blocks for lin in (b.qkv, b.proj, b.up, b.down) for t in (lin.weight, lin.bias)
            ] + [model.tok.weight]
            if self.fused_casts:
                cast = cast_in  # the decoder casts them (compute_dtype)
            else:
                with self._casts():
                    cast = [t.to(bf16) for t in cast_in]
            layers = [
                (
                    b.ln1.weight,
                    b.ln1.bias,
                    *cast[8 * i : 8 * i + 4],
                    b.ln2.weight,
                    b.ln2.bias,
                    *cast[8 * i + 4 : 8 * i + 8],
                )
                for i, b in enumerate(model.blocks)
            ]
            head = cast[-1]
            return self.ht.decoder(
                x,
                layers,
                model.blocks[0].heads,
                (model.lnf.weight, model.lnf.bias),
                head,
                eps=model.lnf.eps,
                compute_dtype=bf16,
            ).float()

    class HostOps(ComposedOps):
        """Helios on a machine without CUDA (the --tiny CI run on lavapipe): the same
        products through helios.Device on host arrays (forward and both gradients),
        attention forward and backward on Helios (the backward from the forward's
        output and log-sum-exp)."""

        name = "helios (host arrays)"

        def __init__(self) -> None:
            from ..device import default_device

            self.dev = default_device()
            dev = self.dev

            def np16(t):
                from ..dtypes import bfloat16

                return t.detach().to(bf16).contiguous().view(torch.int16).numpy().view(bfloat16)

            def back(a):
                return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(bf16)

            class Linear(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, w, b):
                    ctx.save_for_backward(x, w)
                    ctx.has_bias = b is not None
                    bias = None if b is None else b.detach().float().numpy()
                    return back(dev.matmul(np16(x), np16(w), trans_b=True, bias=bias))

                @staticmethod
                def backward(ctx, g):
                    x, w = ctx.saved_tensors
                    gx = back(dev.matmul(np16(g), np16(w)))
                    gw = back(dev.matmul(np16(g), np16(x), trans_a=True))
                    gb = g.float().sum(0).to(bf16) if ctx.has_bias else None
                    return gx, gw, gb

            class Attention(torch.autograd.Function):
                @staticmethod
                def forward(ctx, q, k, v, causal):
                    ctx.causal = causal
                    o, lse = dev.attention(np16(q), np16(k), np16(v), causal=causal, return_lse=True)
                    ctx.saved = (q, k, v, o, lse)
                    return back(o)

                @staticmethod
                def backward(ctx, g):
                    q, k, v, o, lse = ctx.saved
                    grads = dev.attention_backward(np16(q), np16(k), np16(v), o, np16(g), lse, causal=ctx.causal)
                    return (*(back(x) for x in grads), None)

            self._linear, self._attention = Linear, Attention

        def linear(self, x, w, b=None, act=None):
            lead = x.shape[:-1]
            y = self._linear.apply(
                x.reshape(-1, x.shape[-1]).to(bf16), w.to(bf16), None if b is None else b.to(bf16)
            ).reshape(*lead, w.shape[0])
            return F.gelu(y, approximate="tanh") if act else y

        def attention(self, q, k, v, causal=True):
            return self._attention.apply(q.to(bf16), k.to(bf16), v.to(bf16), causal)

    class Block(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, ops, cache=None):
            """cache: this block's [K, V] of earlier positions (decoding), filled in place."""
            x = x + ops.attention_block(self, self.ln1(x), cache).float()
            return x + ops.mlp_block(self, self.ln2(x)).float()

    class GPT(nn.Module):
        def __init__(self, cfg: TrainConfig) -> None:
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
            self.pos = nn.Embedding(cfg.seq, cfg.d_model)
            self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.heads) for _ in range(cfg.layers))
            self.lnf = nn.LayerNorm(cfg.d_model)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, std=0.02)
                elif not name.endswith("weight"):  # biases 0; LayerNorm weights stay 1
                    nn.init.zeros_(p)

        def forward(self, idx, targets, ops):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            logits = ops.stack(self, x)  # the blocks, the final LayerNorm, the LM head (tied)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

        @torch.no_grad()
        def last_logits(self, idx, start, ops, caches):
            """Logits of the last position of idx (positions start...), with KV caches."""
            x = self.tok(idx) + self.pos(torch.arange(start, start + idx.shape[1], device=idx.device))
            for blk, cache in zip(self.blocks, caches):
                x = blk(x, ops, cache)
            return ops.linear(self.lnf(x[:, -1:]), self.tok.weight).float()[:, -1]

    return GPT, TorchOps, HeliosOps, HeliosBlockOps, HeliosPerOpOps, HostOps


def greedy(model: Any, ops: Any, prompt: Any, new: int) -> tuple[list[int], list[Any]]:
    """Greedy decoding with a KV cache: the new tokens and each step's logits."""
    caches: list = [[] for _ in model.blocks]
    logits = model.last_logits(prompt, 0, ops, caches)
    out, steps = [], [logits]
    pos = prompt.shape[1]
    for _ in range(new):
        tok = int(logits.argmax(-1)[0])
        out.append(tok)
        if len(out) == new:
            break
        logits = model.last_logits(prompt.new_tensor([[tok]]), pos, ops, caches)
        steps.append(logits)
        pos += 1
    return out, steps


def inference_smoke(cfg: TrainConfig, model: Any, torch_ops: Any, helios_ops: Any, data: Any, cuda: bool) -> dict:
    """Greedy decoding of 3 fixed prompts from the trained weights with Helios ops
    and with torch's: the tokens, the first divergence with torch's logits margin
    there (top-1 minus top-2), and decode tokens/s for both."""
    import torch

    new = min(64, cfg.seq // 2)
    plen = min(16, cfg.seq - new)
    prompts = [data[i, :plen].unsqueeze(0) for i in (0, 1, 2)]
    res: dict = {"new_tokens": new, "prompt_tokens": plen, "prompts": []}
    rates: dict = {"torch": [], "helios": []}
    for pr in prompts:
        entry: dict = {"prompt": [int(x) for x in pr[0]]}
        for name, ops in (("torch", torch_ops), ("helios", helios_ops)):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            toks, logits = greedy(model, ops, pr, new)
            if cuda:
                torch.cuda.synchronize()
            rates[name].append(new / (time.perf_counter() - t0))
            entry[name] = toks
            entry[f"{name}_logits"] = logits
        div = next((i for i, (a, b) in enumerate(zip(entry["torch"], entry["helios"])) if a != b), None)
        entry["first_divergence"] = div
        if div is not None:
            row = entry["torch_logits"][div][0].float()
            top = row.topk(2).values
            entry["torch_margin_at_divergence"] = float(top[0] - top[1])
            # torch's own logits for its pick and Helios's: a tie where they are within
            # one bfloat16 step of each other (the logits are rounded to bf16), where
            # either pick is the greedy token
            gap = float(row[entry["torch"][div]] - row[entry["helios"][div]])
            entry["torch_margin_to_helios_pick"] = gap
            entry["tie_at_divergence"] = gap <= abs(float(top[0])) * 2.0**-7
        del entry["torch_logits"], entry["helios_logits"]
        res["prompts"].append(entry)
    res["same_tokens"] = all(e["first_divergence"] is None for e in res["prompts"])
    res["same_tokens_up_to_ties"] = all(e["first_divergence"] is None or e["tie_at_divergence"] for e in res["prompts"])
    res["decode_tokens_per_s"] = {k: float(np.median(v)) for k, v in rates.items()}
    return res


def _grads(model: Any) -> dict:
    return {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}


def distributed_rank() -> Optional[tuple[int, int, int]]:
    """(rank, world size, local rank) under a launcher with more than one process, the
    NCCL process group initialised and this rank's CUDA device set; None otherwise."""
    info = launcher_info()
    if info is None or (info.get("world_size") or 1) <= 1:
        return None
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        raise RuntimeError("helios suite train under a launcher runs DistributedDataParallel over NCCL: it needs CUDA")
    torch.cuda.set_device(info["local_rank"])
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", info["local_rank"]))
    return dist.get_rank(), dist.get_world_size(), info["local_rank"]


def run_train(cfg: TrainConfig, log: Callable[[str], None] = lambda s: None) -> dict:
    import torch

    check_config(cfg)
    ddp = distributed_rank()
    rank, world, local = ddp if ddp else (0, 1, 0)
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if HELIOS_ADAPTERS & set(cfg.adapters):
        # the buffer limit of the Helios device this rank's ops run on: with CUDA the one
        # with its CUDA device's UUID (helios.torch's), not a launcher's guess by index
        from ..device import default_device

        hdev = None
        if cuda:
            from ..torch import device_for

            try:
                hdev = device_for(torch.empty(0, device=dev))
            except _helios.UnsupportedError:
                pass  # no Vulkan twin: the helios rows will say so
        check_config(cfg, int((hdev or default_device()).info["max_storage_buffer_range"]))
    result: dict = {"schema": TRAIN_SCHEMA, "status": "ok", **provenance(), "config": asdict(cfg), "rows": []}
    # torch's products as Helios computes them: fp32 accumulation with no reduced-precision
    # (bf16/fp16) split-K reductions and no TF32 (the bench's rule), so that the loss
    # curves differ by the kernels' rounding only
    result["numerics"] = lock_numerics(torch)
    GPT, TorchOps, HeliosOps, HeliosBlockOps, HeliosPerOpOps, HostOps = build(torch)
    trained: Optional[Any] = None
    result["device"] = torch.cuda.get_device_name(dev) if cuda else "cpu (no CUDA: the --tiny CI run)"
    result["distributed"] = {
        "world_size": world,
        "rank": rank,
        "backend": "nccl" if ddp else None,
        "grad_sync": cfg.grad_sync if ddp else None,
        # the CPUs this process may run on (NCCL and launchers may narrow it)
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    rows_per_step = cfg.batch * world  # the global batch
    data = torch.from_numpy(markov_stream(cfg.vocab, rows_per_step * cfg.steps, cfg.seq + 1, cfg.seed)).to(dev)
    torch.manual_seed(cfg.seed)
    init = GPT(cfg).to(dev)  # the same initial weights for every adapter
    state0 = {k: v.clone() for k, v in init.state_dict().items()}

    def batch(step: int) -> tuple:
        first = step * rows_per_step + rank * cfg.batch
        rows = data[first : first + cfg.batch]
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()

    def fresh() -> Any:
        m = GPT(cfg).to(dev)
        m.load_state_dict(state0)
        return m

    # The reference first step (torch_eager) every adapter is gated against.
    ref_model = fresh()
    x0, y0 = batch(0)
    ref_loss = ref_model(x0, y0, TorchOps())
    ref_loss.backward()
    ref_grads, ref_loss_v = _grads(ref_model), float(ref_loss.detach())
    eager_curve: Optional[list] = None
    for adapter in cfg.adapters:
        row: dict = {"adapter": adapter}
        result["rows"].append(row)
        tracer: Optional[_Tracer] = None
        try:
            if adapter in HELIOS_ADAPTERS and not cuda:
                ops = HostOps()
            else:
                ops = {"helios": HeliosOps, "helios_blocks": HeliosBlockOps, "helios_per_op": HeliosPerOpOps}.get(
                    adapter, TorchOps
                )()
            row["ops"] = ops.name
            model = fresh()
            fwd = model
            if adapter == "torch_compile":
                fwd = torch.compile(model)
            # gate: the first step against torch_eager's
            loss = fwd(x0, y0, ops)
            loss.backward()
            g = _grads(model)
            worst = max(float((g[n] - ref_grads[n]).norm() / (ref_grads[n].norm() + 1e-12)) for n in ref_grads)
            loss_err = abs(float(loss.detach()) - ref_loss_v) / abs(ref_loss_v)
            finite = all(bool(torch.isfinite(t).all()) for t in g.values()) and math.isfinite(float(loss.detach()))
            row["gate"] = {
                "loss": float(loss.detach()),
                "loss_rel_err": loss_err,
                "worst_grad_rel_err": worst,
                "finite": finite,
                "loss_rtol": GATE_LOSS_RTOL,
                "grad_rtol": GATE_GRAD_RTOL,
                "passed": finite and loss_err <= GATE_LOSS_RTOL and worst <= GATE_GRAD_RTOL,
            }
            if not row["gate"]["passed"]:
                row["status"] = "gate failed"
                result["status"] = "failed"
                continue
            model.zero_grad(set_to_none=True)
            model.load_state_dict(state0)
            if ddp and cfg.grad_sync == "ddp":  # the gate above ran the replica alone
                fwd = wrap_ddp(torch, model, cfg, [local], adapter)
                row["ddp_comm_hook"] = comm_hook_for(cfg, adapter)
                if adapter == "torch_compile":
                    fwd = torch.compile(fwd)
            opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            # Helios's GPU time per step: the timestamps around each ordered submission
            # (the semaphore path helios.torch takes with CUDA; None elsewhere)
            hdev = _ordered_helios_device(x0) if adapter in HELIOS_ADAPTERS and cuda else None
            losses, norms, fwd_ms, bwd_ms, opt_ms, step_ms, helios_ms = [], [], [], [], [], [], []
            host_fwd_ms, host_bwd_ms = [], []  # how long the forward and backward calls hold the host
            tracer = _Tracer(torch, cuda, cfg, adapter, rank)
            for step in range(cfg.steps):
                tracer.before(step)
                h0 = hdev.telemetry()["async_gpu_ms"] if hdev else 0.0
                xb, yb = batch(step)
                marks = _marks(torch, cuda, 4)
                _mark(torch, cuda, marks, 0)
                t0 = time.perf_counter()
                loss = fwd(xb, yb, ops)
                t1 = time.perf_counter()
                _mark(torch, cuda, marks, 1)
                loss.backward()
                if ddp and cfg.grad_sync == "after-backward":
                    _average_grads(torch, model, world)
                t2 = time.perf_counter()
                _mark(torch, cuda, marks, 2)
                host_fwd_ms.append((t1 - t0) * 1e3)
                host_bwd_ms.append((t2 - t1) * 1e3)
                norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
                opt.step()
                opt.zero_grad(set_to_none=True)
                _mark(torch, cuda, marks, 3)
                losses.append(loss.detach())
                f, b, o = _spans(torch, cuda, marks)
                fwd_ms.append(f)
                bwd_ms.append(b)
                opt_ms.append(o)
                step_ms.append(f + b + o)
                if hdev:
                    helios_ms.append(hdev.telemetry()["async_gpu_ms"] - h0)
                tracer.after(step)
                if step % 10 == 0 or step == cfg.steps - 1:
                    log(f"{adapter} step {step}: loss {float(loss.detach()):.4f}")
            stacked = torch.stack(losses).float()
            if ddp:  # the global batch's loss: the mean of the ranks' (equal micro-batches)
                torch.distributed.all_reduce(stacked)
                stacked /= world
            curve = [float(v) for v in stacked]
            gnorms = [float(v) for v in norms]
            timed = step_ms[cfg.warmup_steps :] or step_ms
            med = float(np.median(timed))
            row.update(
                status="ok" if all(map(math.isfinite, curve + gnorms)) else "non-finite",
                tokens_per_s=world * cfg.batch * cfg.seq / (med / 1e3),
                tokens_per_s_per_gpu=cfg.batch * cfg.seq / (med / 1e3),
                step_ms_p50=med,
                forward_ms_p50=float(np.median(fwd_ms[cfg.warmup_steps :] or fwd_ms)),
                backward_ms_p50=float(np.median(bwd_ms[cfg.warmup_steps :] or bwd_ms)),
                optimizer_ms_p50=float(np.median(opt_ms[cfg.warmup_steps :] or opt_ms)),
                helios_kernel_ms_p50=float(np.median(helios_ms[cfg.warmup_steps :] or helios_ms))
                if helios_ms
                else None,
                host_forward_ms_p50=float(np.median(host_fwd_ms[cfg.warmup_steps :] or host_fwd_ms)),
                host_backward_ms_p50=float(np.median(host_bwd_ms[cfg.warmup_steps :] or host_bwd_ms)),
                peak_memory_bytes=int(torch.cuda.max_memory_allocated()) if cuda else None,
                loss=curve,
                grad_norm=gnorms,
            )
            if row["status"] != "ok":
                result["status"] = "failed"
            if adapter == "torch_eager":
                eager_curve = curve
                trained = model
            elif eager_curve is not None:
                start = 20 if cfg.steps > 40 else cfg.warmup_steps
                devs = [abs(a - b) / abs(b) for a, b in zip(curve[start:], eager_curve[start:])]
                row["loss_max_rel_dev_vs_eager"] = max(devs) if devs else None
        except Exception as e:  # an adapter that cannot run here: said in its row, the others go on
            if tracer is not None:
                tracer.abandon()
            row["status"] = f"error: {type(e).__name__}: {str(e)[:300]}"
            if adapter == "torch_eager":
                result["status"] = "failed"
    if trained is not None and "helios" in cfg.adapters:
        try:
            hops = HeliosOps() if cuda else HostOps()
            result["inference"] = inference_smoke(cfg, trained, TorchOps(), hops, data, cuda)
            log(f"inference: same tokens {result['inference']['same_tokens']}")
        except Exception as e:  # reported, not fatal: training results stand
            result["inference"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    if ddp:
        torch.distributed.destroy_process_group()
    return result


def lock_numerics(torch: Any) -> dict:
    """Sets and returns the torch matmul settings every adapter trains under."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    return {
        "allow_tf32": False,
        "allow_bf16_reduced_precision_reduction": False,
        "allow_fp16_reduced_precision_reduction": False,
    }


def _ordered_helios_device(t: Any) -> Optional[Any]:
    """The Helios device helios.torch runs t's ops on, where they are ordered with
    CUDA through the shared semaphore (each submission timed on the GPU); else None."""
    from .. import torch as ht

    return ht.device_for(t) if ht.ordering(t) == "semaphore" else None


TRACE_STEPS = 3  # warm-up steps a --trace records (the last ones: pipelines and caches warm)


class _Tracer:
    """--trace: torch.profiler (CPU and, with CUDA, every kernel with its stream and GPU
    time) over the last TRACE_STEPS warm-up steps, so that no timed step carries its
    overhead; written as Chrome trace JSON when they end (Perfetto, chrome://tracing)."""

    def __init__(self, torch: Any, cuda: bool, cfg: TrainConfig, adapter: str, rank: int) -> None:
        self.torch, self.cuda = torch, cuda
        self.prof: Any = None
        self.first = max(0, cfg.warmup_steps - TRACE_STEPS)
        self.last = cfg.warmup_steps - 1
        self.path = f"{cfg.trace}-{adapter}-rank{rank}.json" if cfg.trace is not None else None

    def before(self, step: int) -> None:
        if self.path is not None and step == self.first:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            self.prof = profile(activities=acts)
            self.prof.start()

    def after(self, step: int) -> None:
        if self.prof is not None and step == self.last:
            if self.cuda:
                self.torch.cuda.synchronize()
            self.prof.stop()
            self.prof.export_chrome_trace(self.path)
            self.prof = None

    def abandon(self) -> None:
        """Stop a trace the adapter's failure cut short (nothing written)."""
        if self.prof is not None:
            self.prof.stop()
            self.prof = None


def comm_hook_for(cfg: TrainConfig, adapter: str) -> str:
    """The DDP communication hook an adapter trains with: "torch", "helios" or "none"."""
    if cfg.ddp_comm_hook != "auto":
        return cfg.ddp_comm_hook
    return "helios" if adapter in HELIOS_ADAPTERS else "torch"


def wrap_ddp(torch: Any, model: Any, cfg: TrainConfig, device_ids: Optional[list], adapter: str) -> Any:
    """The model in DistributedDataParallel with cfg's bucket size and the adapter's
    communication hook (comm_hook_for): torch's default, helios.torch.ddp_comm_hook, or
    one that hands each bucket back as it is (no collective is launched)."""
    from torch.nn.parallel import DistributedDataParallel

    kw: dict[str, Any] = {} if cfg.ddp_bucket_mb is None else {"bucket_cap_mb": cfg.ddp_bucket_mb}
    wrapped = DistributedDataParallel(model, device_ids=device_ids, **kw)
    hook = comm_hook_for(cfg, adapter)
    if hook == "helios":
        from ..torch import ddp_comm_hook

        wrapped.register_comm_hook(None, ddp_comm_hook)
    elif hook == "none":
        wrapped.register_comm_hook(None, _keep_bucket)
    return wrapped


# Unannotated: register_comm_hook compares annotations with its own classes (PEP 563
# makes these strings).
def _keep_bucket(state, bucket):
    import torch

    fut: Any = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def _average_grads(torch: Any, model: Any, world: int) -> None:
    """Every gradient averaged over the ranks with one all-reduce of them all, flattened."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat.div_(world)
    torch._foreach_copy_(grads, [f.view_as(g) for f, g in zip(flat.split([g.numel() for g in grads]), grads)])


def _marks(torch: Any, cuda: bool, n: int) -> list:
    return [torch.cuda.Event(enable_timing=True) for _ in range(n)] if cuda else [0.0] * n


def _mark(torch: Any, cuda: bool, marks: list, i: int) -> None:
    if cuda:
        marks[i].record()
    else:
        marks[i] = time.perf_counter()


def _spans(torch: Any, cuda: bool, marks: list) -> tuple:
    if cuda:
        marks[-1].synchronize()
        return tuple(marks[i].elapsed_time(marks[i + 1]) for i in range(3))
    return tuple((marks[i + 1] - marks[i]) * 1e3 for i in range(3))


def train_markdown(result: dict) -> str:
    c = result["config"]
    lines = [
        f"Training through each adapter on {result.get('device')}: {c['layers']} layers, d={c['d_model']}, "
        f"{c['heads']} heads, seq {c['seq']}, batch {c['batch']}, vocab {c['vocab']}, {c['steps']} steps "
        f"(bf16 products, fp32 master weights, AdamW)"
        + (
            f"; {world} GPUs, {GRAD_SYNC_WORDS[result['distributed'].get('grad_sync') or 'ddp']} over NCCL, "
            f"global batch {world * c['batch']}"
            + (
                "; comm hooks: " + ", ".join(f"{r['adapter']} {r['ddp_comm_hook']}" for r in hooked)
                if (hooked := [r for r in result["rows"] if r.get("ddp_comm_hook")])
                else ""
            )
            if (world := result.get("distributed", {}).get("world_size", 1)) > 1
            else ""
        ),
        "",
        "| adapter | status | tokens/s | per GPU | step ms | fwd / bwd / opt ms | Helios GPU spans | first loss | "
        "last loss | max dev vs eager | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if "loss" not in r:
            lines.append(f"| {r['adapter']} | {r.get('status')} | - | - | - | - | - | - | - | - | - |")
            continue
        hk = r.get("helios_kernel_ms_p50")
        share = f"{hk:.3f} ms ({hk / r['step_ms_p50'] * 100:.0f}%)" if hk is not None else "-"
        dev = r.get("loss_max_rel_dev_vs_eager")
        peak = r.get("peak_memory_bytes")
        lines.append(
            f"| {r['adapter']} | {r['status']} | {r['tokens_per_s']:.0f} | "
            f"{r.get('tokens_per_s_per_gpu', r['tokens_per_s']):.0f} | {r['step_ms_p50']:.3f} | "
            f"{r['forward_ms_p50']:.3f} / {r['backward_ms_p50']:.3f} / {r['optimizer_ms_p50']:.3f} | {share} | "
            f"{r['loss'][0]:.4f} | {r['loss'][-1]:.4f} | {'-' if dev is None else f'{dev * 100:.2f}%'} | "
            f"{'-' if peak is None else f'{peak / 2**20:.0f}'} |"
        )
    inf = result.get("inference")
    if inf and "prompts" in inf:
        divs = [e["first_divergence"] for e in inf["prompts"]]
        rates = inf["decode_tokens_per_s"]
        lines += [
            "",
            f"Inference smoke (greedy, KV cache, {inf['new_tokens']} new tokens from each of 3 prompts, the "
            f"torch_eager-trained weights): same tokens: {inf['same_tokens']} (first divergence per prompt: "
            f"{divs}{'; each at a tie of torch logits' if not inf['same_tokens'] and inf.get('same_tokens_up_to_ties') else ''}"
            f"); decode tokens/s torch {rates['torch']:.0f}, helios {rates['helios']:.0f}",
        ]
    elif inf:
        lines += ["", f"Inference smoke: {inf.get('error')}"]
    if any(r.get("helios_kernel_ms_p50") is not None for r in result["rows"]):
        lines += [
            "",
            "Helios GPU spans: the step's ordered Helios submissions, timestamp to timestamp, summed (p50 "
            "over the timed steps) and as a share of the step. Each span also holds the GPU's switches "
            "between the CUDA and the Vulkan context and any CUDA work time-sliced into it: an upper "
            "bound on the time in Helios kernels, not its measure.",
        ]
    return "\n".join(lines) + "\n"

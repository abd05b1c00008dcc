"""`helios suite decode`: the training suite's GPT decoding greedily at batch 1,
one table for every way to run its step on the same GPU.

Model: the training suite's decoder (helios/harness/workloads/train/model.py), its weights
from a short torch training run on the suite's Markov token stream (--train-steps;
0 keeps the initial weights: random, where only speed is asked). Products and
attention in bfloat16 with fp32 accumulation, LayerNorm and the residual stream in
fp32, as the training suite computes them.

Greedy run: a prompt of --prompt tokens from the stream, then --new tokens, each
fed back; run twice per adapter (the first warms pipelines, graphs and caches), the
second timed and compared with torch_eager's tokens: a first divergence counts as a
tie where torch's logits for its pick and the adapter's are within one bfloat16 step
(the training suite's rule; a Llama model also where the model in float32 separates the
two picks by less than eager's own error on them). Context sweep: for each --contexts length L the cache
is filled to L tokens and the steps to be timed run once untimed (a first step at a
new key length costs more: torch's cuDNN attention builds a plan per length); the
cache is filled again, 4 steps run untimed, then --context-steps steps are timed, the
positions the greedy run's rule would time after its own untimed pass.

Columns: tokens/s and ms/token p50 and p95 (the host clock around each step, its GPU
work waited for), host ms/token (what launching a step costs the CPU, where the
adapter can tell), GPU ms/token (timestamps or CUDA events around the step), the
step's bytes (16-bit weights, and K and V of every cached position) over its time as
a percent of the memory roof (a 1 GiB read timed with CUDA events in the same run,
once the SM clock ramped; none without CUDA), tokens identical to eager, peak device
memory.

Adapters (helios/harness/workloads/decode/runners.py): torch_eager (on the GPU, or the CPU
without CUDA), torch_cuda_graphs and helios_torch (these two need CUDA),
helios_plan (any Vulkan device: the --tiny CI run on lavapipe)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ....files import size_text
from ..suites import SuiteConfig

CONTEXT_WARMUP = 4  # untimed steps at each context length before the timed ones
DECODE_ADAPTERS = ("torch_eager", "torch_cuda_graphs", "helios_torch", "helios_plan")
LLAMA_ADAPTERS = ("torch_eager", "torch_cuda_graphs", "torch_compile", "hf_transformers", "helios_plan", "llama_cpp")
CUDA_ADAPTERS = frozenset({"torch_cuda_graphs", "helios_torch", "torch_compile"})
TINY = {"layers": 2, "d_model": 64, "heads": 2, "vocab": 96, "prompt": 8, "new": 32, "contexts": [16, 48],
        "context_steps": 4, "train_steps": 30}  # fmt: skip


@dataclass
class DecodeConfig(SuiteConfig):
    layers: int = 8
    d_model: int = 1024
    heads: int = 16
    vocab: int = 8192
    prompt: int = 16
    new: int = 256
    contexts: list[int] = field(default_factory=lambda: [256, 1024, 4096])
    context_steps: int = 32
    train_steps: int = 100
    adapters: list[str] = field(default_factory=lambda: list(DECODE_ADAPTERS))
    model: str = "gpt"  # gpt: the training suite's GPT; llama: llama.py's (a preset or a checkpoint)
    preset: Optional[str] = None  # --model llama: a shape of llama.PRESETS, random weights
    checkpoint: Optional[str] = None  # --model llama: a Hugging Face folder
    prefill: int = 0  # --model llama: a prompt of this many tokens timed through the adapters' prefill (0: none)

    @property
    def max_len(self) -> int:
        """Positions the model embeds: the greedy run's, the longest context's, the prefill's."""
        return max([self.prompt + self.new, self.prefill + 1]
                   + [c + CONTEXT_WARMUP + self.context_steps + 1 for c in self.contexts])  # fmt: skip


def check_config(cfg: DecodeConfig) -> None:
    """ValueError naming the problem before any work."""
    if cfg.d_model % cfg.heads:
        raise ValueError(f"decode: d_model {cfg.d_model} is not a multiple of heads {cfg.heads}")
    hd = cfg.d_model // cfg.heads
    if hd < 8 or 256 % hd:
        raise ValueError(f"decode: head_dim {hd} must divide 256 (8..256): the decode attention's kernel takes those")
    if cfg.prompt < 1 or cfg.new < 2:
        raise ValueError("decode: --prompt >= 1 and --new >= 2")
    if cfg.prefill < 0 or (cfg.prefill and cfg.model != "llama"):
        raise ValueError("decode: --prefill N >= 1 times a Llama model's prefill (--model llama)")
    allowed = LLAMA_ADAPTERS if cfg.model == "llama" else DECODE_ADAPTERS
    bad = [a for a in cfg.adapters if a not in allowed]
    if bad:
        raise ValueError(f"decode: unknown adapters {', '.join(bad)} for --model {cfg.model}; choose from "
                         f"{', '.join(allowed)}")  # fmt: skip


def host_memory_bytes() -> int:
    """This machine's physical memory (the bound the host-side arrays must stay under)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_limits(cfg: DecodeConfig, info: Mapping[str, Any], host_bytes: int) -> None:
    """ValueError naming the flag whose size the Vulkan device (info: Device.info) or this
    machine (host_bytes) cannot hold, before any work: the largest buffer a kernel binds
    (the float32 position and token tables, a layer's K or V cache), the device memory
    all of them take, and the host's arrays (the token stream, the model's tables and
    AdamW's moments, their float32 copies for the plan)."""
    d, n, v, layers = cfg.d_model, cfg.max_len, cfg.vocab, cfg.layers
    longest = "--contexts" if cfg.contexts and n > cfg.prompt + cfg.new else "--prompt/--new"
    binds = min(int(info["max_storage_buffer_range"]), int(info.get("max_allocation_bytes") or 1 << 62))
    for what, flag, nbytes in (
        (f"the float32 position table ({n} positions x d_model {d})", longest, 4 * n * d),
        (f"the float32 token table (vocab {v} x d_model {d})", "--vocab", 4 * v * d),
        (f"a layer's 16-bit K cache ({n} positions x d_model {d})", longest, 2 * n * d),
        (f"a 16-bit weight (4 d_model x d_model, d_model {d})", "--d-model", 8 * d * d),
    ):
        if nbytes > binds:
            raise ValueError(
                f"decode: {flag}: {what} takes {size_text(nbytes)}; {info.get('name', 'the device')} binds at most "
                f"{size_text(binds)} a buffer (max_storage_buffer_range)"
            )
    weights = 2 * (layers * 12 * d * d + v * d)
    device = weights + 2 * layers * n * d * 2 + 4 * (n + v) * d
    have = int(info.get("device_local_bytes") or 1 << 62)
    if device > have:
        raise ValueError(
            f"decode: {longest}, --layers, --d-model: the plan's weights, KV caches and tables take {size_text(device)}; "
            f"{info.get('name', 'the device')} has {size_text(have)} of device memory"
        )
    rows = 8 * max(cfg.train_steps, 1) + 4  # run.train_model's stream: TRAIN_BATCH windows a step, and 4 more
    host = 8 * rows * (n + 1) + 4 * 4 * (n + v) * d + 4 * 4 * layers * 12 * d * d  # tables x4: weights, grads, moments
    if host > host_bytes:
        raise ValueError(
            f"decode: {longest}, --train-steps, --layers, --d-model: the token stream and the model on the host take "
            f"about {size_text(host)}; this machine has {size_text(host_bytes)}"
        )

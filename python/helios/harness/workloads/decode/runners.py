"""Each adapter's decode step behind one interface: ``step(token, position)`` feeds
a token and returns the greedy next one (the GPU's work waited for); ``host_ms`` and
``gpu_ms`` say what the last step cost where the adapter can tell.

torch_eager        the model's own decoding (helios/harness/workloads/train/model.py): torch
                   ops, a KV cache grown by concatenation
torch_cuda_graphs  the same model with static KV caches (bfloat16, max_len rows) and
                   the whole step captured in one CUDA graph, attention over every
                   cached row with the rows past the position masked (as gpt-fast)
helios_torch       the model's decoding with every linear and the attention a
                   helios.torch op (today's op-by-op path)
helios_plan        one Helios plan per step (plan_decoder.py): no CUDA in the step
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import numpy as np


class EagerRunner:
    """The model's last_logits with per-block caches, through `ops`."""

    def __init__(self, torch: Any, model: Any, ops: Any, cuda: bool) -> None:
        self.torch, self.model, self.ops, self.cuda = torch, model, ops, cuda
        self.caches: list = [[] for _ in model.blocks]
        self.host_ms: Optional[float] = None
        self.gpu_ms: Optional[float] = None

    def prefill(self, tokens: list[int]) -> int:
        """The tokens at positions 0.. in one forward (the caches rebuilt)."""
        self.caches = [[] for _ in self.model.blocks]
        dev = self.model.tok.weight.device
        idx = self.torch.tensor([tokens], device=dev)
        return int(self.model.last_logits(idx, 0, self.ops, self.caches).argmax(-1)[0])

    def step(self, token: int, position: int) -> int:
        dev = self.model.tok.weight.device
        logits = self.model.last_logits(self.torch.tensor([[token]], device=dev), position, self.ops, self.caches)
        nxt = int(logits.argmax(-1)[0])  # .item(): waits for the GPU
        return nxt


class GraphRunner:
    """The model's step with static caches, captured once in a CUDA graph."""

    def __init__(self, torch: Any, model: Any, heads: int, max_len: int) -> None:
        import torch.nn.functional as F

        self.torch, self.max_len = torch, max_len
        dev = model.tok.weight.device
        bf = torch.bfloat16
        d = model.tok.weight.shape[1]
        hd = d // heads
        self.tok_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.pos_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.kc = [torch.zeros(1, heads, max_len, hd, dtype=bf, device=dev) for _ in model.blocks]
        self.vc = [torch.zeros(1, heads, max_len, hd, dtype=bf, device=dev) for _ in model.blocks]
        self.out = torch.zeros(1, dtype=torch.long, device=dev)
        ar = torch.arange(max_len, device=dev)
        W = [
            {n: p.detach().to(bf) for n, p in blk.named_parameters() if not n.startswith("ln")} for blk in model.blocks
        ]
        head = model.tok.weight.detach().to(bf)

        def lin(x, blk, name, act=False):
            y = F.linear(x.to(bf), W[blk][f"{name}.weight"], W[blk][f"{name}.bias"])
            return F.gelu(y, approximate="tanh") if act else y

        def step():
            x = model.tok(self.tok_in) + model.pos(self.pos_in)  # (1, d) fp32
            mask = (ar <= self.pos_in).view(1, 1, 1, max_len)
            for i, blk in enumerate(model.blocks):
                qkv = lin(blk.ln1(x), i, "qkv").view(1, 3, heads, 1, hd)
                self.kc[i].index_copy_(2, self.pos_in, qkv[:, 1])
                self.vc[i].index_copy_(2, self.pos_in, qkv[:, 2])
                a = F.scaled_dot_product_attention(qkv[:, 0], self.kc[i], self.vc[i], attn_mask=mask)
                x = x + lin(a.reshape(1, d), i, "proj").float()
                x = x + lin(lin(blk.ln2(x), i, "up", act=True), i, "down").float()
            logits = F.linear(model.lnf(x).to(bf), head).float()
            self.out.copy_(logits.argmax(-1))

        with torch.no_grad():
            self.graph = capture_graph(torch, step)
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)
        self.host_ms: Optional[float] = None
        self.gpu_ms: Optional[float] = None

    def step(self, token: int, position: int) -> int:
        self.tok_in.fill_(token)
        self.pos_in.fill_(position)
        t0 = time.perf_counter()
        self.e0.record()
        self.graph.replay()
        self.e1.record()
        self.host_ms = (time.perf_counter() - t0) * 1e3
        nxt = int(self.out.item())
        self.gpu_ms = self.e0.elapsed_time(self.e1)
        return nxt


def capture_graph(torch: Any, fn: Callable[[], Any], warmup: int = 3) -> Any:
    """fn captured in a CUDA graph after `warmup` runs on a side stream (what capture
    needs: the allocator and the libraries' workspaces set up outside it)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


class PlanRunner:
    """helios_plan: the PlanDecoder's step."""

    def __init__(self, decoder: Any) -> None:
        self.decoder = decoder
        self.host_ms: Optional[float] = None
        self.gpu_ms: Optional[float] = None

    def step(self, token: int, position: int) -> int:
        nxt = self.decoder.step(token, position)
        run = self.decoder.last
        self.host_ms, self.gpu_ms = run.host_ms, (run.gpu_ms or None)
        return nxt

    def logits_after(self, seq: list[int]) -> Any:
        """Its decoder's fp32 logits after stepping through seq from position 0 (the
        judge's look at a divergence; the caches are overwritten)."""
        for i, t in enumerate(seq):
            self.decoder.step(t, i)
        return self.decoder.logits.numpy()[0]

    @property
    def prefills(self) -> bool:
        """Whether its decoder has a prefill (the Llama decoder)."""
        return hasattr(self.decoder, "prefill")

    def time_prefill(self, prompt: list[int]) -> tuple[float, Optional[float]]:
        """The decoder's prefill of the prompt: (wall ms to the first token, the capture's GPU ms)."""
        t0 = time.perf_counter()
        self.decoder.prefill(prompt)
        wall = (time.perf_counter() - t0) * 1e3
        return wall, (self.decoder.last_prefill.gpu_ms or None)


def timed_steps(runner: Any, first: int, start: int, n: int) -> tuple[list[int], list[float], list, list]:
    """n greedy steps from token `first` at position `start`: the tokens fed back,
    each step's wall ms (the host clock around it, its GPU work waited for), and the
    runner's host and GPU ms per step (None where it cannot tell)."""
    toks, wall, host, gpu = [], [], [], []
    tok = first
    for i in range(n):
        t0 = time.perf_counter()
        tok = runner.step(tok, start + i)
        wall.append((time.perf_counter() - t0) * 1e3)
        host.append(runner.host_ms)
        gpu.append(runner.gpu_ms)
        toks.append(tok)
    return toks, wall, host, gpu


def median_or_none(xs: list) -> Optional[float]:
    vals = [x for x in xs if x is not None]
    return float(np.median(vals)) if vals else None

"""The training suite's GPT as one Helios plan per token (the helios_plan adapter):
weights and KV caches resident in Helios Tensors, the token and the position in the
plan's parameter words, the next token from the plan's top-1. No torch in the step.

The step, as the model computes it (helios/harness/workloads/train/model.py): the embedding
rows summed into the fp32 residual stream; per block LayerNorm (the previous
block's MLP output added to the stream in the same pass), the QKV product,
attention over the cache (this position's K and V appended), the output
projection, LayerNorm with that branch added, the MLP up (GELU) and down; the
final LayerNorm and the tied LM head (fp32 logits), and the top-1. Products run in
the model's 16-bit type with fp32 accumulation, as torch's bfloat16 linears."""

from __future__ import annotations

from typing import Any

import numpy as np

from .... import Device
from ....dtypes import as_dtype, bfloat16, float16

TOKEN, POSITION = 0, 1  # the plan's parameter words


def _w16(x: np.ndarray, dt: Any) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).astype(dt)


def _bias(x: np.ndarray, dt: Any) -> np.ndarray:
    """A bias as the 16-bit linear adds it (rounded to the type), held in fp32."""
    return _w16(x, dt).astype(np.float32)


class PlanDecoder:
    """state: the GPT's parameters by name as float32 arrays (``model.state_dict()``);
    layers, heads: its shape; max_len: the KV cache's rows (positions 0..max_len-1)."""

    def __init__(self, dev: Device, state: dict[str, np.ndarray], layers: int, heads: int, max_len: int,
                 dtype: Any = "bfloat16") -> None:  # fmt: skip
        dt = as_dtype(dtype, "PlanDecoder: dtype", (float16, bfloat16))
        tok, pos = state["tok.weight"], state["pos.weight"]
        vocab, d = tok.shape
        if max_len > pos.shape[0]:
            raise ValueError(f"PlanDecoder: max_len {max_len} exceeds the {pos.shape[0]} position embeddings")
        self.dev, self.vocab, self.max_len, self.d = dev, int(vocab), int(max_len), int(d)
        up = lambda a, t=np.float32: dev.upload(np.ascontiguousarray(a), dtype=t)  # noqa: E731
        self.weight_bytes = 0

        def weight(name: str) -> Any:
            w = dev.upload(_w16(state[name], dt), dtype=dt)
            self.weight_bytes += w.size * 2
            return w

        self.k_cache = [dev.empty((max_len, d), dt) for _ in range(layers)]
        self.v_cache = [dev.empty((max_len, d), dt) for _ in range(layers)]
        self.plan = p = dev.plan(params=2)
        x = p.embed(up(tok), up(pos[:max_len]), token=TOKEN, position=POSITION)
        branch = None
        for i in range(layers):
            b = f"blocks.{i}."
            h, x = p.layernorm(x, up(state[b + "ln1.weight"]), up(state[b + "ln1.bias"]), residual=branch, dtype=dt)
            qkv = p.matmul(h, weight(b + "qkv.weight"), trans_b=True, bias=_bias(state[b + "qkv.bias"], dt))
            a = p.attention_decode(qkv, self.k_cache[i], self.v_cache[i], heads=heads, position=POSITION)
            o = p.matmul(a, weight(b + "proj.weight"), trans_b=True, bias=_bias(state[b + "proj.bias"], dt))
            h, x = p.layernorm(x, up(state[b + "ln2.weight"]), up(state[b + "ln2.bias"]), residual=o, dtype=dt)
            u = p.matmul(h, weight(b + "up.weight"), trans_b=True, bias=_bias(state[b + "up.bias"], dt),
                         activation="gelu")  # fmt: skip
            branch = p.matmul(u, weight(b + "down.weight"), trans_b=True, bias=_bias(state[b + "down.bias"], dt))
        h, x = p.layernorm(x, up(state["lnf.weight"]), up(state["lnf.bias"]), residual=branch, dtype=dt)
        self.logits = p.matmul(h, weight("tok.weight"), trans_b=True, out_dtype="float32")
        p.top1(self.logits, into=TOKEN)
        p.record()
        self.last: Any = None  # the last replay's PlanRun

    def step(self, token: int, position: int) -> int:
        """Feeds `token` at `position` (its K and V enter the caches there); returns
        the greedy next token."""
        self.last = self.plan.replay(params=[int(token), int(position)])
        return self.plan.params(TOKEN, 1)[0]

    def generate(self, prompt: list[int], new: int) -> list[int]:
        """Greedy decoding: the prompt fed a token a step from position 0, then `new`
        tokens, each fed back."""
        nxt = 0
        for i, t in enumerate(prompt):
            nxt = self.step(t, i)
        out = [nxt]
        for i in range(len(prompt), len(prompt) + new - 1):
            out.append(self.step(out[-1], i))
        return out

    def close(self) -> None:
        self.plan.close()

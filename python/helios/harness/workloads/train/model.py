"""The model every adapter trains (a GPT-style decoder) and greedy decoding
with a KV cache, the inference smoke run after training."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import TrainConfig


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


def inference_smoke(cfg: TrainConfig, model: Any, torch_ops: Any, helios_greedy: Any, data: Any, cuda: bool) -> dict:
    """Greedy decoding of 3 fixed prompts from the trained weights with torch's ops and
    through Helios (helios_greedy(prompt, new) -> the new tokens: the decode plan): the
    tokens, the first divergence with torch's logits margin there (top-1 minus top-2),
    and decode tokens/s for both."""
    new = min(64, cfg.seq // 2)
    plen = min(16, cfg.seq - new)
    prompts = [data[i, :plen].unsqueeze(0) for i in (0, 1, 2)]
    res: dict = {"new_tokens": new, "prompt_tokens": plen, "prompts": []}
    rates: dict = {"torch": [], "helios": []}
    for pr in prompts:
        entry: dict = {"prompt": [int(x) for x in pr[0]]}
        for name in ("torch", "helios"):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            if name == "torch":
                toks, entry["torch_logits"] = greedy(model, torch_ops, pr, new)
            else:
                toks = [int(t) for t in helios_greedy([int(x) for x in pr[0]], new)]
            if cuda:
                torch.cuda.synchronize()
            rates[name].append(new / (time.perf_counter() - t0))
            entry[name] = toks
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
        del entry["torch_logits"]
        res["prompts"].append(entry)
    res["same_tokens"] = all(e["first_divergence"] is None for e in res["prompts"])
    res["same_tokens_up_to_ties"] = all(e["first_divergence"] is None or e["tie_at_divergence"] for e in res["prompts"])
    res["decode_tokens_per_s"] = {k: float(np.median(v)) for k, v in rates.items()}
    return res

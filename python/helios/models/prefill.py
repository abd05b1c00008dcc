"""A Llama prompt through the tile products: every prompt position of every layer at
once, recorded into one capture per prompt-length bucket (a power of two, the prompt
padded to it) and replayed per prompt, writing the decode plan's KV caches for
positions 0..n-1; then the last prompt row's head gives the first new token.

Per layer: RMSNorm over the rows (the branch before added to the fp32 stream in the
same pass), the QKV product, rotary positions on the q and k heads, K and V copied
into the caches, the heads laid out for the causal attention forward (q, and K and V
repeated for each query head of their group), the attention, the output product,
RMSNorm with that branch, the gate-up product, SwiGLU and the down product. The rows
past the prompt compute on pad tokens: causal attention keeps them out of the prompt's
rows, and the decode steps overwrite their cache rows before any step reads them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import train_ops as T
from ..gemm import product_into

MIN_BUCKET = 16  # the shortest prompt length recorded (shorter prompts pad to it)


def bucket_of(n: int, max_len: int) -> int:
    """The prompt-length bucket for a prompt of n tokens: the power of two >= n (at least
    MIN_BUCKET), at most max_len."""
    return min(max(MIN_BUCKET, 1 << max(0, n - 1).bit_length()), max_len)


class Prefill:
    """The prefill of prompts of up to `rows` tokens for LlamaDecoder `dec` (its weights,
    rope table and caches), recorded at construction."""

    def __init__(self, dec: Any, rows: int) -> None:
        self.dec, self.rows = dec, rows
        cfg, dev, dt = dec.cfg, dec.dev, dec.dtype.name
        H, KV, hd, d = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.d_model
        self.ids = dev.empty((rows,), "int32")
        self.streams = [dev.empty((rows, d), "float32") for _ in range(2)]
        self.stats = dev.empty((rows, 2), "float32")
        self.h = dev.empty((rows, d), dt)
        self.qkv = dev.empty((rows, (H + 2 * KV) * hd), dt)
        self.heads3 = dev.empty((rows, 3 * H * hd), dt)  # [q | K | V] of every query head, the attention's rows
        self.att, self.lse = dev.empty((rows, H * hd), dt), dev.empty((1, H, rows), "float32")
        self.o, self.y = dev.empty((rows, d), dt), dev.empty((rows, d), dt)
        self.gu, self.s = dev.empty((rows, 2 * cfg.hidden), dt), dev.empty((rows, cfg.hidden), dt)
        self.hf = dev.empty((rows, d), dt)
        self.logits = dev.empty((1, cfg.vocab), "float32")
        with dev.capture() as cap:
            self._record()
        self.capture = cap

    def _product(self, a: Any, b: Any, out: Any) -> None:
        product_into(self.dec.dev, a, b, out, trans_b=True)  # b: a weight (N, K)

    def _norm(self, x: Any, gamma: Any, branch: Any, x_out: Any, h: Any) -> None:
        cfg = self.dec.cfg
        self.dec.dev._layernorm(x, gamma, None, h, self.stats, self.rows, cfg.d_model, cfg.eps, self.dec.dtype.name,
                                branch, x_out if branch is not None else None, rms=True)  # fmt: skip

    def _copy(self, src: Any, dst: Any, sizes: tuple, src_strides: tuple, dst_strides: tuple, so: int, do: int) -> None:
        self.dec.dev._copy_strided(src, dst, sizes, src_strides, dst_strides, so, do)

    def _record(self) -> None:
        dec, cfg, r = self.dec, self.dec.cfg, self.rows
        H, KV, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        width, group, w3 = (H + 2 * KV) * hd, H // KV, 3 * H * hd
        x = self.streams[0]
        T.embed(self.ids, dec.embed, None, x)
        branch = None
        for i, w in enumerate(dec.layers):
            other = self.streams[1] if x is self.streams[0] else self.streams[0]
            self._norm(x, w["ln1"], branch, other, self.h)
            x = x if branch is None else other
            self._product(self.h, w["qkv"], self.qkv)
            T.rope_rows(self.qkv, dec.table, H + KV, hd, 0)
            for cache, at in ((dec.k_cache[i], H * hd), (dec.v_cache[i], (H + KV) * hd)):  # positions 0..r-1
                self._copy(self.qkv, cache, (1, 1, r, KV * hd), (0, 0, width), (0, 0, KV * hd), at, 0)
            self._copy(self.qkv, self.heads3, (1, 1, r, H * hd), (0, 0, width), (0, 0, w3), 0, 0)
            for src_at, dst_at in ((H * hd, H * hd), ((H + KV) * hd, 2 * H * hd)):  # each KV head for its group
                self._copy(self.qkv, self.heads3, (r, KV, group, hd), (width, hd, 0), (w3, group * hd, hd), src_at,
                           dst_at)  # fmt: skip
            dec.dev._attention(
                self.heads3, self.heads3, self.heads3, H, r, r, hd, causal=True, scale=1.0 / math.sqrt(hd),
                variant=dec.dev._pick_attention(None, hd, r, True, False, dec.dtype), dtype=dec.dtype.name,
                layout=(H, w3, H * hd, 0, H * hd, 2 * H * hd), out=self.att, lse=self.lse,
            )  # fmt: skip
            self._product(self.att, w["o"], self.o)
            other = self.streams[1] if x is self.streams[0] else self.streams[0]
            self._norm(x, w["ln2"], self.o, other, self.h)
            x = other
            self._product(self.h, w["gu"], self.gu)
            T.swiglu_rows(self.gu, self.s)
            self._product(self.s, w["down"], self.y)
            branch = self.y
        other = self.streams[1] if x is self.streams[0] else self.streams[0]
        self._norm(x, dec.norm, branch, other, self.hf)

    def run(self, prompt: list[int]) -> tuple[int, Any]:
        """The prompt (at most `rows` tokens) at positions 0..: the caches filled, the
        greedy first new token and the capture's PlanRun."""
        n = len(prompt)
        ids = np.zeros(self.rows, np.int32)
        ids[:n] = prompt
        self.ids.copy_(ids)
        run = self.capture.replay()
        last = self.hf[n - 1 : n]
        self._product(last, self.dec.head, self.logits)
        return int(np.argmax(self.logits.numpy()[0])), run

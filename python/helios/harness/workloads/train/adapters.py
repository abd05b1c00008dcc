"""The adapters' ops: how a model's linear, attention, blocks and whole stack
run through torch, through helios.torch op by op, block by block or as one
decoder, and through Helios on host arrays where there is no CUDA."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from .config import HELIOS_ADAPTERS

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
        from .... import torch as ht

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
        cast_in = [t for b in model.blocks for lin in (b.qkv, b.proj, b.up, b.down) for t in (lin.weight, lin.bias)] + [
            model.tok.weight
        ]
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
        from ....functions import default_device

        self.dev = default_device()
        dev = self.dev

        def np16(t):
            from ....dtypes import bfloat16

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


def ops_for(adapter: str, cuda: bool) -> Any:
    """The ops an adapter trains with: a Helios adapter runs on host arrays where
    there is no CUDA (the --tiny CI run on lavapipe)."""
    if adapter in HELIOS_ADAPTERS and not cuda:
        return HostOps()
    return {"helios": HeliosOps, "helios_blocks": HeliosBlockOps, "helios_per_op": HeliosPerOpOps}.get(
        adapter, TorchOps
    )()

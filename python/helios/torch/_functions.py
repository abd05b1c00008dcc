"""The autograd functions of the blocks (mlp, self-attention): each direction one group.
The single ops are torch custom operators (_library)."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._blocks import attention_backward, attention_forward, bias_grad, mlp_backward, mlp_forward
from ._group import Group
from ._state import RUNTIME


class MLP(torch.autograd.Function):
    """act(x @ w_up^T + b_up) @ w_down^T + b_down, each direction one group."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w_up: torch.Tensor, b_up: Any, w_down: torch.Tensor, b_down: Any, act: str):
        ctx.act = act
        training = any(t is not None and t.requires_grad for t in (x, w_up, b_up, w_down, b_down))
        with RUNTIME.lock:
            group = Group(x)
            _, y, (z_t, h_t) = mlp_forward(group, x, w_up, b_up, w_down, b_down, act, training)
            group.run()
        ctx.save_for_backward(x, w_up, b_up, w_down, b_down, z_t, h_t)
        return y

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x, w_up, b_up, w_down, b_down, z, h = ctx.saved_tensors
        need = ctx.needs_input_grad
        g = grads[0]
        with RUNTIME.lock:
            group = Group(g)
            _, gx, gw_up, gw_down, gz = mlp_backward(
                group, g, x, w_up, w_down, (z, h), ctx.act, (need[0], need[1], need[3])
            )
            group.run()
        return gx, gw_up, bias_grad(gz, b_up, need[2]), gw_down, bias_grad(g, b_down, need[4]), None


class SelfAttention(torch.autograd.Function):
    """Multi-head self-attention on (B, S, D): the QKV product, the heads split out,
    attention, the heads merged and the output projection; each direction one group."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        w_qkv: torch.Tensor,
        b_qkv: Any,
        w_out: torch.Tensor,
        b_out: Any,
        heads: int,
        causal: bool,
        scale: Optional[float],
    ):
        b, s, d = x.shape
        x2 = x.reshape(b * s, d)
        with RUNTIME.lock:
            group = Group(x)
            _, y, kept = attention_forward(group, x2, w_qkv, b_qkv, w_out, b_out, (b, s, d), heads, causal, scale)
            group.run()
        ctx.save_for_backward(x2, w_qkv, b_qkv, w_out, b_out, *kept)
        ctx.meta = (b, s, d, heads, causal, scale)
        return y.reshape(b, s, d)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x2, w_qkv, b_qkv, w_out, b_out, *kept = ctx.saved_tensors
        b, s, d, heads, causal, scale = ctx.meta
        need = ctx.needs_input_grad
        g = grads[0].reshape(b * s, d)
        with RUNTIME.lock:
            group = Group(g)
            _, gx, gw_qkv, gw_out, g_qkv = attention_backward(
                group, g, x2, w_qkv, w_out, tuple(kept), (b, s, d), heads, causal, scale, (need[0], need[1], need[3])
            )
            group.run()
        return (
            None if gx is None else gx.reshape(b, s, d),
            gw_qkv,
            bias_grad(g_qkv, b_qkv, need[2]),
            gw_out,
            bias_grad(g, b_out, need[4]),
            None,
            None,
            None,
        )

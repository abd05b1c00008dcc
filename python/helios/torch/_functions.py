"""The autograd functions of the single ops and blocks: each direction one group."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._blocks import (
    attention_backward,
    attention_forward,
    bias_grad,
    grad_products,
    mlp_backward,
    mlp_forward,
    run_product,
)
from ._group import Group
from ._state import ACTIVATIONS, RUNTIME


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return run_product(a, b)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        a, b = ctx.saved_tensors
        g = grads[0].contiguous()
        # g @ b^T and a^T @ g
        return grad_products(ctx.needs_input_grad[:2], (g, b, {"trans_b": True}), (a, g, {"trans_a": True}))


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], act: Optional[str]):
        ctx.act = act
        if act is None or not any(t is not None and t.requires_grad for t in (x, w, bias)):
            ctx.save_for_backward(x, w, bias, None)
            return run_product(x, w, trans_b=True, bias=bias, activation=act)  # the fused epilogue
        # Training: the pre-activation from Helios, the activation in torch, and the
        # pre-activation kept for the backward (recomputing it there would cost a
        # product and another CUDA <-> Vulkan hop pair per call).
        z = run_product(x, w, trans_b=True, bias=bias)
        ctx.save_for_backward(x, w, bias, z)
        return ACTIVATIONS[act](z.float()).to(z.dtype)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x, w, bias, z = ctx.saved_tensors
        g = grads[0].contiguous()
        if ctx.act is not None:  # the activation's derivative at the saved pre-activation
            zf = z.float().requires_grad_(True)
            with torch.enable_grad():
                y = ACTIVATIONS[ctx.act](zf)
            (gz,) = torch.autograd.grad(y, zf, g.float())
            g = gz.to(x.dtype).contiguous()
        # g @ w and g^T @ x
        gx, gw = grad_products(ctx.needs_input_grad[:2], (g, w, {}), (g, x, {"trans_a": True}))
        gb = g.sum(0, dtype=torch.float32).to(bias.dtype) if bias is not None and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None


class Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float]):
        ctx.causal, ctx.scale = causal, scale
        with RUNTIME.lock:
            group = Group(q)
            out, o = group.result(tuple(q.shape), q.dtype)
            lse, lse_t = group.result(tuple(q.shape[:3]), torch.float32)  # what the backward recomputes P from
            group.attention(q, k, v, out, lse, causal, scale)
            group.run()
        # Saved as torch tensors (their exports keep the Helios memory out of the result
        # pool, and autograd's version counters catch an in-place change of o).
        ctx.save_for_backward(q, k, v, o, lse_t)
        ctx.helios = (out, lse)
        return o

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        q, k, v, _, _ = ctx.saved_tensors
        out, lse = ctx.helios
        with RUNTIME.lock:
            group = Group(q)
            gs, gts = zip(*(group.result(tuple(t.shape), t.dtype) for t in (q, k, v)))
            group.attention_backward(q, k, v, out, grads[0], lse, list(gs), ctx.causal, ctx.scale)
            group.run()
        return gts[0], gts[1], gts[2], None, None


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

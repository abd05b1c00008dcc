"""matmul, linear and attention as torch custom operators (``torch.library``), so
that ``torch.compile`` traces through them (``fullgraph=True`` compiles a model
that calls them), ``torch.export`` carries them, and autograd reaches their
backward through ``register_autograd``. Each op is one group of Helios
submissions; its fake (meta) implementation gives the result's shape and dtype
for tracing. The blocks (mlp, self_attention, decoder) stay eager functions
(``torch.compiler.disable`` in _ops): each keeps Helios memory between its
directions, which a functional operator cannot hold.

Ops (namespace ``helios``):
  mm(a, b, trans_a, trans_b) -> op(a) @ op(b)
  mm2(a1, b1, ta1, tb1, a2, b2, ta2, tb2) -> two products as one group (a backward)
  linear(x, weight, bias, activation) -> activation(x @ weight.T + bias), x 2-D
  attention(q, k, v, causal, scale) -> (out, lse)
  attention_backward(q, k, v, out, grad_out, lse, causal, scale) -> (dq, dk, dv)
"""

# No `from __future__ import annotations`: torch.library reads the ops' schemas from
# their annotations, which must be types, not strings.
from typing import Any, Optional

import torch
from torch import Tensor

from ._blocks import run_product, run_products
from ._group import Group
from ._state import ACTIVATIONS, DTYPES, RUNTIME, TORCH_TO_HELIOS, check, same_dtype


def _mm_shape(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> tuple[int, int]:
    return (a.shape[1] if trans_a else a.shape[0], b.shape[0] if trans_b else b.shape[1])


# ---- the operands each op takes: one check for the op and its fake (what torch.compile
# traces with), so a compiled graph is refused where the op would be ----------------------------


# The dtypes the ops compute in (the CUDA kernels': float16, bfloat16). Read at call
# time: a test that registers float64 reference kernels for the ops widens it.
OP_DTYPES = DTYPES


def check_mm(op: str, a: Tensor, b: Tensor, trans_a: bool, trans_b: bool, cuda: bool = True) -> None:
    check("a", a, (2,), OP_DTYPES, cuda=cuda)
    check("b", b, (2,), OP_DTYPES, cuda=cuda)
    same_dtype(op, ("a", a), ("b", b))
    ka, kb = (a.shape[0] if trans_a else a.shape[1]), (b.shape[1] if trans_b else b.shape[0])
    if ka != kb:
        raise ValueError(
            f"helios::{op}: op(a) of {tuple(a.shape)}{'^T' if trans_a else ''} and op(b) of "
            f"{tuple(b.shape)}{'^T' if trans_b else ''} do not chain ({ka} != {kb})"
        )


def check_linear(
    x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str], cuda: bool = True
) -> None:
    check("x", x, (2,), OP_DTYPES, cuda=cuda)
    check("weight", weight, (2,), OP_DTYPES, cuda=cuda)
    same_dtype("linear", ("x", x), ("weight", weight))
    if activation not in ACTIVATIONS:
        raise ValueError(f"helios::linear: activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"helios::linear: x {tuple(x.shape)} and weight {tuple(weight.shape)}: in_features differ")
    if bias is not None:
        check("bias", bias, (1,), {**TORCH_TO_HELIOS, **OP_DTYPES}, cuda=cuda)
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"helios::linear: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")


def check_attention(op: str, q: Tensor, k: Tensor, v: Tensor, cuda: bool = True) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check(name, t, (4,), OP_DTYPES, cuda=cuda)
    same_dtype(op, ("q", q), ("k", k), ("v", v))
    b, h, _, d = q.shape
    if k.shape != v.shape or k.shape[0] != b or k.shape[1] != h or k.shape[3] != d:
        raise ValueError(
            f"helios::{op}: q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)}: k and v must be "
            "(B, H, S_kv, d) with q's B, H and d"
        )


# ---- products ------------------------------------------------------------------------------------


@torch.library.custom_op("helios::mm", mutates_args=(), device_types="cuda")
def mm(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> Tensor:
    check_mm("mm", a, b, trans_a, trans_b)
    return run_product(a, b, trans_a=trans_a, trans_b=trans_b)


@mm.register_fake
def _(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> Tensor:
    check_mm("mm", a, b, trans_a, trans_b, cuda=False)
    return a.new_empty(_mm_shape(a, b, trans_a, trans_b))


@torch.library.custom_op("helios::mm2", mutates_args=(), device_types="cuda")
def mm2(
    a1: Tensor, b1: Tensor, ta1: bool, tb1: bool, a2: Tensor, b2: Tensor, ta2: bool, tb2: bool
) -> tuple[Tensor, Tensor]:
    check_mm("mm2", a1, b1, ta1, tb1)
    check_mm("mm2", a2, b2, ta2, tb2)
    y1, y2 = run_products((a1, b1, {"trans_a": ta1, "trans_b": tb1}), (a2, b2, {"trans_a": ta2, "trans_b": tb2}))
    return y1, y2


@mm2.register_fake
def _(a1: Tensor, b1: Tensor, ta1: bool, tb1: bool, a2: Tensor, b2: Tensor, ta2: bool, tb2: bool) -> Any:
    check_mm("mm2", a1, b1, ta1, tb1, cuda=False)
    check_mm("mm2", a2, b2, ta2, tb2, cuda=False)
    return a1.new_empty(_mm_shape(a1, b1, ta1, tb1)), a2.new_empty(_mm_shape(a2, b2, ta2, tb2))


def _run(specs: list) -> list:
    """Products (a, b, trans_a, trans_b), two at a time as one group."""
    out: list = []
    for i in range(0, len(specs), 2):
        pair = specs[i : i + 2]
        out.extend(mm2(*pair[0], *pair[1]) if len(pair) == 2 else [mm(*pair[0])])
    return out


def _products(needs: tuple, *specs: tuple) -> tuple:
    """The gradient products autograd asks for (needs: one flag per spec), two at a
    time as one group; None where not needed."""
    results = iter(_run([spec for need, spec in zip(needs, specs) if need]))
    return tuple(next(results) if need else None for need in needs)


def _grad_specs(a: Tensor, b: Tensor, ta: bool, tb: bool, g: Tensor) -> tuple[tuple, tuple]:
    """The products giving a's and b's gradients of C = op(a) op(b) at dC = g:
    dop(a) = g op(b)^T and dop(b) = op(a)^T g, transposed back where an operand is
    read transposed."""
    ga = (b, g, tb, True) if ta else (g, b, False, not tb)
    gb = (g, a, True, ta) if tb else (a, g, not ta, False)
    return ga, gb


def _mm_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    a, b, ta, tb = inputs
    ctx.save_for_backward(a, b)
    ctx.trans = (ta, tb)


def _mm_backward(ctx: Any, g: Tensor) -> tuple:
    a, b = ctx.saved_tensors
    ta, tb = ctx.trans
    ga, gb = _products(ctx.needs_input_grad[:2], *_grad_specs(a, b, ta, tb, g.contiguous()))
    return ga, gb, None, None


def _mm2_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    a1, b1, ta1, tb1, a2, b2, ta2, tb2 = inputs
    ctx.save_for_backward(a1, b1, a2, b2)
    ctx.trans = (ta1, tb1, ta2, tb2)


def _mm2_backward(ctx: Any, g1: Tensor, g2: Tensor) -> tuple:
    a1, b1, a2, b2 = ctx.saved_tensors
    ta1, tb1, ta2, tb2 = ctx.trans
    need = ctx.needs_input_grad
    specs = _grad_specs(a1, b1, ta1, tb1, g1.contiguous()) + _grad_specs(a2, b2, ta2, tb2, g2.contiguous())
    ga1, gb1, ga2, gb2 = _products((need[0], need[1], need[4], need[5]), *specs)
    return ga1, gb1, None, None, ga2, gb2, None, None


mm.register_autograd(_mm_backward, setup_context=_mm_setup)
mm2.register_autograd(_mm2_backward, setup_context=_mm2_setup)


# ---- linear --------------------------------------------------------------------------------------


@torch.library.custom_op("helios::linear", mutates_args=(), device_types="cuda")
def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> Tensor:
    check_linear(x, weight, bias, activation)
    return run_product(x, weight, trans_b=True, bias=bias, activation=activation)


@linear.register_fake
def _(x: Tensor, weight: Tensor, bias: Optional[Tensor], activation: Optional[str]) -> Tensor:
    check_linear(x, weight, bias, activation, cuda=False)
    return x.new_empty((x.shape[0], weight.shape[0]))


def _linear_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    x, w, bias, act = inputs
    ctx.save_for_backward(x, w)
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.act = act


def _linear_backward(ctx: Any, g: Tensor) -> tuple:
    if ctx.act is not None:  # helios.torch.linear never asks for this: it runs the activation in torch
        raise RuntimeError(
            "helios::linear with a fused activation has no backward; call helios.torch.linear, which keeps the "
            "pre-activation for it"
        )
    x, w = ctx.saved_tensors
    g = g.contiguous()
    need = ctx.needs_input_grad
    gx, gw = _products(need[:2], (g, w, False, False), (g, x, True, False))  # g @ w, g^T @ x
    gb = g.sum(0, dtype=torch.float32).to(ctx.bias_dtype) if ctx.bias_dtype is not None and need[2] else None
    return gx, gw, gb, None


linear.register_autograd(_linear_backward, setup_context=_linear_setup)


# ---- attention -----------------------------------------------------------------------------------


@torch.library.custom_op("helios::attention", mutates_args=(), device_types="cuda")
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: Optional[float]) -> tuple[Tensor, Tensor]:
    check_attention("attention", q, k, v)
    with RUNTIME.lock:
        group = Group(q)
        out, o = group.result(tuple(q.shape), q.dtype)
        lse, lse_t = group.result(tuple(q.shape[:3]), torch.float32)  # what the backward recomputes P from
        group.attention(q, k, v, out, lse, causal, scale)
        group.run()
    return o, lse_t


@attention.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: Optional[float]) -> Any:
    check_attention("attention", q, k, v, cuda=False)
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("helios::attention_backward", mutates_args=(), device_types="cuda")
def attention_backward(
    q: Tensor, k: Tensor, v: Tensor, out: Tensor, grad_out: Tensor, lse: Tensor, causal: bool, scale: Optional[float]
) -> tuple[Tensor, Tensor, Tensor]:
    check_attention("attention_backward", q, k, v)
    with RUNTIME.lock:
        group = Group(q)
        gs, gts = zip(*(group.result(tuple(t.shape), t.dtype) for t in (q, k, v)))
        group.attention_backward(q, k, v, out, grad_out.contiguous(), lse, list(gs), causal, scale)
        group.run()
    return gts[0], gts[1], gts[2]


@attention_backward.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, out: Tensor, grad_out: Tensor, lse: Tensor, causal: bool, scale: Any) -> Any:
    check_attention("attention_backward", q, k, v, cuda=False)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _attention_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    q, k, v, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal, ctx.scale = causal, scale


def _attention_grads(ctx: Any, g: Tensor, g_lse: Optional[Tensor]) -> tuple:
    # lse is an output for the backward's use; no gradient flows through it
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(q, k, v, o, g, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


attention.register_autograd(_attention_grads, setup_context=_attention_setup)

OPS = (mm, mm2, linear, attention, attention_backward)

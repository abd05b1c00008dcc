"""The ops of each block, recorded into a group: products (and a product's two
gradient products), the MLP and self-attention forward and backward. The autograd
functions and the decoder build their groups from these."""

from __future__ import annotations

from typing import Any, Optional

import torch

from ._group import Group
from ._state import HELIOS_TO_TORCH, RUNTIME


def run_products(*specs: tuple) -> list[torch.Tensor]:
    """Several products, each (a, b, keywords of Group.product), on one device,
    submitted as one group (one CUDA <-> Vulkan hop pair, ordered())."""
    with RUNTIME.lock:
        group = Group(specs[0][0])
        results = [group.product(a, b, **kw)[1] for a, b, kw in specs]
        group.run()
        return results


def run_product(a: torch.Tensor, b: torch.Tensor, **kw: Any) -> torch.Tensor:
    """op(a) @ op(b) (+ bias, activation) for 2-D float16 or bfloat16 CUDA tensors, as a torch tensor."""
    return run_products((a, b, kw))[0]


def bias_grad(g: torch.Tensor, bias: Optional[torch.Tensor], needed: bool) -> Optional[torch.Tensor]:
    """A bias's gradient: the rows of its output's gradient summed (in torch, after the group)."""
    return g.sum(0, dtype=torch.float32).to(bias.dtype) if bias is not None and needed else None


def mlp_forward(
    group: Group, x: Any, w_up: Any, b_up: Any, w_down: Any, b_down: Any, act: str, training: bool, export: bool = True
):
    """The MLP's forward into the group: (y, its torch view, what the backward keeps:
    the pre-activation and the activation, torch views; z None without training)."""
    if training:  # the pre-activation kept for the backward, the activation its own op
        z, z_t = group.product(x, w_up, trans_b=True, bias=b_up)
        h, h_t = group.result(tuple(z.shape), HELIOS_TO_TORCH[z.dtype.name])
        group.activation(z, act, out=h)
    else:  # inference: the fused epilogue
        h, h_t = group.product(x, w_up, trans_b=True, bias=b_up, activation=act)
        z_t = None
    y, y_t = group.product(h, w_down, trans_b=True, bias=b_down, export=export)  # export: y's torch view
    return y, y_t, (z_t, h_t)


def mlp_backward(
    group: Group, g: Any, x: Any, w_up: Any, w_down: Any, kept: tuple, act: str, need: tuple, export: bool = True
):
    """The MLP's backward into the group at the output gradient g: (gx, its torch
    view, gw_up, gw_down, gz: torch views; None where need (x, w_up, w_down) says no;
    gz is what b_up's gradient sums)."""
    z, h = kept
    gh, _ = group.product(g, w_down, export=False)  # dL/dh = g @ w_down
    gw_down = group.product(g, h, trans_a=True)[1] if need[2] else None
    gz, gz_t = group.result(tuple(gh.shape), HELIOS_TO_TORCH[gh.dtype.name])
    group.activation(z, act, out=gz, grad=gh)
    gx, gx_t = group.product(gz, w_up, export=export) if need[0] else (None, None)  # export: gx's torch view
    gw_up = group.product(gz, x, trans_a=True)[1] if need[1] else None
    return gx, gx_t, gw_up, gw_down, gz_t


def attention_forward(
    group: Group,
    x: Any,
    w_qkv: Any,
    b_qkv: Any,
    w_out: Any,
    b_out: Any,
    bsd: tuple,
    heads: int,
    causal: bool,
    scale: Optional[float],
    export: bool = True,
):
    """Self-attention's forward into the group on x (B*S, D): (y (B*S, D), its torch
    view, what the backward keeps (KEPT_ATTENTION torch views: the QKV product, the
    log-sum-exp and the merged heads)). The attention reads the heads straight out of
    the QKV product's rows and writes them merged: no layout copies."""
    b, s, d = bsd
    dt = HELIOS_TO_TORCH[group.stage(w_qkv).dtype.name]
    qkv, qkv_t = group.product(x, w_qkv, trans_b=True, bias=b_qkv)  # kept: the backward reads it
    merged, merged_t = group.result((b * s, d), dt)
    lse, lse_t = group.result((b, heads, s), torch.float32)
    group.attention_rows(qkv, merged, lse, heads, bsd, causal, scale)
    y, y_t = group.product(merged, w_out, trans_b=True, bias=b_out, export=export)  # export: y's torch view
    return y, y_t, (qkv_t, lse_t, merged_t)


KEPT_ATTENTION = 3  # torch views attention_forward keeps for the backward
KEPT_MLP = 2  # and mlp_forward


def attention_backward(
    group: Group,
    g: Any,
    x: Any,
    w_qkv: Any,
    w_out: Any,
    kept: tuple,
    bsd: tuple,
    heads: int,
    causal: bool,
    scale: Optional[float],
    need: tuple,
    export: bool = True,
):
    """Self-attention's backward into the group at the output gradient g (B*S, D):
    (gx, its torch view, gw_qkv, gw_out, g_qkv: torch views; None where need (x,
    w_qkv, w_out) says no; g_qkv is what b_qkv's gradient sums). dO is read as the
    output projection's gradient rows and dQ, dK, dV written as a QKV product's
    gradient rows: no layout copies."""
    qkv, lse, merged = kept
    b, s, d = bsd
    dt = HELIOS_TO_TORCH[group.stage(w_out).dtype.name]
    g_merged, _ = group.product(g, w_out, export=False)
    gw_out = group.product(g, merged, trans_a=True)[1] if need[2] else None
    g_qkv, g_qkv_t = group.result((b * s, 3 * d), dt)
    group.attention_rows_backward(qkv, merged, g_merged, lse, g_qkv, heads, bsd, causal, scale)
    gx, gx_t = group.product(g_qkv, w_qkv, export=export) if need[0] else (None, None)  # export: gx's torch view
    gw_qkv = group.product(g_qkv, x, trans_a=True)[1] if need[1] else None
    return gx, gx_t, gw_qkv, gw_out, g_qkv_t

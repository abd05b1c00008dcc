"""The ops a model runs between its products and attention, on the device:
layout copies (``Device.copy_strided``) and activations with their backward
(``Device.activation``). On Tensors only; each is one dispatch, ordered like a
product where ``order`` is given, so that a layer's work can stay one group of
Helios submissions (see ``helios.torch``)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _helios
from .dtypes import as_dtype, bfloat16, float16
from .gemm import activation_code
from .tensor import Tensor, new_tensor
from .validate import count, got_tensor

_SIXTEEN = (np.dtype(float16), np.dtype(bfloat16))
_U32 = 2**32 - 1


def _tensor(dev: Any, t: Any, name: str, who: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: {name} must be a helios.Tensor, not {type(t).__name__}")
    if t.device is not dev:
        raise ValueError(f"{who}: {name} belongs to another Device")
    if t.dtype not in _SIXTEEN:
        raise TypeError(f"{who}: {name} is {t.dtype}; this op takes float16 or bfloat16 Tensors")
    return t


def _ordered(order: Optional[tuple[int, int]]) -> dict:
    return {} if order is None else {"wait_value": int(order[0]), "signal_value": int(order[1])}


def copy_strided(
    dev: Any,
    src: Tensor,
    out: Tensor,
    shape: Sequence[int],
    src_strides: Sequence[int],
    out_strides: Sequence[int],
    src_offset: int = 0,
    out_offset: int = 0,
    order: Optional[tuple[int, int]] = None,
) -> Tensor:
    """out[out_offset + sum(i_j * out_strides[j])] = src[src_offset + sum(i_j * src_strides[j])]
    for every index (i_0, ...) of `shape` (1 to 4 dimensions; strides and offsets in
    elements of each Tensor's memory as stored; the last stride of both sides must
    be 1; every element reached must lie inside its Tensor, ValueError otherwise). Bits are copied: src and out
    share one 16-bit dtype. Elements of out the shape does not reach are left as
    they were. Returns out."""
    who = "copy_strided"
    src, out = _tensor(dev, src, "src", who), _tensor(dev, out, "out", who)
    if src.dtype != out.dtype:
        raise TypeError(
            f"{who}: src is {src.dtype.name} and out {out.dtype.name}; the copy keeps the bits of one dtype"
        )
    dims = [count(f"{who}: shape[{i}]", s, 1, _U32) for i, s in enumerate(shape)]
    if not 1 <= len(dims) <= 4:
        raise ValueError(f"{who}: shape must have 1 to 4 dimensions, got {tuple(shape)}")
    strides = []
    for name, st in (("src_strides", src_strides), ("out_strides", out_strides)):
        got = [count(f"{who}: {name}[{i}]", s, 0, _U32) for i, s in enumerate(st)]
        if len(got) != len(dims) or got[-1] != 1:
            raise ValueError(
                f"{who}: {name} {tuple(st)} must give one stride per dimension of shape {tuple(dims)}, the last 1"
            )
        strides.append([0] * (4 - len(dims)) + got[:-1])
    sizes = [1] * (4 - len(dims)) + dims
    dev._copy_strided(
        src,
        out,
        tuple(sizes),
        tuple(strides[0][-3:]),
        tuple(strides[1][-3:]),
        count(f"{who}: src_offset", src_offset, 0, _U32),
        count(f"{who}: out_offset", out_offset, 0, _U32),
        **_ordered(order),
    )
    return out


def activation(
    dev: Any,
    z: Tensor,
    name: str,
    grad: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    order: Optional[tuple[int, int]] = None,
) -> Tensor:
    """act(z) elementwise, or with grad the activation's backward grad * act'(z)
    (z: the activation's input), computed in fp32 and rounded once to z's dtype
    (float16 or bfloat16). name: 'relu', 'gelu' / 'gelu_tanh' (the tanh
    approximation, as torch's approximate='tanh') or 'silu'. out: a Tensor of
    z's dtype with room for z's elements (default a new one shaped like z)."""
    who = "activation"
    z = _tensor(dev, z, "z", who)
    code = activation_code(name)
    if code == 0:
        raise ValueError(f"{who}: name must be an activation ('relu', 'gelu', 'gelu_tanh', 'silu'), got {name!r}")
    n = z.size
    if grad is not None:
        grad = _tensor(dev, grad, "grad", who)
        if grad.dtype != z.dtype or grad.size != n:
            raise ValueError(
                f"{who}: grad {grad.shape} {grad.dtype.name} must match z {z.shape} {z.dtype.name} (elements and dtype)"
            )
    if out is None:
        out = new_tensor(dev, z.shape, z.dtype)
    else:
        out = _tensor(dev, out, "out", who)
        if out.dtype != z.dtype or out.size < n:
            raise ValueError(f"{who}: out {out.shape} {out.dtype.name} must hold z's {n} {z.dtype.name} elements")
    for t, nm in ((z, "z"), (grad, "grad"), (out, "out")):
        if t is not None and not t.packed:
            raise ValueError(f"{who}: {nm} must be packed (rows without padding), got pitch {t.pitch}")
    dev._activation(z, out, n, code, z.dtype.name, grad, **_ordered(order))
    return out


LAYERNORM_ROWS: int = _helios.LAYERNORM_ROWS  # rows per workgroup of the backward: one partial row-sum each


def _fp32(dev: Any, t: Any, name: str, who: str, n: int) -> Tensor:
    if not isinstance(t, Tensor) or t.device is not dev:
        raise TypeError(f"{who}: {name} must be a helios.Tensor of this Device, not {type(t).__name__}")
    if t.dtype != np.float32 or t.size != n or not t.packed:
        raise ValueError(f"{who}: {name} must be a packed float32 Tensor of {n} elements; {got_tensor(t)}")
    return t


def _fresh(dev: Any, t: Optional[Tensor], shape: tuple, dtype: Any, name: str, who: str) -> Tensor:
    """out= Tensors: packed, of the dtype, with room; else a new one."""
    if t is None:
        return new_tensor(dev, shape, dtype)
    if not isinstance(t, Tensor) or t.device is not dev or t.dtype != np.dtype(dtype) or not t.packed:
        raise ValueError(f"{who}: {name} must be a packed {np.dtype(dtype).name} Tensor of this Device")
    if t.size != int(np.prod(shape)):
        raise ValueError(f"{who}: {name} must hold {int(np.prod(shape))} elements, got {t.shape}")
    return t


def layernorm(
    dev: Any,
    x: Tensor,
    gamma: Tensor,
    beta: Tensor,
    *,
    residual: Optional[Tensor] = None,
    eps: float = 1e-5,
    dtype: Any = None,
    out: Optional[Tensor] = None,
    x_out: Optional[Tensor] = None,
    stats: Optional[Tensor] = None,
    order: Optional[tuple[int, int]] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """LayerNorm over the last dimension of an fp32 stream x (rows, d): with
    residual (a 16-bit Tensor of x's elements, a branch's output) the stream becomes
    x + residual first (written to x_out). gamma, beta: fp32 (d,). Returns (h, stream,
    stats): h = (v - mean) / sqrt(var + eps) * gamma + beta in dtype (float16 or
    bfloat16; default residual's, else float16), the stream normalised (x_out, or x),
    and stats (rows, 2) fp32: each row's mean and 1/sqrt(var + eps) (biased
    variance, as torch), what :func:`layernorm_backward` takes."""
    op = layernorm_operands(dev, x, gamma, beta, residual, eps, dtype, out, x_out, stats)
    dev._layernorm(**op, **_ordered(order))
    return op["h"], (op["x_out"] if op["x_out"] is not None else x), op["stats"]


def layernorm_operands(
    dev: Any,
    x: Tensor,
    gamma: Any,
    beta: Any,
    residual: Optional[Tensor],
    eps: float,
    dtype: Any,
    out: Optional[Tensor],
    x_out: Optional[Tensor],
    stats: Optional[Tensor],
) -> dict[str, Any]:
    """LayerNorm's forward checked, its outputs made where not given: the core's
    arguments by name (x, gamma, beta, h, stats, rows, d, eps, dtype, r, x_out), what
    a call and a plan's step both take. beta None: RMSNorm's (a plan's rmsnorm)."""
    who = "layernorm"
    if not isinstance(x, Tensor) or x.dtype != np.float32 or not x.packed or x.ndim < 1:
        raise TypeError(f"{who}: x must be a packed float32 helios.Tensor; {got_tensor(x)}")
    d = int(x.shape[-1])
    rows = x.size // d
    gamma = _fp32(dev, gamma, "gamma", who, d)
    beta = _fp32(dev, beta, "beta", who, d) if beta is not None else None
    if residual is not None:
        residual = _tensor(dev, residual, "residual", who)
        if residual.size != x.size:
            raise ValueError(f"{who}: residual {residual.shape} must have x's {x.size} elements")
    if dtype is not None:
        dt = as_dtype(dtype, f"{who}: dtype", (float16, bfloat16))
    else:
        dt = residual.dtype if residual is not None else np.dtype(float16)
    h = _fresh(dev, out, tuple(x.shape), dt, "out", who)
    st = _fresh(dev, stats, (rows, 2), np.float32, "stats", who)
    stream = _fresh(dev, x_out, tuple(x.shape), np.float32, "x_out", who) if residual is not None else None
    return dict(
        x=x, gamma=gamma, beta=beta, h=h, stats=st, rows=rows, d=d, eps=float(eps), dtype=dt.name, r=residual,
        x_out=stream,
    )  # fmt: skip


def layernorm_backward(
    dev: Any,
    grad_h: Tensor,
    x: Tensor,
    stats: Tensor,
    gamma: Tensor,
    *,
    grad_residual: Optional[Tensor] = None,
    gx: Optional[Tensor] = None,
    gx16: Optional[Tensor] = None,
    partial: Optional[Tensor] = None,
    order: Optional[tuple[int, int]] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The backward of :func:`layernorm` at its output gradient grad_h (16-bit, x's
    elements): (gx, gx16, partial). gx: d loss / d stream in fp32 (+ grad_residual,
    the stream's gradient from above, fp32), gx16 the same rounded to grad_h's dtype
    (the gradient of the branch that was added), partial (ceil(rows / LAYERNORM_ROWS),
    2, d) fp32: per LAYERNORM_ROWS (8) rows the column sums of grad_h * xhat and of
    grad_h, whose sum over the
    first axis is (gamma's gradient, beta's gradient). x: the stream the forward
    normalised (its returned stream); stats: its stats."""
    who = "layernorm_backward"
    grad_h = _tensor(dev, grad_h, "grad_h", who)
    if not isinstance(x, Tensor) or x.dtype != np.float32 or not x.packed or x.size != grad_h.size:
        raise ValueError(f"{who}: x must be a packed float32 Tensor of grad_h's {grad_h.size} elements")
    d = int(x.shape[-1])
    rows = x.size // d
    stats = _fp32(dev, stats, "stats", who, rows * 2)
    gamma = _fp32(dev, gamma, "gamma", who, d)
    if grad_residual is not None:
        grad_residual = _fp32(dev, grad_residual, "grad_residual", who, x.size)
    groups = -(-rows // LAYERNORM_ROWS)
    gx = _fresh(dev, gx, tuple(x.shape), np.float32, "gx", who)
    gx16 = _fresh(dev, gx16, tuple(x.shape), grad_h.dtype, "gx16", who)
    partial = _fresh(dev, partial, (groups, 2, d), np.float32, "partial", who)
    dev._layernorm_backward(
        grad_h, x, stats, gamma, gx, gx16, partial, rows, d, grad_h.dtype.name, grad_residual, **_ordered(order)
    )
    return gx, gx16, partial

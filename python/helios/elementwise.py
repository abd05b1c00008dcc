"""The ops a model runs between its products and attention, on the device:
layout copies (``Device.copy_strided``) and activations with their backward
(``Device.activation``). On Tensors only; each is one dispatch, ordered like a
product where ``order`` is given, so that a layer's work can stay one group of
Helios submissions (see ``helios.torch``)."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .dtypes import bfloat16, float16
from .gemm import activation_code
from .tensor import Tensor, new_tensor
from .validate import count

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

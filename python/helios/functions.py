"""The module-level ops: ``helios.matmul``, ``helios.attention``,
``helios.variants`` and ``helios.tensor`` on the default device (opened on first
use), the given one (a Device, or an index as torch's ``device=0``), or the one
their Tensors live on."""

from __future__ import annotations

import threading
from typing import Any, Optional, Union, cast

import numpy as np

from . import _helios
from .device import Device
from .tensor import Tensor

_default: Optional[Device] = None
_default_lock = threading.Lock()
_by_index: dict[int, Device] = {}  # device=i: one Device per index for the process

DeviceLike = Union[Device, int, None]


def default_device() -> Device:
    """The process-wide Device used by helios.matmul (opened on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Device()
        return _default


def device_at(index: int) -> Device:
    """The process-wide Device of Vulkan device `index` (opened on first use, kept):
    what ``device=i`` means in the module-level ops."""
    with _default_lock:
        dev = _by_index.get(index)
        if dev is None or dev.closed:
            dev = _by_index[index] = Device(index)
        return dev


def op_device(device: DeviceLike, *args: Any) -> Device:
    """The device a module-level op runs on: the given Device (or index); else the one
    its Tensors live on (Tensors on two devices are refused, naming both); else the
    default device."""
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool):
        device = device_at(int(device))
    if device is not None and not isinstance(device, _helios.Device):
        raise TypeError(f"device must be a helios.Device, an index or None, not {type(device).__name__}")
    homes = {id(t.device): t.device for t in args if isinstance(t, Tensor)}
    if len(homes) > 1:
        names = " and ".join(
            f"{d.info['name']} ({d.info['uuid']})" if not d.closed else "a closed Device" for d in homes.values()
        )
        raise ValueError(f"these Tensors live on different Devices: {names}; copy one with upload(t.numpy())")
    if device is None:
        return cast(Device, next(iter(homes.values()))) if homes else default_device()
    return cast(Device, device)


def matmul(
    a: Any,
    b: Any,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    bias: Any = None,
    activation: Optional[str] = None,
    alpha: float = 1.0,
    beta: Optional[float] = None,
    c: Any = None,
    out: Any = None,
    out_dtype: Any = None,
    variant: Optional[str] = None,
    device: DeviceLike = None,
) -> Any:
    """C = act(alpha * op(a) @ op(b) + beta * c + bias) on the default (or given)
    device, as :meth:`Device.matmul` (numpy.matmul's shapes; the result's dtype and
    array type follow the inputs). device: a Device or an index."""
    return op_device(device, a, b, out, bias).matmul(
        a,
        b,
        trans_a=trans_a,
        trans_b=trans_b,
        bias=bias,
        activation=activation,
        alpha=alpha,
        beta=beta,
        c=c,
        out=out,
        out_dtype=out_dtype,
        variant=variant,
    )


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    variant: Optional[str] = None,
    out: Any = None,
    is_causal: Optional[bool] = None,
    return_lse: bool = False,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    device: DeviceLike = None,
) -> Any:
    """softmax(scale * q @ k^T) @ v on (B, H, S, d) arrays, on the default (or given)
    device, as :meth:`Device.attention`. device: a Device or an index."""
    return op_device(device, q, k, v, out).attention(
        q,
        k,
        v,
        causal=causal,
        scale=scale,
        variant=variant,
        out=out,
        is_causal=is_causal,
        return_lse=return_lse,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
    )


def variants(device: DeviceLike = None) -> list[str]:
    """Canonical strings of every variant valid on the device."""
    return op_device(device).variants()


def tensor(data: Any, *, device: DeviceLike = None, dtype: Any = None) -> Tensor:
    """A Tensor holding a copy of data (a NumPy array, nested lists, a torch CPU tensor,
    anything with the array interface or DLPack) on the default (or given) device, as
    torch.tensor and cupy.asarray: dtype float16 (default; bfloat16 data stays
    bfloat16), bfloat16 or float32. The same as ``Device.upload(data, dtype=dtype)``."""
    return op_device(device).upload(data, dtype=dtype)

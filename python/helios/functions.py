"""The module-level ops: ``helios.matmul``, ``helios.attention`` and
``helios.variants`` on the default device (opened on first use), the given one,
or the one their Tensors live on."""

from __future__ import annotations

import threading
from typing import Any, Optional, cast

from . import _helios
from .device import Device
from .tensor import Tensor

_default: Optional[Device] = None
_default_lock = threading.Lock()


def default_device() -> Device:
    """The process-wide Device used by helios.matmul (opened on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Device()
        return _default


def op_device(device: Optional[Device], *args: Any) -> Device:
    """The device a module-level op runs on: the given Device; else the one its
    Tensors live on (Tensors on two devices are refused, naming both); else the
    default device."""
    if device is not None and not isinstance(device, _helios.Device):
        raise TypeError(f"device must be a helios.Device or None, not {type(device).__name__}")
    homes = {id(t.device): t.device for t in args if isinstance(t, Tensor)}
    if len(homes) > 1:
        names = " and ".join(
            f"{d.info['name']} ({d.info['uuid']})" if not d.closed else "a closed Device" for d in homes.values()
        )
        raise ValueError(f"these Tensors live on different Devices: {names}; copy one with upload(t.numpy())")
    if device is None:
        return cast(Device, next(iter(homes.values()))) if homes else default_device()
    return device


def matmul(a: Any, b: Any, *, device: Optional[Device] = None, **kwargs: Any) -> Any:
    """C = act(alpha * op(a) @ op(b) + beta * c + bias) on the default (or given)
    device. Keywords as Device.matmul: trans_a, trans_b, bias, activation, alpha,
    beta, c, out, out_dtype, variant."""
    return op_device(device, a, b, kwargs.get("out"), kwargs.get("bias")).matmul(a, b, **kwargs)


def attention(q: Any, k: Any, v: Any, *, device: Optional[Device] = None, **kwargs: Any) -> Any:
    """softmax(scale * q @ k^T) @ v on (B, H, S, d) arrays, on the default (or given)
    device. Keywords as Device.attention: causal, scale, variant, out."""
    return op_device(device, q, k, v, kwargs.get("out")).attention(q, k, v, **kwargs)


def variants(device: Optional[Device] = None) -> list[str]:
    """Canonical strings of every variant valid on the device."""
    return op_device(device).variants()

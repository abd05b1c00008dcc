"""``helios.from_dlpack``: a Tensor from any DLPack producer. Host arrays are
uploaded once; torch CUDA tensors go device to device through helios.torch
(zero-copy from its memory pool). Its own module: it sits above both the device
layer and helios.torch, which builds on the device layer."""

from __future__ import annotations

from typing import Any, Optional

from .device import Device
from .functions import op_device
from .tensor import Tensor


def from_dlpack(x: Any, *, dtype: Any = None, device: Optional[Device] = None, copy: Optional[bool] = None) -> Tensor:
    """A Tensor from a DLPack producer. Host data (a torch CPU tensor, a NumPy
    array) is read in place and uploaded once (Device.upload; copy=False is a
    BufferError: host memory is always copied). A torch CUDA tensor goes device to
    device, never through the host (helios.torch.to_helios): zero-copy where it
    was allocated in ``helios.torch.memory_pool()``, else one copy on its stream
    (copy=False: BufferError instead)."""
    kind = tuple(x.__dlpack_device__())[0] if hasattr(x, "__dlpack_device__") else 1
    if kind == 2:  # kDLCUDA
        if type(x).__module__.split(".")[0] != "torch":
            raise TypeError(
                f"from_dlpack: CUDA arrays are taken from torch tensors (helios.torch.to_helios); "
                f"{type(x).__name__} is not supported yet"
            )
        if dtype is not None:
            raise ValueError("from_dlpack: a CUDA tensor keeps its dtype (convert it in torch first)")
        from .torch import to_helios  # needs torch: imported only for torch tensors

        t = to_helios(x, copy)
        if device is not None and t.device is not device:
            raise ValueError("from_dlpack: the tensor's GPU is another Vulkan device than `device`")
        return t
    if copy is False:
        raise BufferError("from_dlpack(copy=False): host memory is always copied to the device")
    return op_device(device).upload(x, dtype=dtype)

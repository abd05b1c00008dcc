"""Host data as Helios reads it: the one conversion rule of every entry point
(operands, uploads, C, bias): host data must be real floating point (float16,
bfloat16, float32 or float64), rounded once to what the kernel reads (the op's 16-bit
type for operands, float32 bias, the output dtype for C). Integer, bool, complex and
object dtypes are a TypeError, never a silent conversion (a complex array would lose
its imaginary part); integer data becomes int32 indices only where asked for
(index_array). The dtypes themselves are declared in helios/dtypes.py."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

from .dtypes import HOST_FLOATS, bfloat16, int32


def host_array(x: Any, name: str) -> np.ndarray:
    """An ndarray view of x (NumPy, the array interface, or DLPack such as a torch
    CPU tensor: no copy where the producer allows)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (list, tuple)):  # nested Python sequences, as NumPy reads them
        return np.asarray(x)
    if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError) as e:
            try:
                on_host = tuple(x.__dlpack_device__())[0] in (1, 3)  # kDLCPU, kDLCUDAHost
            except Exception:
                on_host = False
            if getattr(x, "requires_grad", False) is True:  # torch refuses to export a tensor autograd tracks
                raise TypeError(
                    f"{name}: a torch tensor that requires grad cannot be read as host data; pass "
                    f"{name}.detach() (helios.torch's ops take CUDA tensors with autograd)"
                ) from None
            if on_host and str(getattr(x, "dtype", "")) == "torch.bfloat16":  # NumPy has no bfloat16
                return x.view(_torch_int16()).numpy().view(bfloat16)  # the same bits, no copy
            if on_host:  # a host array NumPy cannot represent
                raise TypeError(
                    f"{name}: {type(x).__name__} of dtype {getattr(x, 'dtype', '?')} cannot be "
                    f"read as a NumPy array ({e}); Helios takes float16, bfloat16, float32 or float64 "
                    f"host data: convert it, e.g. x.float()"
                ) from None
            raise TypeError(
                f"{name}: cannot read {type(x).__name__} through DLPack ({e}); pass a host (CPU) array"
            ) from None
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__") or isinstance(x, memoryview):
        return np.asarray(x)
    raise TypeError(
        f"{name} must be an array (numpy.ndarray, a nested list, a DLPack or array-interface object) "
        f"or a helios.Tensor, not {type(x).__name__}"
    )


def _torch_int16() -> Any:
    import torch

    return torch.int16


# The one conversion rule of every entry point (operands, uploads, C, bias):
# host data must be real floating point (float16, bfloat16, float32 or float64),
# rounded once to what the kernel reads (the op's 16-bit type for operands,
# float32 bias, the output dtype for C). Integer, bool, complex and object dtypes
# are a TypeError, never a silent conversion (a complex array would lose its
# imaginary part). The dtypes themselves are declared in helios/dtypes.py.


def float_array(x: Any, name: str, op: str) -> np.ndarray:
    """host_array(x) checked against the conversion rule."""
    arr = host_array(x, name)
    if arr.dtype not in HOST_FLOATS:
        raise TypeError(
            f"{name} has dtype {arr.dtype}; {op} takes floating-point host data (float16 or "
            f"float32; float64 is rounded), never integers, bools, complex or objects: convert "
            f"it explicitly"
        )
    return arr


def index_array(x: Any, name: str) -> np.ndarray:
    """host_array(x) as int32 indices: integer host data whose values int32 holds (a
    TypeError for any other dtype, a ValueError naming the value out of range)."""
    arr = host_array(x, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: an int32 Tensor takes integer host data (token ids), got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < -(2**31) or int(arr.max()) >= 2**31):
        bad = int(arr.min()) if int(arr.min()) < -(2**31) else int(arr.max())
        raise ValueError(f"{name}: {bad} does not fit int32")
    return arr.astype(int32, copy=False)


def input_array(arr: np.ndarray, name: str, op: str, dt: Any) -> np.ndarray:
    """A C-contiguous, aligned array of arr in the op's 16-bit type dt (float16 or
    bfloat16; wider types are rounded once, a copy only where needed, an unaligned
    view is copied as NumPy would); other dtypes are a TypeError naming the
    operation (the conversion rule above)."""
    if arr.dtype not in HOST_FLOATS:
        raise TypeError(
            f"{name} has dtype {arr.dtype}; {op} takes floating-point data (float16, bfloat16 or "
            f"float32; float64 is rounded to {np.dtype(dt).name})"
        )
    return np.require(to_compute_type(arr, dt, name, op), requirements=["C", "A"])


FLOAT16_MAX = 65504.0


def to_compute_type(arr: np.ndarray, dt: Any, name: str, op: str) -> np.ndarray:
    """arr in the op's 16-bit type dt (a copy where it is not already). Finite values
    beyond float16's range become inf in that rounding: one warning naming the operand,
    its largest value and the way out (bfloat16 keeps float32's range), instead of
    NumPy's bare overflow warning from inside Helios."""
    if arr.dtype == dt:
        return arr
    if np.dtype(dt) == np.float16 and arr.dtype in (np.float32, np.float64) and arr.size:
        big = np.abs(arr) > FLOAT16_MAX
        if big.any() and np.isfinite(arr[big]).any():
            largest = float(np.max(np.abs(arr[big & np.isfinite(arr)])))
            warnings.warn(
                f"{op}: {name} holds values beyond float16's range (largest |x| = {largest:.6g} > 65504): "
                "rounded to float16 they become inf. Pass bfloat16 data (helios.bfloat16, torch.bfloat16) "
                "for float32's range, or scale them",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        with np.errstate(over="ignore"):
            return arr.astype(dt)
    return arr.astype(dt)


def user_stacklevel() -> int:
    """The stacklevel of a warning raised inside the helios package that points at the
    first frame outside it (the user's call)."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    f: Any = sys._getframe(1)
    level = 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(here):
        f, level = f.f_back, level + 1
    return level


def like_inputs(result: np.ndarray, *inputs: Any) -> Any:
    """A host result in the array type of the inputs: a torch CPU tensor when an
    input was a torch tensor, else the NumPy array."""
    if any(type(x).__module__.split(".")[0] == "torch" for x in inputs):
        import torch

        result = np.ascontiguousarray(result)
        if result.dtype == bfloat16:  # torch.from_numpy knows no ml_dtypes bfloat16: the same bits
            return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(result)
    return result


def ndim_of(x: Any) -> int:
    return x.ndim if hasattr(x, "ndim") else np.ndim(x)

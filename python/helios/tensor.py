"""Device-resident tensors (``helios.Tensor``) and the conversion of host arrays
(NumPy, the array interface, DLPack producers such as torch CPU tensors) that
every op shares."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from . import _helios
from .validate import count


class Tensor(_helios.Tensor):
    """Device-resident memory holding a 1-D to 4-D float16/float32 array (products
    take 2-D and 3-D Tensors, attention 4-D ones).

    Made by ``Device.upload``, ``Device.empty`` or ``Device.prepack``; rows are
    ``pitch`` elements apart (``pitch == shape[-1]`` except for prepacked weights,
    whose rows are padded to 16 bytes). ``numpy()`` downloads a packed copy.
    Closing the Device frees the memory; using the Tensor afterwards raises
    DeviceClosedError. ``__dlpack__`` exports that host copy (kDLCPU).
    """

    shape: tuple
    dtype: np.dtype
    pitch: int
    prepacked_for: Optional[str]
    # False while this Tensor is the output of a Chain that has not run: reading it
    # then is an error, not zeros.
    computed: bool = True

    def _set_meta(self, shape: Sequence[int], dtype: Any, pitch: int,
                  prepacked_for: Optional[str] = None) -> "Tensor":
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.pitch = int(pitch)
        self.prepacked_for = prepacked_for
        return self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def _rows(self) -> int:
        return math.prod(self.shape[:-1]) if self.ndim > 1 else 1

    def numpy(self) -> np.ndarray:
        """A host copy (packed, C-contiguous). RuntimeError for the output of a
        Chain that has not run yet (its contents are undefined)."""
        if not self.computed:
            raise RuntimeError("this Tensor is the output of a Chain that has not run yet: call "
                               "chain.run() (or leave the chain's with-block) before reading it")
        cols = self.shape[-1]
        raw = np.empty(self._rows() * self.pitch, dtype=self.dtype)
        self._read(0, raw)
        return np.ascontiguousarray(raw.reshape(self._rows(), self.pitch)[:, :cols]).reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self.numpy().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple:
        return (1, 0)   # kDLCPU: the export is a host copy

    def __repr__(self) -> str:
        state = "" if self.alive else ", closed"
        extra = f", pitch={self.pitch}" if self.pitch != self.shape[-1] else ""
        pp = f", prepacked_for={self.prepacked_for!r}" if self.prepacked_for else ""
        return f"helios.Tensor(shape={self.shape}, dtype={self.dtype}{extra}{pp}{state})"


def new_tensor(dev: Any, shape: Sequence[int], dtype: Any, pitch: Optional[int] = None,
               prepacked_for: Optional[str] = None) -> Tensor:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
        raise TypeError(f"shape must be a sequence of ints, not {type(shape).__name__}")
    shape = tuple(count(f"shape[{i}]", s, 1, 2**62) for i, s in enumerate(shape))
    if not 1 <= len(shape) <= 4:
        raise ValueError(f"a Tensor has 1 to 4 dimensions, got shape {shape}")
    dt = np.dtype(dtype)
    if dt not in (np.float16, np.float32):
        raise TypeError(f"Tensor dtype must be float16 or float32, got {dt}")
    pitch = shape[-1] if pitch is None else int(pitch)
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    t = Tensor(dev, rows * pitch * dt.itemsize)
    return t._set_meta(shape, dt, pitch, prepacked_for)


def host_array(x: Any, name: str) -> np.ndarray:
    """An ndarray view of x (NumPy, the array interface, or DLPack such as a torch
    CPU tensor: no copy where the producer allows)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError) as e:
            try:
                on_host = tuple(x.__dlpack_device__())[0] in (1, 3)   # kDLCPU, kDLCUDAHost
            except Exception:
                on_host = False
            if on_host:   # a host array NumPy cannot represent (bfloat16, ...)
                raise TypeError(f"{name}: {type(x).__name__} of dtype {getattr(x, 'dtype', '?')} cannot be "
                                f"read as a NumPy array ({e}); Helios takes float16, float32 or float64 host "
                                f"data (bfloat16 is not supported yet): convert it, e.g. x.float()") from None
            raise TypeError(f"{name}: cannot read {type(x).__name__} through DLPack ({e}); "
                            f"pass a host (CPU) array") from None
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__") or isinstance(x, memoryview):
        return np.asarray(x)
    raise TypeError(f"{name} must be an array (numpy.ndarray, a DLPack or array-interface object) "
                    f"or a helios.Tensor, not {type(x).__name__}")


# The one conversion rule of every entry point (operands, uploads, C, bias):
# host data must be real floating point (float16, float32 or float64), rounded
# once to what the kernel reads (float16 operands, float32 bias, the output
# dtype for C). Integer, bool, complex and object dtypes are a TypeError, never
# a silent conversion (a complex array would lose its imaginary part).
HOST_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
TENSOR_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))


def float_array(x: Any, name: str, op: str) -> np.ndarray:
    """host_array(x) checked against the conversion rule."""
    arr = host_array(x, name)
    if arr.dtype not in HOST_FLOATS:
        raise TypeError(f"{name} has dtype {arr.dtype}; {op} takes floating-point host data (float16 or "
                        f"float32; float64 is rounded), never integers, bools, complex or objects: convert "
                        f"it explicitly")
    return arr


def float16_array(arr: np.ndarray, name: str, op: str) -> np.ndarray:
    """A C-contiguous, aligned float16 array of arr (float32 and float64 are rounded;
    a copy only where needed, an unaligned view is copied as NumPy would); other
    dtypes are a TypeError naming the operation (the conversion rule above)."""
    if arr.dtype not in HOST_FLOATS:
        raise TypeError(f"{name} has dtype {arr.dtype}; {op} takes floating-point data (float16 or "
                        f"float32; float64 is rounded to float16)")
    return np.require(arr, dtype=np.float16, requirements=["C", "A"])

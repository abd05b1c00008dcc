"""Device-resident tensors (``helios.Tensor``) and the conversion of host arrays
(NumPy, the array interface, DLPack producers such as torch CPU tensors) that
every op shares."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, cast

import numpy as np

from . import _helios
from .dtypes import HOST_FLOATS, TENSOR_DTYPES, as_dtype, bfloat16, int32, wire
from .validate import count


class Tensor(_helios.Tensor):
    """Device-resident memory holding a 1-D to 4-D float16, bfloat16
    (``helios.bfloat16``) or float32 array (products take 2-D and 3-D Tensors,
    attention 4-D ones).

    Made by ``Device.upload``, ``Device.empty`` or ``Device.prepack``; rows are
    ``pitch`` elements apart (``pitch == shape[-1]`` except for prepacked weights,
    whose rows are padded to 16 bytes). As an array: ``shape``, ``dtype``,
    ``device``, ``len(t)``, ``t @ u`` (a product on the device: a Tensor),
    ``t.T`` (a transposed view, read by the kernels as a layout, no copy),
    ``t.reshape(...)`` (a view of a packed Tensor), ``t[i]`` / ``t[a:b]`` (views
    of the leading axis: operands, never outputs), ``t.copy_(x)`` (new contents
    from a host array or another Tensor), ``numpy()`` (a host copy).
    Closing the Device frees the memory; using the Tensor afterwards raises
    DeviceClosedError. ``__dlpack__`` exports a host copy (kDLCPU), except for
    a Tensor made with ``exportable=True``: that one is handed to CUDA consumers
    (``torch.from_dlpack(t)``, CuPy, JAX) with no copy (kDLCUDA, the CUDA device
    with the same UUID), both sides then share the memory (see :meth:`__dlpack__`).
    """

    shape: tuple
    dtype: np.dtype
    pitch: int
    prepacked_for: Optional[str]
    # True for a transposed view: shape is the logical one, the memory holds its
    # last two axes swapped (rows `pitch` elements apart, as the base stores them).
    transposed: bool = False
    # True for a slice (t[i], t[a:b]): a view of part of another Tensor's memory,
    # an operand, never an output.
    is_slice: bool = False
    # NumPy's binary operators defer to ours (host @ Tensor runs on the device);
    # np.asarray(t) still copies through __array__.
    __array_ufunc__ = None
    # False while this Tensor is the output of a Chain that has not run: reading it
    # then is an error, not zeros.
    computed: bool = True

    def _set_meta(
        self,
        shape: Sequence[int],
        dtype: Any,
        pitch: int,
        prepacked_for: Optional[str] = None,
        transposed: bool = False,
    ) -> "Tensor":
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.pitch = int(pitch)
        self.prepacked_for = prepacked_for
        self.transposed = bool(transposed)
        return self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def stored_shape(self) -> tuple:
        """The shape as the memory holds it (the last two axes swapped for a transposed view)."""
        return self.shape[:-2] + (self.shape[-1], self.shape[-2]) if self.transposed else self.shape

    @property
    def packed(self) -> bool:
        """Rows are stored back to back and in the logical order (no pitch, not transposed)."""
        return not self.transposed and self.pitch == self.shape[-1]

    def _rows(self) -> int:
        st = self.stored_shape
        return math.prod(st[:-1]) if len(st) > 1 else 1

    def __new__(cls, *args: Any, **kwargs: Any) -> "Tensor":
        if args and isinstance(args[0], _helios.Device):
            return super().__new__(cls, *args, **kwargs)  # the engine's own: (device, nbytes, ...)
        raise TypeError(
            "helios.Tensor is made from data by helios.tensor(data, device=None, dtype=None) "
            "(or Device.upload(data), Device.empty(shape)), as torch.tensor and cupy.asarray make theirs"
        )

    def cpu(self) -> np.ndarray:
        """A host copy as a NumPy array (torch's name for ``numpy()``)."""
        return self.numpy()

    def astype(self, dtype: Any) -> "Tensor":
        """A new Tensor on the same Device holding this one's values as dtype (float16,
        bfloat16 or float32; through a host copy), as NumPy's and CuPy's astype."""
        dt = as_dtype(dtype, "astype: dtype")
        host = self.numpy()
        dev: Any = self.device  # a helios.Device (the engine's type is its base)
        return cast(Tensor, dev.upload(host.astype(dt) if dt != host.dtype else host, dtype=dt))

    def to(self, target: Any) -> Any:
        """torch's ``to``: a Device (a copy on that Device), a dtype (``astype``), or
        "cpu" (a host NumPy copy)."""
        if isinstance(target, _helios.Device):
            dev: Any = target
            return self if target is self.device else dev.upload(self.numpy(), dtype=self.dtype)
        if isinstance(target, str) and target == "cpu":
            return self.numpy()
        if isinstance(target, str) and target.split(":")[0] in ("cuda", "gpu", "vulkan", "mps", "xpu", "meta"):
            raise ValueError(
                f"to({target!r}): a helios.Tensor lives on a Vulkan device, which to() takes as a helios.Device; "
                "for a torch CUDA tensor, make the Tensor with exportable=True and pass it to torch.from_dlpack "
                "(no copy), or copy through the host: torch.from_numpy(t.numpy()).cuda()"
            )
        return self.astype(target)

    def numpy(self) -> np.ndarray:
        """A host copy (packed, C-contiguous). RuntimeError for the output of a
        Chain that has not run yet (its contents are undefined)."""
        if not self.computed:
            raise RuntimeError(
                "this Tensor is the output of a Chain that has not run yet: call "
                "chain.run() (or leave the chain's with-block) before reading it"
            )
        st = self.stored_shape
        raw = np.empty(self._rows() * self.pitch, dtype=self.dtype)
        self._read(0, wire(raw))
        host = raw.reshape(self._rows(), self.pitch)[:, : st[-1]].reshape(st)
        return np.ascontiguousarray(np.swapaxes(host, -1, -2) if self.transposed else host)

    def _derived(self, shape: Sequence[int], pitch: int, transposed: bool) -> "Tensor":
        v = self._view()
        v._set_meta(shape, self.dtype, pitch, self.prepacked_for, transposed)
        v.computed = self.computed
        v.is_slice = self.is_slice
        return v

    @property
    def T(self) -> "Tensor":
        """A view with the last two axes swapped (2-D and 3-D): no copy; products
        read it as a transposed layout."""
        if self.ndim not in (2, 3):
            raise ValueError(f"Tensor.T: 2-D or 3-D Tensors, this one has shape {self.shape}")
        return self._derived(self.shape[:-2] + (self.shape[-1], self.shape[-2]), self.pitch, not self.transposed)

    def reshape(self, *shape: Any) -> "Tensor":
        """A view with another shape of the same elements (1-D to 4-D; one -1 is
        inferred). Only a packed Tensor reshapes without a copy; others raise
        ValueError (reshape t.numpy() and upload it instead)."""
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        dims = tuple(count(f"reshape: shape[{i}]", d, -1, 2**62) for i, d in enumerate(dims))
        if dims.count(-1) > 1 or 0 in dims:
            raise ValueError(f"reshape: dimensions >= 1 and at most one -1, got {dims}")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)
            dims = tuple(self.size // known if d == -1 else d for d in dims)
        if math.prod(dims) != self.size or not 1 <= len(dims) <= 4:
            raise ValueError(f"reshape: cannot view {self.shape} ({self.size} elements) as {dims}")
        if not self.packed:
            raise ValueError(
                f"reshape: this Tensor is not packed (pitch {self.pitch}, transposed "
                f"{self.transposed}): a view cannot reorder it"
            )
        return self._derived(dims, dims[-1], False)

    def __getitem__(self, key: Any) -> "Tensor":
        """Basic slicing of the leading axis, as a view (no copy): ``t[i]`` drops
        the axis, ``t[a:b]`` keeps it (step 1). A slice is an operand of products
        and attention, and an output where its bytes are whole 4-byte words. Its first byte must sit where the device
        lets a buffer binding start (``device.info["storage_offset_alignment"]``,
        16 bytes on NVIDIA and lavapipe); other slices raise ValueError saying so
        (take ``t.numpy()[key]`` and upload it)."""
        if self.transposed:
            raise ValueError("Tensor slicing: slice the base Tensor, not a transposed view")
        n = self.shape[0]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {key} is out of range for a leading axis of {n}")
            start, stop, shape = i, i + 1, self.shape[1:]
        elif isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise ValueError(f"Tensor slicing: step {step}: only contiguous slices are views")
            stop = max(stop, start)
            shape = (stop - start,) + self.shape[1:]
        else:
            raise TypeError(
                f"Tensor indices: an int or a slice of the leading axis, not {type(key).__name__} "
                f"(use t.numpy()[...] for anything else)"
            )
        if not shape or 0 in shape:
            raise ValueError(
                f"Tensor slicing: {key!r} of shape {self.shape} selects {'a scalar' if not shape else 'nothing'}"
            )
        per = (math.prod(self.stored_shape[1:-1]) if self.ndim > 1 else 1) * (self.pitch if self.ndim > 1 else 1)
        item = self.dtype.itemsize
        if self.ndim == 1:
            offset, nbytes = start * item, (stop - start) * item
        else:
            offset, nbytes = start * per * item, (stop - start) * per * item
        try:
            view = self._slice(offset, nbytes)
        except _helios.UnsupportedError as e:
            raise ValueError(f"Tensor slicing: {key!r} starts {offset} bytes in; {e}") from None
        view._set_meta(
            shape, self.dtype, self.pitch if len(shape) > 1 or self.ndim > 1 else shape[-1], self.prepacked_for
        )
        if len(shape) == 1 and self.ndim > 1:  # one row of a matrix: its own elements only
            view.pitch = shape[0]
        view.computed = self.computed
        view.is_slice = True
        return view

    def copy_(self, src: Any) -> "Tensor":
        """Write new contents: a host array (floating point, rounded to this
        Tensor's dtype) or another Tensor of the same shape. Returns self, so a
        recorded Chain can run again on new inputs."""
        if isinstance(src, Tensor):
            data = src.numpy()
        elif self.dtype == int32:
            data = index_array(src, "copy_")
        else:
            data = float_array(src, "copy_", "Tensor.copy_")
        if tuple(data.shape) != self.shape:
            raise ValueError(f"copy_: source has shape {tuple(data.shape)}, this Tensor {self.shape}")
        if self.transposed:
            raise ValueError("copy_: write through the base Tensor, not a transposed view")
        if self.is_slice:
            raise ValueError("copy_: write through the base Tensor, not a slice of it")
        host = np.ascontiguousarray(data, dtype=self.dtype)
        if self.pitch != self.shape[-1]:  # padded rows (prepacked): keep the padding
            padded = np.zeros((self._rows(), self.pitch), dtype=self.dtype)
            padded[:, : self.shape[-1]] = host.reshape(self._rows(), self.shape[-1])
            host = padded
        self._write(0, wire(host))
        self.computed = True
        return self

    def __len__(self) -> int:
        return self.shape[0]

    def __matmul__(self, other: Any) -> Any:
        dev: Any = self.device  # the helios.Device (a subclass) that made this Tensor
        return dev.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        dev: Any = self.device
        return dev.matmul(other, self)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Optional[bool] = None
    ) -> Any:
        """DLPack export. A Tensor made with ``exportable=True`` is exported with no
        copy as CUDA memory (the NVIDIA driver's libcuda maps the Vulkan memory; a
        BufferError says what is missing where it cannot), and the export keeps the
        Tensor alive until the consumer frees its tensor (the Device refuses to close
        before). Ordering: every Helios operation returns after the GPU finished it,
        so the consumer may read at once, whatever `stream` it passes; work the
        consumer queues on the memory (a torch write) must finish before Helios
        reads it: synchronize that stream first. Other Tensors export a host copy.
        A consumer that passes ``max_version`` (1, 0) or newer gets DLPack 1.0's
        versioned capsule (``dltensor_versioned``), else the unversioned one.
        ``dl_device`` must be ``__dlpack_device__()`` where given, and a host copy
        (``copy=False`` refused: BufferError) takes ``stream=None`` only, as DLPack
        says of CPU memory; a CUDA export takes None or an integer stream."""
        if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
            raise TypeError(f"__dlpack__: stream must be None or an integer, got {stream!r}")
        if dl_device is not None:
            if (
                not isinstance(dl_device, (tuple, list))
                or len(dl_device) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in dl_device)
            ):
                raise TypeError(f"__dlpack__: dl_device must be a (device_type, device_id) pair, got {dl_device!r}")
            if tuple(dl_device) != self.__dlpack_device__():
                raise BufferError(
                    f"__dlpack__: dl_device={tuple(dl_device)}: the Tensor exports on {self.__dlpack_device__()} only"
                )
        if not self.exportable:
            if copy is False:
                raise BufferError(
                    "__dlpack__(copy=False): this Tensor is exported as a host copy only; make it with "
                    "exportable=True for a CUDA export without a copy"
                )
            if stream is not None:
                raise BufferError(f"__dlpack__: a host copy (kDLCPU) takes stream=None, got {stream!r}")
            if self.dtype == bfloat16:  # NumPy exports no bfloat16 (DLPack's kDLBfloat)
                raise BufferError(
                    "a bfloat16 Tensor is exported through DLPack only when exportable=True (CUDA, no copy); "
                    "read it with t.numpy() (an ml_dtypes bfloat16 array)"
                )
            host = self.numpy()
            if max_version is not None:
                try:  # NumPy >= 2.1 emits DLPack 1.0's versioned capsule where asked (flagged as a copy)
                    return host.__dlpack__(max_version=max_version, copy=True)
                except TypeError:
                    pass  # an older NumPy: the unversioned capsule, as DLPack lets a producer
            return host.__dlpack__()
        if copy:
            raise BufferError("an exportable Tensor is exported without a copy (copy=True is not offered)")
        if not self.packed or self.is_slice:
            raise BufferError("only a whole, packed Tensor is exported (not a slice, transposed or pitched view)")
        if not self.computed:
            raise BufferError("the Tensor is the output of a Chain that has not run")
        code = 4 if self.dtype == bfloat16 else 0 if self.dtype == int32 else 2  # kDLBfloat, kDLInt, kDLFloat
        # DLPack 1.0's versioned capsule where the consumer takes it (max_version >= (1, 0)),
        # else the unversioned one every consumer takes
        versioned = max_version is not None and tuple(max_version)[:1] >= (1,)
        return self._dlpack(self.shape, code, self.dtype.itemsize * 8, versioned)

    def __dlpack_device__(self) -> tuple:
        if self.exportable:
            return (2, self._cuda_device())  # kDLCUDA, the ordinal with this device's UUID
        return (1, 0)  # kDLCPU: the export is a host copy

    def __repr__(self) -> str:
        state = "" if self.alive else ", closed"
        extra = f", pitch={self.pitch}" if self.pitch != self.stored_shape[-1] else ""
        extra += ", transposed view" if self.transposed else ""
        pp = f", prepacked_for={self.prepacked_for!r}" if self.prepacked_for else ""
        dev = self.device.info["name"] if self.alive and not self.device.closed else "closed"
        return f"helios.Tensor(shape={self.shape}, dtype={self.dtype}, device={dev!r}{extra}{pp}{state})"


def new_tensor(
    dev: Any,
    shape: Sequence[int],
    dtype: Any,
    pitch: Optional[int] = None,
    prepacked_for: Optional[str] = None,
    exportable: bool = False,
) -> Tensor:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__"):
        raise TypeError(f"shape must be a sequence of ints, not {type(shape).__name__}")
    shape = tuple(count(f"shape[{i}]", s, 1, 2**62) for i, s in enumerate(shape))
    if not 1 <= len(shape) <= 4:
        raise ValueError(f"a Tensor has 1 to 4 dimensions, got shape {shape}")
    dt = as_dtype(dtype, "Tensor dtype")
    pitch = shape[-1] if pitch is None else int(pitch)
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    try:
        t = Tensor(dev, rows * pitch * dt.itemsize, exportable=exportable)
    except _helios.DeviceMemoryError as e:
        raise _helios.DeviceMemoryError(f"a {dt.name} Tensor of shape {shape}: {e}") from None
    return t._set_meta(shape, dt, pitch, prepacked_for)


from .host_data import (  # noqa: E402  (re-exported: the entry points import them from here)
    float_array,
    host_array,
    index_array,
    input_array,
    like_inputs,
    ndim_of,
    to_compute_type,
    user_stacklevel,
)

__all__ = [
    "HOST_FLOATS",
    "TENSOR_DTYPES",
    "Tensor",
    "float_array",
    "host_array",
    "index_array",
    "new_tensor",
    "input_array",
    "like_inputs",
    "ndim_of",
    "to_compute_type",
    "user_stacklevel",
]

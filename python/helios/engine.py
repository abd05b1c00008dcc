"""The engine's entry points for framework bridges (helios.torch): what the public API
(Device.matmul, helios.attention, helios.layernorm, ...) runs after its own checks,
for a caller that has made those checks already and cannot afford the generic layer's
conversions per op; and the ordering of Vulkan work against a CUDA stream.

Each entry is one call of the binding (``_helios``), named, typed and documented here,
so that a bridge never reaches into Device's or Tensor's private members. The core
checks every size against the tensors again: a wrong call raises, it never reads or
writes outside a buffer. Internal: kept in step with helios.torch, not promised to
users across versions (docs/architecture.md, "The package")."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from . import _helios
from .device import Device
from .dtypes import bfloat16

# -- ordering against a CUDA stream (a stream is its CUstream handle as an int) -------


def stream_signals(dev: Device, stream: int) -> tuple[int, int]:
    """A fresh pair of the device's shared timeline values (wait, signal); the stream
    signals `wait` once the work queued on it so far is done. BufferError where the
    GPU offers no semaphore shared with CUDA (then order by waiting on the host)."""
    wait, signal = dev._async_values()
    dev._cuda_signal(stream, wait)
    return wait, signal


def stream_waits(dev: Device, stream: int, value: int) -> None:
    """The stream's later work waits until the device's timeline reaches value."""
    dev._cuda_wait(stream, value)


def probe_stream_order(dev: Device, stream: int) -> None:
    """Signals an unused pair of values on the stream (kept in order, nothing waits on
    them): BufferError, naming what is missing, where semaphore ordering cannot work."""
    wait, signal = dev._async_values()
    dev._cuda_signal(stream, wait)
    dev._cuda_signal(stream, signal)


@contextlib.contextmanager
def group_on_stream(dev: Device, stream: int) -> Iterator[None]:
    """The ops issued inside are one submission, after the stream's work so far; the
    stream's later work waits for it: one CUDA -> Vulkan hop and one back. Submitted
    even when an op inside raised (what was recorded runs and the signal comes), so the
    stream never waits for a value that is never signalled."""
    wait, signal = stream_signals(dev, stream)
    dev._group_begin(wait, signal)
    try:
        yield
    finally:
        dev._group_end()
        stream_waits(dev, stream, signal)


def replay_on_stream(dev: Device, capture: Any, stream: int) -> None:
    """One replay of a capture (helios.capture) after the stream's work so far, the
    stream's later work after it."""
    wait, signal = stream_signals(dev, stream)
    capture.submit(wait, signal)
    stream_waits(dev, stream, signal)


# -- the kernels, on Tensors the caller has checked ------------------------------------


def pick_matmul(dev: Device, m: int, n: int, k: int, dtype: str) -> Optional[str]:
    """The variant Device.matmul would run for this product where something chose one
    (an override, the tuning cache); None: the core's own default for the shape."""
    return dev._pick(None, m, n, k, dtype)


def pick_attention(dev: Device, head_dim: int, keys: int, causal: bool, backward: bool, dtype: Any) -> Optional[str]:
    """The attention variant helios.attention (or its backward) would run where
    something chose one; None: the core's own default."""
    return dev._pick_attention(None, head_dim, keys, causal, backward, dtype)


def matmul(dev: Device, **fields: Any) -> None:
    """op(a) @ op(b) (+ bias, activation) into out: the fields of Device.matmul's engine
    call (a, b, m, n, k, trans_a, trans_b, lda, ldb, in_dtype, out_dtype, out, act,
    bias, variant)."""
    dev._gemm(**fields)


def activation(dev: Device, z: Any, y: Any, n: int, code: int, dtype: str, grad: Optional[Any] = None) -> None:
    """y = act(z) over n elements (act by its code, helios.gemm's), or with grad the
    activation's backward at z times grad."""
    dev._activation(z, y, n, code, dtype, grad)


def layernorm(dev: Device, x: Any, gamma: Any, beta: Any, h: Any, stats: Any, rows: int, d: int, eps: float,
              dtype: str, branch: Optional[Any] = None, stream_out: Optional[Any] = None) -> None:  # fmt: skip
    """h = LayerNorm(x (+ branch)) of the fp32 stream x (rows, d) in dtype, with each
    row's (mean, rstd) in stats; with a branch, x + branch also into stream_out."""
    dev._layernorm(x, gamma, beta, h, stats, rows, d, eps, dtype, branch, stream_out)


def layernorm_backward(dev: Device, grad_h: Any, x: Any, stats: Any, gamma: Any, gx: Any, gx16: Any, partial: Any,
                       rows: int, d: int, dtype: str, grad_stream: Optional[Any] = None) -> None:  # fmt: skip
    """LayerNorm's backward: gx (fp32) and gx16 (dtype), the gamma/beta sums per block
    of rows in partial; grad_stream, where given, added into gx."""
    dev._layernorm_backward(grad_h, x, stats, gamma, gx, gx16, partial, rows, d, dtype, grad_stream)


def attention(dev: Device, q: Any, k: Any, v: Any, sizes: tuple, *, out: Any, lse: Any, **kw: Any) -> None:
    """The attention forward: sizes (bh, sq, skv, d), keywords as helios.attention's
    engine call (causal, scale, variant, dtype, layout), out and the log-sum-exp."""
    dev._attention(q, k, v, *sizes, out=out, lse=lse, **kw)


def attention_backward(dev: Device, q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, grads: tuple,
                       sizes: tuple, **kw: Any) -> None:  # fmt: skip
    """dQ, dK, dV into grads from the forward's operands, output and log-sum-exp."""
    dev._attention_backward(q, k, v, o, do, lse, *grads, *sizes, **kw)


# -- Tensors over memory another framework owns -----------------------------------------


def probe_cuda_pool(ordinal: int) -> None:
    """Allocates and frees one byte of the shared CUDA pool on that device: the
    driver's reason (an exception) where the pool cannot work there."""
    _helios._cuda_pool_free(_helios._cuda_pool_alloc(1, ordinal))


def view(t: Any, offset: int, nbytes: int, shape: tuple, dtype: str, ld: int) -> Any:
    """A Tensor over nbytes of t's memory from offset, with that shape, dtype and
    leading dimension (UnsupportedError for an offset the device cannot bind)."""
    v = t._slice(offset, nbytes)
    v._set_meta(shape, dtype, ld)
    return v


def set_meta(t: Any, shape: tuple, dtype: str, ld: int) -> Any:
    """t seen with that shape, dtype and leading dimension (the bytes unchanged); t."""
    return t._set_meta(shape, dtype, ld)


def dlpack_capsule(t: Any) -> Any:
    """A DLPack capsule over t's memory (its shape and dtype), without the protocol's
    stream handshake: for results the caller orders itself."""
    code = 4 if t.dtype == bfloat16 else 2  # DLPack's kDLBfloat, kDLFloat
    return t._dlpack(t.shape, code, t.dtype.itemsize * 8)

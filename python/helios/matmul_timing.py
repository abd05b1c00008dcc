"""GPU-timed products: ``Device.time_matmul`` (samples between GPU timestamps
after a warm-up), the warm-up rule and the seeded inputs every timer shares."""

from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from . import _helios
from .dtypes import as_dtype, bfloat16, float16, unwire, wire
from .files import FileError, read_npy
from .flops import matmul_flops, tflops
from .tensor import input_array
from .validate import count

MAX_LAUNCHES: int = _helios.MAX_LAUNCHES  # per call, warm-up and timed each (defined in the core)


def out_dtype_name(out_dtype: Any, default: str, compute: Any = float16) -> str:
    """The output dtype's name: the op's 16-bit compute type or float32 (default when None)."""
    if out_dtype is None:
        return default
    allowed = (np.dtype(compute), np.dtype(np.float32))
    try:
        dt = as_dtype(out_dtype, "out_dtype", allowed)
    except TypeError as e:
        raise ValueError(f"{e} (for {allowed[0].name} inputs)") from None
    return dt.name


def as_operand(x: Any, name: str, dt: Any = float16) -> np.ndarray:
    """A C-contiguous 2-D array of dt, or a TypeError/ValueError that says why not."""
    if isinstance(x, np.ndarray):
        arr = x
    elif hasattr(x, "__array_interface__") or hasattr(x, "__array__") or isinstance(x, memoryview):
        arr = np.asarray(x)
    else:
        raise TypeError(
            f"{name} must be an array (numpy.ndarray or an object exposing the array interface), not {type(x).__name__}"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {arr.shape} ({arr.ndim}-D)")
    return input_array(arr, name, "helios.matmul", dt)


def check_fits(dev: Any, m: int, n: int, k: int, out: str) -> None:
    """Refuse, in microseconds, a product the engine cannot index or the device
    cannot hold, before inputs are generated or copied."""
    for name, elems in (("A", m * k), ("B", k * n), ("C", m * n)):
        if elems >= _helios.MAX_OPERAND_ELEMENTS:
            raise _helios.DeviceMemoryError(
                f"matmul {m}x{n}x{k}: {name} has {elems} elements; kernels index with 32 bits (< 2^32)"
            )
    size = (m * k + k * n) * 2 + m * n * (4 if out == "float32" else 2)
    limit = int(dev.info["device_local_bytes"])
    per_buffer = int(dev.info["max_storage_buffer_range"])
    if size > limit or max(m * k * 2, k * n * 2) > per_buffer:
        raise _helios.DeviceMemoryError(
            f"matmul {m}x{n}x{k}: operands need {size} bytes; the device has {limit} bytes of "
            f"local memory and {per_buffer} bytes per buffer"
        )


@dataclass
class MatmulTiming:
    """GPU-timed matmul: per-iteration device times after warm-up."""

    m: int
    n: int
    k: int
    variant: str
    samples_ms: list[float]
    batch_ms: float
    warmup: int
    out_dtype: str
    flush_bytes: int = 0
    telemetry: dict = field(default_factory=dict)
    output: Optional[np.ndarray] = field(default=None, repr=False)  # C of the last dispatch

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def flops(self) -> float:
        return matmul_flops(self.m, self.n, self.k)

    @property
    def tflops(self) -> float:
        return tflops(self.flops, self.median_ms)


def time_matmul(
    dev: Any,
    m: int,
    n: int,
    k: int,
    *,
    iters: int = 20,
    warmup: int = 5,
    variant: Optional[str] = None,
    dtype: str = "float16",
    out_dtype: Optional[str] = None,
    seed: int = 0,
    inputs: Optional[Sequence[np.ndarray]] = None,
    flush_bytes: int = 0,
) -> MatmulTiming:
    """Time C = A @ B with GPU timestamps: `warmup` untimed dispatches, then `iters`
    dispatches each between two timestamps (samples_ms), then `iters` back to
    back (batch_ms, the mean). Inputs are seeded random normals unless given.
    flush_bytes > 0 overwrites that many bytes before each sample, outside the
    timestamps, so samples start with a cold L2. `output` holds C. dtype: the
    inputs' type, float16 or bfloat16; out_dtype: that type (default) or float32."""
    dt = as_dtype(dtype, "time_matmul: dtype", (float16, bfloat16))
    m, n, k = (count(f"time_matmul: {nm}", v, 1, 2**32 - 1) for nm, v in (("m", m), ("n", n), ("k", k)))
    iters = count("time_matmul: iters", iters, 1, MAX_LAUNCHES)
    warmup = count("time_matmul: warmup", warmup, 0, MAX_LAUNCHES)
    flush_bytes = count("time_matmul: flush_bytes", flush_bytes, 0, int(dev.info["max_storage_buffer_range"]))
    out = out_dtype_name(out_dtype, dt.name, dt)
    check_fits(dev, m, n, k, out)  # before any input is generated
    if inputs is None:
        a, b = random_inputs(m, n, k, seed, dt)
    else:
        a, b = (as_operand(x, nm, dt) for x, nm in zip(inputs, ("a", "b")))
        if a.shape != (m, k) or b.shape != (k, n):
            raise ValueError(f"time_matmul: inputs {a.shape} x {b.shape} do not match m, n, k = {m}, {n}, {k}")
    c, samples, batch, used = dev._gemm(
        a=wire(a),
        b=wire(b),
        m=m,
        n=n,
        k=k,
        in_dtype=dt.name,
        out_dtype=out,
        variant=dev._pick(variant, m, n, k, dt),
        warmup=warmup,
        iters=iters,
        flush_bytes=flush_bytes,
    )
    c = unwire(c[0], out)
    return MatmulTiming(
        m=int(m),
        n=int(n),
        k=int(k),
        variant=used,
        samples_ms=samples,
        batch_ms=batch,
        warmup=warmup,
        out_dtype=out,
        flush_bytes=flush_bytes,
        telemetry=dev.telemetry(),
        output=c,
    )


def warmup_launches(estimate_ms: float, min_count: int, min_ms: float, cap: int = 20000) -> int:
    """Warm-up launches: at least `min_count` and at least `min_ms` of GPU work.
    A GPU left idle drops its clocks within milliseconds and needs tens to
    hundreds of ms of work to ramp back up (measured on an H100: 4-5x slower
    first samples after host-side pauses); a fixed count of fast launches does
    not cover that."""
    if estimate_ms <= 0:
        return min_count
    return int(min(cap, max(min_count, -(-min_ms // estimate_ms))))


# How random_inputs draws, in the input cache's key: change it with the drawing below,
# or a process of the new code reads what the old code drew.
INPUT_DRAW = "normal-f32-v1"


def random_inputs(m: int, n: int, k: int, seed: int = 0, dtype: Any = float16) -> tuple[np.ndarray, np.ndarray]:
    """Seeded standard-normal operands of dtype (float16 or bfloat16; never zeros:
    they hide bugs and time faster). The same seed gives the same normals in both.
    With HELIOS_INPUT_CACHE set to a directory, they are read from there where an
    earlier process drew them (drawing is ~20 ns an element: seconds for a large shape,
    in every process of a series of runs) and written there where not. An entry that is
    not a regular file is refused (FileError); one that is cut, of the wrong size or holds
    what no draw gives (non-finite, or far outside a normal's range) is named in a
    warning, discarded and drawn again."""
    cache = os.environ.get("HELIOS_INPUT_CACHE", "").strip()
    key = f"{m}x{n}x{k}-seed{seed}-{np.dtype(dtype).name}-{INPUT_DRAW}-numpy{np.__version__}"
    path = Path(cache) / f"{key}.npy" if cache else None
    if path is not None and os.path.lexists(path):
        cached = _read_inputs(path, (m, k), (k, n), dtype)
        if cached is not None:
            return cached
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(dtype)
    if path is not None:
        _write_inputs(path, a, b)
    return a, b


# |x| of a standard normal past this has odds below 1e-15 a draw: a cached entry holding
# one was not drawn by random_inputs.
_DRAW_BOUND = 9.0


def _read_inputs(path: Path, a_shape: tuple[int, int], b_shape: tuple[int, int], dtype: Any) -> Optional[tuple]:
    """The cached operands, None for an entry to draw again (named in a warning and
    removed), FileError for a path that is not a regular file."""
    words = a_shape[0] * a_shape[1] + b_shape[0] * b_shape[1]
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO, a device, a directory
        raise FileError(f"{path}: not a regular file; not an entry of the input cache (HELIOS_INPUT_CACHE)")
    try:
        flat = read_npy(path, max_bytes=2 * words)  # bounded by the shape before any allocation
    except FileError as e:
        return _discard(path, str(e))
    if flat.dtype != np.uint16 or flat.shape != (words,):
        return _discard(path, f"holds {flat.dtype} {flat.shape}, not the {words} 16-bit words of this shape")
    cut = a_shape[0] * a_shape[1]
    a, b = flat[:cut].view(dtype).reshape(a_shape), flat[cut:].view(dtype).reshape(b_shape)
    for x in (a, b):
        if x.size and not np.isfinite(x).all():
            return _discard(path, "holds non-finite values, which no draw gives")
        if x.size and float(np.abs(x).max()) > _DRAW_BOUND:
            return _discard(path, f"holds values past +-{_DRAW_BOUND:g}, which no standard-normal draw gives")
    return a, b


def _discard(path: Path, why: str) -> Optional[tuple]:
    """None, once the entry is named in a warning and removed."""
    warnings.warn(f"helios: input cache entry {path}: {why}; discarded and drawn again", stacklevel=3)
    try:
        os.unlink(path)
    except OSError:
        pass  # rewritten by the draw's rename, where it can be
    return None


def _write_inputs(path: Path, a: np.ndarray, b: np.ndarray) -> None:
    """Written whole under another name, then renamed: a reader never sees half a file,
    and processes drawing the same inputs at once each rename a complete one."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:  # files: the input cache, a cache of our own
            # one array of 16-bit words (.npy stores no bfloat16), a's then b's, so that
            # files.read_npy bounds it by the shape before reading
            np.save(f, np.concatenate([a.view(np.uint16).ravel(), b.view(np.uint16).ravel()]))
        os.replace(tmp, path)
    except OSError:  # a cache that cannot be written costs the next process a draw, nothing else
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)

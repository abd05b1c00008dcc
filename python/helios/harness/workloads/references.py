"""CUDA references timed like Helios, and an honest CPU fallback.

- torch:  torch.cuda matmul, CUDA events around each launch after warm-up, batch
          = N launches captured in one CUDA graph; TF32 and reduced-precision
          (fp16/bf16) reductions off; float16 or bfloat16 as the inputs are.
- cublas: helios._cublas (cuBLASLt directly, built where the CUDA toolkit was);
          the same protocol without needing torch.
- numpy:  CPU float32 matmul of the 16-bit inputs, host clock. Not CUDA:
          every row it produces says so.
`auto` picks torch.cuda, else cublas, else numpy.
"""

from __future__ import annotations

import abc
import platform
import time
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ...dtypes import bfloat16
from ..protocol.gpustate import bare_uuid


@dataclass
class RefTiming:
    samples_ms: list[float]
    batch_ms: Optional[float]
    output: np.ndarray  # C from a launch on the same inputs (for the check)
    batch_mode: str  # "cuda_graph", "back_to_back" or "none"


class Reference(abc.ABC):
    name = "base"
    is_cuda = False

    @abc.abstractmethod
    def metadata(self) -> dict:
        """torch_version, cuda_runtime, gpu (None where not CUDA) and a label."""

    @abc.abstractmethod
    def time(
        self, a: np.ndarray, b: np.ndarray, iters: int, warmup: int, flush_bytes: int = 0, batch: bool = True
    ) -> RefTiming:
        """Samples after warm-up, a batch figure and one launch's output. batch False:
        no batch figure where it costs time of its own (a CUDA graph's capture, ~0.3 s),
        as for an estimate of a launch's time."""


def torch_block(torch, launches: int) -> bool:
    """Hold the GPU in a spin kernel long enough for the host to enqueue
    `launches` timed launches behind it, so that per-launch CUDA events measure
    kernel time, not Python's launch latency (Helios's dispatches are all
    recorded into one command buffer: no host gaps). False if unavailable."""
    if not hasattr(torch.cuda, "_sleep"):
        return False
    torch.cuda._sleep(int(2e9 * (launches * 60e-6 + 2e-3)))  # ~2 GHz cycles
    return True


class DeviceMismatch(RuntimeError):
    """No CUDA device is the GPU Helios runs on: timing one would compare two GPUs."""


def torch_index_for_uuid(torch, uuid: str) -> Optional[int]:
    """The CUDA index (as this process numbers them) of the device with this UUID."""
    want = bare_uuid(uuid)
    for i in range(torch.cuda.device_count()):
        got = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        if got is not None and bare_uuid(str(got)) == want:
            return i
    return None


def _mismatch(ref: str, uuid: str, seen: list[str]) -> DeviceMismatch:
    return DeviceMismatch(
        f"--ref={ref}: no CUDA device matches the Vulkan device (UUID {uuid}); CUDA "
        f"sees {', '.join(seen) or 'none'}. Timing another GPU would compare two "
        f"GPUs: select the GPU with HELIOS_DEVICE / CUDA_VISIBLE_DEVICES, or use "
        f"--ref=numpy"
    )


def to_torch(torch: Any, x: np.ndarray) -> Any:
    """A CPU torch tensor sharing x's memory (bfloat16 through its 16-bit patterns:
    torch.from_numpy knows no ml_dtypes bfloat16)."""
    if x.dtype == bfloat16:
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def from_torch(torch: Any, t: Any) -> np.ndarray:
    """A host NumPy copy of a torch tensor (bfloat16 as helios.bfloat16)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(bfloat16)
    return t.cpu().numpy()


class TorchReference(Reference):
    name = "torch"
    is_cuda = True

    def __init__(self, uuid: Optional[str] = None) -> None:
        """uuid: the Vulkan device's; the CUDA device with the same UUID is used
        (DeviceMismatch where there is none). None: CUDA's current device."""
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda is not available")
        self.torch = torch
        self.index = torch.cuda.current_device()
        if uuid is not None:
            idx = torch_index_for_uuid(torch, uuid)
            if idx is None:
                seen = [
                    str(getattr(torch.cuda.get_device_properties(i), "uuid", "?"))
                    for i in range(torch.cuda.device_count())
                ]
                raise _mismatch("torch", uuid, seen)
            self.index = idx
            torch.cuda.set_device(idx)  # every .cuda() tensor, event and graph below goes there
        self.uuid = str(getattr(torch.cuda.get_device_properties(self.index), "uuid", "")) or None
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # bfloat16 products accumulate in fp32 throughout, as Helios's do (cuBLAS may
        # otherwise reduce split-K partials in bf16).
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

    def metadata(self) -> dict:
        t = self.torch
        return {
            "reference": "torch",
            "label": "torch.matmul on CUDA (cuBLAS), CUDA events, TF32 and reduced-precision reductions off; "
            "timed launches enqueued behind a spin kernel (no host gaps)",
            "torch_version": t.__version__,
            "cuda_runtime": t.version.cuda,
            "gpu": t.cuda.get_device_name(self.index),
            "gpu_uuid": self.uuid,
            "cuda_index": self.index,
            "cublas_handle": "torch default",
        }

    def time(self, a, b, iters, warmup, flush_bytes=0, batch=True):
        t = self.torch
        ta, tb = to_torch(t, a).cuda(), to_torch(t, b).cuda()
        tc = t.full((a.shape[0], b.shape[1]), float("nan"), dtype=ta.dtype, device="cuda")
        t.matmul(ta, tb, out=tc)
        out = from_torch(t, tc)
        timing = time_torch_launches(t, lambda: t.matmul(ta, tb, out=tc), iters, warmup, flush_bytes, batch)
        self.queued_ahead = timing.queued_ahead
        return RefTiming(timing.samples_ms, timing.batch_ms, out, timing.batch_mode)


@dataclass
class LaunchTiming:
    samples_ms: list[float]
    batch_ms: Optional[float]
    batch_mode: str  # "cuda_graph", "back_to_back" or "none" (not asked for)
    queued_ahead: bool


def time_torch_launches(t, launch, iters: int, warmup: int, flush_bytes: int = 0, batch: bool = True) -> LaunchTiming:
    """The CUDA side's protocol for any torch launch: `warmup` launches, then
    `iters` each between two CUDA events, enqueued behind a spin kernel (no host
    gaps), with an optional L2 flush before each outside its events; then a batch
    figure: `iters` launches in one CUDA graph (back to back where capture is refused)."""
    for _ in range(warmup):
        launch()
    flush = t.empty(flush_bytes, dtype=t.uint8, device="cuda") if flush_bytes else None
    ev = [(t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)) for _ in range(iters)]
    queued = torch_block(t, iters)
    for i, (s, e) in enumerate(ev):
        if flush is not None:
            flush.fill_(i & 0xFF)
        s.record()
        launch()
        e.record()
    t.cuda.synchronize()
    samples = [s.elapsed_time(e) for s, e in ev]
    if not batch:
        return LaunchTiming(samples, None, "none", queued)
    mode = "cuda_graph"
    try:
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g):  # captures on its own side stream
            for _ in range(iters):
                launch()
        g.replay()  # untimed: uploads the graph
        s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        t.cuda.synchronize()
        batch_ms = s.elapsed_time(e) / iters
    except RuntimeError:  # capture refused: back-to-back launches, labelled so
        mode = "back_to_back"
        batch_ms = queued_ms_per_call(t, launch, iters)
    return LaunchTiming(samples, batch_ms, mode, queued)


def queued_ms_per_call(t, call, n: int) -> float:
    """ms per call of `n` calls queued back to back between two CUDA events on
    torch's current stream (the host waits once, after the last)."""
    s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        call()
    e.record()
    t.cuda.synchronize()
    return s.elapsed_time(e) / n


class CublasReference(Reference):
    name = "cublas"
    is_cuda = True

    def __init__(self, uuid: Optional[str] = None) -> None:
        """Runs on CUDA device 0 of this process; with uuid, refuses (DeviceMismatch)
        unless that is the Vulkan device."""
        from ... import _cublas  # type: ignore[attr-defined]  # ImportError where the toolkit was absent at build

        self.mod = _cublas
        self.info = _cublas.info()
        if uuid is not None and bare_uuid(self.info.get("uuid", "")) != bare_uuid(uuid):
            raise _mismatch(
                "cublas",
                uuid,
                [f"device 0 {self.info.get('uuid', '?')} (cuBLASLt runs on device 0; --ref=torch selects by UUID)"],
            )

    def metadata(self) -> dict:
        rt = self.info["cuda_runtime"]
        return {
            "reference": "cublas",
            "label": "cuBLASLt fp16 GEMM (fp32 accumulate), CUDA events; "
            "launched from a C loop (small host gaps, not removed)",
            "torch_version": None,
            "cuda_runtime": f"{rt // 1000}.{rt % 1000 // 10}",
            "gpu": self.info["gpu"],
            "gpu_uuid": self.info.get("uuid"),
            "cuda_index": 0,
            "cublaslt_version": self.info["cublaslt_version"],
        }

    def time(self, a, b, iters, warmup, flush_bytes=0, batch=True):
        if a.dtype != np.float16:
            raise RuntimeError(f"--ref=cublas times float16 GEMMs only (got {a.dtype}); use --ref=torch")
        c, samples, batch = self.mod.matmul(a, b, warmup, iters, flush_bytes)
        return RefTiming(samples, batch, c, "cuda_graph")


class NumpyReference(Reference):
    name = "numpy"
    is_cuda = False

    def metadata(self) -> dict:
        return {
            "reference": "numpy",
            "label": "NOT CUDA: numpy float32 matmul on the CPU, host clock",
            "torch_version": None,
            "cuda_runtime": None,
            "gpu": None,
            "cpu": platform.processor() or platform.machine(),
            "numpy_version": np.__version__,
        }

    def time(self, a, b, iters, warmup, flush_bytes=0, batch=True):
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        out = (a32 @ b32).astype(a.dtype)
        for _ in range(warmup):
            a32 @ b32
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            a32 @ b32
            samples.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        for _ in range(iters):
            a32 @ b32
        return RefTiming(samples, (time.perf_counter() - t0) * 1e3 / iters, out, "back_to_back")


def make_reference(kind: str, uuid: Optional[str] = None) -> Reference:
    """kind: auto, torch, cublas or numpy; uuid: the Vulkan device's, which a CUDA
    reference must run on. Raises RuntimeError saying why one is unavailable, and
    DeviceMismatch (also for auto) where CUDA is here but not on that GPU."""
    if kind == "torch":
        try:
            return TorchReference(uuid)
        except ImportError as e:
            raise RuntimeError(f"--ref=torch: torch is not installed ({e})") from None
    if kind == "cublas":
        try:
            return CublasReference(uuid)
        except ImportError:
            raise RuntimeError(
                "--ref=cublas: helios._cublas was not built (no CUDA toolkit when the package was built)"
            ) from None
    if kind == "numpy":
        return NumpyReference()
    if kind == "auto":
        mismatch: Optional[DeviceMismatch] = None
        for cls in (TorchReference, CublasReference):
            try:
                return cls(uuid)
            except DeviceMismatch as e:
                mismatch = mismatch or e
            except (ImportError, RuntimeError):
                continue
        if mismatch is not None:  # CUDA is here, on other GPUs: never silently the CPU
            raise mismatch
        return NumpyReference()
    raise ValueError(f"unknown reference {kind!r}: use auto, torch, cublas or numpy")

"""The references `helios bench --workload=attention` times beside Helios: torch SDPA
on the Vulkan device's CUDA twin, or NumPy on the CPU where no CUDA exists (labelled
NOT CUDA)."""

from __future__ import annotations

import platform
import time
from typing import Any, Callable

import numpy as np

from ...attention import reference_attention, reference_attention_backward


class NumpyAttention:
    """NOT CUDA: float32 attention on the CPU, host clock (where no CUDA exists)."""

    name = "numpy"
    is_cuda = False

    def metadata(self) -> dict:
        return {
            "reference": "numpy",
            "label": "NOT CUDA: numpy float32 attention on the CPU, host clock",
            "torch_version": None,
            "cuda_runtime": None,
            "gpu": None,
            "cpu": platform.processor() or platform.machine(),
            "numpy_version": np.__version__,
        }

    def run(self, q, k, v, *, causal, scale, backend, iters, warmup, flush_bytes=0):
        def once() -> np.ndarray:
            return reference_attention(
                q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=causal, scale=scale
            ).astype(q.dtype)

        return self._timed(backend, once, iters, warmup)

    def run_backward(self, q, k, v, do, *, causal, scale, backend, iters, warmup, flush_bytes=0):
        def once() -> tuple:
            g = reference_attention_backward(q, k, v, do, causal=causal, scale=scale)[:3]
            return tuple(x.astype(q.dtype) for x in g)

        return self._timed(backend, once, iters, warmup)

    @staticmethod
    def _timed(backend: str, once: Callable, iters: int, warmup: int):
        """once()'s output and `iters` host-clock samples after `warmup` calls."""
        from .references import LaunchTiming
        from .sdpa import SdpaRun

        out = once()
        for _ in range(warmup):
            once()
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            once()
            samples.append((time.perf_counter() - t0) * 1e3)
        return SdpaRun(backend, LaunchTiming(samples, float(np.mean(samples)), "back_to_back", False), out)


def make_reference(kind: str, uuid: str) -> Any:
    """sdpa on the CUDA twin of the Vulkan device; auto falls back to numpy only
    where CUDA is absent (never when CUDA is here on other GPUs)."""
    from .references import DeviceMismatch

    if kind not in ("auto", "sdpa", "numpy"):
        raise ValueError(f"unknown attention reference {kind!r}: use auto, sdpa or numpy")
    if kind == "numpy":
        return NumpyAttention()
    try:
        from .sdpa import SdpaReference

        return SdpaReference(uuid)
    except DeviceMismatch:
        raise
    except (ImportError, RuntimeError) as e:
        if kind == "sdpa":
            raise RuntimeError(f"--ref=sdpa: {e}") from None
        return NumpyAttention()

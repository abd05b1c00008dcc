"""The CUDA side of the attention workload: torch's scaled_dot_product_attention,
each backend (flash, cuDNN, memory-efficient, math) timed on its own with the
protocol of every CUDA reference here (helios.reference.time_torch_launches),
on the CUDA device with the Vulkan device's UUID. TF32 off; fp16 in and out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from .references import LaunchTiming, TorchReference, time_torch_launches, to_torch

BACKENDS = ("flash", "cudnn", "efficient", "math")


@dataclass
class SdpaRun:
    backend: str
    timing: Optional[LaunchTiming]
    output: Optional[Any]  # O, or (dQ, dK, dV) for a backward
    error: Optional[str] = None  # why the backend did not run this case


class SdpaReference(TorchReference):
    """torch SDPA on the CUDA twin of the Vulkan device (DeviceMismatch otherwise),
    with the seeds' environment locked: TF32 off (TorchReference) and
    deterministic algorithms (warn-only, as the seed's fuzz does)."""

    name = "sdpa"

    def __init__(self, uuid: Optional[str] = None) -> None:
        super().__init__(uuid)
        self.torch.use_deterministic_algorithms(True, warn_only=True)

    def metadata(self) -> dict:
        md = super().metadata()
        t = self.torch
        md.update(
            {
                "reference": "sdpa",
                "label": "torch.nn.functional.scaled_dot_product_attention per "
                "backend, CUDA events, TF32 off; timed launches enqueued behind a spin kernel",
                "cudnn_version": t.backends.cudnn.version() if t.backends.cudnn.is_available() else None,
            }
        )
        md.pop("cublas_handle", None)
        return md

    def _backend_enum(self, name: str):
        from torch.nn.attention import SDPBackend

        return {
            "flash": SDPBackend.FLASH_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "math": SDPBackend.MATH,
        }[name]

    def run(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        *,
        causal: bool,
        scale: float,
        backend: str,
        iters: int,
        warmup: int,
        flush_bytes: int = 0,
    ) -> SdpaRun:
        """One backend: its output on these inputs and its timing, or the reason it
        refused (unsupported shape, missing kernel, out of memory)."""
        t = self.torch
        import torch.nn.functional as F

        tq, tk, tv = (to_torch(t, x).cuda() for x in (q, k, v))

        def prepare() -> tuple:
            def launch():
                return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)

            return launch, launch().float().cpu().numpy().astype(q.dtype)

        return self._measured(backend, prepare, iters, warmup, flush_bytes)

    def _measured(self, backend: str, prepare: Any, iters: int, warmup: int, flush_bytes: int) -> SdpaRun:
        """Under the backend: prepare() -> (launch, output), then launch timed; a
        backend that refuses (no kernel for the case, out of memory) says why."""
        t = self.torch
        from torch.nn.attention import sdpa_kernel

        try:
            with sdpa_kernel([self._backend_enum(backend)]):
                launch, out = prepare()
                timing = time_torch_launches(t, launch, iters, warmup, flush_bytes)
        except (RuntimeError, ValueError) as e:  # "No available kernel", OOM: reported, not fatal
            t.cuda.synchronize()
            msg = str(e).strip().splitlines()
            return SdpaRun(backend, None, None, msg[0][:300] if msg else type(e).__name__)
        return SdpaRun(backend, timing, out)

    def run_backward(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        do: np.ndarray,
        *,
        causal: bool,
        scale: float,
        backend: str,
        iters: int,
        warmup: int,
        flush_bytes: int = 0,
    ) -> SdpaRun:
        """One backend's backward: the forward runs once under the backend (autograd
        then holds that backend's backward), each timed launch is
        ``torch.autograd.grad(o, (q, k, v), do)``; output is (dQ, dK, dV)."""
        t = self.torch
        import torch.nn.functional as F

        tq, tk, tv = (to_torch(t, x).cuda().requires_grad_(True) for x in (q, k, v))
        tdo = to_torch(t, do).cuda()

        def prepare() -> tuple:
            out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)

            def launch():
                return t.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True)

            return launch, tuple(g.float().cpu().numpy().astype(q.dtype) for g in launch())

        return self._measured(backend, prepare, iters, warmup, flush_bytes)

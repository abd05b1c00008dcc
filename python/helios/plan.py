"""Replayable plans: products on Tensors recorded once into a command buffer of
their own and replayed with one submission and one wait, what a decode step is
per token (a Vulkan counterpart of a CUDA graph)::

    with dev.plan() as p:                    # recorded when the block ends
        h = p.matmul(x, w1, bias=b1, activation="gelu")
        y = p.matmul(h, w2, bias=b2)
    run = p.replay()                         # run.host_ms, run.wall_ms, run.gpu_ms
    x.copy_(next_input); p.replay()          # new contents, the same recording

A replay reads whatever the Tensors hold then: what changes between replays is
their contents (``Tensor.copy_``), never the recording. A barrier stands only
before a product that reads or writes what an earlier one since the last barrier
wrote (or writes what it read). The plan holds every Tensor it binds; closing the
Device releases it (a replay then raises DeviceClosedError).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import _helios
from .gemm import Chain
from .validate import count


@dataclass(frozen=True)
class PlanRun:
    """One replay as the engine timed it: host_ms from the call to the submission's
    return (what launching costs the CPU), wall_ms to the end of the wait, gpu_ms
    between timestamps around the plan (0.0 where the device has none)."""

    host_ms: float
    wall_ms: float
    gpu_ms: float


@dataclass(frozen=True)
class PlanTiming:
    """Replays one after another (each waited for), as a decode loop runs them."""

    ops: int
    runs: list[PlanRun]

    def median(self, field: str) -> float:
        return float(np.median([getattr(r, field) for r in self.runs]))


class Plan(Chain):
    """Products recorded like a Chain's (``matmul``), compiled into a replayable
    plan when the with-block ends (or at ``record()``). Not run at recording."""

    def __init__(self, device: Any) -> None:
        super().__init__(device)
        self._plan: Optional[Any] = None

    def record(self) -> "Plan":
        """Compile the recorded products into the plan (once)."""
        if self._plan is not None:
            raise ValueError("plan: already recorded; record a new plan for other products")
        if not self._ops:
            raise ValueError("plan: no operations recorded")
        self._plan = self._dev._plan(self._ops)
        return self

    def matmul(self, *args: Any, **kwargs: Any) -> Any:
        if self._plan is not None:
            raise ValueError("plan: recorded already; products are added before the with-block ends")
        return super().matmul(*args, **kwargs)

    @property
    def counts(self) -> tuple[int, int, int]:
        """(products, dispatches, barriers) as recorded."""
        ops, dispatches, barriers = self._recorded().counts
        return int(ops), int(dispatches), int(barriers)

    def replay(self) -> PlanRun:
        """Submit the plan once and wait for it."""
        run = PlanRun(*self._recorded().replay())
        self._mark_ran()
        return run

    def run(self) -> float:
        """As Chain.run: one replay; its GPU time in ms."""
        return self.replay().gpu_ms

    def time(self, iters: int = 20, warmup: int = 5) -> PlanTiming:  # type: ignore[override]
        """`warmup` replays, then `iters` replays each timed by the engine."""
        iters = count("Plan.time: iters", iters, 1, _helios.MAX_LAUNCHES)
        warmup = count("Plan.time: warmup", warmup, 0, _helios.MAX_LAUNCHES)
        plan = self._recorded()
        for _ in range(warmup):
            plan.replay()
        runs = [PlanRun(*plan.replay()) for _ in range(iters)]
        self._mark_ran()
        return PlanTiming(ops=len(self._ops), runs=runs)

    def close(self) -> None:
        """Release the plan's command buffer, sets and workspace (idempotent)."""
        if self._plan is not None:
            self._plan.close()

    def _recorded(self) -> Any:
        if self._plan is None:
            raise ValueError("plan: not recorded yet (leave the with-block, or call record())")
        return self._plan

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and self._plan is None:
            self.record()

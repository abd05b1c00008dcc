"""Captures: every operation on Tensors called inside the with-block recorded once,
not run, into a command buffer of its own, and replayed with one submission (the
Vulkan counterpart of capturing a CUDA graph)::

    with dev.capture() as step:          # nothing runs here
        dev.matmul(x, w1, out=h, activation="gelu")
        dev.matmul(h, w2, out=y)
    step.replay()                        # PlanRun: host_ms, wall_ms, gpu_ms
    x.copy_(next_batch); step.replay()   # new contents, the same recording

A Plan records the operations its op table declares (helios.Plan) and may fuse them
into persistent runs; a capture takes any operation that runs on Tensors alone
(products, attention and its backward, LayerNorm either direction, activations, the
training step's ops) and replays what each recorded, as recorded: a whole training
step. Inside the block an operation may not move host data (no host arrays, no
results returned to the host, no uploads): those raise and the capture is dropped.
The capture holds every Tensor its operations bind; closing the Device releases it
(a replay then raises DeviceClosedError). An operation goes behind a barrier only
where it touches memory an earlier one since the last barrier wrote (or writes what
one read), as in a group.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _helios
from .plan import PlanRun, PlanTiming
from .validate import count


class Capture:
    """Operations recorded between ``__enter__`` and ``__exit__`` (Device.capture()),
    then replayable: ``replay()`` (submitted and waited for), ``submit(wait, signal)``
    (ordered with CUDA through the device's timeline, what helios.torch uses)."""

    def __init__(self, device: Any) -> None:
        self._dev = device
        self._capture: Optional[Any] = None
        self._recording = False

    def __enter__(self) -> "Capture":
        if self._capture is not None or self._recording:
            raise ValueError("capture: already recorded; make a new one with Device.capture()")
        self._dev._capture_begin()
        self._recording = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._recording = False
        if exc_type is not None:
            self._dev._capture_abort()
            return
        self._capture = self._dev._capture_end()

    def _recorded(self) -> Any:
        if self._capture is None:
            raise ValueError("capture: nothing recorded yet (replay after the with-block ends)")
        return self._capture

    @property
    def counts(self) -> tuple[int, int, int]:
        """(operations, dispatches, barriers) as recorded."""
        ops, dispatches, barriers = self._recorded().counts
        return int(ops), int(dispatches), int(barriers)

    @property
    def alive(self) -> bool:
        """False once closed or its Device closed."""
        return self._capture is not None and bool(self._capture.alive)

    def replay(self) -> PlanRun:
        """Submit the capture once and wait for it."""
        return PlanRun(*self._recorded().replay())

    def submit(self, wait: int, signal: int) -> None:
        """One replay after the device's timeline semaphore reaches `wait`, signalling
        `signal` when done; returns at once (values from Device._async_values)."""
        self._recorded().submit(wait, signal)

    def gpu_ms(self) -> float:
        """The last finished replay's GPU time (waits for it; 0.0 where the device has
        no timestamps)."""
        return float(self._recorded().gpu_ms())

    def time(self, iters: int = 20, warmup: int = 5) -> PlanTiming:
        """`warmup` replays, then `iters` replays each timed by the engine."""
        iters = count("Capture.time: iters", iters, 1, _helios.MAX_LAUNCHES)
        warmup = count("Capture.time: warmup", warmup, 0, _helios.MAX_LAUNCHES)
        cap = self._recorded()
        for _ in range(warmup):
            cap.replay()
        return PlanTiming(ops=self.counts[0], runs=[PlanRun(*cap.replay()) for _ in range(iters)])

    def close(self) -> None:
        """Release the capture's command buffer, sets and buffers (idempotent)."""
        if self._capture is not None:
            self._capture.close()

    def __repr__(self) -> str:
        if self._capture is None:
            return f"helios.Capture({'recording' if self._recording else 'empty'})"
        return f"helios.Capture(ops={self.counts[0]}, alive={self.alive})"

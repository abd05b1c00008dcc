"""A clock for pytest-benchmark that advances only by GPU-measured time.

pytest-benchmark times each round as timer() after minus timer() before. With
this clock as the timer, a round's duration is exactly the GPU time its work
reported (Vulkan timestamps for Helios, CUDA events for the references), so
the suite's statistics and its JSON are GPU-time statistics."""
from __future__ import annotations


class GpuClock:
    def __init__(self) -> None:
        self._seconds = 0.0

    def __call__(self) -> float:
        return self._seconds

    def advance_ms(self, ms: float) -> None:
        if not ms > 0:
            raise ValueError(f"GPU time must be positive, got {ms!r} ms")
        self._seconds += ms / 1e3

    def __repr__(self) -> str:   # recorded in the JSON's options.timer
        return "helios.GpuClock (Vulkan timestamps / CUDA events)"


CLOCK = GpuClock()

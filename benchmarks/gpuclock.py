"""A clock for pytest-benchmark that advances only by GPU-measured time.

pytest-benchmark times each round as timer() after minus timer() before. With
this clock as the timer, a round's duration is exactly one GPU-measured
dispatch (Vulkan timestamps for Helios, CUDA events for the references), so
the suite's statistics and its JSON are GPU-time statistics.

The GPU work itself runs as `helios bench` runs it: warm-up and every round's
dispatch back to back in one submission (one CUDA stream), each dispatch
between its own timestamps; the rounds then replay those samples in order.
One submission per round was measured on an H100 at 5x the real time at
4096^3: the host work between rounds let the GPU drop its clocks."""

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

    def __repr__(self) -> str:  # recorded in the JSON's options.timer
        return "helios.GpuClock (Vulkan timestamps / CUDA events)"


def replay(benchmark, samples_ms, *, setup=None) -> None:
    """Feed GPU samples to pytest-benchmark, one per round (pedantic, no calibration)."""
    it = iter(list(samples_ms))
    benchmark.pedantic(
        lambda: CLOCK.advance_ms(next(it)), setup=setup, rounds=len(samples_ms), iterations=1, warmup_rounds=0
    )


CLOCK = GpuClock()

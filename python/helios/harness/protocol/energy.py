"""Energy per operation, from NVML's energy counter.

After a bench's rounds, each row runs an energy window per side: the same kernel
(Helios's variant, or the reference) launched back to back until the window is
long enough for the counter, with NVML's total-energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver loaded)
read before and after. Joules per operation are the window's energy over its
launches; the average power is the energy over the window's wall time; TF/s per
watt is the operation's FLOPs over its joules. The window's length is what the
counter's update period supports: at least MIN_WINDOW_S and PERIODS counter
updates (the period is measured when the counter is first opened), so one
update more or less moves the figure by at most 1/PERIODS.

Where NVML, the counter or the GPU is absent (a CPU device, another vendor's
GPU), a row's ``energy`` says why instead of printing a number.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence, Union

MIN_WINDOW_S = 1.0
PERIODS = 20  # counter updates a window spans at least
PROBE_S = 0.5  # how long the counter's update period is watched for


class EnergyCounter:
    """NVML's energy counter of one GPU (index or UUID); `why` says why not."""

    def __init__(self, index: Union[int, str]) -> None:
        self.why: Optional[str] = None
        self.period_s: Optional[float] = None
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml
        except ImportError:
            self.why = "no NVML here (nvidia-ml-py is not installed)"
            return
        try:
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = (
                pynvml.nvmlDeviceGetHandleByUUID(index)
                if isinstance(index, str)
                else pynvml.nvmlDeviceGetHandleByIndex(index)
            )
            self.joules()
        except Exception as e:  # no driver, no such GPU, a GPU without the counter
            self.why = f"NVML offers no energy counter here ({type(e).__name__}: {e})"
            self.close()
            return
        self.period_s = self._period()

    def joules(self) -> float:
        return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0

    def _period(self) -> Optional[float]:
        """The counter's update period: the time between its changes, watched for
        PROBE_S (None where it never changed: an idle counter that updates slower)."""
        changes, last, t0 = [], self.joules(), time.perf_counter()
        while time.perf_counter() - t0 < PROBE_S:
            now = self.joules()
            if now != last:
                changes.append(time.perf_counter())
                last = now
        if len(changes) < 2:
            return None
        return (changes[-1] - changes[0]) / (len(changes) - 1)

    def window_s(self) -> float:
        return max(MIN_WINDOW_S, PERIODS * (self.period_s or MIN_WINDOW_S / PERIODS * 2))

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None


def window(counter: EnergyCounter, run: Callable[[int], Any], per_op_ms: float, flops: float, max_batch: int) -> dict:
    """One side's energy window: `run(n)` launches the operation n times back to
    back (as the timed batches do); repeated until the window is long enough."""
    if counter.why:
        return {"status": counter.why}
    if not per_op_ms or per_op_ms <= 0:
        return {"status": "no timing to size the window from"}
    target = counter.window_s()
    batch = max(1, min(max_batch, int(target * 1000.0 / per_op_ms / 4) or 1))
    launches = 0
    e0, t0 = counter.joules(), time.perf_counter()
    while time.perf_counter() - t0 < target:
        run(batch)
        launches += batch
    e1, t1 = counter.joules(), time.perf_counter()
    joules, seconds = e1 - e0, t1 - t0
    if joules <= 0:
        return {"status": f"the counter did not advance over {seconds:.2f} s", "window_s": seconds}
    per_op = joules / launches
    return {
        "status": "ok",
        "joules_per_op": per_op,
        "watts": joules / seconds,
        "tflops_per_watt": flops / per_op / 1e12,
        "launches": launches,
        "window_s": seconds,
        "counter_period_ms": None if counter.period_s is None else counter.period_s * 1000.0,
    }


NO_ENERGY = {"status": "not measured (--no-energy)"}


def row_energy(
    counter: Optional[EnergyCounter],
    helios: tuple[Callable[[int], Any], Optional[float]],
    reference: tuple[Callable[[int], Any], Optional[float]],
    reference_on_gpu: bool,
    flops: float,
    max_batch: int,
) -> dict:
    """A row's ``energy``: each side's window ((run, median ms) each), or why not."""
    if counter is None:
        return dict(NO_ENERGY)
    if counter.why:
        return {"status": counter.why}
    ref = (
        window(counter, reference[0], reference[1] or 0.0, flops, max_batch)
        if reference_on_gpu
        else {"status": "the reference runs on the CPU: the GPU's counter does not see it"}
    )
    return {"helios": window(counter, helios[0], helios[1] or 0.0, flops, max_batch), "reference": ref}


def energy_of_rows(
    enabled: bool,
    gpu: Union[int, str],
    rows: Sequence[dict],
    windows: Callable[[Optional[EnergyCounter], dict, int], dict],
) -> None:
    """Set each row's ``energy``: windows(counter, row, i) for a row that passed its
    check, the reason for one that did not. With --no-energy no window is asked for
    (a workload's windows draw the row's inputs again: seconds a row for large shapes)."""
    counter = EnergyCounter(gpu) if enabled and rows else None
    try:
        for i, r in enumerate(rows):
            if not r["valid"]:
                r["energy"] = {"status": "not measured: the row failed its check"}
            else:
                r["energy"] = windows(counter, r, i) if enabled else dict(NO_ENERGY)
    finally:
        if counter is not None:
            counter.close()

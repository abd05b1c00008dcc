"""Progress of long runs: a tqdm bar with an ETA on a terminal, nothing
otherwise (a log or a pipe gets the per-step lines the commands print)."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional


class Progress:
    """``step(label)`` once per unit of work; ``close()`` at the end (also as a
    context manager). enabled=None: on when stderr is a terminal and tqdm is
    installed. log_every=N: without a bar, a line on stderr every N steps
    (count, elapsed time, the last label), for runs that print nothing per step
    to a log."""

    def __init__(self, total: int, enabled: Optional[bool] = None, unit: str = "round", log_every: int = 0) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar: Any = None
        self._total, self._unit, self._log_every, self._done = total, unit, log_every, 0
        self._t0 = time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # optional (helios-vulkan[progress]): without it, the per-step log lines only
                return
            self._bar = tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=True)

    def step(self, label: str) -> None:
        self._done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(1)
        elif self._log_every and (self._done % self._log_every == 0 or self._done == self._total):
            elapsed = time.perf_counter() - self._t0
            print(f"  {self._done}/{self._total} {self._unit}s, {elapsed:.0f} s ({label})", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

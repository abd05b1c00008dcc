"""Progress of long runs: a tqdm bar with an ETA on a terminal, nothing
otherwise (a log or a pipe gets the per-step lines the commands print)."""

from __future__ import annotations

import sys
from typing import Any, Optional


class Progress:
    """``step(label)`` once per unit of work; ``close()`` at the end (also as a
    context manager). enabled=None: on when stderr is a terminal and tqdm is
    installed."""

    def __init__(self, total: int, enabled: Optional[bool] = None, unit: str = "round") -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar: Any = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # optional (helios[progress]): without it, the per-step log lines only
                return
            self._bar = tqdm(total=total, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=True)

    def step(self, label: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""The one signal policy: SIGINT (Ctrl-C) and SIGTERM (what Slurm, CI runners and
`timeout` send) stop a command and keep what it measured, whatever phase the
signal lands in.

A command's life has three kinds of phase:

- measuring (the default while a policy is active): the first signal raises
  KeyboardInterrupt where the program is, and the workload keeps its complete
  rounds;
- finishing (``finishing()``, from the end of the measurements to the last byte
  written): a signal is recorded and never raised, so assembling rows and
  writing files cannot be cut; the result is marked interrupted;
- extras inside finishing (``extras()``: kernel identity, energy windows): work
  that improves a result but is not the measurement; a signal stops them (the
  rows stay, without what was left), also one that came before they started.

Outside a command (a library call with no policy active) these are no-ops and
Python's own Ctrl-C stands."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

_active: Optional["SignalPolicy"] = None


class SignalPolicy:
    """Installed for one command (a context manager, main thread only). Exit status
    130 after SIGINT, 143 after SIGTERM (``status``)."""

    def __init__(self) -> None:
        self.first: Optional[int] = None
        self._saved: dict[int, Any] = {}
        self._finishing = 0
        self._extras = 0
        self._held = False  # a first signal recorded inside finishing(), raised when it ends

    @property
    def status(self) -> int:
        return 128 + int(self.first or signal.SIGINT)

    @property
    def name(self) -> str:
        """The first signal as a user knows it: 'Ctrl-C' or 'SIGTERM'."""
        return "SIGTERM" if self.first == signal.SIGTERM else "Ctrl-C"

    def _handle(self, signum: int, frame: Any) -> None:
        raising = self._extras > 0 or self._finishing == 0
        if self.first is None:
            self.first = signum
            if raising:
                raise KeyboardInterrupt
            self._held = True
            print(
                f"helios: {signal.Signals(signum).name}: finishing what was measured first",
                file=sys.stderr,
                flush=True,
            )
            return
        print(
            f"helios: {signal.Signals(signum).name} again: finishing what was measured first",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self) -> "SignalPolicy":
        global _active
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
            _active = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active
        for sig, old in self._saved.items():
            signal.signal(sig, old)
        if _active is self:
            _active = None


def active() -> Optional[SignalPolicy]:
    return _active


def received() -> Optional[str]:
    """The first signal of the active policy ('Ctrl-C' or 'SIGTERM'), or None."""
    return _active.name if _active is not None and _active.first is not None else None


def stopped_by() -> str:
    """How the user stopped the command, for messages: 'Ctrl-C' outside a policy."""
    return received() or "Ctrl-C"


def measured() -> None:
    """The measurements are over: from here to the end of the command a signal is
    recorded, never raised (except inside extras())."""
    if _active is not None:
        _active._finishing += 1


@contextmanager
def finishing() -> Iterator[None]:
    """A write that a signal must not cut (a cache entry, a result): a signal inside
    is recorded and raised as KeyboardInterrupt once the block is done, unless the
    measurements are over (measured()). Nests."""
    p = _active
    if p is not None:
        p._finishing += 1
    try:
        yield
    finally:
        if p is not None:
            p._finishing -= 1
    if p is not None and p._held and p._finishing == 0:
        p._held = False
        raise KeyboardInterrupt


@contextmanager
def extras() -> Iterator[None]:
    """Work a signal may stop inside finishing(): KeyboardInterrupt at the signal,
    or at once when one came earlier. The caller catches it."""
    p = _active
    if p is not None and p.first is not None:
        raise KeyboardInterrupt
    if p is not None:
        p._extras += 1
    try:
        yield
    finally:
        if p is not None:
            p._extras -= 1

"""Pieces of the benchmark protocol every workload shares: how an interrupted
run keeps what it measured, and the status a result ends with."""

from __future__ import annotations

INTERRUPTED = "interrupted (Ctrl-C): the rows hold the rounds completed before it"


def keep_complete_rounds(slot: dict) -> int:
    """Cut a shape's per-round lists to the rounds whose every side finished.

    A round is complete once its GPU state is recorded (``slot["state"]``,
    appended after both sides ran): after an interrupt, samples of a round
    that only one side finished are dropped, so the sides stay paired. Lists
    inside dict values (one per reference backend) are cut the same way.
    Returns the number of complete rounds."""
    n = len(slot["state"])
    for value in slot.values():
        lists = value.values() if isinstance(value, dict) else [value]
        for lst in lists:
            if isinstance(lst, list):
                del lst[n:]
    return n

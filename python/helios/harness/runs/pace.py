"""How long the next base/head pair of ci and bisect is expected to take: what their
stopping rule (ci.pairs_until_decided) weighs against the budget."""

from __future__ import annotations

import numpy as np


class PairPace:
    """The seconds a base/head pair takes on n shapes, a + b n: each bench is a process
    with a start-up of its own (a) and a time per shape (b), fitted to the pairs so far
    by least squares; proportional to n (a = 0) while they had one shape count, or
    where the fit gives a negative part."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, float]] = []  # (shapes, seconds)

    def add(self, shapes: int, seconds: float) -> None:
        self.pairs.append((max(1, shapes), seconds))

    def expect(self, shapes: int) -> float:
        ns = [n for n, _ in self.pairs]
        ts = [t for _, t in self.pairs]
        if len(set(ns)) > 1:
            b, a = (float(c) for c in np.polyfit(ns, ts, 1))
            if a >= 0 and b >= 0:
                return a + b * shapes
        return sum(ts) / sum(ns) * shapes

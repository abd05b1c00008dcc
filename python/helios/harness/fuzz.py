"""`helios check --fuzz N`: random shapes x the device's variants vs float64."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..check import check_close, reference_matmul
from ..device import Device

PRIMES = [1, 2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 131, 251, 257, 383, 509, 521, 631, 701]
# fp16 accumulators cannot meet the gate on random normals (docs/perf-notes.md). They
# get inputs in {-1, 0, 1} instead: every partial sum is an integer below 2048, exact
# in fp16, so any indexing or tail error still fails.


@dataclass
class FuzzCase:
    index: int
    shape: tuple[int, int, int]
    variant: str
    out_dtype: str
    fails: int
    total: int
    line: str

    @property
    def passed(self) -> bool:
        return self.fails == 0


def random_dim(rng: np.random.Generator, hi: int) -> int:
    kind = rng.integers(0, 3)
    if kind == 0:
        return int(rng.integers(1, hi + 1))
    if kind == 1:
        return int(rng.choice([p for p in PRIMES if p <= hi]))
    base = int(rng.choice([8, 16, 32, 64, 128]))   # tile multiples and their tails
    return int(np.clip(base * int(rng.integers(1, max(2, hi // base + 1))) + int(rng.integers(-1, 2)), 1, hi))


def fuzz(dev: Device, n: int, seed: int, *, variants: Optional[list[str]] = None,
         max_dim: int = 700, atol: float = 0.02, rtol: float = 0.01):
    """Yields one FuzzCase per case; variants default to every one the device lists."""
    rng = np.random.default_rng(seed)
    vs = variants or dev.variants()
    for i in range(n):
        v = vs[i % len(vs)] if i < len(vs) else vs[int(rng.integers(0, len(vs)))]
        m, nn, k = (random_dim(rng, max_dim) for _ in range(3))
        od = "float32" if rng.integers(0, 2) else "float16"
        if "acc=f16" in v:
            a = rng.integers(-1, 2, size=(m, k)).astype(np.float16)
            b = rng.integers(-1, 2, size=(k, nn)).astype(np.float16)
        else:
            a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
            b = rng.standard_normal((k, nn), dtype=np.float32).astype(np.float16)
        r = check_close(dev.matmul(a, b, out_dtype=od, variant=v), reference_matmul(a, b),
                        atol=atol, rtol=rtol)
        yield FuzzCase(i, (m, nn, k), v, od, r.fails, r.total, r.line())

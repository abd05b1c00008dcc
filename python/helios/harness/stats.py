"""Sample statistics for timings: summaries, seeded bootstrap CIs, a rank test."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 12345


def _arr(samples: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty 1-D sequence of samples")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples must be finite")
    return x


def bootstrap_median_ci(
    samples: Sequence[float] | np.ndarray,
    *,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the median (seeded: the same samples give the same CI)."""
    x = _arr(samples)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def bootstrap_ratio_ci(
    num: Sequence[float],
    den: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """CI of median(num) / median(den), resampling each side independently."""
    a, b = _arr(num), _arr(den)
    rng = np.random.default_rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    r = ma / mb
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def summarize(samples: Sequence[float]) -> dict:
    """median, mean, min, max, p95, p99, cv (std/mean), n, and the median's 95% CI."""
    x = _arr(samples)
    mean = float(x.mean())
    lo, hi = bootstrap_median_ci(x)
    return {
        "median": float(np.median(x)),
        "mean": mean,
        "min": float(x.min()),
        "max": float(x.max()),
        "p95": float(np.percentile(x, 95)),
        "p99": float(np.percentile(x, 99)),
        "cv": float(x.std(ddof=1) / mean) if x.size > 1 and mean > 0 else 0.0,
        "n": int(x.size),
        "median_ci95": [lo, hi],
    }


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value, normal approximation with tie correction.
    1.0 when the samples cannot differ (all values tied)."""
    x, y = _arr(a), _arr(b)
    n1, n2 = x.size, y.size
    allv = np.concatenate([x, y])
    order = np.argsort(allv, kind="mergesort")
    ranks = np.empty_like(allv)
    sorted_v = allv[order]
    # average ranks over ties
    i = 0
    tie_term = 0.0
    while i < sorted_v.size:
        j = i
        while j + 1 < sorted_v.size and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)  # continuity correction
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))

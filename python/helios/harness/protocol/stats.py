"""Sample statistics for timings: summaries, seeded bootstrap CIs, a rank test."""

from __future__ import annotations

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

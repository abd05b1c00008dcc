"""Statistics against known values."""

import numpy as np
import pytest

from helios.harness.protocol.stats import bootstrap_median_ci, bootstrap_ratio_ci, summarize


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median"] == 3.0 and s["mean"] == 22.0 and s["min"] == 1.0 and s["max"] == 100.0
    assert s["n"] == 5
    assert s["p95"] == pytest.approx(np.percentile([1, 2, 3, 4, 100], 95))
    assert s["cv"] == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1) / 22.0)
    lo, hi = s["median_ci95"]
    assert 1.0 <= lo <= 3.0 <= hi <= 100.0


def test_bootstrap_is_seeded_and_sane():
    x = np.random.default_rng(1).normal(10, 1, 200)
    assert bootstrap_median_ci(x) == bootstrap_median_ci(x)
    lo, hi = bootstrap_median_ci(x)
    assert lo < np.median(x) < hi and hi - lo < 0.6
    assert bootstrap_median_ci([5.0] * 10) == (5.0, 5.0)


def test_ratio_ci_brackets_true_ratio():
    rng = np.random.default_rng(2)
    lo, hi = bootstrap_ratio_ci(rng.normal(15, 0.3, 300), rng.normal(10, 0.2, 300))
    assert lo < 1.5 < hi and hi - lo < 0.05


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [[1.0]]])
def test_bad_samples(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_warmup_launches():
    from helios.matmul_timing import warmup_launches

    assert warmup_launches(0.034, 10, 200) == 5883  # 200 ms of 34 us launches
    assert warmup_launches(5.7, 10, 200) == 36
    assert warmup_launches(100.0, 10, 200) == 10  # the count is a minimum
    assert warmup_launches(1e-6, 10, 200) == 20000  # capped
    assert warmup_launches(0.0, 7, 200) == 7

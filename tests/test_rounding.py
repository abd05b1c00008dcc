"""Outputs are rounded once, to nearest even, like torch and NumPy round: a kernel
that rounds toward zero is within one unit of the last place, so tolerance tests
pass it, but it biases every value toward zero (a training run feels that: its
loss curve drifts from torch's). Inputs are chosen so that every product and sum
is exact in fp32 (multiples of 2^-8 times small integers), so the exact result is
known and any other rounding shows as a mismatch."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios.dtypes import as_dtype
from helios.harness.workloads.fuzz import bf16_aware_variants

SHAPES = [(128, 128, 128), (127, 129, 96)]  # whole tiles (the fragment store), and tails


def exact_operands(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(-255, 256, (m, k)) / 256.0  # 8 significant bits: exact in bf16 and fp16
    b = rng.integers(-4, 5, (k, n)).astype(np.float64)
    return a, b, a @ b  # |sum| <= 4 * k: exact in fp32 at k <= 2^12


def sampled_variants(dev: helios.Device, dtype: str) -> list[str]:
    """The default and every variant that writes C differently (split-K, each
    fragment shape), not all of them: each is a compile on lavapipe. Not the
    acc=f16 variants: they accumulate in fp16 (rounding every partial sum), so
    their outputs are not one rounding of the exact sum."""
    vs = [v for v in bf16_aware_variants(dev, dtype) if "acc=f16" not in v]
    picked, seen = [dev.default_variant(512, 512, 512, dtype=dtype)], set()
    for v in vs:
        key = (v.split(":")[1] if v.startswith("coop") else v.split(":")[0], "splitk=1" in v)
        if key not in seen:
            seen.add(key)
            picked.append(v)
    return list(dict.fromkeys(picked))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_products_round_to_nearest_even(device, dtype):
    dt = as_dtype(dtype)
    bad = []
    for variant in sampled_variants(device, dtype):
        for i, (m, n, k) in enumerate(SHAPES):
            a, b, exact = exact_operands(m, n, k, seed=i)
            want = exact.astype(np.float32).astype(dt).astype(np.float64)  # round to nearest even
            got = np.asarray(device.matmul(a.astype(dt), b.astype(dt), variant=variant, out_dtype=dtype), np.float64)
            wrong = got != want
            if wrong.any():
                toward_zero = np.abs(got[wrong]) < np.abs(want[wrong])
                bad.append(
                    f"{variant} {m}x{n}x{k}: {int(wrong.sum())} of {wrong.size} not rounded to nearest even "
                    f"({int(toward_zero.sum())} of them toward zero)"
                )
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_epilogue_rounds_to_nearest_even(device, dtype):
    dt = as_dtype(dtype)
    a, b, exact = exact_operands(128, 128, 128, seed=3)
    bias = np.arange(128) / 64.0  # exact in fp32
    want = (exact + bias).astype(np.float32).astype(dt).astype(np.float64)
    got = np.asarray(device.matmul(a.astype(dt), b.astype(dt), bias=bias, out_dtype=dtype), np.float64)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} not rounded to nearest even"

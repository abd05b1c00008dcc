"""helios.matmul_timing's seeded inputs and their cache (HELIOS_INPUT_CACHE)."""

from __future__ import annotations

import numpy as np
import pytest

from helios import matmul_timing
from helios.dtypes import bfloat16


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
def test_cached_inputs_are_the_drawn_ones_and_are_not_drawn_again(tmp_path, monkeypatch, dtype):
    drawn = matmul_timing.random_inputs(40, 24, 56, seed=9, dtype=dtype)
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path / "inputs"))
    first = matmul_timing.random_inputs(40, 24, 56, seed=9, dtype=dtype)  # drawn and written
    assert len(list((tmp_path / "inputs").glob("*.npz"))) == 1
    assert not list((tmp_path / "inputs").glob("*.tmp"))

    def no_draw(seed):
        raise AssertionError("drawn again although cached")

    monkeypatch.setattr(matmul_timing.np.random, "default_rng", no_draw)
    again = matmul_timing.random_inputs(40, 24, 56, seed=9, dtype=dtype)
    for x, y, z in zip(drawn, first, again):
        assert z.dtype == np.dtype(dtype) and z.shape == x.shape
        assert x.view(np.uint16).tobytes() == y.view(np.uint16).tobytes() == z.view(np.uint16).tobytes()


def test_each_seed_shape_and_dtype_has_its_own_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path))
    a1, _ = matmul_timing.random_inputs(8, 8, 8, seed=1)
    a2, _ = matmul_timing.random_inputs(8, 8, 8, seed=2)
    matmul_timing.random_inputs(8, 8, 16, seed=1)
    matmul_timing.random_inputs(8, 8, 8, seed=1, dtype=bfloat16)
    assert len(list(tmp_path.glob("*.npz"))) == 4
    assert not np.array_equal(a1, a2)


def test_a_damaged_entry_is_drawn_again_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path))
    want = matmul_timing.random_inputs(16, 8, 24, seed=3)
    (entry,) = tmp_path.glob("*.npz")
    entry.write_bytes(b"not an npz")
    got = matmul_timing.random_inputs(16, 8, 24, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(want, got))
    with np.load(entry) as z:  # rewritten whole
        assert z["a"].shape == (16, 24)


def test_a_cache_that_cannot_be_written_costs_only_a_draw(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(blocker / "inputs"))
    a, b = matmul_timing.random_inputs(8, 8, 8, seed=4)
    assert a.shape == (8, 8) and b.shape == (8, 8)

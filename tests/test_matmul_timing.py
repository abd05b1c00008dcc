"""helios.matmul_timing's seeded inputs and their cache (HELIOS_INPUT_CACHE)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from helios import matmul_timing
from helios.cli import main
from helios.dtypes import bfloat16
from helios.files import FileError


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
def test_cached_inputs_are_the_drawn_ones_and_are_not_drawn_again(tmp_path, monkeypatch, dtype):
    drawn = matmul_timing.random_inputs(40, 24, 56, seed=9, dtype=dtype)
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path / "inputs"))
    first = matmul_timing.random_inputs(40, 24, 56, seed=9, dtype=dtype)  # drawn and written
    assert len(list((tmp_path / "inputs").glob("*.npy"))) == 1
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
    assert len(list(tmp_path.glob("*.npy"))) == 4
    assert not np.array_equal(a1, a2)


def _npy_header(shape: tuple, descr: str = "<u2") -> bytes:
    """A .npy version-1.0 header claiming `shape` of `descr`, padded as NumPy pads it."""
    head = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    head += b" " * (-(len(head) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head


DAMAGE = {
    "garbage": lambda good: b"not an npy file",
    "cut short": lambda good: good[: len(good) // 2],
    "empty": lambda good: b"",
    "header claims 2^40 elements": lambda good: _npy_header((1 << 40,)),
    "wrong size": lambda good: _npy_header((3,)) + b"\0" * 6,
    "wrong dtype": lambda good: _npy_header((16 * 24 + 24 * 8,), "<f4") + b"\0" * 4 * (16 * 24 + 24 * 8),
    "all NaN": lambda good: good[: -2 * (16 * 24 + 24 * 8)] + b"\x00\x7e" * (16 * 24 + 24 * 8),
    "far outside a normal": lambda good: good[: -2 * (16 * 24 + 24 * 8)] + b"\x00\x5c" * (16 * 24 + 24 * 8),
    "old npz": lambda good: b"PK\x03\x04" + b"\0" * 40,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_named_discarded_and_drawn_again(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path))
    want = matmul_timing.random_inputs(16, 8, 24, seed=3)
    (entry,) = tmp_path.glob("*.npy")
    entry.write_bytes(DAMAGE[damage](entry.read_bytes()))
    with pytest.warns(UserWarning, match=f"input cache entry {entry}.*discarded and drawn again"):
        got = matmul_timing.random_inputs(16, 8, 24, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(want, got))
    assert np.load(entry).shape == (16 * 24 + 24 * 8,)  # rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten entry reads back quietly
        again = matmul_timing.random_inputs(16, 8, 24, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(want, again))


@pytest.mark.parametrize("link", [False, True])
def test_an_entry_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, monkeypatch, link):
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path))
    matmul_timing.random_inputs(8, 8, 8, seed=5)
    (entry,) = tmp_path.glob("*.npy")
    entry.unlink()
    if link:
        os.mkfifo(tmp_path / "fifo")
        entry.symlink_to(tmp_path / "fifo")
    else:
        os.mkfifo(entry)
    with pytest.raises(FileError, match=f"{entry}: not a regular file.*HELIOS_INPUT_CACHE"):
        matmul_timing.random_inputs(8, 8, 8, seed=5)


def test_a_fifo_in_the_input_cache_stops_bench_with_exit_2(device, tmp_path, monkeypatch, capsys):
    """The gate's operands (384^3, seed 0 + 7919, float16) are the first bench reads."""
    monkeypatch.setenv("HELIOS_INPUT_CACHE", str(tmp_path))
    key = f"384x384x384-seed7919-float16-{matmul_timing.INPUT_DRAW}-numpy{np.__version__}"
    os.mkfifo(tmp_path / f"{key}.npy")
    argv = ["bench", "--shapes=16x16x16", "--iters=2", "--warmup=1", "--ref=numpy", f"--out={tmp_path / 'r.json'}"]
    assert main(argv) == 2
    assert "not a regular file" in capsys.readouterr().err

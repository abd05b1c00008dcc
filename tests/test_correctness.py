"""Helios vs a float64 reference of the same fp16 inputs, with the seeds' gate."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_variants, rand, small_ints

import helios

ODD_SHAPES = [
    (1, 1, 1),
    (7, 7, 7),
    (17, 17, 17),
    (63, 63, 63),
    (65, 65, 65),
    (127, 127, 127),
    (129, 129, 129),
    (383, 384, 385),
    (385, 383, 384),
    (1, 300, 40),
    (300, 1, 40),
    (40, 70, 1),
    (5, 3, 200),
    (100, 37, 91),
    (8, 8, 8),
    (16, 16, 16),
]


@pytest.mark.parametrize("m,n,k", ODD_SHAPES)
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_default_variant_odd_shapes(device, m, n, k, out_dtype):
    a, b = rand((m, k), m + n), rand((k, n), k + 1)
    c = device.matmul(a, b, out_dtype=out_dtype)
    assert c.shape == (m, n) and c.dtype == np.dtype(out_dtype)
    # fp16 output adds one rounding of the result: half an ulp, |ref| * 2^-11
    r = helios.check_close(c, helios.reference_matmul(a, b), rtol=0.01)
    assert r.passed, r.line()


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", device_variants())
def test_every_variant_exact_small_integers(device, variant):
    """Small-integer inputs make every variant's result exact (fp16 accumulators too)."""
    for m, n, k in [(1, 1, 1), (33, 17, 65), (130, 70, 385), (64, 64, 64)]:
        a, b = small_ints((m, k), m), small_ints((k, n), n + k)
        for out_dtype in ("float32", "float16"):
            c = device.matmul(a, b, out_dtype=out_dtype, variant=variant)
            ref = a.astype(np.int64) @ b.astype(np.int64)
            np.testing.assert_array_equal(c.astype(np.int64), ref, err_msg=f"{variant} {m}x{n}x{k}")


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", device_variants())
def test_every_variant_random_gate(device, variant):
    """The seeds' gate on random normals. fp16 accumulation cannot meet it at large K
    (that is the gate working), so acc=f16 variants are gated up to K=128."""
    kmax = 128 if "acc=f16" in variant else 1000
    for m, n, k in [(7, 17, 63), (65, 127, 129), (383, 384, 385), (130, 7, 1), (129, 255, 33)]:
        if k > kmax:
            continue
        a, b = rand((m, k), 3 * m + n), rand((k, n), k)
        c = device.matmul(a, b, out_dtype="float32", variant=variant)
        r = helios.check_close(c, helios.reference_matmul(a, b))
        assert r.passed, f"{variant} {m}x{n}x{k}: {r.line()}"


def test_check_shape_384(device):
    a, b = rand((384, 384), 1), rand((384, 384), 2)
    r = helios.check_close(device.matmul(a, b, out_dtype="float32"), helios.reference_matmul(a, b))
    assert r.passed and r.total == 384 * 384, r.line()


def test_layouts_noncontiguous_and_fortran(device):
    base = rand((90, 140), 5)
    a = base[::2, ::3]  # non-contiguous view (45, 47)
    b = np.asfortranarray(rand((47, 31), 6))
    ref = helios.reference_matmul(a, b)
    assert helios.check_close(device.matmul(a, b, out_dtype="float32"), ref).passed
    bt = rand((31, 47), 7).T  # transposed view
    assert helios.check_close(device.matmul(a, bt, out_dtype="float32"), helios.reference_matmul(a, bt)).passed


def test_float32_inputs_are_rounded_to_float16(device):
    a32, b32 = rand((50, 60), 8, np.float32), rand((60, 70), 9, np.float32)
    c = device.matmul(a32, b32)
    assert c.dtype == np.float32  # out follows the inputs' dtype
    ref = helios.reference_matmul(a32.astype(np.float16), b32.astype(np.float16))
    assert helios.check_close(c, ref).passed


@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (4, 0, 3), (0, 0, 0), (4, 5, 0)])
def test_zero_sized_dimensions_match_numpy(device, m, n, k):
    a, b = np.ones((m, k), np.float16), np.ones((k, n), np.float16)
    c = device.matmul(a, b, out_dtype="float32")
    np.testing.assert_array_equal(c, (a.astype(np.float32) @ b.astype(np.float32)))


def test_module_level_matmul_uses_default_device():
    a, b = small_ints((20, 30), 1), small_ints((30, 10), 2)
    try:
        c = helios.matmul(a, b, out_dtype="float32")
    except helios.NoDeviceError as e:
        pytest.skip(f"no Vulkan device: {e}")
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_scalar_path_when_coop_disabled():
    try:
        dev = helios.Device(disable_coop=True)
    except helios.NoDeviceError as e:
        pytest.skip(f"no Vulkan device: {e}")
    with dev:
        assert dev.default_variant().startswith("scalar:")
        a, b = rand((70, 33), 1), rand((33, 45), 2)
        assert helios.check_close(dev.matmul(a, b, out_dtype="float32"), helios.reference_matmul(a, b)).passed
        assert dev.telemetry()["coop_matmuls"] == 0

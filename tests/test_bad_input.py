"""Bad input gets a clear Python exception naming what is wrong, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import helios

A = np.ones((4, 3), np.float16)
B = np.ones((3, 5), np.float16)


@pytest.mark.parametrize(
    "a,b,exc,match",
    [
        # lists, 1-D and N-D operands are taken as numpy.matmul takes them: what does not chain is refused
        ([[1.0]], B, ValueError, r"inner dimensions differ: op\(a\) is \(1, 1\)"),
        (A, "not an array", TypeError, "must be an array"),
        (None, B, TypeError, "must be an array"),
        (np.ones(4, np.float16), B, ValueError, r"inner dimensions differ: a has shape \(4,\) \(K 4\).*\(3, 5\)"),
        (np.ones((2, 2, 2, 2), np.float16), B, ValueError, r"inner dimensions differ: a has shape \(2, 2, 2, 2\)"),
        (np.ones((4, 2), np.float16), B, ValueError, r"inner dimensions differ.*\(4, 2\).*\(3, 5\)"),
        (np.ones((4, 3), np.int32), B, TypeError, "int32"),
        (np.ones((4, 3), object), B, TypeError, "object"),
        (np.ones((4, 3), np.complex64), B, TypeError, "complex64"),
        (np.ones((4, 3), bool), B, TypeError, "bool"),
    ],
)
def test_bad_operands(device, a, b, exc, match):
    with pytest.raises(exc, match=match):
        device.matmul(a, b)


@pytest.mark.parametrize("out_dtype", ["float64", "int8", "bogus", 3.5])
def test_bad_out_dtype(device, out_dtype):
    with pytest.raises(ValueError, match="out_dtype"):
        device.matmul(A, B, out_dtype=out_dtype)


@pytest.mark.parametrize(
    "variant",
    [
        "",
        "coop",
        "coop:16x16x16",
        "fast",
        "coop:0x16x16:tile1x1x1:sg1x1:acc=f32:load=shared:stages=2",
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f64:load=shared:stages=2",
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f32:load=maybe:stages=2",
        "scalar:tile64x64:acc=f32",
    ],
)
def test_malformed_variant_is_value_error(device, variant):
    with pytest.raises(ValueError, match="variant"):
        device.matmul(A, B, variant=variant)


@pytest.mark.parametrize(
    "variant",
    [
        "coop:7x7x7:tile14x14x14:sg1x1:acc=f32:load=shared:stages=2",  # not in the table
        "coop:8x8x8:tile4000x4000x64:sg500x500:acc=f32:load=shared:stages=2",  # far too big
        "scalar:tile32x32x16:acc=f32",  # scalar is fixed
        "coop:16x16x16:tile128x128x32:sg4x4:acc=f32:load=shared:stages=3",
    ],
)
def test_unsupported_variant_is_unsupported_error(device, variant):
    with pytest.raises(helios.UnsupportedError, match="variant") as ei:
        device.matmul(A, B, variant=variant)
    assert isinstance(ei.value, NotImplementedError) and isinstance(ei.value, helios.HeliosError)
    assert ei.value.status == "HL_ERR_UNSUPPORTED_VARIANT"


def test_variant_must_be_str(device):
    with pytest.raises(TypeError, match="variant"):
        device.matmul(A, B, variant=3)


def test_too_large_is_device_memory_error(device):
    # np.empty reserves address space without touching it: the engine must refuse
    # before it reads a byte. 70000^2 elements overflow 32-bit indexing.
    a = np.empty((70000, 70000), np.float16)
    with pytest.raises(helios.DeviceMemoryError, match="70000") as ei:
        device.matmul(a, np.ones((70000, 1), np.float16))
    assert isinstance(ei.value, MemoryError)
    # A 4 GiB fp32 output exceeds maxStorageBufferRange (and was never allocated).
    with pytest.raises(helios.DeviceMemoryError, match="exceeds"):
        device.matmul(np.ones((65536, 1), np.float16), np.ones((1, 16384), np.float16), out_dtype="float32")


def test_time_matmul_bad_arguments(device):
    with pytest.raises(ValueError, match="m must be"):
        device.time_matmul(0, 4, 4)
    with pytest.raises(ValueError, match="iters"):
        device.time_matmul(4, 4, 4, iters=0)
    with pytest.raises(TypeError, match="dtype must be one of float16, bfloat16"):
        device.time_matmul(4, 4, 4, dtype="float64")
    with pytest.raises(ValueError, match="do not match"):
        device.time_matmul(4, 4, 4, inputs=(A, B))


def test_low_level_run_validates(device):
    def run(a, b, out):
        return device._gemm(a=a, b=b, m=a.shape[0], n=b.shape[1], k=a.shape[1], out_dtype=out)

    with pytest.raises(TypeError, match="float16"):
        run(np.ones((2, 2), np.float32), np.ones((2, 2), np.float16), "float32")
    with pytest.raises(ValueError, match="C-contiguous"):
        run(np.asfortranarray(np.ones((2, 3), np.float16)), np.ones((3, 2), np.float16), "float32")
    with pytest.raises(ValueError, match="out_dtype"):
        run(np.ones((2, 2), np.float16), np.ones((2, 2), np.float16), "float64")


def test_bad_device_index():
    with pytest.raises(helios.NoDeviceError, match="out of range"):
        helios.Device(999)
    with pytest.raises(ValueError):
        helios.Device(-1)
    with pytest.raises(TypeError):
        helios.Device("0")

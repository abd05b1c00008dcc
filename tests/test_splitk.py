"""Split-K, rasterized block order and the interior fast path: exact results on
shapes that exercise each (uneven K chunks, fewer chunks than asked, edge blocks
beside interior ones), fp16 and fp32 output, and the variant-string fields."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import rand, small_ints

import helios


def _coop_base(device) -> str:
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    return device.default_variant()


def _with(v: str, **fields) -> str:
    for name, value in fields.items():
        parts = v.split(":")
        parts = [f"{name}={value}" if p.startswith(f"{name}=") else p for p in parts]
        v = ":".join(parts)
    return v


@pytest.mark.parametrize("splitk", [2, 3, 5])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (64, 64, 512), (100, 37, 1000), (257, 136, 700), (33, 8, 96)])
def test_splitk_exact(device, splitk, m, n, k):
    v = _with(_coop_base(device), splitk=splitk)
    a, b = small_ints((m, k), m + k), small_ints((k, n), n)
    ref = a.astype(np.int64) @ b.astype(np.int64)
    for out in ("float32", "float16"):
        c = device.matmul(a, b, out_dtype=out, variant=v)
        np.testing.assert_array_equal(c.astype(np.int64), ref, err_msg=f"{v} {m}x{n}x{k} {out}")
    assert device.telemetry()["last_variant"] == v


def test_splitk_random_gate_and_dispatch_count(device):
    v = _with(_coop_base(device), splitk=4)
    a, b = rand((200, 1024), 1), rand((1024, 72), 2)
    device.reset_telemetry()
    c = device.matmul(a, b, out_dtype="float32", variant=v)
    r = helios.check_close(c, helios.reference_matmul(a, b))
    assert r.passed, r.line()
    assert device.telemetry()["dispatches"] == 2  # the product and the reduction


@pytest.mark.parametrize("raster", [1, 2, 3, 8])
def test_raster_covers_every_block(device, raster):
    """Every block of C is written exactly once whatever the grouping (unwritten
    elements stay NaN from the poison and fail)."""
    v = _with(_coop_base(device), raster=raster)
    a, b = small_ints((300, 64), 5), small_ints((64, 170), 6)
    c = device.matmul(a, b, out_dtype="float32", variant=v)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_interior_and_edge_blocks_agree(device):
    """A product whose grid has interior blocks (fast path) and edge blocks (checked
    path) in both directions, with K a multiple of the slab and not."""
    v = _coop_base(device)
    for k in (64, 96, 100):
        a, b = small_ints((150, k), k), small_ints((k, 130), k + 1)
        c = device.matmul(a, b, out_dtype="float32", variant=v)
        np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_variant_fields_round_trip_and_legacy_form():
    v = "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=3:raster=4"
    assert helios.canonical_variant(v) == v
    legacy = "coop:16x8x16:tile128x64x32:sg4x4:acc=f32:load=shared:stages=1"
    assert helios.canonical_variant(legacy) == legacy + ":splitk=1:raster=1"
    assert helios.canonical_variant(legacy + ":splitk=2") == legacy + ":splitk=2:raster=1"


@pytest.mark.parametrize(
    "bad",
    [
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:raster=8:splitk=1",  # order
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=0:raster=8",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=0",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8:x=1",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2::raster=8",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8:",
        ":coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2",
        "coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:bogus=1",
    ],
)
def test_malformed_fields_rejected(bad):
    with pytest.raises(ValueError, match="malformed variant"):
        helios.canonical_variant(bad)


def test_nul_in_variant_rejected(device):
    with pytest.raises(ValueError, match="NUL"):
        device.check_variant("coop:16x8x16\x00:tile")


def test_splitk_limits_checked(device):
    v = _with(_coop_base(device), splitk=17)
    with pytest.raises(helios.UnsupportedError, match="splitk must be 1..16"):
        device.check_variant(v)


def test_default_for_shape_is_valid_and_used(device):
    for shape in [(64, 64, 64), (1024, 1024, 1024), (33, 4096, 8192)]:
        v = device.default_variant(*shape)
        assert device.check_variant(v) == v
    a, b = small_ints((40, 48), 1), small_ints((48, 24), 2)
    device.matmul(a, b)
    assert device.telemetry()["last_variant"] == device.default_variant(40, 24, 48)


def test_kernel_stats(device):
    stats = device.kernel_stats()
    assert isinstance(stats, dict)
    digest = stats.pop("code_digest")  # always: what the driver was given (the row's identity)
    assert isinstance(digest, str) and len(digest) == 16
    if device.info["pipeline_statistics"]:
        assert stats and all(isinstance(x, float) for x in stats.values())
    else:
        assert stats == {}  # the driver offers no statistics: said as an empty report
    with pytest.raises(ValueError, match="malformed"):
        device.kernel_stats("nonsense")
    with pytest.raises(ValueError, match="out_dtype"):
        device.kernel_stats(None, "int8")

"""The opt-in NV cooperative matrix 2 family (workgroup-scope matrices, tensor-
layout loads that clamp every tail): exact results where the device offers it,
a clear UnsupportedError where it does not, and its kill switch."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import rand, small_ints

import helios

V = "coop2:tile128x128x32:wg256:acc=f32:raster=8"


def _coop2_variants(device) -> list[str]:
    return [v for v in device.variants() if v.startswith("coop2:")]


def test_string_round_trip():
    assert helios.canonical_variant(V) == V
    for bad in (
        "coop2:tile128x128x32:acc=f32:raster=8",
        "coop2:tile128x128x32:wg256:acc=f32",
        "coop2:tile128x128x32:wg256:acc=f64:raster=8",
        "coop2:tile128x128:wg256:acc=f32:raster=8",
    ):
        with pytest.raises(ValueError, match="malformed"):
            helios.canonical_variant(bad)


def test_never_the_default(device):
    assert not device.default_variant().startswith("coop2:")
    assert not device.default_variant(4096, 4096, 4096).startswith("coop2:")


def test_refused_with_the_reason_where_not_offered(device):
    if device.info["cooperative_matrix2_enabled"]:
        pytest.skip("this device runs coop2 (tested below)")
    feats = device.info["cooperative_matrix2_features"]
    assert not _coop2_variants(device)
    with pytest.raises(helios.UnsupportedError, match="VK_NV_cooperative_matrix2"):
        device.check_variant(V)
    with pytest.raises(helios.UnsupportedError):
        device.matmul(small_ints((8, 8), 1), small_ints((8, 8), 2), variant=V)
    assert isinstance(feats["workgroup_scope"], bool) and isinstance(feats["tensor_addressing"], bool)


def test_kill_switch(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP2", "1")
    with helios.Device() as d:
        assert not d.info["cooperative_matrix2_enabled"] and not _coop2_variants(d)
        with pytest.raises(helios.UnsupportedError, match="VK_NV_cooperative_matrix2"):
            d.check_variant(V)
    with helios.Device(disable_coop2=True) as d:
        assert not _coop2_variants(d)


def _needs_coop2(device):
    if not device.info["cooperative_matrix2_enabled"]:
        feats = device.info["cooperative_matrix2_features"]
        pytest.skip(
            f"device {device.info['name']} offers no usable NV cooperative matrix 2 "
            f"(workgroup scope {feats['workgroup_scope']}, tensor addressing "
            f"{feats['tensor_addressing']})"
        )


@pytest.mark.parametrize(
    "m,n,k", [(1, 1, 1), (7, 17, 63), (130, 70, 385), (128, 128, 64), (300, 257, 33), (129, 255, 1000)]
)
def test_exact_with_tails(device, m, n, k):
    _needs_coop2(device)
    for v in _coop2_variants(device):
        a, b = small_ints((m, k), m + k), small_ints((k, n), n)
        ref = a.astype(np.int64) @ b.astype(np.int64)
        for out in ("float32", "float16"):
            c = device.matmul(a, b, out_dtype=out, variant=v)
            np.testing.assert_array_equal(c.astype(np.int64), ref, err_msg=f"{v} {m}x{n}x{k} {out}")


def test_random_gate(device):
    _needs_coop2(device)
    for v in _coop2_variants(device):
        if "acc=f16" in v:
            continue
        a, b = rand((383, 385), 1), rand((385, 384), 2)
        r = helios.check_close(device.matmul(a, b, out_dtype="float32", variant=v), helios.reference_matmul(a, b))
        assert r.passed, f"{v}: {r.line()}"

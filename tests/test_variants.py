"""Variant strings, the device's list, and the seeds' environment switches."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_variants, small_ints

import helios


def test_list_is_canonical_and_checkable(device):
    vs = device.variants()
    assert vs and len(vs) == len(set(vs))
    for v in vs:
        assert helios.canonical_variant(v) == v
        assert device.check_variant(v) == v
    assert any(v.startswith("scalar:") for v in vs)


def test_default_on_coop_device_is_coop_and_listed(device):
    d = device.default_variant()
    if device.info["cooperative_matrix"]:
        assert d.startswith("coop:"), d  # lavapipe included: CI exercises the real coop path
    assert d in device.variants()


def test_default_coop_shape_comes_from_the_table(device):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    shape = device.default_variant().split(":")[1]
    table = {
        f"{r['m']}x{r['n']}x{r['k']}"
        for r in device.info["cooperative_matrix_properties"]
        if r["a"] == "f16" and r["c"] == "f32"
    }
    assert shape in table


def test_canonical_round_trip():
    s = "coop:16x8x16:tile64x64x32:sg2x4:acc=f32:load=direct:stages=1:splitk=2:raster=8"
    assert helios.canonical_variant(s) == s
    with pytest.raises(ValueError):
        helios.canonical_variant("coop:16x8x16")


def test_result_reports_variant_used(device):
    for v in device_variants()[:3] + [device.default_variant()]:
        device.matmul(small_ints((9, 9), 1), small_ints((9, 9), 2), variant=v)
        assert device.telemetry()["last_variant"] == v


def _coop(device):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")


def test_env_disable_coop(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP", "1")
    with helios.Device() as d:
        assert d.default_variant().startswith("scalar:")
        assert not any(v.startswith("coop:") for v in d.variants())


def test_env_force_variant(device, monkeypatch):
    _coop(device)
    target = device.variants()[0]
    monkeypatch.setenv("HELIOS_VARIANT", target)
    assert device.default_variant() == target
    monkeypatch.setenv("HELIOS_VARIANT", "nonsense")
    with pytest.raises(ValueError, match="HELIOS_VARIANT"):
        device.default_variant()
    monkeypatch.setenv("HELIOS_VARIANT", "coop:7x7x7:tile14x14x14:sg1x1:acc=f32:load=shared:stages=2")
    with pytest.raises(helios.UnsupportedError, match="HELIOS_VARIANT"):
        device.matmul(small_ints((4, 4), 1), small_ints((4, 4), 2))


@pytest.mark.parametrize(
    "env,value,expect",
    [
        ("HELIOS_COOP_F16IN_SUBGROUP_TILES", "1x2", ":sg1x2:"),
        ("HELIOS_COOP_F16IN_SUBGROUP_TILES", "2x1", ":sg2x1:"),
        ("HELIOS_COOP_DIRECT_LOAD", "1", ":load=direct:"),
        ("HELIOS_COOP_F16_ACCUM", "1", ":acc=f16:"),
    ],
)
def test_env_switches_shape_the_default(device, monkeypatch, env, value, expect):
    _coop(device)
    monkeypatch.setenv(env, value)
    v = device.default_variant()
    assert expect in v, v
    a, b = small_ints((40, 50), 3), small_ints((50, 30), 4)
    np.testing.assert_array_equal(device.matmul(a, b, out_dtype="float32"), a.astype(np.float32) @ b.astype(np.float32))
    # the product runs the default for its shape (small grids: smaller blocks), switch applied
    used = device.telemetry()["last_variant"]
    assert used == device.default_variant(40, 30, 50) and expect in used


def test_env_coop_tile(device, monkeypatch):
    _coop(device)
    shapes = sorted(
        {
            f"{r['m']}x{r['n']}x{r['k']}"
            for r in device.info["cooperative_matrix_properties"]
            if r["a"] == "f16" and r["c"] == "f32"
        }
    )
    for s in shapes:
        monkeypatch.setenv("HELIOS_COOP_TILE", s)
        assert device.default_variant().split(":")[1] == s
    monkeypatch.setenv("HELIOS_COOP_TILE", "7x7x7")
    with pytest.raises(helios.UnsupportedError, match="7x7x7"):
        device.default_variant()
    monkeypatch.setenv("HELIOS_COOP_TILE", "big")
    with pytest.raises(ValueError, match="HELIOS_COOP_TILE"):
        device.default_variant()


def test_variant_fields_are_the_parsed_variant(device):
    for v in device.variants():
        f = helios.variant_fields(v)
        assert f["path"] in ("scalar", "coop", "coop2", "gemv") and v.startswith(f["path"] + ":")
        if f["path"] == "gemv":  # no tiles: the workgroup size, fp32 sums
            assert v == f"gemv:wg{f['threads']}" and f["acc"] == "f32" and f["bm"] == 0 and f["splitk"] == 1
        else:
            assert f"acc={f['acc']}" in v and f["bm"] > 0 and f["splitk"] >= 1
    with pytest.raises(ValueError):
        helios.variant_fields("coop:bogus")


def test_the_batch_rule_lives_in_the_engine(device):
    """A batch runs as batch * M rows without split-K: Chain reports what the engine picks."""
    one = device.default_variant(64, 4096, 8192)
    batched = device.default_variant(64, 4096, 8192, batch=4)
    assert helios.variant_fields(batched)["splitk"] == 1
    assert helios.variant_fields(one)["path"] == helios.variant_fields(batched)["path"]

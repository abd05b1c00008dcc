"""helios roof: the cooperative-matrix MMA roof per fragment shape and accumulator."""

from __future__ import annotations

import json

import pytest

import helios
from helios.cli import main
from helios.roof import mma_roof


def _coop(device):
    if not device.info["cooperative_matrix_enabled"]:
        pytest.skip("the roof measures cooperative matrices; this device runs without them")


def test_roof_rows_cover_the_table_and_are_positive(device):
    _coop(device)
    rows = mma_roof(device, iters=64, reps=3)
    listed = {
        (f"{r['m']}x{r['n']}x{r['k']}", r["c"])
        for r in device.info["cooperative_matrix_properties"]
        if r["a"] == "f16" and r["scope"] == "subgroup" and r["c"] == r["result"]
    }
    assert {(r["shape"], r["acc"]) for r in rows} == listed
    for r in rows:
        assert r["tflops"] > 0 and len(r["samples_ms"]) == 3 and r["tflops_max"] >= r["tflops"]
        m, n, k = map(int, r["shape"].split("x"))
        assert r["flops_per_dispatch"] == 2 * m * n * k * 64 * 4 * 4 * r["workgroups"]


def test_roof_refuses_what_the_device_lacks(device):
    _coop(device)
    with pytest.raises(helios.UnsupportedError, match="no subgroup cooperative matrix 7x7x7"):
        device._mma_roof(7, 7, 7, "f32", 8, 8, 0, 1)
    with pytest.raises(ValueError, match="acc must be"):
        device._mma_roof(8, 8, 8, "f64", 8, 8, 0, 1)
    with pytest.raises(ValueError, match="reps must be"):
        device._mma_roof(8, 8, 8, "f32", 8, 8, 0, 0)


def test_roof_cli_json(device, capsys):
    _coop(device)
    assert main(["roof", "--iters", "32", "--reps", "2", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["schema"] == "helios-roof/1" and res["rows"] and res["helios_build"]["build_commit"]


def test_bench_rows_report_their_fraction_of_the_cached_roof(device, tmp_path, monkeypatch):
    """Without a cached roof roofFraction is null; after `helios roof` it is the row's
    TF/s over the roof of its variant's fragment shape."""
    _coop(device)
    from helios import _helios
    from helios.roof import roof_tflops

    monkeypatch.setenv("HELIOS_ROOF_CACHE", str(tmp_path / "roof.json"))
    bench = ["bench", "--shapes=96x80x64", "--iters=3", "--warmup=1", "--ref=numpy", "--force"]
    assert main([*bench, f"--out={tmp_path / 'a.json'}"]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["rows"][0]["roofFraction"] is None
    assert main(["roof", "--iters", "32", "--reps", "2"]) == 0
    assert main([*bench, f"--out={tmp_path / 'b.json'}"]) == 0
    row = json.loads((tmp_path / "b.json").read_text())["rows"][0]
    f = _helios.variant_fields(row["variant"])
    roof = roof_tflops(device.info, f"{f['tm']}x{f['tn']}x{f['tk']}", f["acc"])
    assert roof and row["roofFraction"] == pytest.approx(row["heliosTflops"] / roof)
    assert "of the MMA roof" in (tmp_path / "b.md").read_text()


def test_a_corrupt_roof_cache_is_ignored_with_a_warning(device, tmp_path, monkeypatch):
    from helios.roof import roof_tflops

    bad = tmp_path / "roof.json"
    bad.write_text("{not json")
    monkeypatch.setenv("HELIOS_ROOF_CACHE", str(bad))
    with pytest.warns(UserWarning, match="roof cache .* ignored"):
        assert roof_tflops(device.info, "8x8x8", "f32") is None

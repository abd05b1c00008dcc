"""The tuner: cache file handling, lookups by bucket, precedence of the
environment switches, and the rule that a variant that failed its check is
never chosen (on a synthetic device whose fastest variant is wrong)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pytest

import helios
from helios import tune, tune_cache
from helios.cli import main


def test_bucket_rounds_up_to_blocks():
    assert tune_cache.bucket((1, 128, 129)) == "128x128x256"
    assert tune_cache.bucket((4096, 4096, 4096)) == "4096x4096x4096"
    assert tune_cache.bucket((3000, 3072, 3100)) == "3072x3072x3200"


def test_missing_cache_is_empty(tmp_path):
    assert tune_cache.load(tmp_path / "none.json") == {"schema": tune_cache.SCHEMA, "devices": {}}


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        json.dumps({"schema": "other/9", "devices": {}}),
        json.dumps({"schema": tune_cache.SCHEMA, "devices": []}),
    ],
)
def test_corrupt_or_foreign_cache_warns_and_is_ignored(tmp_path, text):
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.warns(UserWarning, match="ignored"):
        doc = tune_cache.load(p)
    assert doc == {"schema": tune_cache.SCHEMA, "devices": {}}


INFO = {
    "name": "Fake GPU",
    "vendor_id": 1,
    "device_id": 2,
    "driver_version": 3,
    "driver_name": "fake",
    "driver_info": "1.0",
    "cooperative_matrix_properties": [{"m": 16, "n": 16, "k": 16}],
}


def test_store_and_lookup_round_trip(tmp_path):
    p = tmp_path / "t.json"
    r = tune.TuneResult(
        shape=(1000, 1000, 1000),
        bucket=tune_cache.bucket((1000, 1000, 1000)),
        variant="V1",
        median_ms=0.5,
        candidates={"V1": 0.5, "V2": 0.7},
    )
    tune.store([r], INFO, p)
    doc = tune_cache.load(p)
    assert tune_cache.lookup(doc, INFO, (1000, 1000, 1000)) == "V1"
    assert tune_cache.lookup(doc, INFO, (1024, 1020, 1001)) == "V1"  # same bucket
    assert tune_cache.lookup(doc, INFO, (2048, 1000, 1000)) is None
    other = dict(INFO, driver_version=4)  # a new driver: picks do not apply
    assert tune_cache.lookup(doc, other, (1000, 1000, 1000)) is None
    # a second store merges, and a corrupt file is rewritten by it
    p.write_text("garbage")
    with pytest.warns(UserWarning):
        tune.store([r], INFO, p)
    assert json.loads(p.read_text())["schema"] == tune_cache.SCHEMA


@dataclass
class _Timing:
    median_ms: float


class FakeDevice:
    """Variant 'fast-wrong' is fastest but computes garbage; 'slow-right' is correct."""

    info = INFO

    def matmul(self, a, b, out_dtype="float16", variant=None):
        c = a.astype(np.float32) @ b.astype(np.float32)
        if variant == "fast-wrong":
            c = c + 1.0
        return c.astype(out_dtype)

    def time_matmul(self, m, n, k, iters, warmup, variant, inputs):
        return _Timing({"fast-wrong": 0.1, "slow-right": 0.3, "mid-right": 0.2}[variant])


def test_failed_check_is_never_chosen():
    logs = []
    res = tune.tune(
        FakeDevice(),
        [(64, 64, 64), (300, 200, 100)],
        variants=["fast-wrong", "slow-right", "mid-right"],
        iters=3,
        warmup=1,
        warmup_ms=0,
        log=logs.append,
    )
    assert [r.variant for r in res] == ["mid-right", "mid-right"]
    assert all(str(r.candidates["fast-wrong"]).startswith("REJECTED") for r in res)
    assert any("REJECTED fast-wrong" in line for line in logs)


def test_all_rejected_is_an_error():
    with pytest.raises(RuntimeError, match="every candidate failed"):
        tune.tune(FakeDevice(), [(8, 8, 8)], variants=["fast-wrong"], iters=1, warmup=0, warmup_ms=0)


def test_device_uses_tuned_pick_and_switches_win(device, tmp_path, monkeypatch):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    path = tmp_path / "t.json"
    monkeypatch.setenv("HELIOS_TUNE_CACHE", str(path))
    default = device.default_variant(70, 60, 50)
    pick = next(v for v in device.variants() if v.startswith("coop:") and v != default and "acc=f32" in v)
    tune.store([tune.TuneResult((70, 60, 50), tune_cache.bucket((70, 60, 50)), pick, 1.0)], device.info, path)
    with helios.Device() as d:
        assert d.resolve_variant(70, 60, 50) == pick
        assert d.resolve_variant(70, 60, 50, "auto") == pick
        a = np.ones((70, 50), np.float16)
        b = np.ones((50, 60), np.float16)
        assert (d.matmul(a, b, out_dtype="float32") == 50).all()
        assert d.telemetry()["last_variant"] == pick
        assert d.resolve_variant(700, 600, 500) == d.default_variant(700, 600, 500)  # not tuned
        monkeypatch.setenv("HELIOS_COOP_DIRECT_LOAD", "1")  # a switch wins
        assert d.resolve_variant(70, 60, 50) == d.default_variant(70, 60, 50)


def test_invalid_cached_pick_warns_and_falls_back(device, tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    monkeypatch.setenv("HELIOS_TUNE_CACHE", str(path))
    tune.store(
        [
            tune.TuneResult(
                (16, 16, 16),
                tune_cache.bucket((16, 16, 16)),
                "coop:7x7x7:tile7x7x7:sg1x1:acc=f32:load=shared:stages=1",
                1.0,
            )
        ],
        device.info,
        path,
    )
    with helios.Device() as d:  # 16 rows: past the matrix-vector kernel's 8, where tuned picks apply
        with pytest.warns(UserWarning, match="not valid here"):
            v = d.resolve_variant(16, 16, 16)
        assert v == d.default_variant(16, 16, 16)


def test_cli_tune_writes_cache(device, tmp_path, capsys):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    cache = tmp_path / "c.json"
    v = device.default_variant()
    assert (
        main(
            [
                "tune",
                "--shapes",
                "64x64x64,40x30x20",
                "--candidates",
                v,
                "--iters",
                "2",
                "--warmup",
                "1",
                "--warmup-ms",
                "0",
                "--cache",
                str(cache),
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in out] == [v, v]
    doc = tune_cache.load(cache)
    assert tune_cache.lookup(doc, device.info, (64, 64, 64)) == v


def test_cli_tune_dry_run_and_bad_candidate(device, tmp_path, capsys):
    cache = tmp_path / "c.json"
    v = device.default_variant()
    assert (
        main(
            [
                "tune",
                "--shapes",
                "16x16x16",
                "--candidates",
                v,
                "--iters",
                "1",
                "--warmup",
                "0",
                "--warmup-ms",
                "0",
                "--cache",
                str(cache),
                "--dry-run",
            ]
        )
        == 0
    )
    assert not cache.exists()
    assert main(["tune", "--shapes", "16x16x16", "--candidates", "nonsense", "--cache", str(cache)]) == 2
    assert "malformed variant" in capsys.readouterr().err


def test_candidates_are_built_from_the_variant_table(device):
    from helios.tune import candidates

    got = candidates(device)
    assert got[0] == device.default_variant()
    assert len(set(got)) == len(got)
    for v in got:
        assert device.check_variant(v) == v


# ---- attention -------------------------------------------------------------------


def test_attention_buckets():
    b = tune_cache.attention_bucket
    assert b(128, 1, False, False, "float16") == "attention:d128:kv128:float16"
    assert b(64, 129, True, True, "bfloat16") == "attention:d64:kv256:causal:bwd:bfloat16"
    assert b(64, 2048, False, False, "float16") == b(64, 1025, False, False, "float16")
    assert b(64, 2048, False, False, "float16") != b(64, 2048, True, False, "float16")


def test_attention_uses_the_tuned_pick_and_switches_win(device, tmp_path, monkeypatch):
    """A stored attention pick (forward and backward, their own buckets) runs where
    variant is None; the kill switches and a pick that is not valid fall back."""
    from helios.attention import random_qkv

    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    path = tmp_path / "t.json"
    monkeypatch.setenv("HELIOS_TUNE_CACHE", str(path))
    fwd = [v for v in device.attention_variants(16) if v != device.default_attention_variant(16, 40)][0]
    bwd = [
        v
        for v in device.attention_variants(16, backward=True)
        if v != device.default_attention_variant(16, 40, backward=True) and v != "fa-scalar"
    ][0]
    tune.store(
        [
            tune.TuneResult((1, 1, 40, 16), tune_cache.attention_bucket(16, 40, False, False, "float16"), fwd, 1.0),
            tune.TuneResult((1, 1, 40, 16), tune_cache.attention_bucket(16, 40, False, True, "float16"), bwd, 1.0),
            tune.TuneResult(
                (1, 1, 40, 32),
                tune_cache.attention_bucket(32, 40, False, False, "float16"),
                "fa-coop:7x7x7:sg1:wq1:bc7",
                1.0,
            ),
        ],
        device.info,
        path,
    )
    q, k, v = random_qkv(1, 1, 40, 40, 16, 0)
    with helios.Device() as d:
        o, lse = d.attention(q, k, v, return_lse=True)
        assert d.telemetry()["last_variant"] == fwd
        d.attention_backward(q, k, v, o, q, lse)
        assert d.telemetry()["last_variant"] == bwd
        d.attention(q, k, v, causal=True)  # another bucket: the engine's default
        assert d.telemetry()["last_variant"] == d.default_attention_variant(16, 40, True)
        monkeypatch.setenv("HELIOS_DISABLE_COOP_ATTENTION", "1")
        d.attention(q, k, v)
        assert d.telemetry()["last_variant"] == "fa-scalar"
        monkeypatch.delenv("HELIOS_DISABLE_COOP_ATTENTION")
        q2, k2, v2 = random_qkv(1, 1, 40, 40, 32, 0)
        with pytest.warns(UserWarning, match="not valid here"):
            d.attention(q2, k2, v2)
        assert d.telemetry()["last_variant"] == d.default_attention_variant(32, 40)


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_cli_tune_attention_writes_cache(device, tmp_path, capsys, backward):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    cache = tmp_path / "c.json"
    cands = device.attention_variants(16, backward=backward)[:2]
    argv = [
        "tune",
        "--workload",
        "attention",
        "--shapes",
        "1x2x64x16",
        "--candidates",
        ",".join(cands),
        "--iters",
        "2",
        "--warmup",
        "1",
        "--warmup-ms",
        "0",
        "--cache",
        str(cache),
        "--json",
        "--causal",
    ]
    assert main(argv + (["--backward"] if backward else [])) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["variant"] in cands and set(row["candidates"]) == set(cands)
    assert row["bucket"] == tune_cache.attention_bucket(16, 64, True, backward, "float16")
    assert tune_cache.lookup(tune_cache.load(cache), device.info, row["bucket"]) == row["variant"]


def test_cli_tune_attention_flags_belong_to_attention(device, capsys):
    assert main(["tune", "--causal", "--dry-run"]) == 2
    assert "belong to --workload=attention" in capsys.readouterr().err


def test_attention_candidate_failing_its_check_is_never_chosen(device, monkeypatch):
    if not device.info["cooperative_matrix"]:
        pytest.skip("device has no cooperative matrices")
    cands = device.attention_variants(16)[:2]
    monkeypatch.setattr(
        tune, "check_attention_candidate", lambda dev, v, *a, **k: "planted failure" if v == cands[0] else None
    )
    (r,) = tune.tune_attention(device, [(1, 1, 32, 16)], variants=cands, iters=2, warmup=1, warmup_ms=0)
    assert r.variant == cands[1] and r.candidates[cands[0]] == "REJECTED: planted failure"
    monkeypatch.setattr(tune, "check_attention_candidate", lambda *a, **k: "all fail")
    with pytest.raises(RuntimeError, match="failed its check"):
        tune.tune_attention(device, [(1, 1, 32, 16)], variants=cands, iters=2, warmup=1, warmup_ms=0)


def test_check_shapes_reach_the_unchecked_loop(device):
    """The tuner's (and sweep.py's) correctness check must run every listed variant's
    interior path too: a shape of whole blocks and whole slabs for each variant's
    tile (a tail-only check once passed a loop whose interior stores were wrong)."""
    for v in device.variants():
        f = helios._helios.variant_fields(v)
        if f["path"] in ("scalar", "gemv"):  # no tiles: no interior a shape must reach
            continue
        assert any(m % f["bm"] == 0 and n % f["bn"] == 0 and k % f["bk"] == 0 for m, n, k in tune.CHECK_SHAPES), v


def test_tune_with_defaults_finishes_on_a_cpu_device_and_says_how_far_it_is(device, capsys):
    """`helios tune` with its defaults used to time the GPU shape sets on lavapipe (2.5
    minutes for the first of 12 rows, the list up to 8192^3): on a CPU device it scales them
    like bench and says so, and each row says how far the tune is and about how long is left."""
    if device.info["device_type"] != "cpu":
        pytest.skip("the scaled defaults are a CPU device's; a GPU keeps the full sets")
    default = device.default_variant()
    assert main(["tune", "--dry-run", f"--candidates={default}"]) == 0
    err = capsys.readouterr().err
    assert "defaults scaled to --shapes=small --iters=5 --warmup=1 --warmup-ms=0" in err
    assert "1 candidates x 3 shapes" in err
    assert re.search(r"\[1/3, \d+ s, ~\d+ s left\]", err) and re.search(r"\[3/3, \d+ s\]", err), err

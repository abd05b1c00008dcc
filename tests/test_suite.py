"""`helios suite mlp` (seed 002's suite) on small sizes: the schema, the gate,
adapters skipped with their reason where there is no CUDA, and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helios.cli import main
from helios.harness.results.suite_tables import suite_markdown
from helios.harness.workloads.mlp import MlpConfig, latency, make_workload, run_suite


def test_suite_small_mlp(device, tmp_path, capsys, report):
    out = tmp_path / "mlp.json"
    rc = main(
        [
            "suite",
            "mlp",
            "--tokens",
            "16,33",
            "--d-model",
            "64",
            "--hidden",
            "96",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--adapters",
            "helios,helios_per_call,helios_torch,torch_eager,torch_compile",
            "--tag",
            "ci",
            f"--out={out}",
        ]
    )
    assert rc == 0, capsys.readouterr()
    res = json.loads(out.read_text())
    assert res["schema"] == "helios-suite/1" and res["tag"] == "ci" and res["status"] == "ok"
    assert out.with_suffix(".md").read_text().startswith("# helios suite mlp (ci)")
    assert [(r["tokens"], r["adapter"]) for r in res["rows"]] == [
        (t, a) for t in (16, 33) for a in ("helios", "helios_per_call", "helios_torch", "torch_eager", "torch_compile")
    ]
    for r in res["rows"]:
        if r["adapter"] in ("helios", "helios_per_call"):
            assert r["status"] == "ok" and r["check"]["passed"] and r["check"]["nonfinite_total"] == 0
            lat = r["latency_ms"]
            assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["max"]
            assert r["throughput_tokens_per_sec"] == pytest.approx(r["tokens"] / (lat["p50"] * 1e-3))
            assert r["peak_memory_bytes"] >= 2 * 64 * 96 * 2  # both weights are resident
            assert r["wall_ms"]["p50"] > 0
        else:  # no CUDA here, or CUDA: either numbers or a reason, never silence
            assert r["status"] == "ok" or r["status"].startswith("skipped: "), r["status"]
            if r["status"] == "ok":  # on a CUDA GPU: every torch-stream adapter on CUDA events
                assert r["timer"].startswith("cuda events per forward"), r["timer"]
                assert len(r["samples_ms"]) == 3 and min(r["samples_ms"]) > 0 and r["warmup_launches"] >= 1
                if r["adapter"] == "helios_torch":  # and the forward waited for alone beside it
                    assert r["wall_ms"]["p50"] > 0
    h = [r for r in res["rows"] if r["adapter"] == "helios"]
    assert all(len(r["variants"]) == 2 for r in h)
    report(f"suite mlp (lavapipe, d=64, hidden=96): helios chain p50 {h[0]['latency_ms']['p50']:.3f} ms at 16 tokens")


def test_suite_gate_rejects_a_wrong_result(device, monkeypatch):
    """A broken adapter output fails the gate, marks the run failed, gets no numbers."""
    import helios.harness.workloads.mlp as suite

    real = suite.gate

    def broken(y, wl, cfg):
        return real(np.asarray(y, np.float32) + 1.0, wl, cfg)

    monkeypatch.setattr(suite, "gate", broken)
    res = run_suite(MlpConfig(tokens=[8], d_model=32, hidden=48, iters=2, warmup=0, adapters=["helios"]))
    assert res["status"] == "failed"
    assert res["rows"][0]["status"] == "check failed" and "latency_ms" not in res["rows"][0]
    assert "check failed" in suite_markdown(res)


def test_workload_and_stats():
    wl = make_workload(5, 8, 12, seed=3)
    assert wl.x.shape == (5, 8) and wl.w1.shape == (8, 12) and wl.w2.shape == (12, 8)
    assert wl.flops == 4 * 5 * 8 * 12
    assert wl.reference_rows(np.array([0, 4])).shape == (2, 8)
    lat = latency([1.0, 2.0, 3.0, 4.0])
    assert lat["p50"] == 2.5 and lat["mean"] == 2.5 and lat["min"] == 1.0 and lat["max"] == 4.0


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["suite", "mlp", "--tokens", "0"], "integers >= 1"),
        (["suite", "mlp", "--tokens", "x"], "comma-separated integers"),
        (["suite", "attention"], "invalid choice"),
    ],
)
def test_suite_cli_errors(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_suite_unknown_adapter(device, capsys):
    assert main(["suite", "mlp", "--tokens", "4", "--d-model", "8", "--hidden", "8", "--adapters", "tvm"]) == 2
    assert "unknown adapter" in capsys.readouterr().err

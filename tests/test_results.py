"""What result files say and how Helios reads its own outputs back: provenance,
reference naming, every workload comparable, an interrupted run kept, one run
a side never a confident verdict, and the persisted pipeline cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import helios
from helios.cli import main
from helios.harness.results.compare import compare, exit_status
from helios.harness.results.compare_load import load


def _bench(tmp_path, name, *extra):
    out = tmp_path / name
    rc = main(
        [
            "bench",
            "--shapes=16x16x16,24x8x40",
            "--iters=3",
            "--warmup=0",
            "--warmup-ms=0",
            "--check-shape=16x16x16",
            "--ref=numpy",
            f"--out={out}",
            *extra,
        ]
    )
    return rc, out


def test_provenance_is_helios_own_build(tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(other),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=n",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    monkeypatch.chdir(other)
    monkeypatch.delenv("HELIOS_COMMIT", raising=False)
    rc, out = _bench(tmp_path, "b.json")
    assert rc == 0
    res = json.loads(out.read_text())
    theirs = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert res["helios_build"] == {"version": helios.__version__, "build_commit": helios._helios.BUILD_COMMIT}
    assert res["git"]["commit"] == helios._helios.BUILD_COMMIT.removesuffix("+dirty")  # readers use it: Helios's
    assert res["cwd_git"]["commit"] == theirs  # the user's project: labelled as such
    assert theirs not in json.dumps(res["helios_build"])


def test_cpu_reference_never_reads_as_cuda(tmp_path):
    rc, out = _bench(tmp_path, "b.json")
    res = json.loads(out.read_text())
    for row in res["rows"]:
        assert row["cudaMs"] is None and row["cudaTflops"] is None
        assert row["referenceMs"] > 0 and row["reference"] == "numpy"
    assert "NOT CUDA" in res["cuda"]["label"]


def test_single_run_compare_is_never_a_confident_regression(tmp_path, capsys):
    _, a = _bench(tmp_path, "a.json")
    _, b = _bench(tmp_path, "b.json")
    verdicts = compare([load(str(a))], [load(str(b))])
    assert all(v.verdict in ("SAME", "INCONCLUSIVE") for v in verdicts), [(v.shape, v.verdict) for v in verdicts]
    assert exit_status(verdicts) == 0
    assert main(["compare", str(a), str(b)]) == 0


def test_single_run_large_change_says_why():
    def fake(level):
        return {
            "schema": "helios-bench/1",
            "status": "ok",
            "helios": {"name": "GPU", "driver_version": 1},
            "rows": [
                {
                    "shape": "64x64x64",
                    "valid": True,
                    "helios": {"samples_ms": [[level * (1 + 0.001 * i) for i in range(20)]] * 3},
                }
            ],
        }

    old, new = fake(1.0), fake(1.5)
    (v,) = compare([old], [new])
    assert v.verdict == "INCONCLUSIVE" and v.assumed_noise


def test_attention_time_and_suite_results_compare(tmp_path, capsys):
    att = []
    for name in ("a1.json", "a2.json"):
        out = tmp_path / name
        assert (
            main(
                [
                    "bench",
                    "--workload=attention",
                    "--shapes=1x2x33x16",
                    "--iters=2",
                    "--warmup=0",
                    "--warmup-ms=0",
                    "--ref=numpy",
                    f"--out={out}",
                ]
            )
            == 0
        )
        att.append(str(out))
    assert main(["compare", *att]) == 0
    assert "1x2x33x16" in capsys.readouterr().out
    times = []
    for name in ("t1.json", "t2.json"):
        out = tmp_path / name
        assert (
            main(
                [
                    "time",
                    "--shapes=16x16x16",
                    "--iters=3",
                    "--warmup=0",
                    "--check-shape=16x16x16",
                    "--no-cuda",
                    f"--out={out}",
                ]
            )
            == 0
        )
        times.append(str(out))
    assert main(["compare", *times]) == 0
    assert "16x16x16" in capsys.readouterr().out
    suites = []
    for name in ("s1.json", "s2.json"):
        out = tmp_path / name
        assert (
            main(
                [
                    "suite",
                    "mlp",
                    "--tokens=8",
                    "--d-model=16",
                    "--hidden=32",
                    "--iters=3",
                    "--warmup=0",
                    "--adapters=helios",
                    f"--out={out}",
                ]
            )
            == 0
        )
        suites.append(str(out))
    assert main(["compare", *suites]) == 0
    assert "helios@8" in capsys.readouterr().out
    assert main(["report", *att, *times]) == 0


def test_interrupted_bench_keeps_complete_rounds(tmp_path, monkeypatch):
    """Ctrl-C in the second round: the file holds round one, status interrupted, exit 130."""
    from helios.harness.protocol import rounds as protocol

    calls = {"n": 0}
    real = protocol.gpu_state

    def interrupting_state(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:  # round 2's first shape: before, after of round 1's two shapes came first
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(protocol, "gpu_state", interrupting_state)
    rc, out = _bench(tmp_path, "b.json", "--repeats=3")
    assert rc == 130
    res = json.loads(out.read_text())
    assert res["status"] == "interrupted"
    assert res["rows"] and all(len(r["helios"]["samples_ms"]) == len(r["cuda"]["samples_ms"]) >= 1 for r in res["rows"])


def test_interrupted_suite_keeps_the_adapters_measured(tmp_path, monkeypatch):
    """Ctrl-C during the second token count: the file holds the first, exit 130."""
    from helios.cli import main
    from helios.harness.workloads import mlp as suite

    real = suite.run_helios

    def interrupting(dev, wl, cfg):
        if wl.tokens > 8:
            raise KeyboardInterrupt
        return real(dev, wl, cfg)

    monkeypatch.setattr(suite, "run_helios", interrupting)
    out = tmp_path / "s.json"
    args = ["suite", "mlp", "--tokens=8,16", "--d-model=32", "--hidden=32", "--iters=3", "--warmup=0"]
    assert main([*args, "--adapters=helios", f"--out={out}"]) == 130
    res = json.loads(out.read_text())
    assert res["status"] == "interrupted" and [r["tokens"] for r in res["rows"]] == [8]


def test_pipeline_cache_persists_and_ignores_corrupt_files(tmp_path):
    code = (
        "import numpy as np, helios, json\n"
        "with helios.Device() as d:\n"
        "    d.matmul(np.ones((8,8),np.float16), np.ones((8,8),np.float16))\n"
        "    print(json.dumps(dict(d.info['pipeline_cache'])))\n"
    )
    env = dict(os.environ, HELIOS_PIPELINE_CACHE=str(tmp_path / "pc"))

    def run():
        r = subprocess.run(
            [sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr

    first, _ = run()
    assert first["loaded_bytes"] == 0 and first["path"].startswith(str(tmp_path / "pc"))
    assert os.path.getsize(first["path"]) > 0
    second, _ = run()
    assert second["loaded_bytes"] > 0 and second["note"] is None
    with open(first["path"], "r+b") as f:  # a foreign header
        f.seek(8)
        f.write(b"\xde\xad\xbe\xef")
    third, err = run()
    assert third["loaded_bytes"] == 0 and "another device or driver" in third["note"]
    assert "pipeline cache" in err
    fourth, _ = run()  # rewritten at close: usable again
    assert fourth["loaded_bytes"] > 0
    off = dict(env, HELIOS_PIPELINE_CACHE="off")
    r = subprocess.run([sys.executable, "-c", code], env=off, capture_output=True, text=True, timeout=300)
    assert json.loads(r.stdout.strip().splitlines()[-1])["path"] is None


def test_pipeline_ir_dump_writes_files_or_says_why(tmp_path):
    """HELIOS_PIPELINE_IR never fails an op and is never silent: every file it
    wrote is counted, and where it wrote none the device's note says why."""
    code = (
        "import numpy as np, helios, json\n"
        "with helios.Device() as d:\n"
        "    d.matmul(np.ones((8,8),np.float16), np.ones((8,8),np.float16))\n"
        "    print(json.dumps(dict(d.info['pipeline_ir'])))\n"
    )
    ir = tmp_path / "ir"
    base = {k: v for k, v in os.environ.items() if k != "HELIOS_PIPELINE_IR"}
    env = dict(base, HELIOS_PIPELINE_IR=str(ir), HELIOS_PIPELINE_CACHE="off")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["dir"] == str(ir)
    written = sorted(ir.glob("*")) if ir.exists() else []
    assert got["files"] == len(written)
    if not written:
        assert got["note"], got
    else:
        assert all(f.stat().st_size > 0 for f in written)
    r = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"dir": None, "files": 0, "note": None}


def test_report_without_matplotlib_needs_it_only_for_figures(tmp_path, monkeypatch, capsys):
    rc, out = _bench(tmp_path, "b.json")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["report", str(out)]) == 0
    assert main(["report", str(out), "--png", str(tmp_path / "png")]) == 2
    assert "helios-vulkan[notebook]" in capsys.readouterr().err


def test_compare_without_scipy_names_the_extra(tmp_path, monkeypatch, capsys):
    _, a = _bench(tmp_path, "a.json")
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    assert main(["compare", str(a), str(a)]) == 2
    err = capsys.readouterr().err
    assert "helios-vulkan[stats]" in err and "Traceback" not in err


def test_bench_tables_use_one_ratio_convention(tmp_path, capsys):
    rc, out = _bench(tmp_path, "b.json")
    md = out.with_suffix(".md").read_text()
    assert "helios/numpy time" in md and "speedup" not in md
    assert "| 0.0 |" not in md  # small TF/s in significant digits


def test_np_operations_stay_exact(device):
    a = np.ones((8, 8), np.float16)
    assert (helios.matmul(a, a, device=device) == 8).all()


def test_shape_flops_reads_every_label():
    from helios.flops import attention_backward_flops, attention_flops, matmul_flops
    from helios.harness.results.rows import shape_flops

    assert shape_flops("64x32x16") == matmul_flops(64, 32, 16)
    assert shape_flops("2x3x128x64") == attention_flops(2, 3, 128, 128, 64)
    assert shape_flops("2x3x128x64-causal") == attention_flops(2, 3, 128, 128, 64, True)
    assert shape_flops("2x3x128x64-bwd") == attention_backward_flops(2, 3, 128, 128, 64)
    assert shape_flops("2x3x128x64-causal-bwd") == 2.5 * attention_flops(2, 3, 128, 128, 64, True)
    for bad in ("2x3x128x64-sideways", "12", "axbxc"):
        with pytest.raises(ValueError):
            shape_flops(bad)


def test_rates_keep_significant_digits():
    """A CPU device's figures (0.0123 TF/s, 0.4 GB/s) read as numbers, not 0.0 or 0."""
    from helios.harness.results.format import fmt_rate, fmt_tflops

    assert fmt_rate(0.01234) == "0.0123" and fmt_rate(0.4) == "0.4" and fmt_rate(12.345) == "12.3"
    assert fmt_rate(312.44) == "312.4" and fmt_rate(None) == "-" and fmt_tflops is fmt_rate


def test_the_attention_table_shows_a_small_bandwidth():
    from helios.harness.results.attention_table import attention_markdown

    row = {
        "shape": "1x1x16x16",
        "heliosMs": 0.5,
        "heliosTflops": 0.0001,
        "backends": {},
        "cudaBackend": None,
        "valid": True,
        "throttled": False,
        "variant": "fa-scalar",
        "helios": {"bandwidth_gbs": 0.0262, "queries_per_s": 32000.0, "p95_ms": 0.6, "p99_ms": 0.7},
    }
    doc = {"status": "ok", "rows": [row], "backends": [], "iters": 1, "repeats": 1, "environment": {"flops": "x"}}
    table = attention_markdown(doc)
    assert "| 0.0262 |" in table and "| 0.0001 |" in table

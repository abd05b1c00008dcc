"""External adapters of `helios suite`: a real command on the same table, and
every failure mode ending in a row whose status says exactly what happened."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helios.cli import main
from helios.harness.workloads.external import external_adapters, validate_report

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = f"{sys.executable} {ROOT / 'tools' / 'adapters' / 'template_numpy.py'}"
SMALL = [
    "suite",
    "mlp",
    "--tokens",
    "16",
    "--d-model",
    "32",
    "--hidden",
    "64",
    "--iters",
    "3",
    "--warmup",
    "0",
    "--adapters",
    "helios",
]

GOOD = {
    "status": "ok",
    "latency_ms": {"mean": 1.0, "p50": 1.0, "p95": 1.2, "min": 0.9, "max": 1.3},
    "throughput_tokens_per_sec": 16000.0,
    "peak_memory_bytes": 1024,
}


def script(tmp_path, name, body):
    p = tmp_path / f"{name}.py"
    p.write_text("import json, sys, time\nreq = json.load(sys.stdin)\n" + body)
    return f"{sys.executable} {p}"


def run_suite(tmp_path, *extra):
    out = tmp_path / "s.json"
    rc = main(SMALL + list(extra) + [f"--out={out}", "--force"])
    return rc, json.loads(out.read_text())


def test_a_real_command_joins_the_table_gated(tmp_path):
    rc, res = run_suite(tmp_path, "--adapter-cmd", f"numpy={TEMPLATE}")
    assert rc == 0
    row = [r for r in res["rows"] if r["adapter"] == "numpy"][0]
    assert row["status"] == "ok" and row["check"]["passed"] and row["latency_ms"]["p50"] > 0
    assert row["throughput_tokens_per_sec"] > 0 and row["exit_status"] == 0 and len(row["samples_ms"]) == 3
    assert res["external_adapters"]["numpy"] == TEMPLATE
    assert "numpy" in (tmp_path / "s.md").read_text()


def test_the_seeds_environment_variables_name_adapters(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_BENCH_CMD", TEMPLATE)
    rc, res = run_suite(tmp_path)
    assert rc == 0 and [r["status"] for r in res["rows"] if r["adapter"] == "tvm"] == ["ok"]


@pytest.mark.parametrize(
    "name,body,status",
    [
        ("timeout", "time.sleep(30)\n", "timeout: no answer within 2 s"),
        ("crash", "sys.exit(3)\n", "crashed: exit status 3"),
        ("nojson", "print('hello, no json here')\n", "no JSON"),
        ("malformed", "print(json.dumps({'status': 'ok', 'latency_ms': {'p50': -1}}))\n", "malformed JSON: latency_ms"),
        (
            "nan",
            'print(\'{"status": "ok", "latency_ms": {"mean": NaN, "p50": 1, "p95": 1, "min": 1, '
            '"max": 1}, "throughput_tokens_per_sec": 1, "peak_memory_bytes": 0}\')\n',
            "malformed JSON",
        ),
        (
            "wronggpu",
            f"g = {GOOD!r}\ng['gpu_uuid'] = 'GPU-00000000-0000-0000-0000-000000000000'\nprint(json.dumps(g))\n",
            "refused: it ran on GPU",
        ),
        ("says", "print(json.dumps({'status': 'unsupported dtype'}))\n", "reported: unsupported dtype"),
        (
            "badoutput",
            f"import numpy as np\nnp.save(req['output'], np.full((16, 32), 7.0))\nprint(json.dumps({GOOD!r}))\n",
            "check failed",
        ),
    ],
)
def test_every_failure_mode_is_a_row_with_its_status(tmp_path, name, body, status):
    rc, res = run_suite(tmp_path, "--adapter-cmd", f"{name}={script(tmp_path, name, body)}", "--adapter-timeout", "2")
    row = [r for r in res["rows"] if r["adapter"] == name][0]
    assert row["status"].startswith(status), row["status"]
    assert "latency_ms" not in row and "throughput_tokens_per_sec" not in row  # never a number not measured
    assert rc == (1 if status == "check failed" else 0)
    helios_row = [r for r in res["rows"] if r["adapter"] == "helios"][0]
    assert helios_row["status"] == "ok"  # the suite went on


def test_an_ungated_command_is_labelled(tmp_path):
    cmd = script(tmp_path, "nogate", f"print(json.dumps({GOOD!r}))\n")
    rc, res = run_suite(tmp_path, "--adapter-cmd", f"plain={cmd}")
    row = [r for r in res["rows"] if r["adapter"] == "plain"][0]
    assert rc == 0 and row["status"] == "ok" and row["check"] is None and "not correctness-gated" in row["untrusted"]
    assert "not gated" in (tmp_path / "s.md").read_text()


@pytest.mark.parametrize(
    "spec,match",
    [
        ("noequals", "NAME=COMMAND"),
        ("=cmd", "NAME must"),
        ("bad name=x", "NAME must"),
        ("helios=x", "built-in"),
        ("q=echo 'unterminated", "cannot split"),
    ],
)
def test_bad_adapter_specs_exit_2(capsys, spec, match):
    assert main(SMALL + ["--adapter-cmd", spec]) == 2
    assert match in capsys.readouterr().err
    with pytest.raises(ValueError):
        external_adapters([spec], ("helios",))


def test_the_seeds_flags_are_accepted(tmp_path):
    out = tmp_path / "b.json"
    assert (
        main(
            [
                "suite",
                "mlp",
                "--batch",
                "8",
                "--device",
                "cuda",
                "--d-model",
                "16",
                "--hidden",
                "32",
                "--iters",
                "2",
                "--warmup",
                "0",
                "--adapters",
                "helios",
                f"--out={out}",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["rows"][0]["tokens"] == 8


def test_validate_report_contract():
    assert validate_report(GOOD) is None
    assert "no 'status'" in validate_report({k: v for k, v in GOOD.items() if k != "status"})
    assert "min <= p50" in validate_report({**GOOD, "latency_ms": {**GOOD["latency_ms"], "p50": 5.0}})
    assert "peak_memory_bytes" in validate_report({**GOOD, "peak_memory_bytes": -1})
    assert "samples_ms" in validate_report({**GOOD, "samples_ms": []})


def test_suite_results_compare_across_tags(tmp_path, capsys):
    files = []
    for tag in ("base", "idea"):
        out = tmp_path / f"{tag}.json"
        assert main(SMALL + ["--tag", tag, "--adapter-cmd", f"numpy={TEMPLATE}", f"--out={out}"]) == 0
        files.append(str(out))
    assert main(["compare", *files]) == 0
    out = capsys.readouterr().out
    assert "numpy@16" in out and "helios@16" in out

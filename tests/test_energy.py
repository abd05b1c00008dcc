"""Energy per operation (harness/protocol/energy.py; read back by harness/results/energy.py)
with a stand-in NVML whose counter advances at a known power, so the arithmetic is
checked exactly; and the fields a row carries where there is no counter."""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from helios.cli import main
from helios.harness.protocol import energy


def fake_nvml(watts: float, period_s: float = 0.01, fail: bool = False) -> types.ModuleType:
    """A pynvml whose energy counter (mJ) grows at `watts`, in steps of period_s."""
    m = types.ModuleType("pynvml")
    t0 = time.perf_counter()

    def total(handle):
        if fail:
            raise RuntimeError("not supported")
        steps = int((time.perf_counter() - t0) / period_s)
        return int(steps * period_s * watts * 1000)

    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: object()
    m.nvmlDeviceGetHandleByUUID = lambda u: object()
    m.nvmlDeviceGetTotalEnergyConsumption = total
    return m


def test_a_window_measures_joules_per_op_at_a_known_power(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(300.0))
    monkeypatch.setattr(energy, "MIN_WINDOW_S", 0.3)
    c = energy.EnergyCounter(0)
    assert c.why is None and c.period_s == pytest.approx(0.01, rel=0.3)
    op_s = 0.002

    def run(n: int) -> None:
        time.sleep(n * op_s)  # n launches of 2 ms each

    w = energy.window(c, run, op_s * 1000, 1e9, 1000)
    assert w["status"] == "ok" and w["window_s"] >= 0.3
    assert w["watts"] == pytest.approx(300.0, rel=0.1)
    assert w["joules_per_op"] == pytest.approx(300.0 * op_s, rel=0.15)
    assert w["tflops_per_watt"] == pytest.approx(1e9 / w["joules_per_op"] / 1e12)


def test_a_counter_that_does_not_advance_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(0.0))
    monkeypatch.setattr(energy, "MIN_WINDOW_S", 0.05)
    c = energy.EnergyCounter(0)
    w = energy.window(c, lambda n: time.sleep(0.01), 1.0, 1e9, 10)
    assert w["status"].startswith("the counter did not advance") and "joules_per_op" not in w


@pytest.mark.parametrize("module", [None, "fail"])
def test_no_counter_gives_a_reason_not_a_number(monkeypatch, module):
    monkeypatch.setitem(sys.modules, "pynvml", None if module is None else fake_nvml(1.0, fail=True))
    c = energy.EnergyCounter(0)
    assert c.why and ("not installed" in c.why or "no energy counter" in c.why)
    row = energy.row_energy(c, (lambda n: None, 1.0), (lambda n: None, 1.0), True, 1e9, 10)
    assert row == {"status": c.why}


def test_a_cpu_reference_gets_no_energy_figure(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(100.0))
    monkeypatch.setattr(energy, "MIN_WINDOW_S", 0.05)
    c = energy.EnergyCounter(0)
    row = energy.row_energy(c, (lambda n: time.sleep(n * 0.001), 1.0), (lambda n: None, 1.0), False, 1e9, 100)
    assert row["helios"]["status"] == "ok" and "CPU" in row["reference"]["status"]


def test_bench_rows_carry_energy_or_why_not(device, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # as on a machine without NVML
    out = tmp_path / "e.json"
    base = ["bench", "--shapes=40x24x16", "--iters=2", "--warmup=0", "--ref=numpy"]
    assert main([*base, f"--out={out}"]) == 0
    doc = json.loads(out.read_text())
    assert doc["energy"] is True and "not installed" in doc["rows"][0]["energy"]["status"]
    assert "energy: not measured" in (tmp_path / "e.md").read_text()
    assert main([*base, "--no-energy", f"--out={out}", "--force"]) == 0
    assert json.loads(out.read_text())["rows"][0]["energy"] == {"status": "not measured (--no-energy)"}


@pytest.mark.parametrize("backward", [False, True])
def test_attention_rows_carry_energy_windows(device, tmp_path, monkeypatch, backward):
    """The attention bench runs a window per row on Helios's kernel (forward, or the
    backward when it is what was timed); a CPU reference gets the reason instead."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(200.0))
    monkeypatch.setattr(energy, "MIN_WINDOW_S", 0.05)
    out = tmp_path / "a.json"
    argv = ["bench", "--workload=attention", "--shapes=1x2x64x64", "--iters=2", "--warmup=0", "--ref=numpy"]
    assert main([*argv, *(["--backward"] if backward else []), f"--out={out}"]) == 0
    e = json.loads(out.read_text())["rows"][0]["energy"]
    assert e["helios"]["status"] == "ok" and e["helios"]["joules_per_op"] > 0, e
    assert "CPU" in e["reference"]["status"]
    assert "helios J/op" in (tmp_path / "a.md").read_text()


def _bench_with_energy(seed: int, joules: float) -> dict:
    """test_control's synthetic bench, its row with a Helios energy window of `joules`
    per operation (0.4% window-to-window noise)."""
    import numpy as np
    from test_control import bench

    d = bench(seed, 1.0, 0.5)
    j = joules * float(np.exp(np.random.default_rng(seed).normal(0, 0.004)))
    d["rows"][0]["energy"] = {"helios": {"status": "ok", "joules_per_op": j}}
    return d


def test_compare_judges_energy_with_files_as_runs():
    """Three files a side: Helios's J/op 10% higher on the new side is an energy
    SLOWER (more joules) with its interval; equal energy at 0.4% spread is SAME with three
    a side (the interval narrows with the measured spread) and with ten; one file a side
    gives no confident verdict."""
    from helios.harness.results.compare import compare
    from helios.harness.results.compare_table import table, verdict_dict

    old = [_bench_with_energy(s, 0.5) for s in range(3)]
    [v] = compare(old, [_bench_with_energy(s, 0.55) for s in range(10, 13)])
    assert v.energy.verdict == "SLOWER" and v.energy.pct == pytest.approx(10, abs=1.5)
    assert v.energy.old_ratio == pytest.approx(0.5, rel=0.01)
    d = verdict_dict(v)["energy"]
    assert d["verdict"] == "SLOWER" and d["ratio_ci95"][0] > 1.0 and "energy verdict" in table([v])
    [same] = compare(old, [_bench_with_energy(s, 0.5) for s in range(20, 23)])
    assert same.energy.verdict == "SAME"
    ten = [_bench_with_energy(s, 0.5) for s in range(40, 50)]
    [same] = compare(ten, [_bench_with_energy(s, 0.5) for s in range(20, 30)])
    assert same.energy.verdict == "SAME"
    [one] = compare(old[:1], [_bench_with_energy(30, 0.55)])
    assert one.energy.verdict in ("INCONCLUSIVE", "SAME") and one.energy.verdict != "SLOWER"


def test_compare_without_energy_says_nothing_about_it():
    from helios.harness.results.compare import compare
    from helios.harness.results.compare_table import table, verdict_dict

    a, b = _bench_with_energy(1, 0.5), _bench_with_energy(2, 0.5)
    for d in (a, b):
        d["rows"][0]["energy"] = {"status": "no NVML here"}
    [v] = compare([a], [b])
    assert v.energy is None and verdict_dict(v)["energy"] is None and "energy verdict" not in table([v])


def test_no_energy_asks_no_window():
    """--no-energy: no row's windows run (they draw the row's inputs again, seconds a
    large row), a valid row says why, a failed one keeps its own reason."""
    asked = []
    rows = [{"valid": True}, {"valid": False}]
    energy.energy_of_rows(False, 0, rows, lambda counter, r, i: asked.append(i) or {"status": "ok"})
    assert asked == []
    assert rows[0]["energy"] == {"status": "not measured (--no-energy)"}
    assert rows[1]["energy"]["status"] == "not measured: the row failed its check"

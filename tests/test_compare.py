"""helios compare on synthetic results."""
import json
import re

import numpy as np
import pytest

from helios.cli import main
from helios.compare import classify, commit_line, compare, CompareError


def fake_result(samples_by_shape, name="NVIDIA H100 80GB HBM3", driver=1):
    rows = []
    for shape, samples in samples_by_shape.items():
        rounds = [list(map(float, samples))]
        rows.append({"shape": shape, "valid": True, "heliosMs": float(np.median(samples)),
                     "helios": {"samples_ms": rounds}})
    return {"schema": "helios-bench/1", "status": "ok", "helios": {"name": name, "driver_version": driver},
            "rows": rows}


def noisy(median, n=100, cv=0.01, seed=0):
    return np.random.default_rng(seed).normal(median, median * cv, n)


def test_identical_distributions_are_same():
    x = noisy(1.0, seed=1)
    assert classify(x, x)[0] == "SAME"
    assert classify(noisy(1.0, seed=1), noisy(1.0, seed=2))[0] == "SAME"


def test_slowdown_faster_and_inconclusive():
    assert classify(noisy(1.0, seed=1), noisy(1.5, seed=2))[0] == "SLOWER"
    assert classify(noisy(1.0, seed=1), noisy(0.8, seed=2))[0] == "FASTER"
    # 4% apart but with 30% noise and few samples: cannot tell
    assert classify(noisy(1.0, n=8, cv=0.3, seed=3), noisy(1.04, n=8, cv=0.3, seed=4))[0] == "INCONCLUSIVE"


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def test_cli_exit_codes_and_commit_line(tmp_path, capsys):
    old = _write(tmp_path, "old.json", fake_result({"2048x2048x2048": noisy(1.0, seed=1),
                                                   "3072x3072x3072": noisy(3.0, seed=2)}))
    slow = _write(tmp_path, "slow.json", fake_result({"2048x2048x2048": noisy(1.5, seed=3),
                                                     "3072x3072x3072": noisy(3.0, seed=4)}))
    fast = _write(tmp_path, "fast.json", fake_result({"2048x2048x2048": noisy(0.8, seed=5),
                                                     "3072x3072x3072": noisy(2.4, seed=6)}))
    assert main(["compare", old, slow]) == 1
    out = capsys.readouterr().out
    assert "SLOWER" in out and "perf: <change summary> (H100: 2048 " in out
    assert main(["compare", old, fast, "--summary", "double buffering"]) == 0
    out = capsys.readouterr().out
    assert "FASTER" in out and "perf: double buffering (H100: 2048 " in out
    assert re.search(r"2048 1(\.\d+)?->0\.\d+ -(19|20|21)\.\d%", out), out
    assert main(["compare", old, old]) == 0
    assert "net ~0%, correctness preserved" in capsys.readouterr().out


def test_pooling_several_files(tmp_path):
    olds = [fake_result({"1024x1024x1024": noisy(1.0, n=20, seed=s)}) for s in range(3)]
    news = [fake_result({"1024x1024x1024": noisy(1.0, n=20, seed=10 + s)}) for s in range(3)]
    (v,) = compare(olds, news)
    assert v.n_old == 60 and v.n_new == 60 and v.verdict == "SAME"


def test_refuses_other_device_and_failed_runs(tmp_path, capsys):
    a = _write(tmp_path, "a.json", fake_result({"64x64x64": noisy(1.0)}))
    b = _write(tmp_path, "b.json", fake_result({"64x64x64": noisy(1.0)}, name="NVIDIA L4"))
    assert main(["compare", a, b]) == 2
    assert "different devices" in capsys.readouterr().err
    assert main(["compare", a, b, "--ignore-device"]) == 0
    failed = fake_result({"64x64x64": noisy(1.0)})
    failed["status"] = "failed"
    assert main(["compare", a, _write(tmp_path, "f.json", failed)]) == 2
    with pytest.raises(CompareError):
        compare([fake_result({"1x1x1": [1.0]})], [fake_result({"2x2x2": [1.0]})])


def test_commit_line_formats():
    from helios.compare import ShapeVerdict
    v = [ShapeVerdict("2048x2048x2048", 2.0, 1.8, 0.9, (0.88, 0.92), 1e-6, 10, 10, "FASTER"),
         ShapeVerdict("4096x1024x512", 1.0, 1.0, 1.0, (0.99, 1.01), 0.9, 10, 10, "SAME")]
    assert commit_line(v, "L4", "tile change") == \
        "perf: tile change (L4: 2048 2->1.8 -10.0%, 4096x1024x512 1->1 +0.0%)"

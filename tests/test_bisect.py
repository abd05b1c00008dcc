"""helios bisect's search on synthetic series of commits with a planted
regression (measurements made from synthetic bench results with known noise, the
same compare rules as a real run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helios.cli import main
from helios.harness.results.compare import compare
from helios.harness.runs.bisect import judge, search

COMMITS = [f"{i:040x}" for i in range(1, 12)]  # after GOOD; the last is BAD


def doc(seed: int, factor: float, noise: float, shapes=("4096x4096x4096", "2048x2048x2048"), runs=3) -> dict:
    rng = np.random.default_rng(seed)
    rows = []
    for si, shape in enumerate(shapes):
        hs, rr = [], []
        for run in range(runs):
            run_effect = np.exp(rng.normal(0, noise))
            for _ in range(2):
                hs.append(list((1.0 + si) * factor * run_effect * np.exp(rng.normal(0, 0.002, 10))))
                rr.append(run)
        rows.append({"shape": shape, "valid": True, "helios": {"samples_ms": hs, "round_runs": rr}})
    return {"schema": "helios-bench/1", "status": "ok", "helios": {"name": "GPU", "driver_version": 1}, "rows": rows}


def series(first_slow: int, slow: float, noise: float = 0.003, runs: int = 3):
    """measure(commit, shapes) for COMMITS where commit index >= first_slow is
    `slow` times slower on 4096^3 only; counts the measurements."""
    calls: list[str] = []
    seeds = iter(range(1000, 10**6))

    def measure(commit, shapes):
        calls.append(commit)
        i = COMMITS.index(commit)
        old = doc(next(seeds), 1.0, noise, runs=runs)
        new = doc(next(seeds), 1.0, noise, runs=runs)
        if i >= first_slow:
            new["rows"][0]["helios"]["samples_ms"] = [
                [x * slow for x in r] for r in new["rows"][0]["helios"]["samples_ms"]
            ]
        return judge(compare([old], [new]), shapes, "plain")

    return measure, calls


@pytest.mark.parametrize("first_slow", [0, 4, 7, 10])
def test_the_planted_commit_is_found(first_slow):
    measure, calls = series(first_slow, 1.10)
    r = search(COMMITS, measure, 20, {})
    assert r["status"] == "found" and r["first_slower"] == COMMITS[first_slow]
    assert r["shapes_bisected"] == ["4096x4096x4096"]
    assert len(calls) <= 1 + int(np.ceil(np.log2(len(COMMITS)))) + 1 and len(set(calls)) == len(calls)


def test_a_change_below_the_mde_is_inconclusive_not_a_guess():
    """A 4% slowdown under 4% run-to-run noise: BAD cannot be told SLOWER with
    confidence, and the search says so with the MDE instead of picking a commit."""
    measure, _ = series(5, 1.04, noise=0.04)
    r = search(COMMITS, measure, 20, {})
    assert "first_slower" not in r and ("INCONCLUSIVE" in r["status"] or "not slower" in r["status"])
    assert "MDE" in r["status"]


def test_no_regression_means_nothing_to_bisect():
    """BAD is not slower only where its intervals lie below the floor: 3 runs a side at
    0.3% run noise rule it out; at 2% they cannot, and the search says to rerun."""
    measure, calls = series(99, 1.10, runs=3)
    r = search(COMMITS, measure, 20, {})
    assert r["status"].startswith("BAD is not slower") and len(calls) == 1
    measure, calls = series(99, 1.10, runs=3, noise=0.02)
    assert search(COMMITS, measure, 20, {})["status"].startswith("INCONCLUSIVE: BAD against GOOD")


def test_max_steps_then_resume_without_measuring_again():
    measure, calls = series(6, 1.10)
    record: dict = {}
    r = search(COMMITS, measure, 2, record)
    assert r["status"] == "max steps" and len(calls) == 2
    resumed = json.loads(json.dumps({"steps": r["steps"]}))  # as read back from bisect.json
    measure2, calls2 = series(6, 1.10)
    r2 = search(COMMITS, measure2, 20, resumed)
    assert r2["first_slower"] == COMMITS[6] and not set(calls2) & set(calls)
    assert [s["commit"] for s in r2["steps"]][:2] == calls


def test_bisect_cli_refuses_bad_input_before_any_build(tmp_path, capsys):
    assert main(["bisect", "HEAD", "HEAD", "--repo", str(tmp_path), f"--out={tmp_path / 'o'}"]) == 2
    assert "could not run" in capsys.readouterr().err
    assert main(["bisect", "--shapes=garbage", "a", "b", f"--out={tmp_path / 'o'}"]) == 2
    for argv in (["bisect", "--max-steps=0", "a", "b"], ["bisect", "-x", "b"], ["bisect", "a", "--gate=x", "b"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_bisect_exit_status_names_each_ending():
    from helios.cli.bisect import exit_status

    assert exit_status("found") == 0
    assert exit_status("INCONCLUSIVE at 1234 (MDE 6.0%): rerun with more --runs") == 3
    assert exit_status("max steps") == 1 and exit_status("BAD is not slower against GOOD (MDE 2.0%)") == 1


def test_attention_shapes_are_checked_in_attention_grammar(tmp_path):
    """--workload attention takes B x H x S x d shapes; a matmul shape is refused
    before any build, as a bad shape of either grammar is."""
    out = f"--out={tmp_path / 'o'}"
    for wl, bad in (("attention", "64x64x64"), ("matmul", "1x2x64x64")):
        assert main(["bisect", f"--workload={wl}", f"--shapes={bad}", "a", "b", out]) == 2
    from helios.harness.runs.ci import shape_specs

    assert shape_specs(["1x32x2048x128-causal-bwd", "1x32x2048x128-bwd", "4x8x64x64"]) == "1x32x2048x128,4x8x64x64"


FAKE_HELIOS = """
import json, sys
args = sys.argv[1:]
if args == ["bench", "--help"]:
    print("usage: helios bench [--shapes SHAPES]" + (" [--no-energy]" if {energy} else ""))
    raise SystemExit(0)
out = next(a.split("=", 1)[1] for a in args if a.startswith("--out="))
open(out, "w").write(json.dumps({{"args": args}}))
"""


@pytest.mark.parametrize("has_flag", [True, False])
def test_a_commit_whose_bench_predates_no_energy_runs_without_it(tmp_path, has_flag):
    """ci and bisect run each commit's own `helios bench`: --no-energy goes only to
    a bench that has it (an older one, without energy windows, would refuse it)."""
    from helios.harness.runs.ci import CiConfig, bench

    site = tmp_path / f"site{has_flag}"
    (site / "helios").mkdir(parents=True)
    (site / "helios" / "__init__.py").write_text("")
    (site / "helios" / "__main__.py").write_text(FAKE_HELIOS.format(energy=has_flag))
    cfg = CiConfig(repo=tmp_path, out=tmp_path / "out", work=tmp_path, workload="attention")
    cfg.out.mkdir()
    args = json.loads(bench(cfg, "head", "0" * 40, site, "t", "1x2x64x64").read_text())["args"]
    assert ("--no-energy" in args) == has_flag and "--workload=attention" in args

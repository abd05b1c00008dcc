"""helios ci end to end on this device, on commits of a scratch clone of this
repository: A/A (exit 0, no shape FASTER or SLOWER), a head whose kernel does six times
the work (SLOWER, exit 1), a head whose products are wrong (exit 1 before any
timing), a base that does not build (exit 2 with the reason); the comment checked
against ci.json; the history file. The scratch builds share one work directory
(one engine build per distinct engine tree)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from helios.harness.results.ci_comment import COMMENT_MARKER, comment
from helios.harness.results.compare import compare
from helios.harness.runs.ci import CiConfig, run_ci
from helios.harness.runs.ci_verdicts import failed_checks, judge_sides, latest_rows
from helios.harness.runs.floors import noise_floor

# The end-to-end tests share one scratch repository and its builds (a module fixture):
# under pytest-xdist they stay on one worker. The two whose verdicts judge timings (A/A,
# the planted regression) are marked timing: make test runs them alone, after the
# parallel part (a second worker's load is noise); the gate and build checks need no quiet.
pytestmark = [pytest.mark.xdist_group("helios-ci")]

ROOT = Path(__file__).resolve().parent.parent
SHAPES = "64x64x64,96x96x96"
SLOWER_FACTOR = 6  # the slower head's work over the base's


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, message: str, edits: list) -> str:
    for rel, old, new in edits:
        p = repo / rel
        text = p.read_text()
        assert old in text, (rel, old)
        p.write_text(text.replace(old, new, 1))
    _git(repo, "commit", "-qam", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, device):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("helios ci needs git and this checkout's history (a source tree without .git)")
    d = tmp_path_factory.mktemp("ci")
    repo = d / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    assert not _git(repo, "status", "--porcelain"), "a fresh clone must be clean"
    _git(repo, "config", "user.email", "ci@helios.test")
    _git(repo, "config", "user.name", "helios ci test")
    base = _git(repo, "rev-parse", "HEAD")
    same = _commit(repo, "A/A: documentation only", [("README.md", "# Helios", "# Helios\n")])
    # A kernel that runs its main loop six times and scales the sum back: the same answer,
    # six times the work. (Three times read +186% (2.86x) on lavapipe; with two runs a side, t
    # at 2 degrees of freedom, SLOWER then needs the runs' spread below ln(2.86) / 4.30, which a
    # loaded two-core CI machine can pass: the test flaked once. Six read +574% (6.74x), nearly
    # twice the margin in log time.)
    slower = _commit(
        repo,
        "a slower kernel",
        [
            (
                "shaders/matmul/matmul_coop.comp",
                "    // Uniform per workgroup.",
                # a loop the compiler cannot unroll (it starts at 1 plus a push constant's top
                # bit, 0, unknown when compiling), so the kernel's code, and lavapipe's compile
                # of it, grow by one main loop, not five
                f"    for (uint rep = 1u + (p.flags >> 31); rep < {SLOWER_FACTOR}u; rep++)\n"
                "        main_loop(true, m0, n0, kbeg, kend, tid, wm, wn);\n"
                "    // Uniform per workgroup.",
            ),
            (
                "shaders/matmul/matmul_coop.comp",
                "    // Interior, aligned blocks store tiles",
                f"    [[unroll]] for (uint i = 0; i < SG_M * SG_N; i++) acc[i] = acc[i] * ACC_T(1.0 / {SLOWER_FACTOR}.0);\n"
                "    // Interior, aligned blocks store tiles",
            ),
        ],
    )
    _git(repo, "checkout", "-q", same)
    wrong = _commit(
        repo,
        "wrong products",
        [
            (
                "python/helios/device.py",
                "        res = unwire(res, out_name)\n",
                "        res = unwire(res, out_name) * 1.5\n",
            )
        ],
    )
    _git(repo, "checkout", "-q", same)
    broken = _commit(repo, "does not build", [("CMakeLists.txt", "project(helios", "project(helios BROKEN(")])
    return {
        "repo": repo,
        "work": d / "work",
        "base": base,
        "same": same,
        "slower": slower,
        "wrong": wrong,
        "broken": broken,
        "dir": d,
    }


def _run(s: dict, name: str, base: str, head: str, shapes: str = SHAPES, **kw) -> dict:
    cfg = CiConfig(
        repo=s["repo"],
        out=s["dir"] / name,
        work=s["work"],
        base=base,
        head=head,
        shapes=shapes,
        runs=2,
        iters=10,
        warmup=2,
        repeats=2,
        ref="numpy",
        **{"fuzz": 4, "attention_fuzz": 2, "max_pairs": 3, **kw},
    )
    return run_ci(cfg)


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.long_on_cpu
def test_aa_claims_no_difference_and_the_comment_matches_the_json(scratch):
    hist = scratch["dir"] / "history.jsonl"
    rec = _run(scratch, "aa", scratch["base"], scratch["same"], history=hist)
    assert rec["exit"] == 0, rec.get("reason")
    assert rec["failed_checks"] == {"base": [], "head": []}
    # A/A must never claim a difference. SAME is what a quiet device gives; on CI's two
    # cores a side's runs sometimes swing past lavapipe's 30% floor, and the honest
    # answer is then INCONCLUSIVE (64x64x64 read so on 9687199's CI run).
    verdicts = [v["verdict"] for v in rec["verdicts"]]
    assert len(verdicts) == 2 and set(verdicts) <= {"SAME", "INCONCLUSIVE"}, verdicts
    assert rec["engines"]["base"] == rec["engines"]["head"]  # Python-only difference: one build
    # The runs' inputs were drawn once and read back by the later runs' processes.
    cached = {p.name.split("-")[0] for p in (scratch["work"] / "inputs").glob("*.npy")}
    assert set(SHAPES.split(",")) <= cached, cached
    out = scratch["dir"] / "aa"
    saved = json.loads((out / "ci.json").read_text())
    md = (out / "comment.md").read_text()
    assert md == comment(saved) and md.startswith(COMMENT_MARKER)
    for v in saved["verdicts"]:  # every number in the table is the JSON's
        assert f"| {v['shape']} | {v['base_ms']:.4g} | {v['head_ms']:.4g} | {v['change_pct']:+.1f}%" in md
    assert "no regression" in md and "Gate head: passed" in md
    lines = [json.loads(x) for x in hist.read_text().splitlines()]
    assert {x["shape"] for x in lines} == set(SHAPES.split(",")) and all(x["commit"] == scratch["same"] for x in lines)


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.long_on_cpu
def test_a_slower_kernel_is_a_regression(scratch):
    # large enough that the kernel's work, not the dispatch, sets the time on a CPU driver
    rec = _run(scratch, "slower", scratch["same"], scratch["slower"], shapes="192x192x192")
    assert rec["exit"] == 1, rec.get("reason")
    assert any(v["verdict"] == "SLOWER" for v in rec["verdicts"]), rec["verdicts"]
    assert rec["reruns"], "a SLOWER shape is measured again before it counts"
    assert "REGRESSION" in (scratch["dir"] / "slower" / "comment.md").read_text()


@pytest.mark.slow
def test_a_head_that_fails_its_gate_stops_before_timing(scratch):
    # one product case fails a head whose products are all 1.5x (the default variant's: the
    # fuzz takes the variants in order, each its own compile on a CPU device)
    rec = _run(scratch, "wrong", scratch["same"], scratch["wrong"], fuzz=1, attention_fuzz=0)
    assert rec["exit"] == 1 and "gate" in rec["reason"]
    assert not rec["gate"]["head"]["passed"] and "verdicts" not in rec
    assert not list((scratch["dir"] / "wrong").glob("*-run*.json"))  # nothing was timed


@pytest.mark.slow
def test_a_base_that_does_not_build_cannot_run(scratch):
    rec = _run(scratch, "broken", scratch["broken"], scratch["same"])
    assert rec["exit"] == 2 and "does not build" in rec["reason"]
    assert "could not run" in (scratch["dir"] / "broken" / "comment.md").read_text()


def test_noise_tiers():
    assert noise_floor("64x64x64") == 0.05 and noise_floor("8192x8192x8192") == 0.02
    assert noise_floor("2048x2048x2048") == 0.02 and noise_floor("4096x4096x4096", "cpu") == 0.30
    assert noise_floor("512x512x512") == 0.05 and noise_floor("1024x1024x1024") == 0.02


def _cpu_side(rng: np.random.Generator, level: float, run_cv: float, heavy: bool = False) -> dict:
    """One side as helios ci pools it on a CPU device: 2 runs x 2 rounds x 10 launches
    (the end-to-end test's --runs 2 --repeats 2 --iters 10), each run's level drawn with
    run_cv (heavy: Student t, 3 degrees of freedom, a loaded machine's outliers)."""
    samples, run_ids = [], []
    for r in range(2):
        level_r = level * math.exp(run_cv * (rng.standard_t(3) if heavy else rng.normal()))
        for _ in range(2):
            samples.append(list(level_r * np.exp(rng.normal(0, 0.03, 10))))
            run_ids.append(r)
    row = {"shape": "64x64x64", "valid": True, "heliosMs": float(np.median(samples)), "helios": {}}
    row["helios"] = {"samples_ms": samples, "round_runs": run_ids}
    return {"schema": "helios-bench/1", "helios": {"name": "llvmpipe", "device_type": "cpu"}, "rows": [row]}


def test_two_cpu_runs_that_agree_do_not_make_a_verdict():
    """A/A on lavapipe with runs swinging 20% (CV): 2 runs a side that happen to agree gave t
    at 2 degrees of freedom a tiny spread, and a swing past the 30% floor read FASTER or
    SLOWER (14 of these 600 pairs with compare's GPU floor of the spread). ci floors a CPU
    side's run spread at half its noise floor: 1 of 600 here, and a 6x slower kernel is
    still found."""
    rng = np.random.default_rng(5)
    pairs = [(_cpu_side(rng, 1.0, 0.20), _cpu_side(rng, 1.0, 0.20)) for _ in range(600)]
    claims = sum(v.verdict in ("FASTER", "SLOWER") for a, b in pairs for v in judge_sides([a], [b]))
    gpu_rule = sum(
        v.verdict in ("FASTER", "SLOWER") for a, b in pairs for v in compare([a], [b], noise_for=lambda s: 0.30)
    )
    assert claims <= 1 and gpu_rule >= 5, (claims, gpu_rule)
    found = [
        v.verdict
        for _ in range(200)
        for v in judge_sides([_cpu_side(rng, 1.0, 0.12, True)], [_cpu_side(rng, 6.74, 0.12, True)])
    ]
    assert found.count("SLOWER") >= 190, found  # 6.74x: test_a_slower_kernel_is_a_regression's read


def test_history_trends_flag_step_changes(tmp_path, capsys):
    from helios.cli import main
    from helios.harness.results.history import read_history, steps

    path = tmp_path / "history.jsonl"
    ms = [1.00, 1.01, 0.99, 1.00, 1.30, 1.31]  # a 30% step at the fifth commit
    path.write_text(
        "".join(
            json.dumps(
                {
                    "date": f"2026-11-{10 + i:02d}T00:00:00Z",
                    "commit": f"{i:040x}",
                    "gpu": "H100",
                    "gpu_uuid": "GPU-1",
                    "driver": "580",
                    "dtype": "float16",
                    "shape": "4096x4096x4096",
                    "helios_ms": m,
                    "cuda_ms": 0.2,
                    "speedup": 0.2 / m,
                    "variant": "coop",
                }
            )
            + "\n"
            for i, m in enumerate(ms)
        )
    )
    flags = steps(read_history(path))
    assert [f is not None for f in flags] == [False, False, False, False, True, True]
    assert main(["report", "--history", str(path)]) == 0
    out = capsys.readouterr().out
    assert "STEP +30.0%" in out and "6 points, 1 series, 2 step change(s)" in out
    path.write_text("not json\n")
    assert main(["report", "--history", str(path)]) == 2
    assert "no line could be read" in capsys.readouterr().err


def test_failed_checks_name_the_rows_that_failed(tmp_path):
    """A bench row whose timed output failed its check is invalid (compare leaves it
    out of the verdicts); helios ci names it, file and shape, so that a wrong result
    in one run of several cannot pass as a timing."""
    ok = {"shape": "64x64x64", "valid": True, "helios": {"check": [{"passed": True}]}}
    good = {"schema": "helios-bench/1", "rows": [ok]}
    bad = {
        "schema": "helios-bench/1",
        "rows": [
            ok,
            {  # the checks are in the Helios block, one per round, as the bench writes them
                "shape": "96x96x96",
                "valid": False,
                "helios": {"check": [{"passed": True}, {"passed": False, "max_abs_err": 0.5, "nonfinite_total": 3}]},
            },
        ],
    }
    files = []
    for name, doc in (("run1-head.json", good), ("run2-head.json", bad)):
        (tmp_path / name).write_text(json.dumps(doc))
        files.append(tmp_path / name)
    assert failed_checks(files[:1]) == []
    assert failed_checks(files) == [
        {"file": "run2-head.json", "shape": "96x96x96", "why": "max abs err 0.5, 3 non-finite"}
    ]


def test_a_rerun_keeps_every_shapes_latest_row():
    """A rerun file holds only the shapes that read SLOWER: the history and the
    comment's per-shape fields take each shape's row from the last file that measured
    it (the A/A run once wrote 96x96x96 alone to its history after a rerun of it)."""
    run1 = {
        "helios": {"name": "gpu"},
        "rows": [{"shape": "64x64x64", "heliosMs": 1.0}, {"shape": "96x96x96", "heliosMs": 2.0}],
    }
    run2 = {
        "helios": {"name": "gpu"},
        "rows": [{"shape": "64x64x64", "heliosMs": 1.1}, {"shape": "96x96x96", "heliosMs": 2.1}],
    }
    rerun = {"helios": {"name": "gpu", "tag": "rerun"}, "rows": [{"shape": "96x96x96", "heliosMs": 2.2}]}
    got = latest_rows([run1, run2, rerun])
    assert [(r["shape"], r["heliosMs"]) for r in got["rows"]] == [("64x64x64", 1.1), ("96x96x96", 2.2)]
    assert got["helios"] == rerun["helios"]
    assert latest_rows([run1])["rows"] == run1["rows"]


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.long_on_cpu
def test_bisect_finds_the_slower_kernel_in_a_series(scratch):
    """helios bisect end to end on lavapipe (issue 52): base, a documentation commit,
    the slower kernel, two more documentation commits; builds shared with the tests
    above. Found is the slower kernel's commit; where lavapipe's noise leaves a step
    INCONCLUSIVE the search stops there and says so. Never another commit."""
    from helios.harness.runs.bisect import run_bisect

    repo = scratch["repo"]
    _git(repo, "checkout", "-q", scratch["slower"])
    tip = scratch["slower"]
    for i in (1, 2):
        tip = _commit(repo, f"after the slower kernel {i}", [("README.md", "# Helios", f"# Helios{' ' * i}")])
    _git(repo, "checkout", "-q", scratch["same"])
    cfg = CiConfig(
        repo=repo,
        out=scratch["dir"] / "bisect",
        work=scratch["work"],
        shapes="192x192x192",
        runs=2,
        iters=10,
        warmup=2,
        repeats=2,
        ref="numpy",
    )
    r = run_bisect(cfg, scratch["base"], tip, 6, "plain", lambda s: None)
    assert r["commits"][:2] == [scratch["same"], scratch["slower"]] and len(r["commits"]) == 4
    if r["status"] == "found":
        assert r["first_slower"] == scratch["slower"]
    else:
        assert r["status"].startswith("INCONCLUSIVE at " + scratch["same"][:12]), r["status"]
    saved = json.loads((scratch["dir"] / "bisect" / "bisect.json").read_text())
    assert saved["status"] == r["status"] and len(saved["steps"]) == len(r["steps"]) >= 2


def test_pairs_are_added_until_the_shapes_are_decided(tmp_path, monkeypatch):
    """The stopping rule (pairs_until_decided): one more pair, on the undecided shapes
    only, while any is INCONCLUSIVE; it stops when all are decided, at --max-pairs, or
    when --max-time is spent, and says which."""
    from types import SimpleNamespace

    from helios.harness.runs import ci

    asked: list = []
    state = {"open_after": 3}  # pairs after which the shape is decided

    def fake_pairs(cfg, sites, shas, shapes, tag, n, say, start=0, into=None):
        asked.append((shapes, tag, start))
        for side in into:
            into[side].append(tag)
        return into

    def fake_verdicts(files):
        decided = len(files["head"]) >= state["open_after"]
        return [SimpleNamespace(shape="64x64x64", verdict="SAME" if decided else "INCONCLUSIVE"),
                SimpleNamespace(shape="96x96x96", verdict="SAME")]  # fmt: skip

    monkeypatch.setattr(ci, "bench_pairs", fake_pairs)
    monkeypatch.setattr(ci, "verdicts_of", fake_verdicts)
    undecided = lambda vs: [v.shape for v in vs if v.verdict == "INCONCLUSIVE"]  # noqa: E731
    cfg = CiConfig(repo=tmp_path, out=tmp_path, work=tmp_path, max_pairs=8, max_time_s=900.0)
    start = {"base": ["r1", "r2"], "head": ["r1", "r2"]}
    files, verdicts, why = ci.pairs_until_decided(cfg, {}, {}, start, undecided, time.monotonic(), lambda s: None)
    assert why["stopped_by"] == "decided" and why["pairs"] == 3 and len(files["head"]) == 3
    assert asked == [("64x64x64", "pair3-", 2)]  # the undecided shape only, keeping ABBA's order
    state["open_after"] = 99
    _, _, why = ci.pairs_until_decided(
        CiConfig(repo=tmp_path, out=tmp_path, work=tmp_path, max_pairs=4), {}, {}, {"base": ["a"], "head": ["a"]},
        undecided, time.monotonic(), lambda s: None,
    )  # fmt: skip
    assert why["stopped_by"] == "4 pairs" and why["undecided"] == ["64x64x64"]
    _, _, why = ci.pairs_until_decided(
        CiConfig(repo=tmp_path, out=tmp_path, work=tmp_path, max_time_s=5.0), {}, {}, {"base": ["a"], "head": ["a"]},
        undecided, time.monotonic() - 10, lambda s: None,
    )  # fmt: skip
    assert why["stopped_by"] == "5 s" and why["pairs"] == 1
    # 10 s for the opening pair of 2 shapes: 5 s a shape. A pair on the open shape fits
    # 20 s; with the rerun of a SLOWER shape (2 pairs more) it would not.
    for rerun, pairs in ((lambda vs: [], 4), (lambda vs: ["96x96x96"], 1)):
        _, _, why = ci.pairs_until_decided(
            CiConfig(repo=tmp_path, out=tmp_path, work=tmp_path, max_pairs=4, max_time_s=20.0), {}, {},
            {"base": ["a"], "head": ["a"]}, undecided, time.monotonic() - 10, lambda s: None, rerun=rerun,
        )  # fmt: skip
        assert why["pairs"] == pairs, why


def test_the_pace_of_a_pair_is_a_start_up_and_a_time_per_shape():
    """A pair's seconds as a + b x shapes, from the pairs so far: the H200 jobs' pairs
    took about 18 s plus 3.5 s a shape (results/h200-ci-plants-76e4d11/c40_1.log)."""
    from helios.harness.runs.pace import PairPace

    pace = PairPace()
    pace.add(12, 60.0)
    assert pace.expect(3) == pytest.approx(15.0)  # one shape count: proportional
    for n in (11, 8, 7, 3):
        pace.add(n, 18 + 3.5 * n)
    pace.pairs[0] = (12, 18 + 3.5 * 12)
    assert pace.expect(9) == pytest.approx(18 + 3.5 * 9)
    slower_with_more = PairPace()
    for n, t in ((12, 30.0), (3, 40.0)):  # a negative time per shape: proportional again
        slower_with_more.add(n, t)
    assert slower_with_more.expect(3) == pytest.approx(70.0 / 15 * 3)


def test_an_interrupted_job_judges_the_runs_it_finished(tmp_path, monkeypatch):
    """SIGTERM during the third bench: ci.json and the comment hold the verdicts of the
    two runs that finished, marked interrupted, and the job exits 143."""
    import os
    import signal

    from test_control import bench as synthetic

    from helios.harness.runs import ci
    from helios.signals import SignalPolicy

    ran: list = []
    signal_at = {"bench": 2}

    def fake_bench(cfg, side, sha, site, tag, shapes):
        if len(ran) == signal_at["bench"]:
            os.kill(os.getpid(), signal.SIGTERM)
        out = cfg.out / f"{side}-{tag}.json"
        out.write_text(json.dumps(synthetic(len(ran), 1.0, 0.5, runs=1)))
        ran.append(out)
        return out

    monkeypatch.setattr(ci, "resolve_refs", lambda cfg: ("a" * 40, "b" * 40))
    monkeypatch.setattr(ci, "build", lambda cfg, sha, say: tmp_path)
    monkeypatch.setattr(ci, "engine_key", lambda repo, sha: "e1")
    monkeypatch.setattr(ci, "check_side", lambda cfg, site, sha: {})
    monkeypatch.setattr(ci, "gate", lambda cfg, side, sha, site: {"passed": True, "steps": []})
    monkeypatch.setattr(ci, "bench", fake_bench)
    cfg = CiConfig(repo=tmp_path, out=tmp_path / "out", work=tmp_path / "work", runs=2)
    with SignalPolicy():
        rec = run_ci(cfg)
    assert rec["exit"] == 143 and rec["interrupted"] == "SIGTERM", rec.get("reason")
    assert rec["files"] == {"base": ["base-run1.json"], "head": ["head-run1.json"]}
    assert [v["shape"] for v in rec["verdicts"]] == ["4096x4096x4096"] and rec["device"]["name"]
    assert "stopped by SIGTERM after 1 base and 1 head runs" in rec["reason"]
    saved = json.loads((cfg.out / "ci.json").read_text())
    assert saved["exit"] == 143 and "INTERRUPTED by SIGTERM" in (cfg.out / "comment.md").read_text()
    # after the benches, a signal no longer cuts the job: every run judged and written
    ran.clear()
    signal_at["bench"] = -1
    real_fields = ci.device_fields
    monkeypatch.setattr(ci, "device_fields", lambda r: (os.kill(os.getpid(), signal.SIGTERM), real_fields(r))[1])
    (cfg.out / "ci.json").unlink()
    with SignalPolicy() as stop:
        rec = run_ci(cfg)
    assert stop.first == signal.SIGTERM and "interrupted" not in rec and len(rec["files"]["head"]) >= 2
    assert json.loads((cfg.out / "ci.json").read_text())["files"] == rec["files"]

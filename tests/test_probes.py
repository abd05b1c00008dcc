"""The probes in tools/probes/ (what an A/B of the engine reads between suites) run on
the CPU device and refuse bad input."""

from __future__ import annotations

import difflib
import json
import os

import pytest
from tools.probes import step


def test_the_step_probe_times_each_position(capsys):
    assert step.main(["--preset", "tiny", "--positions", "3,70", "--replays", "3", "--warmup", "1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    (only,) = r["sides"].values()
    assert [row["position"] for row in only["rows"]] == [3, 70]
    assert all(row["wall_ms"] > 0 and row["gpu_ms"] >= 0 for row in only["rows"])
    assert only["ops"] > 0 and 0 < only["dispatches"] <= only["ops"] and only["barriers"] > 0
    assert step.main(["--preset", "tiny", "--positions", "5", "--replays", "1", "--warmup", "0"]) == 0
    assert "position  " in capsys.readouterr().out


def test_the_step_probe_times_sides_under_their_own_switches(capsys, monkeypatch):
    """Each side's Device opens with its switches, and they are unset again after: runs
    of a grid of 2 on one side, every op apart on the other (lavapipe's default)."""
    monkeypatch.delenv("HELIOS_PLAN_PERSISTENT_GRID", raising=False)
    argv = ["--preset", "tiny", "--positions", "3", "--replays", "5", "--warmup", "0", "--json",
            "--side", "runs:HELIOS_PLAN_PERSISTENT_GRID=2", "--side", "apart:"]  # fmt: skip
    assert step.main(argv) == 0
    whole = json.loads(capsys.readouterr().out)
    r = whole["sides"]
    assert (
        whole["same_logits"] is True
        and r["runs"]["env"] == {"HELIOS_PLAN_PERSISTENT_GRID": "2"}
        and r["apart"]["env"] == {}
    )
    assert r["runs"]["dispatches"] < r["apart"]["dispatches"] and r["runs"]["grid_barriers"] > 0
    assert r["apart"]["grid_barriers"] == 0 and "HELIOS_PLAN_PERSISTENT_GRID" not in os.environ
    # the runs' logits are the ops' apart, bit for bit, and the probe says so
    (run_row,), (apart_row,) = r["runs"]["rows"], r["apart"]["rows"]
    assert run_row["logits_sha256"] == apart_row["logits_sha256"] and len(run_row["logits_sha256"]) == 16
    assert run_row["top1"] == apart_row["top1"]


def test_the_step_probe_tells_sides_whose_logits_differ():
    """A side whose logits differ at any position, or lack one, is not the same bits."""
    a = {3: ("00aa", 5), 70: ("00bb", 6)}
    assert step.same_bits({"a": a, "b": dict(a)}) and step.same_bits({"only": a})
    assert not step.same_bits({"a": a, "b": {**a, 70: ("00bc", 6)}})
    assert not step.same_bits({"a": a, "b": {3: a[3]}})


@pytest.mark.parametrize(
    "args,says",
    [
        (["--positions", "a,b"], "--positions"),
        (["--positions", "-1"], "--positions"),
        (["--replays", "0"], "--positions"),
        (["--side", "nolabel"], "LABEL:NAME=VALUE"),
        (["--side", "x:PATH=/bin"], "is not HELIOS_NAME=VALUE"),
        (["--side", "a:", "--side", "a:HELIOS_WAIT_SPIN_US=0"], "must differ"),
    ],
)
def test_the_step_probe_refuses_bad_positions_counts_and_sides(args, says, capsys):
    with pytest.raises(SystemExit) as e:
        step.main(["--preset", "tiny", *args])
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_the_barrier_probe_counts_a_link_of_each_kind(capsys, monkeypatch):
    """A chain's links: one run of grid barriers on the side of a grid of 2, a dispatch
    and barrier each apart; the slope between the chains is what a link costs."""
    from tools.probes import barrier

    monkeypatch.delenv("HELIOS_PLAN_PERSISTENT_GRID", raising=False)
    argv = ["--links", "1,5", "--d", "64", "--replays", "3", "--warmup", "1", "--json",
            "--side", "runs:HELIOS_PLAN_PERSISTENT_GRID=2", "--side", "apart:"]  # fmt: skip
    assert barrier.main(argv) == 0
    r = json.loads(capsys.readouterr().out)["sides"]
    runs, apart = r["runs"]["rows"], r["apart"]["rows"]
    assert [(x["links"], x["dispatches"], x["grid_barriers"]) for x in runs] == [(1, 1, 0), (5, 1, 4)]
    assert [(x["links"], x["dispatches"], x["grid_barriers"]) for x in apart] == [(1, 1, 0), (5, 5, 0)]
    for side in r.values():
        rows = side["rows"]
        assert side["us_per_link"] == pytest.approx((rows[1]["gpu_ms"] - rows[0]["gpu_ms"]) * 1e3 / 4)


@pytest.mark.parametrize(
    "args,says",
    [
        (["--links", "4"], "--links"),
        (["--links", "4,2"], "--links"),
        (["--links", "a,b"], "--links"),
        (["--d", "12"], "--d"),
    ],
)
def test_the_barrier_probe_refuses_bad_chains(args, says, capsys):
    from tools.probes import barrier

    with pytest.raises(SystemExit) as e:
        barrier.main(args)
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_the_trace_probe_reads_each_member_kind_of_the_runs(capsys, monkeypatch):
    """The tiny Llama's two layers as traced runs (a grid of 2): each kind's members (QKV,
    the attention, the projection, gate-up and down, two of each), their spans summing
    to the step's time in its runs, a workgroup's median work no more than the slowest's,
    the stamps inside a member in order (inputs in, first column or split done, within
    the work), and no member released before the one before it was
    done (every wait a grid barrier); each side's switches as its own."""
    from tools.probes import trace

    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "2")
    argv = ["--preset", "tiny", "--positions", "3", "--replays", "3", "--warmup", "1", "--json",
            "--side", "spin:", "--side", "nospin:HELIOS_WAIT_SPIN_US=0"]  # fmt: skip
    assert trace.main(argv) == 0
    r = json.loads(capsys.readouterr().out)["sides"]
    for label, side in r.items():
        (p,) = side["positions"]
        assert [(k["kind"], k["members"]) for k in p["kinds"]] == [
            ("128x64", 2), ("attention", 2), ("64x64", 2), ("256x64", 2), ("64x128", 2)
        ], label  # fmt: skip
        assert sum(k["span_us"] for k in p["kinds"]) == pytest.approx(p["runs_us"])
        assert all(0 < k["work_median_us"] <= k["work_max_us"] for k in p["kinds"]), p["kinds"]
        for m in p["members"]:  # every workgroup has a task or columns here: each stamped both
            assert 0 < m["inputs_median_us"] <= m["first_median_us"] <= m["work_max_us"], m
        # a member's bytes: N x K 16-bit weights; the attention's K and V (2 heads of 16) to position 3
        assert [k["member_bytes"] for k in p["kinds"]] == [128 * 64 * 2, 2 * 2 * 16 * 4 * 2, 64 * 64 * 2,
                                                           256 * 64 * 2, 64 * 128 * 2], label  # fmt: skip
        assert "HELIOS_PLAN_TRACE" not in os.environ
    for side in r.values():
        assert all(m["release_us"] >= 0 for m in side["positions"][0]["members"])
    argv = ["--preset", "tiny", "--positions", "5", "--replays", "1", "--warmup", "0", "--members", "--roof-gbs", "100"]
    assert trace.main(argv) == 0
    out = capsys.readouterr().out
    assert "release" in out and "us at 100 GB/s" in out and "every kind:" in out


def test_the_builds_probe_plans_sides_in_turns_and_patches_each_copy(capsys, tmp_path):
    """builds.py: the sides' patches (a leading '-' reversed) and the runs alternating
    (A B, then B A), a --build-only side built but never run; a copy of the tree takes
    its patch, and a patch that does not apply stops the round naming it."""
    from tools.probes import builds

    patch = tmp_path / "readme.patch"
    lines = (builds.ROOT / "README.md").read_text().splitlines(keepends=True)
    patch.write_text("".join(difflib.unified_diff(lines, ["# patched\n", *lines[1:]], "a/README.md", "b/README.md")))
    argv = ["--build", f"base:-{patch}", "--build", "new:", "--build-only", f"traced:{patch}", "--out",
            str(tmp_path / "o"), "--repeats", "3", "--dry-run", "--", "tools/probes/step.py", "--json"]  # fmt: skip
    assert builds.main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["sides"] == {"base": [f"-{patch}"], "new": [], "traced": [str(patch)]}  # built, never in the turns
    assert plan["runs"] == ["base-1", "new-1", "new-2", "base-2", "base-3", "new-3"]
    assert plan["command"] == ["tools/probes/step.py", "--json"]
    src = builds.prepare("fwd", [(patch, False)], tmp_path / "work", ["results"])
    assert (src / "README.md").read_text().splitlines()[0] == "# patched"
    assert (src / "tools" / "probes" / "builds.py").is_file() and (src / "pyproject.toml").is_file()
    assert not any((src / n).exists() for n in ("build", ".git", "results"))
    with pytest.raises(SystemExit, match="readme.patch"):
        builds.prepare("rev", [(patch, True)], tmp_path / "work", ["results"])
    assert "helios" in builds.imported_from(tmp_path) and not builds.imported_from(tmp_path).startswith(str(tmp_path))


@pytest.mark.parametrize(
    "args,says",
    [
        (["--build", "a:", "--out", "o"], "no command"),
        (["--out", "o", "--", "x.py"], "no --build"),
        (["--build", "a:/no/such.patch", "--out", "o", "--", "x.py"], "no patch file"),
        (["--build", "a:", "--build", "a:", "--out", "o", "--", "x.py"], "each label once"),
        (["--build", "a:", "--build-only", "a:", "--out", "o", "--", "x.py"], "each label once"),
        (["--build", "a b:", "--out", "o", "--", "x.py"], "a label of"),
        (["--build", "a:", "--repeats", "0", "--out", "o", "--", "x.py"], "--repeats 0"),
    ],
)
def test_the_builds_probe_refuses_bad_flags(capsys, args, says):
    from tools.probes import builds

    with pytest.raises(SystemExit) as e:
        builds.main(args)
    assert e.value.code == 2 and says in capsys.readouterr().err

"""Every flag validated before any work, by the declared types of helios/cli/common.py
(a walk over every command's parser fails on a numeric flag without one), and one
signal policy for every command (SIGTERM is Ctrl-C; a second signal never cuts the
write of what was measured)."""

from __future__ import annotations

import argparse
import json
import os
import signal

import pytest
from test_results import _bench

from helios.cli import build_parser, main


def _parsers():
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return [("helios", top), *((f"helios {n}", p) for n, p in sub.choices.items())]


def test_every_numeric_flag_declares_its_range():
    """A flag typed as bare int or float takes nan, inf, 1e400 or -5 (report --step and ci
    --fail-on-regression did): every one goes through a declared type (positive_int,
    nonneg_int, launches, device_index, finite_float(lo, hi), ...)."""
    bare = [
        f"{name} {'/'.join(a.option_strings) or a.dest}"
        for name, p in _parsers()
        for a in p._actions
        if a.type in (int, float)
    ]
    assert not bare, f"flags without a declared range: {bare}"
    assert len(_parsers()) >= 10


@pytest.mark.parametrize("value", ["nan", "-5", "inf", "1e400", "0"])
def test_report_step_is_a_finite_positive_percent(value, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["report", "--history", "h.jsonl", "--step", value])
    assert e.value.code == 2 and "--step" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "-1", "inf"])
def test_ci_fail_on_regression_is_finite(value, capsys):
    """With nan no regression could ever fail the job (pct > nan is always false)."""
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["ci", f"--fail-on-regression={value}"])
    assert e.value.code == 2 and "--fail-on-regression" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--main=--octopus", "--base=-x", "--head=", "--ref=bogus", "--device=-1"])
def test_ci_refs_and_reference_are_checked_at_parse(flag, capsys):
    """A ref starting with '-' would reach git as an option; a bad --ref used to be refused
    only after both builds and gates."""
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["ci", flag])
    assert e.value.code == 2


def test_ci_refuses_bad_shapes_before_any_build(tmp_path, capsys):
    assert main(["ci", "--shapes=garbage", f"--out={tmp_path}"]) == 2
    assert "--shapes" in capsys.readouterr().err
    assert not (tmp_path / "work").exists()  # nothing was built


def test_ci_with_one_commit_on_both_sides_cannot_run(tmp_path, capsys):
    """--base=HEAD --head=HEAD used to report "no regression": an A/A of a commit with itself."""
    if not os.path.isdir(os.path.join(os.path.dirname(__file__), "..", ".git")):
        pytest.skip("needs this checkout's git history")
    repo = os.path.join(os.path.dirname(__file__), "..")
    assert main(["ci", "--base=HEAD", "--head=HEAD", f"--repo={repo}", f"--out={tmp_path}"]) == 2
    out = capsys.readouterr().out
    assert "one commit" in out
    assert json.loads((tmp_path / "ci.json").read_text())["exit"] == 2


def test_train_refuses_a_vocabulary_too_small_for_its_stream(capsys):
    """--vocab=1 used to end in NumPy's 'Cannot take a larger sample than population'."""
    pytest.importorskip("torch", reason="helios suite train needs torch")
    assert main(["suite", "train", "--tiny", "--vocab=1", "--adapters=torch_eager"]) == 2
    assert "vocab 1" in capsys.readouterr().err


def test_an_adapter_variable_that_cannot_be_split_is_named_before_any_work(monkeypatch, capsys):
    monkeypatch.setenv("TVM_BENCH_CMD", "python3 'unbalanced")
    assert main(["suite", "mlp", "--tokens=8", "--d-model=32", "--hidden=32", "--adapters=helios"]) == 2
    err = capsys.readouterr().err
    assert "TVM_BENCH_CMD" in err and "cannot split" in err


def test_sigterm_keeps_what_was_measured(device, tmp_path, monkeypatch):
    """SIGTERM (Slurm, CI runners) in the second round: the complete round is written,
    status interrupted, exit 143 (it used to kill the bench with everything it measured)."""
    from helios.harness.protocol import rounds as protocol

    calls = {"n": 0}
    real = protocol.gpu_state

    def terminated(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:  # round 2's first shape
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(protocol, "gpu_state", terminated)
    rc, out = _bench(tmp_path, "b.json", "--repeats=3")
    assert rc == 143
    res = json.loads(out.read_text())
    assert res["status"] == "interrupted" and res["rows"]
    assert all(len(r["helios"]["samples_ms"]) >= 1 for r in res["rows"])
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler is given back


def test_a_second_signal_does_not_cut_the_write(device, tmp_path, monkeypatch, capsys):
    """Two signals close together used to lose the completed rounds ("nothing written"):
    the second, arriving while the result is written, only says so."""
    from helios.cli import common
    from helios.harness.protocol import rounds as protocol

    calls = {"n": 0}
    real_state, real_write = protocol.gpu_state, common.write_results

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return real_state(*a, **k)

    def write_under_fire(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)  # the second signal, while writing
        return real_write(*a, **k)

    monkeypatch.setattr(protocol, "gpu_state", interrupted)
    monkeypatch.setattr(common, "write_results", write_under_fire)
    rc, out = _bench(tmp_path, "b.json", "--repeats=3")
    assert rc == 130
    assert json.loads(out.read_text())["status"] == "interrupted"
    assert "SIGTERM again" in capsys.readouterr().err


def test_ci_out_that_cannot_be_written_is_refused_before_any_build(capsys):
    """`helios ci --out /proc/x` ended as an internal error after the work."""
    assert main(["ci", "--out=/proc/helios-ci", "--base=HEAD~1"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "internal error" not in err


SHARED_FLAGS = ("--shapes", "--out", "--force", "--iters", "--warmup", "--repeats", "--runs", "--ref", "--gate",
                "--atol", "--rtol", "--seed")  # fmt: skip


def test_shared_flags_are_declared_in_one_place():
    """The flags several commands take are declared by cli/common_args.py's groups only:
    no command declares one itself, and every command that takes one takes it with
    the group's type (a launch count is bounded in bench, ci, bisect and time alike)."""
    import ast
    from pathlib import Path

    cli = Path(__file__).resolve().parents[1] / "python" / "helios" / "cli"
    own = []
    for path in sorted(cli.glob("*.py")):
        if path.name in ("common_args.py", "roof.py"):  # roof's --iters counts MMAs in a chain, not launches
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                names = [a.value for a in node.args if isinstance(a, ast.Constant)]
                own += [f"{path.name}:{node.lineno} {n}" for n in names if n in SHARED_FLAGS]
    assert not own, f"declared outside cli/common_args.py: {own}"
    types = {}
    for _name, parser in _parsers():
        for a in parser._actions:
            for flag in set(a.option_strings) & {"--iters", "--warmup", "--repeats", "--runs"}:
                types.setdefault(flag, set()).add(getattr(a.type, "__name__", repr(a.type)))
    assert types["--iters"] == {"launches", "positive_int"}, types  # positive_int: roof's MMAs a chain
    assert types["--warmup"] == {"warmup_count"} and types["--runs"] == {"positive_int"}, types

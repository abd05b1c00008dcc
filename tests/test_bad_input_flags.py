"""Bad flags: every command's flags validated before any work by the declared
types (a walk over every parser fails on a numeric flag without one), usage
errors exit 2 with one line and no traceback, the shared flags declared once."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import helios
from helios.cli import build_parser, main


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "helios", *args], capture_output=True, text=True, timeout=300)


HOSTILE_EXAMPLES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


BAD_FLAGS = [
    ["bench", "--warmup-ms=nan"],
    ["bench", "--warmup-ms=-5"],
    ["bench", "--warmup-ms=inf"],
    ["bench", "--atol=nan"],
    ["bench", "--suite=bogus"],
    ["bench", "--seed=-1"],
    ["bench", "--iters=0"],
    ["bench", "--shapes=99999999999999999999x1x1"],
    ["tune", "--warmup-ms=nan"],
    ["compare", "--fail-on-regression=-5", "a.json", "b.json"],
    ["compare", "--run-noise=nan", "a.json", "b.json"],
    ["compare", "--level=1.5", "a.json", "b.json"],
    ["check", "--max-dim=0"],
    ["check", "--seed=-1"],
]


def _parsers():
    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return [("helios", top), *((f"helios {n}", p) for n, p in sub.choices.items())]


SHARED_FLAGS = ("--shapes", "--out", "--force", "--iters", "--warmup", "--repeats", "--runs", "--ref", "--gate",
                "--atol", "--rtol", "--seed")  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--fuzz=-5"],
        ["check", "--fuzz=0"],
        ["bench", "--runs=0"],
        ["bench", "--repeats=x"],
        ["nosuchcommand"],
        ["bench", "--no-such-flag"],
    ],
)
def test_usage_errors_exit_2_without_traceback(args):
    r = _run_cli(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "content",
    [
        "[]",
        "42",
        '"a string"',
        "{bad json",
        json.dumps({"schema": "helios-bench/1", "rows": [{"shape": 5}]}),
        json.dumps({"schema": "helios-bench/1", "rows": "x"}),
    ],
)
def test_report_on_malformed_files_exits_2_one_line(tmp_path, content):
    p = tmp_path / "r.json"
    p.write_text(content)
    r = _run_cli("report", str(p))
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_report_on_non_utf8_exits_2(tmp_path, capsys):
    p = tmp_path / "r.json"
    p.write_bytes(b"\xff\xfe\x00")
    assert main(["report", str(p)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_help_documents_exit_codes():
    r = _run_cli("--help")
    assert r.returncode == 0 and "exit status" in r.stdout and "3  the device or driver failed" in r.stdout


@pytest.mark.parametrize("argv", BAD_FLAGS, ids=lambda a: " ".join(a))
def test_bad_flags_exit_2_before_any_work(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    flag = argv[1].split("=")[0]
    assert flag in err and "Traceback" not in err


@HOSTILE_EXAMPLES
@given(
    st.sampled_from(["--warmup-ms", "--atol", "--rtol"]),
    st.one_of(st.floats(), st.text(alphabet="0123456789.e-+naif", max_size=6)),
)
def test_numeric_flags_are_finite_or_refused(flag, value):
    from helios.cli import build_parser

    parser = build_parser()
    try:
        args = parser.parse_args(["bench", f"{flag}={value}"])
    except SystemExit as e:
        assert e.code == 2
        return
    v = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert math.isfinite(v) and v >= 0


def test_broken_pipe_is_not_a_traceback():
    r = subprocess.run(
        f"{sys.executable} -m helios info --json | head -1", shell=True, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


def test_internal_error_is_one_line_and_exit_2(monkeypatch, capsys):
    import helios.cli.info as info_cmd

    def boom(args):
        raise KeyError("planted")

    monkeypatch.setattr(info_cmd, "cmd_info", boom)
    from helios.cli import build_parser

    args = build_parser().parse_args(["info"])
    args.func = boom
    monkeypatch.setattr(
        "helios.cli.build_parser", lambda: type("P", (), {"parse_known_args": lambda s, a: (args, [])})()
    )
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert "internal error" in err and "KeyError" in err and "Traceback" not in err


def test_version_names_the_build(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert helios.__version__ in out and helios._helios.BUILD_COMMIT in out


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


def test_ci_out_that_cannot_be_written_is_refused_before_any_build(capsys):
    """`helios ci --out /proc/x` ended as an internal error after the work."""
    assert main(["ci", "--out=/proc/helios-ci", "--base=HEAD~1"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "internal error" not in err


def test_shared_flags_are_declared_in_one_place():
    """The flags several commands take are declared by cli/common_args.py's groups only:
    no command declares one itself, and every command that takes one takes it with
    the group's type (a launch count is bounded in bench, ci, bisect and time alike)."""
    import ast

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


# Each: the command line, what stderr names. Refused before any work (no training, no
# device allocation), exit 2, one line.
REFUSED_BEFORE_WORK = [
    (["suite", "decode", "--tiny", "--contexts=3000000"], "--contexts: the float32 position table"),
    (["suite", "decode", "--tiny", "--contexts=70000000"], "--contexts: the float32 position table"),
    (["suite", "decode", "--tiny", "--vocab=2000000000"], "--vocab: the float32 token table"),
    (["check", "--decode", "--max-seq=100000000"], "--max-seq 100000000"),
    (["check", "--decode", "--attention"], "--attention does not apply"),
    (["check", "--decode", "--backward", "--forms=plain"], "--backward, --forms do not apply"),
    (["check", "--decode", "--head-dims=16"], "--head-dims does not apply"),
    (["check", "--train", "--decode"], "--decode does not apply"),
    (["check", "--train", "--attention", "--variant=x"], "--attention, --variant do not apply"),
    (["suite", "decode", "--tiny", "--adapters=,"], "--adapters ',' names no adapter"),
    (["suite", "train", "--tiny", "--adapters= , "], "names no adapter"),
    (["suite", "mlp", "--tiny", "--adapters=,"], "names no adapter"),
    (["suite", "train", "--tiny", "--tag=x"], "--tag: read by `helios suite mlp` only; suite train does not take it"),
    (["suite", "decode", "--tiny", "--tag=x"], "--tag: read by `helios suite mlp` only; suite decode does not"),
    (["suite", "mlp", "--tiny", "--layers=3"], "--layers: read by `helios suite train` and `helios suite decode` only"),
    (["suite", "decode", "--tiny", "--hidden=64"], "--hidden: read by `helios suite mlp` only"),
    (["suite", "train", "--tiny", "--model=llama"], "--model: read by `helios suite decode` only"),
    (["suite", "decode", "--tiny", "--lr=0.1"], "--lr: read by `helios suite train` only"),
    (["suite", "mlp", "--tiny", "--adapters=bogus"], "--adapters: unknown adapter bogus for mlp"),
    (["report", "--step", "3", "x.json"], "--step flags steps in a --history"),
]


@pytest.mark.parametrize("argv,says", REFUSED_BEFORE_WORK, ids=[" ".join(a) for a, _ in REFUSED_BEFORE_WORK])
def test_sizes_and_flags_that_cannot_apply_are_refused_before_any_work(argv, says, capsys, device):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert says in err and "Traceback" not in err and "training step" not in out, err


@pytest.mark.parametrize("workload", ["decode", "train"])
def test_the_suites_without_torch_say_what_to_install(workload, monkeypatch, capsys, device):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert main(["suite", workload, "--tiny"]) == 2
    err = capsys.readouterr().err
    assert f"helios suite {workload}" in err and "pip install 'helios-vulkan[torch]'" in err
    assert "internal error" not in err and "ModuleNotFoundError" not in err


def test_decoding_through_a_plan_needs_no_torch(monkeypatch, tmp_path, capsys, device):
    monkeypatch.setitem(sys.modules, "torch", None)
    out = tmp_path / "decode.json"
    assert main(["suite", "decode", "--tiny", "--adapters=helios_plan", f"--out={out}"]) == 0
    err = capsys.readouterr().err
    assert "torch is not installed: --adapters helios_plan decodes the model's initial (random) weights" in err
    assert "4/4 phases" in err and "helios_plan: context 48" in err  # progress: 2 greedy runs, 2 contexts
    d = json.loads(out.read_text())
    assert d["status"] == "ok" and d["config"]["train_steps"] == 0 and "numerics" not in d
    (row,) = d["rows"]
    assert row["adapter"] == "helios_plan" and row["status"] == "ok" and "same_tokens" not in row
    assert len(row["tokens"]) == d["config"]["new"] and all(0 <= t < d["config"]["vocab"] for t in row["tokens"])
    assert [c["context"] for c in row["contexts"]] == [16, 48] and row["peak_memory_bytes"] > 0
    # training the weights needs torch: said, not skipped
    assert main(["suite", "decode", "--tiny", "--adapters=helios_plan", "--train-steps=5"]) == 2
    assert "pip install 'helios-vulkan[torch]'" in capsys.readouterr().err


def test_decode_and_train_scale_their_defaults_to_a_cpu_device(device, capsys):
    from helios.cli.suite import SUITES, workload_base

    if device.info["device_type"] != "cpu":
        pytest.skip(f"{device.info['name']} is not a CPU device: the GPU-sized defaults stand")
    for name in ("decode", "train"):
        suite = SUITES[name]
        args = build_parser().parse_args(["suite", name, "--layers=3"])
        base = workload_base(args, suite)
        assert base == {**suite.small, "layers": 3}  # given flags win over the scaled values
        err = capsys.readouterr().err
        assert "is a CPU device: defaults scaled to --d-model=64" in err and "--layers" not in err

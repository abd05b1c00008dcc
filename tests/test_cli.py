"""The helios command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helios.cli import build_parser, main
from helios.harness.protocol.shapes import parse_attention_shapes, parse_shapes


def test_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["time", "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--shapes",
        "--iters",
        "--warmup",
        "--variant",
        "--check-shape",
        "--atol",
        "--rtol",
        "--seed",
        "--no-cuda",
        "--out",
    ):
        assert flag in out


def test_info_json(device, capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == device.info["name"] and info["variants"] == device.variants()
    # kernel statistics: a dict where the driver offers them, null where it does not
    assert (info["kernel_stats"] is None) == (not device.info["pipeline_statistics"])
    assert info["attention_default_variants"]["64"] == device.default_attention_variant(64)
    assert info["attention_variants"]["128"] == device.attention_variants(128)


def test_info_text_runs_as_module(device):
    r = subprocess.run([sys.executable, "-m", "helios", "info"], capture_output=True, text=True, check=True)
    assert "default" in r.stdout and device.info["name"] in r.stdout
    assert "kernel stats" in r.stdout
    assert "priority default (HELIOS_QUEUE_PRIORITY)" in r.stdout
    assert f"queue         family {device.info['queue_family']} (" in r.stdout
    for lay in device.info["accumulator_layouts"]:
        assert f"accumulator   {lay['shape']} f32: rows " in r.stdout
    asked = subprocess.run(
        [sys.executable, "-m", "helios", "info"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HELIOS_QUEUE_PRIORITY": "low"},
    )
    got = "low" if device.info["global_priority"] else "default (asked low: no global priority extension)"
    assert f"; HELIOS_QUEUE_FAMILY), priority {got}" in asked.stdout


def test_time_writes_json(device, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert (
        main(
            [
                "time",
                "--shapes",
                "32x48x40,17x9x33",
                "--iters",
                "3",
                "--warmup",
                "1",
                "--check-shape",
                "64x64x64",
                "--no-cuda",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert [r["shape"] for r in data["rows"]] == ["32x48x40", "17x9x33"]
    assert data["check"]["passed"] and all(r["heliosMs"] > 0 for r in data["rows"])
    assert "fails=0/4096" in capsys.readouterr().out


def test_time_rejects_failing_check(device, capsys):
    assert (
        main(
            [
                "time",
                "--shapes",
                "16x16x16",
                "--iters",
                "2",
                "--check-shape",
                "64x64x64",
                "--atol",
                "0",
                "--rtol",
                "0",
                "--no-cuda",
            ]
        )
        == 1
    )
    assert "no timings" in capsys.readouterr().err


def test_bad_shape_and_variant_exit_2(device, capsys):
    assert main(["time", "--shapes", "12x12"]) == 2
    assert main(["time", "--shapes", "16x16x16", "--variant", "nope"]) == 2
    err = capsys.readouterr().err
    assert "bad shape" in err and "malformed variant" in err


def test_named_shape_sets():
    assert parse_shapes("canonical")[0] == (1024, 1024, 1024)
    assert len(parse_shapes("canonical,1024x1024x1024,large")) == 5
    with pytest.raises(ValueError):
        parse_shapes("huge")


def test_attention_sets_by_name_and_by_their_playbook_names():
    assert parse_attention_shapes("baseline") == [(32, 8, 512, 64)]
    assert parse_attention_shapes("seed004,seed003") == parse_attention_shapes("short,baseline")
    with pytest.raises(ValueError, match="short, baseline, anchor, long, small"):
        parse_attention_shapes("seed005")


def test_the_check_matrix_takes_its_old_name():
    from helios.cli import build_parser

    args = build_parser().parse_args(["check", "--attention", "--matrix", "seed003"])
    assert args.matrix == "grid"


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--md", "results/h100-gemm-c871faf/gemm.json", "results/h100-layout-7507abe/gemm.json"],
        ["report", "results/h100-gemm-c871faf/gemm.json"],
        ["compare", "results/h100-gemm-c871faf/gemm.json", "results/h100-layout-7507abe/gemm.json"],
        ["info", "--json"],
    ],
    ids=["report-md", "report", "compare", "info"],
)
def test_a_closed_stdout_is_exit_141_with_no_message(argv):
    """One rule for every command: a reader that went away (`| head -2`) is exit 141 and
    nothing on stderr (report once turned it into `helios: error: [Errno 32] Broken pipe`, 2).
    The pipe's read end is closed before the command writes, so every write fails."""
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "helios", *argv], stdout=w, stderr=subprocess.PIPE, cwd=top, timeout=300
        )
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr.decode().strip() == "", (p.returncode, p.stderr.decode()[-500:])


def test_the_device_flag_also_follows_the_command(capsys):
    """`helios bench --device 5` used to fail as ambiguous (--devices, --devices-serial):
    after the command it is the top-level --device (here an index this machine lacks)."""
    assert main(["bench", "--device", "5", "--shapes=16x16x16", "--iters=1", "--warmup=0"]) == 2
    err = capsys.readouterr().err
    assert "ambiguous" not in err and "device index 5 out of range" in err
    args = build_parser().parse_args(["--device", "3", "info"])
    assert args.device == 3  # given before the command only: kept
    assert build_parser().parse_args(["info", "--device", "2"]).device == 2


def test_an_unknown_flag_after_a_command_shows_that_commands_usage(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "--bogus", "a.json", "b.json"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: helios compare" in err and "unrecognized arguments: --bogus" in err

"""`helios suite`'s one driver (cli/suite.py) and the plug-ins it runs
(harness/workloads/suites.py): each suite's declaration agrees with the parser, and
what the driver does it does for every suite."""

from __future__ import annotations

import dataclasses

import pytest

from helios.cli import build_parser, main
from helios.cli.suite import FLAG_DEFAULTS, SUITES
from helios.harness.results.rows import DecodeRow, SuiteRow, TrainRow
from helios.harness.workloads.decode import DecodeConfig
from helios.harness.workloads.mlp import MlpConfig
from helios.harness.workloads.suites import SuiteConfig
from helios.harness.workloads.train import TrainConfig

CONFIGS = {"mlp": (MlpConfig, SuiteRow), "train": (TrainConfig, TrainRow), "decode": (DecodeConfig, DecodeRow)}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_suite_declares_flags_the_parser_has_and_a_config_with_its_fields(name):
    build_parser()
    assert set(SUITES) == set(CONFIGS)
    suite, (config, row) = SUITES[name], CONFIGS[name]
    assert suite.name == name and suite.row is row
    assert suite.own_flags <= set(FLAG_DEFAULTS), suite.own_flags - set(FLAG_DEFAULTS)
    assert set(suite.small) <= set(suite.fields)
    fields = [f.name for f in dataclasses.fields(config)]
    assert issubclass(config, SuiteConfig) and fields[:3] == ["adapters", "seed", "command"]  # one shape
    assert set(suite.fields) <= set(fields), set(suite.fields) - set(fields)


@pytest.mark.parametrize("workload", ["mlp", "train", "decode"])
def test_the_device_flag_is_used_or_refused_never_ignored(workload, device, capsys, tmp_path):
    """`helios suite decode --device N` decoded on torch's device, whatever N."""
    out = tmp_path / "r.json"
    assert main(["suite", workload, "--tiny", f"--out={out}", "--device=7"]) == 2
    err = capsys.readouterr().err
    says = "device index 7 out of range" if workload == "mlp" else "--device 7: helios suite"
    assert says in err and not out.exists(), err


def test_the_help_says_what_each_suite_is(capsys):
    with pytest.raises(SystemExit):
        main(["suite", "--help"])
    out = capsys.readouterr().out
    for name in CONFIGS:
        assert f"`helios suite {name}`:" in out, name

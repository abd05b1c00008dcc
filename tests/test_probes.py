"""The probes in tools/probes/ (what an A/B of the engine reads between suites) run on
the CPU device and refuse bad input."""

from __future__ import annotations

import json

import pytest
from tools.probes import step


def test_the_step_probe_times_each_position(capsys):
    assert step.main(["--preset", "tiny", "--positions", "3,70", "--replays", "3", "--warmup", "1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [row["position"] for row in r["rows"]] == [3, 70]
    assert all(row["wall_ms"] > 0 and row["gpu_ms"] >= 0 for row in r["rows"])
    assert r["ops"] > 0 and 0 < r["dispatches"] <= r["ops"] and r["barriers"] > 0
    assert step.main(["--preset", "tiny", "--positions", "5", "--replays", "1", "--warmup", "0"]) == 0
    assert "position  gpu_ms  wall_ms" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--positions", "a,b"], ["--positions", "-1"], ["--replays", "0"]])
def test_the_step_probe_refuses_bad_positions_and_counts(args, capsys):
    with pytest.raises(SystemExit) as e:
        step.main(["--preset", "tiny", *args])
    assert e.value.code == 2 and "--positions" in capsys.readouterr().err

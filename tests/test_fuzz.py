"""helios check --fuzz."""

import subprocess
import sys

from helios.cli import main


def test_fuzz_passes_on_every_variant(device, capsys):
    # acc=f16 variants are fuzzed with exact small-integer inputs (see helios/fuzz.py)
    n = len(device.variants()) + 5
    assert main(["check", "--fuzz", str(n), "--seed", "1", "--max-dim", "150"]) == 0
    assert f"{n} passed, 0 failed" in capsys.readouterr().out


def test_fuzz_reports_failures_with_shape_and_variant(device, capsys):
    v = device.default_variant()  # fp32 accumulation: never bit-equal to float64 on random normals
    assert (
        main(["check", "--fuzz", "5", "--seed", "2", "--atol", "0", "--rtol", "0", "--max-dim", "64", "--variant", v])
        == 1
    )
    out = capsys.readouterr().out
    assert "FAIL #" in out and v in out and "fails=" in out


def test_fuzz_skips_without_a_device():
    # An index past every device behaves as "no device": exit 2, said plainly.
    r = subprocess.run(
        [sys.executable, "-m", "helios", "--device", "999", "check", "--fuzz", "1"], capture_output=True, text=True
    )
    assert r.returncode == 2 and "skipped" in r.stdout

"""helios check --fuzz."""

import subprocess
import sys

from helios.cli import main


def test_fuzz_passes_on_every_variant(device, capsys):
    # acc=f16 variants are fuzzed with exact small-integer inputs (see helios/harness/fuzz.py).
    # Plain products here (each variant's kernel is compiled once for the suite);
    # the other op forms are fuzzed below on one variant: on a CPU driver every form
    # of every variant is its own JIT compile (minutes on a cold cache).
    n = len(device.variants()) + 5
    assert main(["check", "--fuzz", str(n), "--seed", "1", "--max-dim", "150", "--forms", "plain"]) == 0
    out = capsys.readouterr().out
    assert f"{n} passed, 0 failed" in out and f"covered {n - 5} of {n - 5} variants" in out


def test_fuzz_op_forms(device, capsys):
    v = device.default_variant()
    argv = [
        "check",
        "--fuzz",
        "12",
        "--seed",
        "4",
        "--max-dim",
        "120",
        "--variant",
        v,
        "--forms",
        "trans_a,trans_b,batched,epilogue",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "12 passed, 0 failed" in out and "op forms: batched, epilogue, trans_a, trans_b" in out


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

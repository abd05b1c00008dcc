"""helios check --fuzz."""

import subprocess
import sys

import numpy as np
import pytest
from helpers import device_variants

from helios.cli import main
from helios.harness.workloads.fuzz import fuzz


@pytest.mark.every_variant
@pytest.mark.slow
def test_fuzz_passes_on_every_variant(device, capsys):
    # acc=f16 variants are fuzzed with exact small-integer inputs (see helios/harness/workloads/fuzz.py).
    # Plain products here (each variant's kernel is compiled once for the suite);
    # the other op forms are fuzzed below on one variant: on a CPU driver every form
    # of every variant is its own JIT compile (minutes on a cold cache). The variants:
    # one per structural class and every small one, every listed one with --full.
    variants = device_variants()
    n = len(variants) + 5
    argv = ["check", "--fuzz", str(n), "--seed", "1", "--max-dim", "150", "--forms", "plain"]
    if variants != device.variants():
        argv += ["--variant", ",".join(variants)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{n} passed, 0 failed" in out and f"covered {n - 5} of {n - 5} variants" in out


def test_fuzz_takes_a_list_of_variants(device, capsys):
    vs = device_variants()[:2]
    assert (
        main(["check", "--fuzz", "3", "--seed", "2", "--max-dim", "60", "--forms", "plain", "--variant", ",".join(vs)])
        == 0
    )
    out = capsys.readouterr().out
    assert f"{len(vs)} variants" in out and f"covered {len(vs)} of {len(vs)} variants" in out
    assert main(["check", "--fuzz", "1", "--variant", ","]) == 2


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


def test_check_says_at_once_what_it_runs_and_when_a_case_compiles(device):
    """The first line comes before any case runs (a piped run is never silent while
    the first pipelines compile), and on a CPU device each first use of a variant,
    form and output type says it is compiling; compiles' time is reported after."""
    import subprocess
    import sys

    v = device.default_variant()
    r = subprocess.run(
        [sys.executable, "-m", "helios", "check", "--fuzz", "2", "--seed", "4", "--max-dim", "40", "--forms", "plain",
         "--variant", v],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("helios check: 2 cases; float16 inputs: 1 variants on "), first
    if device.info["device_type"] == "cpu":
        assert "compiles each new pipeline first" in first
        assert "case #0: the first plain product with " + v in r.stderr and "case #0 took" in r.stderr, r.stderr


def test_check_attention_says_when_a_case_compiles(device):
    """helios check --attention: its environment line before any case, and on a CPU device
    each first use of a variant, head dim and mask announced before it runs, its time after."""
    import subprocess
    import sys

    v = device.default_attention_variant(16)
    r = subprocess.run(
        [sys.executable, "-m", "helios", "check", "--attention", "--matrix", "none", "--fuzz", "2", "--seed", "4",
         "--max-seq", "40", "--head-dims", "16", "--oracle", "float64", "--variant", v],
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("environment: "), r.stdout
    if device.info["device_type"] == "cpu":
        assert f"case #0: the first forward with {v} at d=16" in r.stderr and "case #0 took" in r.stderr, r.stderr


class _HostProducts:
    """A stand-in device whose products are NumPy's: the fuzz's drawing, not a kernel, is
    under test."""

    def matmul(self, a, b, out_dtype, variant, **kw):
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(out_dtype)


def test_reused_pipelines_cover_every_variant_and_form_then_change_only_shapes():
    """helios check on a CPU device: once every variant and op form has run, a case reuses a
    (variant, form, output type) already compiled; every case still its own shape."""
    vs = [f"coop:8x8x8:tile{t}x32:sg{g}:acc=f16:load=shared:stages=1:splitk=1:raster=8" for t, g in
          (("16x32", "1x2"), ("32x16", "2x1"), ("32x32", "2x2"))]  # fmt: skip
    forms = ("plain", "trans_a", "trans_b", "batched")
    dev = _HostProducts()
    fresh = list(fuzz(dev, 40, 3, variants=vs, forms=forms, max_dim=24))
    reused = list(fuzz(dev, 40, 3, variants=vs, forms=forms, max_dim=24, reuse_pipelines=True))
    assert all(c.passed for c in fresh + reused)

    def combos(cases):
        return {(c.variant, c.form.split("(")[0], c.out_dtype) for c in cases}

    covered = next(
        i for i in range(len(reused)) if {c.variant for c in reused[: i + 1]} == set(vs)
        and {c.form.split("(")[0] for c in reused[: i + 1]} == set(forms)
    )  # fmt: skip
    assert covered < len(reused) - 10
    assert combos(reused[covered + 1 :]) <= combos(reused[: covered + 1])
    assert len(combos(fresh)) > len(combos(reused)) and len({c.shape for c in reused}) >= 35

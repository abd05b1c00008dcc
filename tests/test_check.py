"""The correctness gate itself: it must reject what it should."""

import numpy as np
import pytest

import helios


def test_identical_passes():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    r = helios.check_close(x.astype(np.float32), x)
    assert r.passed and r.fails == 0 and r.total == 12


def test_tolerance_boundary():
    ref = np.array([[1.0, 100.0]])
    ok = ref + np.array([[0.02 + 0.01 * 1.0, 0.02 + 0.01 * 100.0]]) * 0.999
    bad = ref + np.array([[0.0, 0.02 + 0.01 * 100.0]]) * 1.01
    assert helios.check_close(ok, ref).passed
    r = helios.check_close(bad, ref)
    assert r.fails == 1 and not r.passed


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nonfinite_never_passes(value):
    ref = np.zeros((2, 2))
    h = np.zeros((2, 2))
    h[1, 1] = value
    r = helios.check_close(h, ref, atol=1e9, rtol=1e9)
    assert r.fails == 1 and r.nonfinite == 1


def test_zero_tolerance_rejects_rounding():
    ref = np.array([[1.0 / 3.0]])
    assert not helios.check_close(ref.astype(np.float16), ref, atol=0, rtol=0).passed


def test_shape_mismatch_and_negative_tolerance():
    with pytest.raises(ValueError, match="shape"):
        helios.check_close(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="atol"):
        helios.check_close(np.zeros((2, 2)), np.zeros((2, 2)), atol=-1)


def test_line_format():
    r = helios.check_close(np.zeros((3, 3)), np.zeros((3, 3)))
    assert r.line().startswith("fails=0/9 ")


def test_an_interrupted_check_says_how_far_it_got(device, monkeypatch, capsys):
    """Ctrl-C after some cases: the line says how many ran and passed, never "nothing written"."""
    from types import SimpleNamespace

    from helios.cli import main
    from helios.harness.workloads import fuzz as fuzz_module

    def three_then_interrupt(*args, **kwargs):
        for i in range(3):
            yield SimpleNamespace(index=i, variant="v", form="plain", shape=(8, 8, 8), out_dtype="float16",
                                  passed=True, line="")  # fmt: skip
        raise KeyboardInterrupt

    monkeypatch.setattr(fuzz_module, "fuzz", three_then_interrupt)
    rc = main(["check", "--fuzz", "5", "--seed", "4"])
    err = capsys.readouterr().err
    assert rc != 0 and "interrupted after 3 cases: 3 passed, 0 failed (fuzz seed 4); check writes no file" in err
    assert "nothing written" not in err

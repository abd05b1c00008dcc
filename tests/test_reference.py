"""The references: outputs pass the gate, timings are real samples."""

from __future__ import annotations

import pytest

import helios
from helios.harness.workloads.references import NumpyReference, make_reference
from helios.matmul_timing import random_inputs


def _cuda_ref(kind: str):
    try:
        return make_reference(kind)
    except RuntimeError as e:
        pytest.skip(f"--ref={kind} unavailable here: {e}")


def _check_ref(ref):
    a, b = random_inputs(200, 136, 96, seed=4)
    t = ref.time(a, b, iters=4, warmup=1, flush_bytes=1 << 20)
    assert len(t.samples_ms) == 4 and all(s > 0 for s in t.samples_ms) and t.batch_ms > 0
    assert t.output.shape == (200, 136)
    r = helios.check_close(t.output, helios.reference_matmul(a, b))
    assert r.passed, r.line()
    return ref.metadata()


@pytest.mark.cuda
def test_torch_reference():
    meta = _check_ref(_cuda_ref("torch"))
    assert meta["torch_version"] and meta["cuda_runtime"] and meta["gpu"]


@pytest.mark.cuda
def test_cublas_reference():
    meta = _check_ref(_cuda_ref("cublas"))
    assert meta["cuda_runtime"] and meta["gpu"] and meta["torch_version"] is None


def test_numpy_reference_is_labelled_not_cuda():
    meta = _check_ref(NumpyReference())
    assert meta["label"].startswith("NOT CUDA") and meta["gpu"] is None


def test_auto_and_unknown():
    assert make_reference("auto").name in ("torch", "cublas", "numpy")
    with pytest.raises(ValueError, match="unknown reference"):
        make_reference("mkl")

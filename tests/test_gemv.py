"""The matrix-vector kernel (matmul_gemv.comp): products of M <= 8 rows, a decode
step's, against float64 in every op form; the default that picks it and its switch."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios import _helios

GEMV = ("gemv:wg64", "gemv:wg256")


def _rand(shape, seed, dtype=np.float16):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32).astype(dtype)


def _check(c, ref, what):
    r = helios.check_close(c, ref, rtol=0.01)
    assert r.passed, f"{what}: {r.line()}"


@pytest.mark.parametrize("variant", (None,) + GEMV)
@pytest.mark.parametrize("m", [1, 3, 8, 11])
@pytest.mark.parametrize("k", [1, 7, 264, 1100])
def test_both_layouts_of_b_against_float64(device, variant, m, k):
    """B as N x K (a Linear's weight: the 16-byte loads, their unrolled loop and the
    tail; its rows padded to whole 16-byte words, so K's tail is read element-wise
    after them) and as K x N; 11 rows run as a workgroup of 8 and one of 3."""
    a, w = _rand((m, k), m + k), _rand((37, k + -k % 8), k)[:, :k]
    ref = helios.reference_matmul(a, w.T)
    _check(device.matmul(a, w, trans_b=True, variant=variant, out_dtype="float32"), ref, f"{variant} N x K")
    _check(device.matmul(a, np.ascontiguousarray(w.T), variant=variant, out_dtype="float32"), ref, f"{variant} K x N")


@pytest.mark.parametrize("variant", GEMV)
@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_transposes_pitches_and_batches(device, variant, out_dtype):
    """A transposed (read in place), row pitches that are not whole 16-byte words (the
    element-wise paths), a batch with B broadcast and one with B per product."""
    a_t = _rand((300, 5), 1)  # A = a_t.T: 5 x 300, read transposed
    w = _rand((64, 300), 2)
    _check(
        device.matmul(a_t.T, w, trans_b=True, variant=variant, out_dtype=out_dtype),
        helios.reference_matmul(a_t.T, w.T),
        "trans_a",
    )
    wide_a, wide_w = _rand((4, 307), 3), _rand((50, 307), 4)  # pitches 307: odd
    a, wt = wide_a[:, :299], wide_w[:, :299]
    _check(
        device.matmul(a, wt, trans_b=True, variant=variant, out_dtype=out_dtype),
        helios.reference_matmul(a, wt.T),
        "pitches",
    )
    xs, ws = _rand((3, 2, 96), 5), _rand((3, 96, 40), 6)
    _check(device.matmul(xs, ws, variant=variant, out_dtype=out_dtype), helios.reference_matmul(xs, ws), "batch")
    _check(device.matmul(xs, ws[0], variant=variant, out_dtype=out_dtype), helios.reference_matmul(xs, ws[0]), "bcast")


@pytest.mark.parametrize("variant", GEMV)
@pytest.mark.parametrize("activation", ["relu", "gelu", "silu"])
def test_the_epilogue(device, variant, activation):
    """bias, activation, alpha and beta * C, as every product kernel applies them."""
    x, w = _rand((2, 200), 7), _rand((72, 200), 8)
    bias, c = _rand(72, 9, np.float32), _rand((2, 72), 10, np.float32)
    got = device.matmul(
        x, w, trans_b=True, bias=bias, activation=activation, alpha=0.5, beta=-1.25, c=c, variant=variant
    )
    ref = helios.gemm.host_epilogue(
        helios.reference_matmul(x, w.T),
        bias=bias,
        act=helios.gemm.activation_code(activation),
        alpha=0.5,
        beta=-1.25,
        c=c,
    )
    _check(got, ref, activation)


@pytest.mark.parametrize("variant", GEMV)
def test_bfloat16(device, variant):
    x, w = _rand((3, 520), 11, helios.bfloat16), _rand((48, 520), 12, helios.bfloat16)
    for od in ("float32", "bfloat16"):
        _check(device.matmul(x, w, trans_b=True, variant=variant, out_dtype=od), helios.reference_matmul(x, w.T), od)


def test_few_rows_default_to_the_matrix_vector_kernel(device):
    for m in (1, 2, 8):
        for trans_b in (False, True):
            assert device.default_variant(m, 4096, 1024, trans_b=trans_b).startswith("gemv:")
    assert not device.default_variant(9, 4096, 1024).startswith("gemv:")
    x, w = device.upload(_rand((1, 256), 13)), device.upload(_rand((512, 256), 14))
    chain = device.chain()
    chain.matmul(x, w, trans_b=True)
    assert chain.variants[0].startswith("gemv:")


def test_the_kill_switch_keeps_products_of_few_rows_on_the_tiles(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_GEMV", "1")
    x, w = _rand((1, 130), 15), _rand((70, 130), 16)
    with helios.Device() as dev:
        assert not dev.default_variant(1, 4096, 1024).startswith("gemv:")
        assert not any(v.startswith("gemv:") for v in dev.variants())
        with pytest.raises(helios.UnsupportedError, match="HELIOS_DISABLE_GEMV"):
            dev.matmul(x, w, trans_b=True, variant="gemv:wg64")
        _check(dev.matmul(x, w, trans_b=True, out_dtype="float32"), helios.reference_matmul(x, w.T), "switched off")


def test_bad_workgroup_sizes_are_refused_naming_the_variant(device):
    sg = device.info["subgroup_size"]
    bad = max(32, sg) + 1  # in range, not whole subgroups
    with pytest.raises(helios.UnsupportedError, match=f"gemv:wg{bad}.*multiple of the subgroup size {sg}"):
        device.check_variant(f"gemv:wg{bad}")
    with pytest.raises(helios.UnsupportedError, match="gemv:wg2048"):
        device.check_variant("gemv:wg2048")
    for junk in ("gemv", "gemv:wg0", "gemv:wg64:acc=f16", "gemv:tile8x8x8"):
        with pytest.raises(ValueError, match="malformed variant"):
            _helios.variant_fields(junk)


def test_a_plan_replays_the_matrix_vector_products(device):
    x = device.upload(_rand((1, 192), 17))
    w1, w2 = device.upload(_rand((320, 192), 18)), device.upload(_rand((192, 320), 19))
    with device.plan() as p:
        h = p.matmul(x, w1, trans_b=True, activation="relu")
        y = p.matmul(h, w2, trans_b=True)
    p.replay()
    h_ref = device.matmul(x, w1, trans_b=True, activation="relu")
    np.testing.assert_array_equal(h.numpy(), h_ref.numpy() if hasattr(h_ref, "numpy") else h_ref)
    np.testing.assert_array_equal(y.numpy(), np.asarray(device.matmul(h_ref, w2, trans_b=True)))


def test_a_tuned_pick_for_the_bucket_leaves_few_rows_to_the_matrix_vector_kernel(device, monkeypatch):
    """Tuned picks are measured per bucket of 128 rows: one must not move an M <= 8
    product off the matrix-vector kernel."""
    tiled = device.default_variant(64, 4096, 1024)

    class Tuned:
        def resolve(self, dev, shape):
            return tiled

    monkeypatch.setattr(device, "_tuned", Tuned())
    assert device.resolve_variant(64, 4096, 1024) == tiled
    assert device.resolve_variant(_helios.GEMV_MAX_ROWS, 4096, 1024).startswith("gemv:")

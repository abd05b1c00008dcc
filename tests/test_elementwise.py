"""The ops between products (helios.elementwise): the strided layout copy against
NumPy's own strided views (bits, both 16-bit dtypes, the 16-byte and the
element path, gathers and scatters, offsets, elements left alone), the
activations and their backward against float64 (one rounding of the fp32 result),
their ordered form, and bad input refused with a message naming it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import helios
from helios._helios import testing
from helios.elementwise import LAYERNORM_ROWS
from helios.gemm import gelu_tanh

DTYPES = [np.float16, helios.bfloat16]


def _upload(dev, arr):
    return dev.upload(arr, dtype=arr.dtype)


def _strided(flat: np.ndarray, shape, strides, offset):
    """NumPy's view of flat's elements at offset + sum(i_j * strides[j])."""
    item = flat.dtype.itemsize
    return as_strided(flat[offset:], shape=shape, strides=tuple(s * item for s in strides), writeable=False)


# (shape, src strides, out strides, src offset, out offset, src size, out size)
def _heads_cases():
    out = []
    for b, s, h, d in ((2, 5, 3, 8), (1, 7, 2, 5), (3, 4, 4, 16)):
        n = b * s * h * d
        for which in range(3):  # q, k, v out of a (B*S, 3*H*d) QKV product into (B, H, S, d)
            out.append(
                ((b, h, s, d), (s * 3 * h * d, d, 3 * h * d, 1), (h * s * d, s * d, d, 1), which * h * d, 0, 3 * n, n)
            )
            # and back: dq, dk, dv (B, H, S, d) into their columns of a (B*S, 3*H*d) gradient
            out.append(
                ((b, h, s, d), (h * s * d, s * d, d, 1), (s * 3 * h * d, d, 3 * h * d, 1), 0, which * h * d, n, 3 * n)
            )
        # attention's (B, H, S, d) output into the projection's (B*S, H*d) input
        out.append(((b, s, h, d), (h * s * d, d, s * d, 1), (s * h * d, h * d, d, 1), 0, 0, n, n))
    out.append(((17,), (1,), (1,), 3, 5, 40, 30))  # 1-D, unaligned offsets
    out.append(((3, 9), (20, 1), (9, 1), 2, 0, 80, 27))  # 2-D pitch to packed, odd width
    return out


CASES = _heads_cases()


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_copy_strided_matches_numpy_views(device, dtype, case):
    shape, ss, os_, so, oo, n_src, n_out = CASES[case]
    rng = np.random.default_rng(case)
    src = rng.standard_normal(n_src).astype(dtype)
    before = rng.standard_normal(n_out).astype(dtype)
    out = _upload(device, before)
    device.copy_strided(_upload(device, src), out, shape, ss, os_, so, oo)
    got = out.numpy()
    want = before.copy()
    dst = as_strided(want[oo:], shape=shape, strides=tuple(s * want.dtype.itemsize for s in os_))
    dst[...] = _strided(src, shape, ss, so)
    assert got.view(np.uint16).tolist() == want.view(np.uint16).tolist()  # bits, untouched elements included


def test_copy_strided_three_heads_fill_one_gradient(device):
    """dQ, dK and dV scattered into one (B*S, 3*H*d) tensor: every element written once."""
    b, s, h, d = 2, 6, 2, 8
    rng = np.random.default_rng(7)
    parts = [rng.standard_normal((b, h, s, d)).astype(np.float16) for _ in range(3)]
    g = device.empty((b * s, 3 * h * d))
    for which, p in enumerate(parts):
        device.copy_strided(
            _upload(device, p),
            g,
            (b, h, s, d),
            (h * s * d, s * d, d, 1),
            (s * 3 * h * d, d, 3 * h * d, 1),
            0,
            which * h * d,
        )
    want = np.stack(parts, axis=2).transpose(0, 3, 2, 1, 4).reshape(b * s, 3 * h * d)
    np.testing.assert_array_equal(g.numpy(), want)


def _ref(name: str, z: np.ndarray, g=None) -> np.ndarray:
    z = z.astype(np.float64)
    if g is None:
        return {"relu": np.maximum(z, 0), "gelu": gelu_tanh(z), "silu": z / (1 + np.exp(-z))}[name]
    g = g.astype(np.float64)
    if name == "relu":
        return g * (z > 0)
    if name == "silu":
        s = 1 / (1 + np.exp(-z))
        return g * s * (1 + z * (1 - s))
    k = math.sqrt(2 / math.pi)
    t = np.tanh(k * (z + 0.044715 * z**3))
    return g * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 3 * 0.044715 * z * z))


def _ulps_off(got: np.ndarray, want: np.ndarray, dtype, scale: np.ndarray) -> float:
    """The largest error in units of the 16-bit type's spacing at the reference, after
    the fp32 arithmetic's own error (a few fp32 units of the inputs' scale: 1 + tanh
    cancels where GELU is tiny, as in torch's formula)."""
    eps = 2.0**-10 if dtype == np.float16 else 2.0**-7
    tiny = 2.0**-14 if dtype == np.float16 else 2.0**-126
    spacing = np.maximum(np.abs(want), tiny) * eps
    fp32 = 8 * 2.0**-24 * scale
    return float(np.max(np.maximum(np.abs(got.astype(np.float64) - want) - fp32, 0) / spacing))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["relu", "gelu", "silu"])
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("extra", [0, 5], ids=["pairs", "vec8"])  # 403 elements (odd) or 408 (16-byte moves)
def test_activation_against_float64(device, dtype, name, backward, extra):
    rng = np.random.default_rng(3)
    z = np.concatenate([np.linspace(-8, 8, 101), rng.standard_normal(300 + extra) * 3, [0.0, -0.0]]).astype(dtype)
    g = rng.standard_normal(z.size).astype(dtype) if backward else None
    tz = _upload(device, z.reshape(-1, 1))
    out = device.activation(tz, name, grad=None if g is None else _upload(device, g.reshape(-1, 1)))
    assert out.shape == tz.shape and out.dtype == tz.dtype
    path = "activation" + (":backward" if backward else "") + (":vec8" if z.size % 8 == 0 else "")
    assert device.telemetry()["last_variant"] == path
    got = out.numpy().reshape(-1)
    want = _ref(name, z, g)
    assert np.isfinite(got.astype(np.float64)).all()
    # fp32 arithmetic rounded once: within about one unit of the 16-bit type
    scale = np.maximum(np.abs(z.astype(np.float64)), 1) * (1 if g is None else np.abs(g.astype(np.float64)))
    assert _ulps_off(got, want, dtype, scale) <= 1.5


def test_activation_into_out_and_ordered(device):
    if not device.info.get("timeline_semaphore"):
        pytest.skip("this device offers no timeline semaphores: no ordered path to test")
    with helios.Device() as dev:
        testing.async_host(dev)
        z = np.linspace(-3, 3, 64).astype(np.float16)
        tz, out = dev.upload(z), dev.empty(64)
        w, s = dev._async_values()
        assert dev.activation(tz, "relu", out=out, order=(w, s)) is out  # returns at once
        with pytest.raises(helios.HeliosError, match=f"did not reach {s}"):
            testing.host_wait(dev, s, 50_000_000)
        testing.host_signal(dev, w)
        testing.host_wait(dev, s, 10_000_000_000)
        np.testing.assert_array_equal(out.numpy(), np.maximum(z, 0))
        q = dev.empty(32)
        w, s = dev._async_values()
        dev.copy_strided(out, q, (32,), (1,), (1,), 32, 0, order=(w, s))
        testing.host_signal(dev, w)
        testing.host_wait(dev, s, 10_000_000_000)
        np.testing.assert_array_equal(q.numpy(), np.maximum(z, 0)[32:])


def test_bad_input_is_refused_by_name(device):
    a16 = device.upload(np.zeros(64, np.float16))
    b16 = device.empty(64)
    bf = device.empty(64, "bfloat16")
    f32 = device.empty(64, "float32")
    with pytest.raises(TypeError, match="src must be a helios.Tensor"):
        device.copy_strided(np.zeros(64, np.float16), b16, (64,), (1,), (1,))
    with pytest.raises(TypeError, match="src is float16 and out bfloat16"):
        device.copy_strided(a16, bf, (64,), (1,), (1,))
    with pytest.raises(TypeError, match="float32; this op takes float16 or bfloat16"):
        device.copy_strided(f32, b16, (64,), (1,), (1,))
    with pytest.raises(ValueError, match="the last 1"):
        device.copy_strided(a16, b16, (8, 8), (8, 2), (8, 1))
    with pytest.raises(ValueError, match="1 to 4 dimensions"):
        device.copy_strided(a16, b16, (1, 1, 1, 2, 32), (0, 0, 0, 32, 1), (0, 0, 0, 32, 1))
    with pytest.raises(ValueError, match=r"tensor src holds 128 bytes; this operand needs 130"):
        device.copy_strided(a16, b16, (64,), (1,), (1,), 1, 0)  # one element past src's end
    with pytest.raises(ValueError, match=r"tensor dst holds 128 bytes"):
        device.copy_strided(a16, b16, (2, 33), (0, 1), (33, 1))
    with pytest.raises(ValueError, match="same memory"):
        device.copy_strided(a16, a16, (32,), (1,), (1,), 0, 32)
    with pytest.raises(ValueError, match=r"shape\[0\] must be in 1"):
        device.copy_strided(a16, b16, (0,), (1,), (1,))
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        device.activation(a16, "tanh")
    with pytest.raises(ValueError, match="must be an activation"):
        device.activation(a16, "none")
    with pytest.raises(ValueError, match="grad .* must match z"):
        device.activation(a16, "relu", grad=device.empty(63))
    with pytest.raises(ValueError, match="out .* must hold z's 64"):
        device.activation(a16, "relu", out=device.empty(32))
    with pytest.raises(ValueError, match="not run in place"):
        device.activation(a16, "relu", out=a16)
    with pytest.raises(TypeError, match="z is float32"):
        device.activation(f32, "relu")


def _ln_ref(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5):
    mean = v.mean(-1, keepdims=True)
    var = ((v - mean) ** 2).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    return (v - mean) * rstd * gamma + beta, mean[..., 0], rstd[..., 0]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float16", "bfloat16"])
# one column (or group of 4) per invocation, tails, several; D % 4 == 0 takes the 4-column path
@pytest.mark.parametrize("rows,d", [(5, 64), (70, 300), (3, 1029), (4, 2056), (9, 66)])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_layernorm_both_directions_against_float64(device, dtype, rows, d, residual):
    rng = np.random.default_rng(rows + d)
    x = (rng.standard_normal((rows, d)) * 2 + 0.5).astype(np.float32)
    r = rng.standard_normal((rows, d)).astype(dtype)
    gamma = (1 + 0.3 * rng.standard_normal(d)).astype(np.float32)
    beta = (0.2 * rng.standard_normal(d)).astype(np.float32)
    tx, tg, tb = (device.upload(a, dtype="float32") for a in (x, gamma, beta))
    h, stream, stats = device.layernorm(tx, tg, tb, residual=_upload(device, r) if residual else None, dtype=dtype)
    path = ":vec4" if d % 4 == 0 else ""
    assert device.telemetry()["last_variant"] == "layernorm" + path
    v = x.astype(np.float64) + (r.astype(np.float64) if residual else 0)
    want, mean, rstd = _ln_ref(v, gamma.astype(np.float64), beta.astype(np.float64))
    if residual:
        np.testing.assert_allclose(stream.numpy(), v, rtol=1e-6, atol=1e-6)
    else:
        assert stream is tx
    np.testing.assert_allclose(stats.numpy()[:, 0], mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.numpy()[:, 1], rstd, rtol=1e-4)
    assert _ulps_off(h.numpy(), want, dtype, np.full_like(want, 16.0)) <= 1.5
    # backward: against float64 autograd-free formulas
    gh = rng.standard_normal((rows, d)).astype(dtype)
    gres = rng.standard_normal((rows, d)).astype(np.float32)
    gx, gx16, partial = device.layernorm_backward(
        _upload(device, gh), stream, stats, tg, grad_residual=device.upload(gres, dtype="float32") if residual else None
    )
    assert device.telemetry()["last_variant"] == "layernorm:backward" + path
    g = gh.astype(np.float64)
    xhat = (v - mean[:, None]) * rstd[:, None]
    gg = g * gamma
    want_gx = rstd[:, None] * (gg - gg.mean(-1, keepdims=True) - xhat * (gg * xhat).mean(-1, keepdims=True))
    if residual:
        want_gx = want_gx + gres
    scale = np.abs(want_gx).max()
    np.testing.assert_allclose(gx.numpy(), want_gx, rtol=1e-4, atol=1e-5 * scale)
    np.testing.assert_array_equal(gx16.numpy(), gx.numpy().astype(dtype))  # the same values, rounded once
    assert partial.shape == (-(-rows // LAYERNORM_ROWS), 2, d)
    sums = partial.numpy().astype(np.float64).sum(0)
    np.testing.assert_allclose(sums[0], (g * xhat).sum(0), rtol=1e-4, atol=1e-4 * np.abs(g).sum(0).max())
    np.testing.assert_allclose(sums[1], g.sum(0), rtol=1e-4, atol=1e-4 * np.abs(g).sum(0).max())


def test_layernorm_refusals(device):
    x = device.upload(np.zeros((4, 8), np.float32), dtype="float32")
    g = device.upload(np.ones(8, np.float32), dtype="float32")
    with pytest.raises(TypeError, match="x must be a packed float32"):
        device.layernorm(device.empty((4, 8)), g, g)
    with pytest.raises(ValueError, match="gamma must be a packed float32 Tensor of 8"):
        device.layernorm(x, device.upload(np.ones(7, np.float32), dtype="float32"), g)
    with pytest.raises(ValueError, match="residual .* must have x's 32 elements"):
        device.layernorm(x, g, g, residual=device.empty(31))
    with pytest.raises(ValueError, match="eps must be positive"):
        device.layernorm(x, g, g, eps=0.0)
    with pytest.raises(ValueError, match="d in 1..8192"):
        device.layernorm(
            device.upload(np.zeros((1, 8200), np.float32), dtype="float32"),
            *(device.upload(np.ones(8200, np.float32), dtype="float32") for _ in range(2)),
        )

"""The GEMM library: layouts (transposes, F-order, pitches), batches, the fused
epilogue (bias, relu/gelu/silu, alpha/beta), device-resident Tensors, prepacked
weights and chains, on every variant family the device offers, against float64
(exact small integers where fp16 accumulation is involved)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_layouts_exact, rand, small_ints

import helios


def families(dev: helios.Device) -> dict[str, str]:
    """One variant per family this device lists: scalar, coop through shared
    memory, coop with direct (global) loads, split-K, fp16 accumulation."""
    out: dict[str, str] = {}
    for v in dev.variants():
        if v.startswith("scalar"):
            out.setdefault("scalar", v)
        elif v.startswith("coop:"):
            if "acc=f16" in v:
                out.setdefault("acc_f16", v)
            elif "load=direct" in v:
                out.setdefault("direct", v)
            elif "splitk=1" not in v:
                out.setdefault("splitk", v)
            else:
                out.setdefault("coop", v)
    return out


def ref_act(x: np.ndarray, act) -> np.ndarray:
    if act == "relu":
        return np.maximum(x, 0)
    if act == "gelu":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if act == "silu":
        return x / (1 + np.exp(-x))
    return x


def close(got, ref, atol=0.02, rtol=0.01):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.isfinite(got).all(), "non-finite (unwritten, poisoned) elements"
    err = np.abs(got - ref)
    bad = err > atol + rtol * np.abs(ref)
    assert not bad.any(), f"{bad.sum()} of {bad.size} off; max err {err.max():.3g}"


SHAPES = [(37, 29, 41), (64, 48, 32), (19, 72, 100)]  # tails in every dimension, and aligned


@pytest.mark.parametrize("fam", ["scalar", "coop", "direct", "splitk", "acc_f16"])
def test_layouts_every_family(device, fam):
    v = families(device).get(fam)
    if v is None:
        pytest.skip(f"{device.info['name']} lists no {fam} variant")
    assert_layouts_exact(device, v, SHAPES)


def test_views_are_layouts_not_copies(device):
    """F-ordered arrays, .T views and row-pitched slices give the same product."""
    a, b = rand((45, 30), 1), rand((30, 27), 2)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    close(device.matmul(np.asfortranarray(a), b), ref)
    close(device.matmul(a, np.ascontiguousarray(b.T).T), ref)
    wide = rand((60, 50), 3)
    close(device.matmul(wide[:45, :30], b), wide[:45, :30].astype(np.float64) @ b.astype(np.float64))
    close(device.matmul(a, wide[:30, 5:32]), a.astype(np.float64) @ wide[:30, 5:32].astype(np.float64))
    strided = rand((90, 30), 4)[::2]  # every other row: a copy, still right
    close(device.matmul(strided, b), strided.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("fam", ["coop", "scalar", "splitk"])
def test_batches(device, fam):
    v = families(device).get(fam)
    if v is None:
        pytest.skip(f"{device.info['name']} lists no {fam} variant")
    A, B = small_ints((3, 21, 34), 5), small_ints((3, 34, 18), 6)
    a2, b2 = small_ints((21, 34), 7), small_ints((34, 18), 8)
    f64 = lambda x: x.astype(np.float64)
    for x, y in ((A, B), (A, b2), (a2, B)):
        np.testing.assert_array_equal(device.matmul(x, y, out_dtype="float32", variant=v), f64(x) @ f64(y))
    At = np.swapaxes(small_ints((3, 34, 21), 9), 1, 2)  # a batch of transposed views
    np.testing.assert_array_equal(device.matmul(At, B, out_dtype="float32", variant=v), f64(At) @ f64(B))
    np.testing.assert_array_equal(
        device.matmul(A, np.swapaxes(B, 1, 2), trans_b=True, out_dtype="float32", variant=v), f64(A) @ f64(B)
    )
    one = small_ints((1, 21, 34), 10)  # a batch of 1 broadcasts, as numpy.matmul
    np.testing.assert_array_equal(device.matmul(one, B, out_dtype="float32", variant=v), f64(one) @ f64(B))


@pytest.mark.parametrize("fam", ["coop", "scalar", "splitk"])
@pytest.mark.parametrize("act", [None, "relu", "gelu", "silu"])
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_epilogue(device, fam, act, out_dtype):
    v = families(device).get(fam)
    if v is None:
        pytest.skip(f"{device.info['name']} lists no {fam} variant")
    m, n, k = 35, 40, 72
    a, b = rand((m, k), 11) * 0.3, rand((k, n), 12) * 0.3
    bias = np.random.default_rng(13).standard_normal(n)
    c = np.random.default_rng(14).standard_normal((m, n)).astype(out_dtype)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    close(device.matmul(a, b, bias=bias, activation=act, out_dtype=out_dtype, variant=v), ref_act(prod + bias, act))
    close(
        device.matmul(a, b, alpha=0.5, beta=-1.5, c=c, activation=act, out_dtype=out_dtype, variant=v),
        ref_act(0.5 * prod - 1.5 * c.astype(np.float64), act),
    )
    close(
        device.matmul(a, b, c=c, bias=bias, out_dtype=out_dtype, variant=v), prod + c.astype(np.float64) + bias
    )  # c given: beta defaults to 1


def test_epilogue_batched_and_transposed(device):
    A, B = rand((2, 20, 33), 15), rand((2, 26, 33), 16)
    bias = np.linspace(-1, 1, 26)
    ref = ref_act(A.astype(np.float64) @ np.swapaxes(B, 1, 2).astype(np.float64) + bias, "gelu")
    close(device.matmul(A, B, trans_b=True, bias=bias, activation="gelu"), ref)


def test_activation_extremes(device):
    """GELU and SiLU stay finite and saturate correctly for large |x| (no exp overflow NaN)."""
    a = np.array([[60.0], [-60.0], [0.0], [3.0]], np.float16)
    b = np.ones((1, 8), np.float16) * 10
    x = a.astype(np.float64) @ b.astype(np.float64)
    for act in ("gelu", "silu", "relu"):
        close(device.matmul(a, b, activation=act, out_dtype="float32"), ref_act(x, act), atol=1e-3, rtol=1e-3)


def test_tensors_roundtrip_and_metadata(device):
    for shape, dt in (((7,), np.float32), ((5, 9), np.float16), ((2, 3, 5), np.float16)):
        x = np.random.default_rng(0).standard_normal(shape).astype(dt)
        t = device.upload(x, dtype=dt)
        assert t.shape == shape and t.dtype == dt and t.alive and t.device is device
        np.testing.assert_array_equal(t.numpy(), x)
        np.testing.assert_array_equal(np.from_dlpack(t), x)  # the host export
        assert "helios.Tensor" in repr(t)
    e = device.empty((4, 4), "float32")
    assert e.shape == (4, 4) and e.nbytes == 64


def test_dlpack_import_from_torch(device):
    torch = pytest.importorskip("torch", reason="torch is not installed here")
    x = torch.randn(13, 11).half()
    np.testing.assert_array_equal(device.upload(x).numpy(), x.numpy())
    y = torch.randn(11, 6).half()
    close(device.matmul(x, y), x.double().numpy() @ y.double().numpy())


def test_tensor_products_and_out(device):
    a, b = rand((33, 40), 20), rand((40, 25), 21)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    ta, tb = device.upload(a), device.upload(b)
    close(device.matmul(ta, tb), ref)
    close(device.matmul(ta, b), ref)  # mixed host and device operands
    out = device.empty((33, 25), "float32")
    assert device.matmul(ta, tb, out=out) is out
    close(out.numpy(), ref)
    device.matmul(ta, tb, out=out, beta=1.0)  # beta reads out: now 2 * ref
    close(out.numpy(), 2 * ref)
    tbt = device.upload(np.ascontiguousarray(b.T))
    close(device.matmul(ta, tbt, trans_b=True), ref)


def test_prepack(device):
    """Prepacked weights: transposed (torch Linear's (out, in)) once, rows padded
    to 16 bytes for any N; products equal the plain ones."""
    x = rand((31, 40), 22)
    for n in (25, 32):
        w = rand((n, 40), 23 + n)  # (out, in)
        tw = device.prepack(w, trans=True)
        assert tw.shape == (40, n) and tw.pitch % 8 == 0 and tw.pitch >= n
        np.testing.assert_array_equal(tw.numpy(), w.T)
        close(device.matmul(x, tw, out_dtype="float32"), x.astype(np.float64) @ w.T.astype(np.float64))


def mlp_ref(x, w1, b1, w2, b2):
    h = ref_act(x.astype(np.float64) @ w1.astype(np.float64) + b1, "gelu")
    return h.astype(np.float16).astype(np.float64) @ w2.astype(np.float64) + b2


def test_chain_mlp_one_submission(device):
    rng = np.random.default_rng(30)
    x = rand((45, 64), 31)
    w1, w2 = rand((64, 96), 32) / 8, rand((96, 64), 33) / 10
    b1, b2 = rng.standard_normal(96).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    tx, tw1, tw2 = device.upload(x), device.prepack(w1), device.prepack(w2)
    device.reset_telemetry()
    with device.chain() as ch:
        h = ch.matmul(tx, tw1, bias=b1, activation="gelu")
        y = ch.matmul(h, tw2, bias=b2)
    tel = device.telemetry()
    assert ch.ran and len(ch) == 2
    assert tel["chains"] == 1 and tel["chain_ops"] == 2
    close(y.numpy(), mlp_ref(x, w1, b1, w2, b2))
    t = ch.time(iters=3, warmup=1)
    assert t.ops == 2 and len(t.samples_ms) == 3 and all(s > 0 for s in t.samples_ms)
    assert len(t.variants) == 2 and all(v.startswith(("coop", "scalar")) for v in t.variants)
    close(y.numpy(), mlp_ref(x, w1, b1, w2, b2))  # rerunning gives the same output


def test_chain_dependent_and_split(device):
    """Three dependent products (each reads the last one's output), one split-K."""
    v = families(device).get("splitk")
    a = small_ints((40, 40), 40)
    ta = device.upload(a)
    with device.chain() as ch:
        p1 = ch.matmul(ta, ta, out_dtype="float16")
        p2 = ch.matmul(p1, ta, variant=v)
        p3 = ch.matmul(p2, ta, trans_b=True)
    a64 = a.astype(np.float64)
    ref2 = (a64 @ a64).astype(np.float16).astype(np.float64) @ a64
    close(p2.numpy(), ref2)
    close(p3.numpy(), ref2.astype(np.float16).astype(np.float64) @ a64.T, rtol=0.01, atol=0.5)


BAD = [
    (lambda d, a, b: d.matmul(a, b, bias=np.ones(7)), ValueError, "length N=6"),
    (lambda d, a, b: d.matmul(a, b, activation="tanh"), ValueError, "unknown activation 'tanh'"),
    (lambda d, a, b: d.matmul(a, b, activation=3), TypeError, "activation must be"),
    (
        lambda d, a, b: d.matmul(np.ones((2, 4, 5), np.float16), np.ones((3, 5, 6), np.float16)),
        ValueError,
        "batch sizes differ",
    ),
    (lambda d, a, b: d.matmul(a, b, beta=1.0), ValueError, "needs c="),
    (lambda d, a, b: d.matmul(a, b, c=np.ones((3, 3))), ValueError, r"c has shape \(3, 3\)"),
    (lambda d, a, b: d.matmul(a, b, out=d.empty((4, 7))), ValueError, r"out Tensor has shape \(4, 7\)"),
    (lambda d, a, b: d.matmul(a, b, out=[[0.0] * 6] * 4), TypeError, "out must be a helios.Tensor or a NumPy array"),
    (lambda d, a, b: d.matmul(a, b, out=d.empty((4, 6)), out_dtype="float32"), ValueError, "differs"),
    (lambda d, a, b: d.matmul(d.upload(a, dtype="float32"), b), TypeError, "float16 Tensors"),
    (lambda d, a, b: d.matmul(a, b, bias=d.upload(np.ones(6))), ValueError, "bias Tensor must be float32"),
    (lambda d, a, b: d.chain().matmul(a, d.upload(b)), TypeError, "must be a helios.Tensor"),
    (lambda d, a, b: d.chain().matmul(d.upload(a), d.upload(b), beta=1.0), ValueError, "out="),
    (lambda d, a, b: d.empty((0, 3)), ValueError, r"shape\[0\] must be in 1\.\."),
    (lambda d, a, b: d.empty((2, 2, 2, 2, 2)), ValueError, "1 to 4 dimensions"),
    (
        lambda d, a, b: d.upload(np.ones((2, 2), np.int8), dtype="int8"),
        TypeError,
        "must be one of float16, bfloat16, float32, int32",
    ),
    (lambda d, a, b: d.prepack(np.ones(4)), ValueError, "2-D weight"),
    (lambda d, a, b: d.chain().run(), ValueError, "1..4096 operations"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input(device, case):
    fn, exc, match = BAD[case]
    a, b = np.ones((4, 5), np.float16), np.ones((5, 6), np.float16)
    with pytest.raises(exc, match=match):
        fn(device, a, b)


def test_tensor_of_another_or_closed_device(device):
    with helios.Device() as other:
        t_other = other.upload(np.ones((5, 6), np.float16))
        with pytest.raises(ValueError, match="another Device"):
            device.matmul(np.ones((4, 5), np.float16), t_other)
        with pytest.raises(ValueError, match="another Device"):
            ch = device.chain()
            ch.matmul(device.upload(np.ones((4, 5), np.float16)), t_other)
            ch.run()
    assert not t_other.alive  # the device closed: its memory is gone
    for fn in (t_other.numpy, lambda: device.matmul(np.ones((4, 5), np.float16), t_other)):
        with pytest.raises(helios.DeviceClosedError):
            fn()
    dev2 = helios.Device()
    t = dev2.upload(np.ones((4, 5), np.float16))
    ch = dev2.chain()
    ch.matmul(t, dev2.upload(np.ones((5, 3), np.float16)))
    dev2.close()
    with pytest.raises(helios.DeviceClosedError):
        ch.run()
    with pytest.raises(helios.DeviceClosedError):
        dev2.upload(np.ones(3))


def test_in_place_refused(device):
    t = device.upload(np.ones((8, 8), np.float16))
    with pytest.raises(ValueError, match="in place"):
        device.matmul(t, t, out=t)


def test_tensors_release_memory(device):
    """Tensors freed (or their device closed) give their memory back."""
    base = device.telemetry()
    ts = [device.upload(np.ones((64, 64), np.float16)) for _ in range(10)]
    mid = device.telemetry()
    assert mid["live_tensors"] == base["live_tensors"] + 10
    assert mid["device_bytes"] >= base["device_bytes"] + 10 * 64 * 64 * 2
    del ts
    end = device.telemetry()
    assert (end["live_tensors"], end["live_buffers"], end["device_bytes"]) == (
        base["live_tensors"],
        base["live_buffers"],
        base["device_bytes"],
    )
    with helios.Device() as d2:
        keep = [d2.upload(np.ones(16)) for _ in range(3)]
    assert not any(t.alive for t in keep)


def test_chain_reports_the_variant_it_ran(device):
    """A chain's variants are what the engine ran, batched products included
    (picked as for batch * M rows, without split-K)."""
    ta, tw = device.upload(rand((4, 40, 32), 50)), device.upload(rand((32, 24), 51))
    tb = device.upload(rand((64, 32), 52))
    for a in (ta, tb):
        with device.chain() as ch:
            ch.matmul(a, tw)
        assert device.telemetry()["last_variant"] == ch._variants[0]


def test_from_dlpack(device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = helios.from_dlpack(x, device=device)
    assert t.dtype == np.float16 and t.shape == (3, 4)
    np.testing.assert_array_equal(t.numpy(), x.astype(np.float16))

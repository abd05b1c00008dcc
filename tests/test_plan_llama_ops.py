"""The plan ops a Llama-family decoder adds (decode.comp and layernorm.comp): RMSNorm,
rotary positions, SwiGLU and grouped-query attention over a KV cache, each against
float64, and their bad input refused before recording."""

from __future__ import annotations

import os

import numpy as np
import pytest

import helios

CHUNK = 64  # decode_attention.glsl's SPLIT_SHORT


def _rand(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _dt(dtype):
    return helios.bfloat16 if dtype == "bfloat16" else np.float16


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", [8, 37, 256, 1000])  # 37: the scalar path (d % 4)
@pytest.mark.parametrize("residual", [False, True])
def test_rmsnorm_against_float64(device, dtype, d, residual):
    x, g = _rand((1, d), 1), _rand(d, 2)
    r = _rand((1, d), 3, _dt(dtype)) if residual else None
    tx, tg = device.upload(x, dtype=np.float32), device.upload(g, dtype=np.float32)
    tr = device.upload(r, dtype=dtype) if residual else None
    with device.plan() as p:
        h, stream = p.rmsnorm(tx, tg, residual=tr, eps=1e-6, dtype=dtype)
    p.replay()
    v = x.astype(np.float64) + (r.astype(np.float64) if residual else 0.0)
    want = v / np.sqrt((v * v).mean(axis=-1, keepdims=True) + 1e-6) * g
    res = helios.check_close(h.numpy().astype(np.float32), want, rtol=0.01)
    assert res.passed, res.line()
    if residual:
        np.testing.assert_allclose(stream.numpy(), v, rtol=1e-6)


def _rope_table(rows, hd, theta=10000.0):
    inv = (1.0 / theta ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
    ang = np.arange(rows, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.cos(ang.astype(np.float64)), np.sin(ang.astype(np.float64))], axis=1).astype(np.float32)


def _rope_ref(row, table, heads, kv, hd, pos):
    out = row.astype(np.float64).copy()
    half = hd // 2
    c, s = table[pos, :half].astype(np.float64), table[pos, half:].astype(np.float64)
    for h in range(heads + kv):
        a, b = out[h * hd : h * hd + half].copy(), out[h * hd + half : (h + 1) * hd].copy()
        out[h * hd : h * hd + half] = a * c - b * s
        out[h * hd + half : (h + 1) * hd] = b * c + a * s
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("heads,kv,hd", [(2, 2, 8), (4, 2, 16), (8, 1, 64), (3, 3, 128)])
def test_rope_against_float64(device, dtype, heads, kv, hd):
    rows = 40
    table = _rope_table(rows, hd)
    qkv = device.empty((1, (heads + 2 * kv) * hd), dtype)
    tt = device.upload(table, dtype=np.float32)
    with device.plan(params=2) as p:
        p.rope(qkv, tt, heads=heads, kv_heads=kv, position=1)
    for i, pos in enumerate([0, 1, 17, rows - 1]):
        row = _rand((1, (heads + 2 * kv) * hd), 10 + i, _dt(dtype))
        qkv.copy_(row)
        p.replay(params={1: pos})
        got = qkv.numpy().astype(np.float64)[0]
        want = _rope_ref(row[0], table, heads, kv, hd, pos)
        res = helios.check_close(got[None], want[None], rtol=0.01)
        assert res.passed, f"pos {pos}: {res.line()}"
        v = slice((heads + kv) * hd, None)  # V is left as it was
        np.testing.assert_array_equal(qkv.numpy()[0, v].view(np.uint16), row[0, v].view(np.uint16))
    with pytest.raises(ValueError, match=rf"op 0 \(rope\) reads it as a row of {rows}"):
        p.replay(params={1: rows})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 100, 4096])
def test_swiglu_against_float64(device, dtype, n):
    x = _rand((1, 2 * n), 5, _dt(dtype))
    tx = device.upload(x, dtype=dtype)
    with device.plan() as p:
        out = p.swiglu(tx)
    p.replay()
    g, u = x[0, :n].astype(np.float64), x[0, n:].astype(np.float64)
    res = helios.check_close(out.numpy().astype(np.float64), (g / (1 + np.exp(-g)) * u)[None], rtol=0.01)
    assert res.passed, res.line()


def _gqa_ref(qkv, K, V, heads, kv, p):
    hd = K.shape[1] // kv
    q = qkv[0, : heads * hd].astype(np.float64)
    out = np.zeros(heads * hd)
    for h in range(heads):
        kh = h // (heads // kv)
        ks = slice(kh * hd, (kh + 1) * hd)
        sc = K[: p + 1, ks].astype(np.float64) @ q[h * hd : (h + 1) * hd] / np.sqrt(hd)
        w = np.exp(sc - sc.max())
        out[h * hd : (h + 1) * hd] = (w / w.sum()) @ V[: p + 1, ks].astype(np.float64)
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
# Groups of 2, 8, 2, 1 (no grouping), 2 at head dimension 128, 3, and Llama's 4. Width 1:
# the splits sized for a grid of one workgroup; width 2 with 2 heads: 64 keys a split up
# to position 63, then the longer splits.
@pytest.mark.parametrize(
    "heads,kv,hd,width",
    [
        (h, kv, hd, w)
        for (h, kv, hd) in [(4, 2, 16), (8, 1, 64), (6, 3, 32), (4, 4, 8), (8, 2, 128), (6, 2, 16), (8, 2, 64)]
        for w in (None, 1)
    ]
    + [(2, 1, 16, 2), (2, 1, 64, 2)],
)
def test_grouped_query_attention_against_float64(device, monkeypatch, dtype, heads, kv, hd, width):
    """Query head h on KV head h // (heads // kv): over one split and several, on its
    own dispatch and (width 1: HELIOS_PLAN_PERSISTENT_GRID) with splits sized for a grid."""
    if width is not None:
        if width > (os.cpu_count() or 1):
            pytest.skip(f"a grid of {width} needs {width} lavapipe threads; this machine has {os.cpu_count()} cores")
        monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", str(width))
        with helios.Device() as dev:
            _gqa_against_float64(dev, dtype, heads, kv, hd)
        return
    _gqa_against_float64(device, dtype, heads, kv, hd)


def _gqa_against_float64(dev, dtype, heads, kv, hd):
    dt, rows = _dt(dtype), 2 * CHUNK + 9
    dkv = kv * hd
    K, V = _rand((rows, dkv), 1, dt), _rand((rows, dkv), 2, dt)
    kc, vc = dev.upload(K, dtype=dtype), dev.upload(V, dtype=dtype)
    qkv = dev.empty((1, (heads + 2 * kv) * hd), dtype)
    with dev.plan(params=2) as p:
        out = p.attention_decode(qkv, kc, vc, heads=heads, kv_heads=kv, position=1)
    for i, pos in enumerate([0, 5, CHUNK, 2 * CHUNK + 8]):
        row = _rand((1, (heads + 2 * kv) * hd), 20 + i, dt)
        qkv.copy_(row)
        p.replay(params={1: pos})
        K[pos], V[pos] = row[0, heads * hd : heads * hd + dkv], row[0, heads * hd + dkv :]
        res = helios.check_close(out.numpy().astype(np.float64), _gqa_ref(row, K, V, heads, kv, pos)[None], rtol=0.01)
        assert res.passed, f"pos {pos}: {res.line()}"
        np.testing.assert_array_equal(kc.numpy().view(np.uint16), K.view(np.uint16))
        np.testing.assert_array_equal(vc.numpy().view(np.uint16), V.view(np.uint16))


def test_embed_without_positions_is_the_token_row(device):
    tokens = _rand((7, 24), 4)
    with device.plan(params=2) as p:
        out = p.embed(device.upload(tokens, dtype=np.float32))
    for t in (0, 6, 3):
        p.replay(params={0: t, 1: 1000})  # the position word is not read
        np.testing.assert_array_equal(out.numpy()[0], tokens[t])
    with pytest.raises(ValueError, match="reads it as a row of 7"):
        p.replay(params={0: 7})


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_token_table_is_widened_exactly(device, dtype):
    tokens = _rand((7, 40), 5, _dt(dtype))
    with device.plan(params=1) as p:
        out = p.embed(device.upload(tokens, dtype=dtype))
    for t in (0, 6):
        p.replay(params={0: t})
        np.testing.assert_array_equal(out.numpy()[0], tokens[t].astype(np.float32))


def test_llama_ops_refuse_bad_input_before_recording(device):
    p = device.plan(params=2)
    qkv = device.empty((1, 64), "float16")
    table = device.upload(np.zeros((4, 16), np.float32), dtype=np.float32)
    cases = [
        (lambda: p.attention_decode(qkv, qkv, qkv, heads=3, kv_heads=2), ValueError, "kv_heads 2 does not divide"),
        (lambda: p.rope(qkv, table, heads=6, kv_heads=1), TypeError, r"table must be a \(rows, 8\) float32"),
        (lambda: p.rope(qkv, qkv, heads=2, kv_heads=1), TypeError, "table must be"),
        (
            lambda: p.rope(qkv, table, heads=3, kv_heads=1),
            ValueError,
            r"64 elements are not \(heads 3 \+ 2 x kv_heads 1\)",
        ),
        (lambda: p.swiglu(device.empty((1, 3), "float16")), ValueError, r"not \[gate \| up\] of equal halves"),
        (lambda: p.swiglu(table), TypeError, "x must be a packed float16 or bfloat16"),
        (lambda: p.rmsnorm(table, table), ValueError, "gamma must be a packed float32 Tensor of 16 elements"),
        (lambda: p.rope(qkv, table, heads=2, kv_heads=1, position=5), ValueError, "rope's position"),
    ]
    for call, exc, says in cases:
        with pytest.raises(exc, match=says):
            call()
    assert not p._ops


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d,n,residual", [(64, 48, True), (2048, 300, True), (1024, 24, False)])
def test_an_rmsnorm_before_a_one_row_product_runs_as_its_head(device, monkeypatch, dtype, d, n, residual):
    """As LayerNorm's: the RMSNorm a one-row product reads runs in the product's dispatch
    (FLAG_LN_RMS), the stream equal bit for bit to the two dispatches', h and the product
    against float64, one dispatch fewer."""
    monkeypatch.setenv("HELIOS_DISABLE_PLAN_PERSISTENT", "1")  # the counts are the norm's alone
    dt = _dt(dtype)
    x0, r0, g0, w0 = _rand((1, d), 1), _rand((1, d), 2, dt), _rand(d, 3), _rand((n, d), 4, dt)

    def run(dev):
        x, g = dev.upload(x0, dtype=np.float32), dev.upload(g0, dtype=np.float32)
        r, w = dev.upload(r0, dtype=dtype), dev.upload(w0, dtype=dtype)
        with dev.plan() as p:
            h, s = p.rmsnorm(x, g, residual=r if residual else None, eps=1e-6, dtype=dtype)
            y = p.matmul(h, w, trans_b=True)
        p.replay()
        return h.numpy().astype(np.float64), s.numpy(), y.numpy().astype(np.float64), p.counts

    with helios.Device() as fused_dev:
        h, s, y, counts = run(fused_dev)
    monkeypatch.setenv("HELIOS_DISABLE_PLAN_NORM_FUSION", "1")
    with helios.Device() as apart_dev:
        h2, s2, y2, counts2 = run(apart_dev)
    np.testing.assert_array_equal(s, s2)
    v = x0.astype(np.float64) + (r0.astype(np.float64) if residual else 0.0)
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    np.testing.assert_allclose(h, v / np.sqrt((v * v).mean() + 1e-6) * g0, rtol=tol, atol=tol)
    np.testing.assert_allclose(h, h2, rtol=tol, atol=tol)
    z = h @ w0.astype(np.float64).T
    np.testing.assert_allclose(y, z, rtol=tol, atol=tol * np.abs(z).max())
    assert counts[0] == counts2[0] == 2 and counts[1] == counts2[1] - 1

"""A plan's decode ops (decode.comp): attention of one position over a KV cache
against float64, the cache append, the embedding gather and the top-1 through the
parameter words, LayerNorm in a plan, a replayed step against its ops one plan at a
time, and the bounds a replay checks before it submits."""

from __future__ import annotations

import os

import numpy as np
import pytest

import helios

CHUNK = 64  # decode_attention.glsl's SPLIT_SHORT: keys a split while the heads' splits fit the grid


def _rand(shape, seed, dtype=np.float16):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _attention_ref(qkv, K, V, heads, p):
    d = K.shape[1]
    hd = d // heads
    q = qkv[0, :d].astype(np.float64)
    out = np.zeros(d)
    for h in range(heads):
        s = slice(h * hd, (h + 1) * hd)
        sc = K[: p + 1, s].astype(np.float64) @ q[s] / np.sqrt(hd)
        w = np.exp(sc - sc.max())
        out[s] = (w / w.sum()) @ V[: p + 1, s].astype(np.float64)
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("heads,hd", [(2, 8), (2, 16), (3, 64), (2, 64), (1, 256)])
@pytest.mark.parametrize("width", [None, 1, 2])
def test_attention_over_the_cache_against_float64(device, monkeypatch, dtype, heads, hd, width):
    """Positions in the first split, at its last key, past it (splits combined). Splits
    of 64 keys where the device sizes them for no grid (lavapipe's default). Sized for a
    grid of `width` workgroups (HELIOS_PLAN_PERSISTENT_GRID): where it fits fewer than
    one a head, what 6 passes of the workgroup hold (256 keys at head dimension 8 and 16,
    192 at 64; 64 at 256) from the first position on; where it fits one a head (2 on two
    heads), past position 63 the position's keys in one split up to that, then splits of
    that many keys (two combined at 275)."""
    if width is not None and width > (os.cpu_count() or 1):
        pytest.skip(f"a grid of {width} needs {width} lavapipe threads; this machine has {os.cpu_count()} cores")
    if width is None:
        _attention_against_float64(device, dtype, heads, hd)
        return
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", str(width))
    with helios.Device() as dev:
        _attention_against_float64(dev, dtype, heads, hd)


def _attention_against_float64(device, dtype, heads, hd):
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    d, rows = heads * hd, 4 * CHUNK + 20
    K, V = _rand((rows, d), 1, dt), _rand((rows, d), 2, dt)
    kc, vc = device.upload(K, dtype=dtype), device.upload(V, dtype=dtype)
    qkv = device.empty((1, 3 * d), dtype)
    with device.plan(params=2) as p:
        out = p.attention_decode(qkv, kc, vc, heads=heads, position=1)
    for i, pos in enumerate([0, 7, CHUNK - 1, CHUNK, 2 * CHUNK - 1, 3 * CHUNK + 2, 4 * CHUNK + 19]):
        row = _rand((1, 3 * d), 10 + i, dt)
        qkv.copy_(row)
        p.replay(params={1: pos})
        K[pos], V[pos] = row[0, d : 2 * d], row[0, 2 * d :]  # what the replay appends
        r = helios.check_close(out.numpy(), _attention_ref(row, K, V, heads, pos)[None], rtol=0.01)
        assert r.passed, f"pos {pos}: {r.line()}"
        np.testing.assert_array_equal(kc.numpy().view(np.uint16), K.view(np.uint16))
        np.testing.assert_array_equal(vc.numpy().view(np.uint16), V.view(np.uint16))


def _attention_replays(dev, heads, hd, positions):
    """One plan's attention outputs (as uint16 bits) and caches after replays at
    `positions`, each with a fresh QKV row; and the plan's (ops, dispatches, barriers)."""
    d, rows = heads * hd, 3 * CHUNK + 5
    kc, vc = dev.upload(_rand((rows, d), 21)), dev.upload(_rand((rows, d), 22))
    qkv = dev.empty((1, 3 * d), "float16")
    with dev.plan(params=2) as p:
        out = p.attention_decode(qkv, kc, vc, heads=heads, position=1)
    outs = []
    for i, pos in enumerate(positions):
        qkv.copy_(_rand((1, 3 * d), 30 + i))
        p.replay(params={1: pos})
        outs.append(out.numpy().view(np.uint16).copy())
    return outs, kc.numpy(), vc.numpy(), p.counts


def _against_switch(device, monkeypatch, switch, positions):
    """The attention replays of `_attention_replays` on the default device and on one
    opened with `switch`=1: outputs and caches equal bit for bit. Returns both plans'
    counts."""
    default = _attention_replays(device, 3, 32, positions)
    monkeypatch.setenv(switch, "1")
    with helios.Device() as dev:
        switched = _attention_replays(dev, 3, 32, positions)
    for i, (a, b) in enumerate(zip(default[0], switched[0])):
        np.testing.assert_array_equal(a, b, err_msg=f"replay {i} at position {positions[i]}")
    np.testing.assert_array_equal(default[1].view(np.uint16), switched[1].view(np.uint16))
    np.testing.assert_array_equal(default[2].view(np.uint16), switched[2].view(np.uint16))
    return default[3], switched[3]


def test_one_dispatch_attention_is_the_two_dispatch_one_bit_for_bit(device, monkeypatch):
    """The last split to arrive combines in the same dispatch: the same sums as the
    combine dispatch, over repeated replays (the plan zeroes the arrival counts before
    each), with one dispatch and no barrier fewer for the step."""
    positions = [3 * CHUNK + 4, 0, CHUNK, 2 * CHUNK + 1, 2 * CHUNK + 1, 3 * CHUNK + 4]
    (ops_f, disp_f, bar_f), (ops_t, disp_t, bar_t) = _against_switch(
        device, monkeypatch, "HELIOS_DISABLE_DECODE_ATTENTION_FUSION", positions
    )
    assert ops_f == ops_t == 1 and (disp_f, disp_t) == (1, 2) and bar_t == bar_f + 1


def test_attention_grid_sized_to_the_position_is_the_full_grid_bit_for_bit(device, monkeypatch):
    """The attention's grid holds the splits up to the position, read at each replay
    (the host writes the dispatch arguments with the word): the results of the grid
    over the whole cache (HELIOS_DISABLE_DECODE_ATTENTION_GRID=1), over repeated
    replays at positions in the first, a middle and the last split."""
    positions = [3 * CHUNK + 4, 0, CHUNK - 1, CHUNK, 2 * CHUNK + 1, 0, 3 * CHUNK + 4]
    sized, full = _against_switch(device, monkeypatch, "HELIOS_DISABLE_DECODE_ATTENTION_GRID", positions)
    assert sized == full


def test_a_position_an_op_writes_keeps_the_full_attention_grid(device):
    """A top-1 writing the word the attention reads as its position, earlier in the same
    replay: the host cannot size the grid from the word before the submission, so the
    attention keeps the grid over the whole cache and attends up to the written
    position (150: three splits, where the word held 0 before the replay)."""
    heads, hd = 2, 32
    d, rows, pos = heads * hd, 3 * CHUNK + 5, 150
    K, V = _rand((rows, d), 41), _rand((rows, d), 42)
    kc, vc = device.upload(K), device.upload(V)
    row = _rand((1, 3 * d), 43)
    qkv = device.upload(row)
    scores = np.zeros((1, 200), np.float32)
    scores[0, pos] = 1.0
    with device.plan(params=2) as p:
        p.top1(device.upload(scores, dtype="float32"), into=1)
        out = p.attention_decode(qkv, kc, vc, heads=heads, position=1)
    p.replay(params=[0, 0])
    assert p.params() == [0, pos]
    K[pos], V[pos] = row[0, d : 2 * d], row[0, 2 * d :]
    r = helios.check_close(out.numpy(), _attention_ref(row, K, V, heads, pos)[None], rtol=0.01)
    assert r.passed, r.line()


def test_embed_and_top1_through_the_parameter_words(device):
    tok, pos = _rand((10, 40), 3, np.float32), _rand((30, 40), 4, np.float32)
    T, P = device.upload(tok, dtype="float32"), device.upload(pos, dtype="float32")
    scores = np.zeros((1, 50), np.float32)
    scores[0, [7, 31]] = 2.0  # a tie: the first wins
    S = device.upload(scores, dtype="float32")
    with device.plan(params=3) as p:
        x = p.embed(T, P, token=0, position=1)
        p.top1(S, into=2)
    for t, q in [(0, 0), (9, 29), (4, 17)]:
        p.replay(params=[t, q])
        np.testing.assert_array_equal(x.numpy()[0], tok[t] + pos[q])
        assert p.params() == [t, q, 7]
    scores[0, 45] = np.nan  # NaN counts as the largest, as torch.argmax
    S.copy_(scores)
    p.replay()
    assert p.params(2) == [45]


def test_top1_over_many_workgroups_picks_the_first_largest(device):
    """A chunk of 1024 a workgroup (decode.c), the last to arrive reducing their picks:
    the pick in any chunk, ties across chunks (the first wins), NaN largest; each replay
    counts from zero (a stale count would leave the last replay's pick). Over 256
    chunks, so that an invocation of the last reduces two picks."""
    n = 1024 * 300 + 37
    rng = np.random.default_rng(7)
    scores = rng.standard_normal((1, n)).astype(np.float32)
    S = device.upload(scores, dtype="float32")
    with device.plan(params=1) as p:
        p.top1(S, into=0)
    for at in (0, 1023, 1024, 3000, 1024 * 257 + 9, n - 37, n - 1):
        s = scores.copy()
        s[0, at] = 10.0
        S.copy_(s)
        p.replay()
        assert p.params() == [at], at
    s = scores.copy()
    s[0, [4100, 1024, 2047]] = 10.0  # a tie over three chunks
    S.copy_(s)
    p.replay()
    assert p.params() == [1024]
    s[0, [n - 1, 1024 * 257 + 9]] = np.nan  # NaN over any number (1024's, its reducer's first); the first NaN
    S.copy_(s)
    p.replay()
    assert p.params() == [1024 * 257 + 9] == [int(np.argmax(s))]
    S.copy_(np.full((1, n), -np.inf, np.float32))
    p.replay()
    assert p.params() == [0]


def test_a_replay_checks_the_words_it_reads_before_it_submits(device):
    kc, vc = device.upload(np.zeros((16, 32), np.float16)), device.upload(np.zeros((16, 32), np.float16))
    qkv = device.upload(np.ones((1, 96), np.float16))
    tok = device.upload(np.zeros((5, 32)), dtype="float32")
    with device.plan(params=2) as p:
        p.attention_decode(qkv, kc, vc, heads=1, position=1)
        p.embed(tok, tok, token=0, position=1)
    with pytest.raises(ValueError, match=r"parameter word 1 is 5; op 1 \(embed\) reads it as a row of 5"):
        p.replay(params=[0, 5])  # the embedding's 5 rows bound it tighter than the cache's 16
    with device.plan(params=2) as alone:
        alone.attention_decode(qkv, kc, vc, heads=1, position=1)
    with pytest.raises(ValueError, match=r"parameter word 1 is 16; op 0 \(attention_decode\) reads it as a row of 16"):
        alone.replay(params=[0, 16])
    assert not kc.numpy().any()  # nothing ran
    with pytest.raises(ValueError, match="parameter words 1..3; the plan has 2"):
        p._recorded().write_params(1, [0, 0])


def test_bad_decode_ops_are_refused_naming_the_argument(device):
    qkv = device.upload(np.zeros((1, 360), np.float16))
    kc = device.upload(np.zeros((8, 120), np.float16))
    p = device.plan(params=2)
    p.attention_decode(qkv, kc, kc, heads=3, position=1)
    with pytest.raises(ValueError, match="head_dim 40 must divide 256"):
        p.record()
    with pytest.raises(ValueError, match="names a parameter word; this plan has none"):
        device.plan().top1(device.upload(np.zeros(4), dtype="float32"))
    with pytest.raises(ValueError, match="plan: params"):
        device.plan(params=17)
    with pytest.raises(TypeError, match="positions must be a packed 2-D float32"):
        device.plan(params=2).embed(kc, kc)  # a 16-bit token table is one; a 16-bit position table is not
    with pytest.raises(TypeError, match="tokens must be a packed 2-D float32, float16 or bfloat16"):
        device.plan(params=2).embed(device.upload(np.zeros(8, np.float32), dtype="float32"))
    tok16 = device.upload(np.zeros((5, 120), np.float32))  # float16: upload's default, whatever the array's dtype
    with pytest.raises(TypeError, match=r"got a \(5, 120\) float16 Tensor \(Device.upload makes float16 unless told: "
                                        r"upload\(x, dtype=np.float32\)\)"):  # fmt: skip
        device.plan(params=2).embed(tok16, tok16)
    with pytest.raises(TypeError, match="k_cache must be a packed"):
        device.plan(params=2).attention_decode(qkv, device.upload(np.zeros((8, 120), np.float32), dtype="float32"), kc,
                                               heads=3)  # fmt: skip


BAD_PARAMS = [
    ([1.9, 0], TypeError, "parameter word 0 must be an int, not float"),
    ("12", TypeError, "params must be a dict .* not str"),
    (b"\x01\x02", TypeError, "params must be a dict .* not bytes"),
    ([0, "3"], TypeError, "parameter word 1 must be an int, not str"),
    ([0, True], TypeError, "parameter word 1 must be an int, not bool"),
    ([0, -1], ValueError, "parameter word 1 must be in 0..4294967295, got -1"),
    ([0, 2**32], ValueError, "parameter word 1 must be in 0..4294967295, got 4294967296"),
    ({1.0: 3}, TypeError, "parameter word index must be an int, not float"),
    ({5: 3}, ValueError, "parameter word index must be in 0..1, got 5"),
    ([0, 1, 2], ValueError, "3 parameter words given; this plan has 2"),
    (np.array([0.0, 1.0]), TypeError, "parameter word 0 must be an int, not float"),
    ({0, 1}, TypeError, "params must be a dict .* not set"),
]


@pytest.mark.parametrize("params,exc,msg", BAD_PARAMS, ids=[repr(b[0])[:24] for b in BAD_PARAMS])
def test_replay_params_are_integers_named_by_their_word(device, params, exc, msg):
    kc, vc = device.upload(np.zeros((16, 32), np.float16)), device.upload(np.zeros((16, 32), np.float16))
    qkv = device.upload(np.ones((1, 96), np.float16))
    with device.plan(params=2) as p:
        p.attention_decode(qkv, kc, vc, heads=1, position=1)
    with pytest.raises(exc, match=msg):
        p.replay(params=params)
    p.replay(params=[np.int64(0), np.uint32(3)])  # NumPy integers are integers
    assert p.params() == [0, 3]
    p.replay(params=np.array([0, 4], np.int32))
    assert p.params() == [0, 4]


BAD_DECODE_ARGS = [
    (dict(heads=0), ValueError, "heads must be in 1..32, got 0"),
    (dict(heads=True), TypeError, "heads must be an int, not bool"),
    (dict(heads="4"), TypeError, "heads must be an int, not str"),
    (dict(heads=1, scale=float("inf")), ValueError, "scale must be finite"),
    (dict(heads=1, scale=1e300), ValueError, "scale must be positive and finite as a float32"),
    (dict(heads=1, scale=-0.5), ValueError, "scale must be positive"),
    (dict(heads=1, scale=0.0), ValueError, "scale must be positive"),
    (dict(heads=1, scale="x"), TypeError, "scale must be a real number, not str"),
    (dict(heads=1, scale=True), TypeError, "scale must be a real number, not bool"),
]


@pytest.mark.parametrize("kw,exc,msg", BAD_DECODE_ARGS, ids=[repr(b[0]) for b in BAD_DECODE_ARGS])
def test_attention_decode_arguments_follow_the_api_rules(device, kw, exc, msg):
    kc = device.upload(np.zeros((8, 32), np.float16))
    qkv = device.upload(np.zeros((1, 96), np.float16))
    with pytest.raises(exc, match=f"plan.attention_decode: {msg}"):
        device.plan(params=2).attention_decode(qkv, kc, kc, **kw)


def test_layernorm_in_a_plan_is_the_call(device):
    x = device.upload(_rand((1, 200), 5, np.float32), dtype="float32")
    r = device.upload(_rand((1, 200), 6))
    g, b = (device.upload(_rand(200, i, np.float32), dtype="float32") for i in (7, 8))
    h_call, s_call, _ = device.layernorm(x, g, b, residual=r)
    with device.plan() as p:
        h, s = p.layernorm(x, g, b, residual=r)
    p.replay()
    np.testing.assert_array_equal(h.numpy(), h_call.numpy())
    np.testing.assert_array_equal(s.numpy(), s_call.numpy())


def _norm_then_product(dev, dtype, d, n, seed, residual=True, out_dtype=None, act=None, variant=None):
    """A plan of a one-row LayerNorm (the branch added to an fp32 stream, or none) and
    the product with a bias that reads its output, replayed with two inputs. Returns
    per replay (h, the stream, the product) as float64, the inputs and the plan's counts."""
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    g0, b0 = _rand(d, seed, np.float32), _rand(d, seed + 1, np.float32)
    w0, bias = _rand((n, d), seed + 2, dt), _rand(n, seed + 3, np.float32)
    x = dev.upload(_rand((1, d), seed + 4, np.float32), dtype="float32")
    r = dev.upload(_rand((1, d), seed + 5, dt), dtype=dtype)
    g, b = dev.upload(g0, dtype="float32"), dev.upload(b0, dtype="float32")
    w = dev.upload(w0, dtype=dtype)
    with dev.plan() as p:
        h, stream = p.layernorm(x, g, b, residual=r if residual else None, dtype=dtype)
        y = p.matmul(h, w, trans_b=True, bias=bias, out_dtype=out_dtype, activation=act, variant=variant)
    outs, ins = [], []
    for i in range(2):
        x0, r0 = _rand((1, d), seed + 10 + i, np.float32), _rand((1, d), seed + 20 + i, dt)
        x.copy_(x0)
        r.copy_(r0)
        p.replay()
        outs.append(tuple(t.numpy().astype(np.float64) for t in (h, stream, y)))
        ins.append((x0.astype(np.float64) + (r.numpy().astype(np.float64) if residual else 0.0)))
    return outs, ins, (g0, b0, w.numpy().astype(np.float64), bias), p.counts


@pytest.fixture(scope="module")
def norm_apart_device():
    """A Device whose plans keep each norm in its own dispatch
    (HELIOS_DISABLE_PLAN_NORM_FUSION=1, read when the Device opens)."""
    with pytest.MonkeyPatch.context() as mp:  # unset again for the module's other devices
        mp.setenv("HELIOS_DISABLE_PLAN_NORM_FUSION", "1")
        dev = helios.Device()
    with dev:
        yield dev


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "d,n,residual,out_dtype,act",
    [(72, 40, True, None, None), (1024, 300, True, "float32", "gelu"), (4096, 24, False, None, None),
     (64, 4200, True, None, None)],
)  # fmt: skip
def test_a_norm_before_a_one_row_product_runs_as_its_head(device, norm_apart_device, dtype, d, n, residual,
                                                         out_dtype, act):  # fmt: skip
    """By default the LayerNorm whose output a one-row product reads runs in the product's
    dispatch (each workgroup normalizes the row; 4200 columns: more than the grid's
    workgroups cover at once on any device): the stream equals the two dispatches' bit
    for bit, h and the product agree with them and with float64; one dispatch and one
    barrier fewer."""
    fused = _norm_then_product(device, dtype, d, n, 60, residual, out_dtype, act)
    apart = _norm_then_product(norm_apart_device, dtype, d, n, 60, residual, out_dtype, act)
    g0, b0, w, bias = fused[2]
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    for i, ((h, s, y), (h2, s2, y2), v) in enumerate(zip(fused[0], apart[0], fused[1])):
        np.testing.assert_array_equal(s, s2, err_msg=f"replay {i}: the stream")
        ref = (v - v.mean()) / np.sqrt(v.var() + 1e-5) * g0 + b0
        np.testing.assert_allclose(h, ref, rtol=tol, atol=tol, err_msg=f"replay {i}: h")
        np.testing.assert_allclose(h, h2, rtol=tol, atol=tol, err_msg=f"replay {i}: h against apart")
        z = h @ w.T + bias  # from the h the kernel wrote: the product's own error only
        if act == "gelu":
            z = 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
        scale = np.abs(z).max()
        np.testing.assert_allclose(y, z, rtol=tol, atol=tol * scale, err_msg=f"replay {i}: the product")
        np.testing.assert_allclose(y, y2, rtol=tol, atol=tol * scale, err_msg=f"replay {i}: against apart")
    (ops_f, disp_f, bar_f), (ops_a, disp_a, bar_a) = fused[3], apart[3]
    assert ops_f == ops_a == 2 and disp_f == disp_a - 1 and bar_f == bar_a - 1


def test_a_norm_stays_apart_where_its_product_cannot_carry_it(monkeypatch):
    """Two rows, another product between the norm and the one reading it, a row wider than
    the head holds (4104 elements: 4096 at most) or not of whole 16-byte words (300),
    B as K x N, a chosen variant of another workgroup size: two dispatches; the default
    fuses. (Persistent runs off: the counts are the norm's alone.)"""
    monkeypatch.setenv("HELIOS_DISABLE_PLAN_PERSISTENT", "1")
    dev = helios.Device()
    cases = ((2, False, 64, True, None, 0), (1, True, 64, True, None, 0), (1, False, 4104, True, None, 0),
             (1, False, 300, True, None, 0), (1, False, 64, False, None, 0), (1, False, 64, True, "gemv:wg64", 0),
             (1, False, 64, True, "gemv:wg256", 1), (1, False, 64, True, None, 1))  # fmt: skip
    for rows, between, d, trans_b, variant, fewer in cases:
        w = dev.upload(_rand((32, d) if trans_b else (d, 32), 50))
        g, b = (dev.upload(_rand(d, i, np.float32), dtype="float32") for i in (51, 52))
        x = dev.upload(_rand((rows, d), 54, np.float32), dtype="float32")
        with dev.plan() as p:
            h, _ = p.layernorm(x, g, b)
            if between:
                p.matmul(dev.upload(_rand((rows, d), 55)), w, trans_b=trans_b)
            p.matmul(h, w, trans_b=trans_b, variant=variant)
        assert p.counts[1] == p.counts[0] - fewer, (rows, between, d, trans_b, variant, p.counts)
    dev.close()


def _step(device, plan, x, w, kc, vc, g, b, logits_out):
    """A layer's worth of a decode step: norm, product, attention, product, top-1."""
    h, _ = plan.layernorm(x, g, b)
    qkv = plan.matmul(h, w[0], trans_b=True)
    a = plan.attention_decode(qkv, kc, vc, heads=2, position=1)
    plan.matmul(a, w[1], trans_b=True, out=logits_out, out_dtype="float32")
    plan.top1(logits_out, into=0)


def test_a_replayed_step_gives_what_its_ops_give_one_plan_at_a_time(device):
    d = 64
    x = device.upload(_rand((1, d), 9, np.float32), dtype="float32")
    w = [device.upload(_rand((3 * d, d), 10) * 0.1), device.upload(_rand((70, d), 11))]
    g, b = (device.upload(_rand(d, i, np.float32), dtype="float32") for i in (12, 13))
    caches = [[device.upload(_rand((40, d), 14 + i)) for i in range(2)] for _ in range(2)]
    outs = [device.empty((1, 70), "float32") for _ in range(2)]
    with device.plan(params=2) as whole:
        _step(device, whole, x, w, *caches[0], g, b, outs[0])
    parts = device.plan(params=2)
    _step(device, parts, x, w, *caches[1], g, b, outs[1])
    singles = []
    for op, label in zip(parts._ops, parts.variants):
        s = device.plan(params=2)
        s._ops.append(op)
        s._variants.append(label)
        singles.append(s.record())
    for pos in (3, 4, 5):
        whole.replay(params=[0, pos])
        for s in singles:
            s.replay(params=[0, pos])
        np.testing.assert_array_equal(outs[0].numpy(), outs[1].numpy())
        assert whole.params() == singles[-1].params()
        for a, b_ in zip(caches[0], caches[1]):
            np.testing.assert_array_equal(a.numpy(), b_.numpy())


def test_greedy_tokens_match_torch_eager_on_the_cpu():
    """The decode suite's model, trained briefly, 32 greedy tokens: the plan's equal
    torch CPU eager's (ties aside: none on this model and seed)."""
    torch = pytest.importorskip("torch", reason="the reference decoding is torch's")
    from helios.harness.workloads.decode import TINY, DecodeConfig
    from helios.harness.workloads.decode.plan_decoder import PlanDecoder
    from helios.harness.workloads.decode.run import train_model
    from helios.harness.workloads.train.adapters import TorchOps
    from helios.harness.workloads.train.model import greedy

    cfg = DecodeConfig(**TINY)
    model, data = train_model(cfg, torch.device("cpu"), lambda s: None)
    prompt = [int(t) for t in data[0, : cfg.prompt]]
    ref, _ = greedy(model, TorchOps(), torch.tensor([prompt]), cfg.new)
    state = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    with helios.Device() as dev:
        dec = PlanDecoder(dev, state, cfg.layers, cfg.heads, cfg.prompt + cfg.new)
        assert dec.generate(prompt, cfg.new) == ref

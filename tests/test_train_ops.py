"""A training step's ops besides products, attention and LayerNorm (helios.train_ops:
train.comp, optim.comp), each against float64 over odd shapes, deterministic where
the issue asks it, on int32 token ids; bad input refused with messages naming it."""

from __future__ import annotations

import numpy as np
import pytest

import helios
from helios import train_ops as T
from helios.harness.workloads.train_fuzz import cross_entropy_reference


def _f32(device, a):
    return device.upload(np.ascontiguousarray(a, np.float32), dtype="float32")


def _ids(device, a):
    return device.upload(np.ascontiguousarray(a), dtype="int32")


@pytest.mark.parametrize("vocab,batch,seq,d", [(37, 3, 5, 300), (5, 1, 1, 1), (300, 2, 129, 64)])
def test_embedding_and_its_gradients_against_float64(device, vocab, batch, seq, d):
    rng = np.random.default_rng(vocab + d)
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    ids[0, 0] = vocab - 1  # the table's last row is read
    tok, pos = rng.standard_normal((vocab, d)), rng.standard_normal((seq, d))
    out = device.empty((batch * seq, d), "float32")
    T.embed(_ids(device, ids), _f32(device, tok), _f32(device, pos), out)
    want = tok.astype(np.float32)[ids.reshape(-1)] + np.tile(pos.astype(np.float32), (batch, 1))
    np.testing.assert_array_equal(out.numpy(), want)  # one fp32 add: exact

    g = rng.standard_normal((batch * seq, d)).astype(np.float32)
    head = rng.standard_normal((vocab, d)).astype(np.float32)  # a tied head's gradient, there already
    tg, pg = _f32(device, head), _f32(device, np.ones((seq, d)))
    T.embed_backward(_ids(device, ids), _f32(device, g), tg, pg, seq, accumulate=True)
    want_t = head.astype(np.float64)
    np.add.at(want_t, ids.reshape(-1), g.astype(np.float64))
    want_p = 1.0 + g.astype(np.float64).reshape(batch, seq, d).sum(0)
    for name, got, want in (("token", tg, want_t), ("position", pg, want_p)):
        res = helios.check_close(got.numpy().astype(np.float64)[None], want[None], rtol=1e-5, atol=1e-5)
        assert res.passed, f"{name} table gradient: {res.line()}"


def test_the_token_gradient_is_deterministic_and_sums_in_row_order(device):
    rng = np.random.default_rng(5)
    rows, d = 700, 40
    ids = np.zeros(rows, np.int32)  # every row on one table row: the order of the sum shows
    g = (rng.standard_normal((rows, d)) * 10.0 ** rng.integers(-4, 4, (rows, 1))).astype(np.float32)
    out = [device.empty((3, d), "float32") for _ in range(2)]
    for o in out:
        T.embed_backward(_ids(device, ids), _f32(device, g), o, None, 1)
    a, b = out[0].numpy(), out[1].numpy()
    np.testing.assert_array_equal(a, b)
    want = np.zeros(d, np.float32)
    for r in range(rows):  # fp32, in increasing row order
        want += g[r]
    np.testing.assert_array_equal(a[0], want)
    np.testing.assert_array_equal(a[1:], 0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows,classes", [(7, 1000), (1, 3), (33, 257)])
def test_cross_entropy_against_float64(device, dtype, rows, classes):
    rng = np.random.default_rng(rows * classes)
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    x = (rng.standard_normal((rows, classes)) * 4).astype(dt)
    tgt = rng.integers(0, classes, rows).astype(np.int32)
    losses, tx = device.empty((rows,), "float32"), device.upload(x, dtype=dtype)
    grad = device.empty((rows, classes), dtype)
    T.cross_entropy(tx, _ids(device, tgt), losses, grad, 1.0 / rows)
    want_l, want_g = cross_entropy_reference(x, tgt, 1.0 / rows)
    res = helios.check_close(losses.numpy().astype(np.float64)[None], want_l[None])
    assert res.passed, f"losses: {res.line()}"
    ulp = 2.0**-8 if dtype == "bfloat16" else 2.0**-11  # one rounding of the gradient
    assert np.abs(grad.numpy().astype(np.float64) - want_g).max() <= ulp * np.abs(want_g).max() + 1e-7
    T.cross_entropy(tx, _ids(device, tgt), losses, tx, 1.0 / rows)  # in place over the logits
    np.testing.assert_array_equal(tx.numpy().view(np.uint16), grad.numpy().view(np.uint16))


def test_ids_outside_the_table_make_their_rows_nan(device):
    ids = np.array([0, 5, 2], np.int32)
    out = device.empty((3, 4), "float32")
    T.embed(_ids(device, ids), _f32(device, np.ones((3, 4))), _f32(device, np.zeros((3, 4))), out)
    got = out.numpy()
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
    losses = device.empty((2,), "float32")
    x = device.upload(np.zeros((2, 4), np.float16))
    T.cross_entropy(x, _ids(device, np.array([1, 9], np.int32)), losses, device.empty((2, 4)), 0.5)
    assert np.isfinite(losses.numpy()[0]) and np.isnan(losses.numpy()[1])


def test_column_sums_against_float64(device):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((130, 70)).astype(np.float32)
    out = _f32(device, np.ones(30))
    T.column_sum(_f32(device, x), out, scale=0.5, start=20, accumulate=True)
    want = 1.0 + 0.5 * x[:, 20:50].astype(np.float64).sum(0)
    res = helios.check_close(out.numpy().astype(np.float64)[None], want[None], rtol=1e-5, atol=1e-5)
    assert res.passed, res.line()


def test_adamw_as_an_operation_is_torchs(device):
    torch = pytest.importorskip("torch", reason="the oracle is torch.optim.AdamW")
    n = 3001
    rng = np.random.default_rng(11)
    p0 = rng.standard_normal(n).astype(np.float32)
    tp = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = torch.optim.AdamW([tp], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)
    p, m, v, g = _f32(device, p0), _f32(device, np.zeros(n)), _f32(device, np.zeros(n)), _f32(device, np.zeros(n))
    words = device.upload(np.zeros(2, np.int32), dtype="int32")
    copy = device.empty((n,), "bfloat16")
    for t in range(1, 4):
        gt = rng.standard_normal(n).astype(np.float32)
        tp.grad = torch.from_numpy(gt.copy())
        opt.step()
        g.copy_(gt)
        words.copy_(np.array([t, np.float32(1e-3).view(np.int32)], np.int32))
        T.adamw(p, m, v, g, words, betas=(0.9, 0.95), weight_decay=0.1, copy=copy)
        res = helios.check_close(p.numpy().astype(np.float64)[None], tp.detach().numpy().astype(np.float64)[None])
        assert res.passed, f"step {t}: {res.line()}"
    np.testing.assert_array_equal(copy.numpy(), p.numpy().astype(helios.bfloat16))


def test_int32_tensors(device):
    t = device.upload(np.array([[1, -2], [3, 2**31 - 1]], np.int64), dtype="int32")
    assert t.dtype == np.int32
    np.testing.assert_array_equal(t.numpy(), [[1, -2], [3, 2**31 - 1]])
    t.copy_(np.array([[5, 6], [7, 8]], np.uint8))
    np.testing.assert_array_equal(t.numpy(), [[5, 6], [7, 8]])
    with pytest.raises(TypeError, match="integer host data"):
        device.upload(np.ones(3, np.float32), dtype="int32")
    with pytest.raises(ValueError, match="does not fit int32"):
        device.upload(np.array([2**31]), dtype="int32")
    with pytest.raises(TypeError, match="floating-point"):
        device.upload(np.array([1, 2]))  # integers only where int32 is asked for


def test_bad_input(device):
    f = device.empty((4, 8), "float32")
    ids = _ids(device, np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="ids has dtype float32"):
        T.embed(f, f, f, f)
    with pytest.raises(ValueError, match="out has shape"):
        T.embed(ids, f, f, device.empty((3, 8), "float32"))
    with pytest.raises(ValueError, match="differ in width"):
        T.embed(ids, f, device.empty((4, 4), "float32"), f)
    with pytest.raises(TypeError, match="logits has dtype float32"):
        T.cross_entropy(f, ids, device.empty((4,), "float32"), f, 1.0)
    x = device.empty((4, 8), "bfloat16")
    with pytest.raises(TypeError, match="grad has dtype float16"):
        T.cross_entropy(x, ids, device.empty((4,), "float32"), device.empty((4, 8)), 1.0)
    with pytest.raises(TypeError, match="scale must be a real number"):
        T.cross_entropy(x, ids, device.empty((4,), "float32"), x, "1")
    with pytest.raises(ValueError, match="columns"):
        T.column_sum(f, device.empty((8,), "float32"), start=1)
    with pytest.raises(ValueError, match="grad has 4 rows"):
        T.embed_backward(_ids(device, np.zeros(3, np.int32)), f, f, None, 1)
    with pytest.raises(ValueError, match="overlaps"):
        device._train(T.EMBED, f, ids=ids, src=f, src2=f, rows=4, n=8, seq=4, table_rows=4)
    with pytest.raises(ValueError, match="pass 9"):
        device._train(9, f, src=f, rows=4, n=8)


def test_a_gradient_norm_and_clipping_as_torchs(device):
    torch = pytest.importorskip("torch", reason="the oracle is torch.nn.utils.clip_grad_norm_ with AdamW")
    rng = np.random.default_rng(13)
    sizes = (5000, 17, 9000)
    p0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    g0 = [(rng.standard_normal(n) * 0.05).astype(np.float32) for n in sizes]
    tps = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in p0]
    for tp, g in zip(tps, g0):
        tp.grad = torch.from_numpy(g.copy())
    norm = torch.nn.utils.clip_grad_norm_(tps, 1.0)
    torch.optim.AdamW(tps, lr=1e-2, foreach=False).step()
    partial = device.empty((8,), "float32")
    at = 0
    gs = [_f32(device, g) for g in g0]
    for g in gs:
        at += T.sum_squares(g, partial, at)
    words = device.upload(np.array([1, np.float32(1e-2).view(np.int32), 0], np.int32), dtype="int32")
    T.column_sum(partial[:at].reshape(at, 1), words, at=2, n=1)
    got_norm = float(np.sqrt(words.numpy()[2:].view(np.float32)[0]))
    assert abs(got_norm - float(norm)) <= 1e-5 * float(norm)
    assert float(norm) > 1.0  # the clipping applies
    for p, g, tp in zip(p0, gs, tps):
        hp = _f32(device, p)
        z = _f32(device, np.zeros_like(p))
        T.adamw(hp, z, _f32(device, np.zeros_like(p)), g, words, max_norm=1.0, norm_word=2)
        res = helios.check_close(hp.numpy().astype(np.float64)[None], tp.detach().numpy().astype(np.float64)[None])
        assert res.passed, res.line()


def test_helios_check_train_fuzzes_every_op(capsys):
    from helios.cli import main
    from helios.harness.workloads.train_fuzz import OPS

    assert main(["check", "--train", "--fuzz", str(len(OPS)), "--seed", "2", "-v", "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert all(f" {op} " in out for op in OPS), out
    assert f"{len(OPS)} passed, 0 failed" in out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_rows_ops_against_float64(device, dtype):
    """A prompt's ops row by row: the 16-bit embedding without positions (exact), rotary
    positions on the q and k heads of QKV rows, SwiGLU (each one rounding of the type)."""
    rng = np.random.default_rng(17)
    dt = helios.bfloat16 if dtype == "bfloat16" else np.float16
    ulp = 2.0**-8 if dtype == "bfloat16" else 2.0**-11
    vocab, d = 50, 24
    table16 = rng.standard_normal((vocab, d)).astype(dt)
    ids = rng.integers(0, vocab, 7).astype(np.int32)
    out = device.empty((7, d), "float32")
    T.embed(_ids(device, ids), device.upload(table16, dtype=dtype), None, out)
    np.testing.assert_array_equal(out.numpy(), table16.astype(np.float32)[ids])
    rows, heads, hd, start = 5, 3, 8, 4  # two q heads and one k head, then a v head left alone
    x = rng.standard_normal((rows, 4 * hd)).astype(dt)
    ang = rng.uniform(-3, 3, (start + rows, hd // 2))
    tab = np.concatenate([np.cos(ang), np.sin(ang)], 1).astype(np.float32)
    tx = device.upload(x, dtype=dtype)
    T.rope_rows(tx, _f32(device, tab), heads, hd, start)
    want = x.astype(np.float64).copy()
    for r in range(rows):
        c, s = tab[start + r, : hd // 2].astype(np.float64), tab[start + r, hd // 2 :].astype(np.float64)
        for h in range(heads):
            a, b = want[r, h * hd : h * hd + hd // 2].copy(), want[r, h * hd + hd // 2 : (h + 1) * hd].copy()
            want[r, h * hd : h * hd + hd // 2] = a * c - b * s
            want[r, h * hd + hd // 2 : (h + 1) * hd] = b * c + a * s
    got = tx.numpy().astype(np.float64)
    assert np.abs(got - want).max() <= ulp * np.abs(want).max() * 2
    np.testing.assert_array_equal(got[:, heads * hd :], x.astype(np.float64)[:, heads * hd :])  # v untouched
    gu = rng.standard_normal((6, 2 * 40)).astype(dt)
    o = device.empty((6, 40), dtype)
    T.swiglu_rows(device.upload(gu, dtype=dtype), o)
    g, u = gu[:, :40].astype(np.float64), gu[:, 40:].astype(np.float64)
    want = g / (1 + np.exp(-g)) * u
    assert np.abs(o.numpy().astype(np.float64) - want).max() <= ulp * np.abs(want).max() * 2
    with pytest.raises(ValueError, match="past the table"):
        T.rope_rows(tx, _f32(device, tab), heads, hd, start + 1)
    with pytest.raises(ValueError, match="even width"):
        T.swiglu_rows(device.upload(np.zeros((2, 5), dt), dtype=dtype), device.empty((2, 2), dtype))

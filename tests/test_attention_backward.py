"""The attention backward: dQ, dK, dV against float64 over odd shapes (tails on
every side, S_kv != S_q, one key), every backward variant the device offers,
causal and not, the scalar fallback and its kill switch; the forward's
log-sum-exp; bfloat16 (coop on a GPU with bf16 cooperative matrices, the fallback
elsewhere); the bad-input battery; Tensors; leaks; the bench and check CLIs. On
lavapipe the coop kernels run 8x8x8 fragments."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import attention_test_variants, cpu_default_run

import helios
from helios.attention import LSE_ATOL, random_qkv, reference_attention, reference_attention_backward
from helios.check import check_close, tolerances
from helios.cli import main

# (B, H, S_q, S_kv, d, causal)
SHAPES = [
    (1, 2, 37, 37, 32, False),
    (2, 1, 33, 50, 64, False),
    (1, 1, 41, 41, 64, True),
    (1, 1, 1, 1, 16, False),
    (2, 1, 9, 1, 32, False),
    (1, 2, 70, 70, 16, True),
]


def _inputs(b, h, s, skv, d, seed, dtype=np.float16):
    q, k, v = random_qkv(b, h, s, skv, d, seed, dtype)
    do = random_qkv(b, h, s, s, d, seed + 100, dtype)[0]
    return q, k, v, do


def _check(dev, b, h, s, skv, d, causal, variant=None, scale=None, seed=0, dtype=np.float16):
    q, k, v, do = _inputs(b, h, s, skv, d, seed, dtype)
    o, lse = dev.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    want = reference_attention_backward(q, k, v, do, causal=causal, scale=scale)
    got = dev.attention_backward(q, k, v, o, do, lse, causal=causal, scale=scale, variant=variant)
    atol, rtol = tolerances(np.dtype(dtype).name)
    for name, g, w in zip(("dq", "dk", "dv"), got, want[:3]):
        assert g.shape == w.shape and g.dtype == np.dtype(dtype), (name, g.shape, g.dtype)
        assert np.isfinite(np.asarray(g, np.float32)).all(), f"{name}: unwritten (poisoned) or non-finite"
        r = check_close(g, w, atol=atol, rtol=rtol)
        assert r.passed, f"{name} {b}x{h}x{s}x{d} S_kv={skv} causal={causal} {variant}: {r.line()}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + ("c" if s[5] else ""))
def test_default_variant_matches_float64(device, shape):
    _check(device, *shape)


@pytest.mark.parametrize("shape", SHAPES[:3], ids=lambda s: "x".join(map(str, s[:5])) + ("c" if s[5] else ""))
def test_scalar_fallback_matches_float64(device, shape):
    _check(device, *shape, variant="fa-scalar", seed=5)


def _variants(d: int) -> list[str]:
    return attention_test_variants(d, backward=True)


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", _variants(16))
def test_every_variant(device, variant):
    """Every backward variant at d=16, with query and key tails and several tiles
    each way."""
    _check(device, 1, 2, 45, 45, 16, False, variant=variant, seed=1)


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", _variants(16)[::3])
def test_variants_causal(device, variant):
    """Every third causal (each causal kernel is its own compile: CI time on a CPU device)."""
    _check(device, 1, 1, 39, 39, 16, True, variant=variant, seed=2)


@pytest.mark.every_variant
@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
def test_every_variant_gpu_head_dims(device, d):
    for var in device.attention_variants(d, backward=True):
        for causal in (False, True):
            _check(device, 2, 3, 257, 257, d, causal, variant=var, seed=d)


def test_scale_and_the_lse(device):
    """lse is the natural log-sum-exp of the scaled scores (torch's convention),
    for the coop forward and the fallback; a non-default scale reaches dQ and dK."""
    q, k, v, do = _inputs(2, 2, 29, 29, 32, 7)
    for var in (None, "fa-scalar"):
        for causal in (False, True):
            o, lse = device.attention(q, k, v, causal=causal, scale=0.3, variant=var, return_lse=True)
            assert lse.shape == (2, 2, 29) and lse.dtype == np.float32
            want = reference_attention_backward(q, k, v, do, causal=causal, scale=0.3)[3]
            np.testing.assert_allclose(lse, want, rtol=1e-5, atol=LSE_ATOL["float16"])
            assert check_close(o, reference_attention(q, k, v, causal=causal, scale=0.3))
    _check(device, 1, 2, 30, 30, 32, False, scale=2.5, seed=9)


def test_bfloat16(device):
    """bfloat16 gradients (bf16 tolerances): the coop kernels where the device has
    bf16 cooperative matrices, else the fp32 fallback (never fp16)."""
    dv = device.default_attention_variant(32, dtype="bfloat16", backward=True)
    if device.info.get("bf16_coop_enabled"):
        assert dv.startswith("fa-coop:")
    else:
        assert dv == "fa-scalar"
        coop = [x for x in device.attention_variants(32, backward=True) if x.startswith("fa-coop:")]
        if coop:  # an fp16 coop variant named for bfloat16 inputs: refused, not run in fp16
            q, k, v, do = _inputs(1, 1, 8, 8, 32, 0, helios.bfloat16)
            o, lse = device.attention(q, k, v, return_lse=True)
            with pytest.raises(helios.UnsupportedError, match="bfloat16"):
                device.attention_backward(q, k, v, o, do, lse, variant=coop[0])
    _check(device, 1, 2, 37, 37, 32, True, seed=4, dtype=helios.bfloat16)


def test_kill_switch(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP_ATTENTION_BACKWARD", "1")
    assert device.default_attention_variant(64, backward=True) == "fa-scalar"
    assert device.default_attention_variant(64) != "fa-scalar" or not device.info["cooperative_matrix"]
    q, k, v, do = _inputs(1, 1, 20, 20, 64, 3)
    o, lse = device.attention(q, k, v, return_lse=True)
    device.reset_telemetry()
    device.attention_backward(q, k, v, o, do, lse)
    t = device.telemetry()
    assert (t["attentions"], t["coop_attentions"], t["last_variant"]) == (1, 0, "fa-scalar")
    monkeypatch.setenv("HELIOS_DISABLE_COOP_ATTENTION_BACKWARD", "perhaps")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_COOP_ATTENTION_BACKWARD"):
        device.default_attention_variant(64, backward=True)


@pytest.mark.parametrize("fold", ["0", "1"])
def test_statistics_folded_and_not(device, monkeypatch, fold):
    """The coop kernels take lse and delta into their score products by default
    (HELIOS_DISABLE_ATTENTION_BWD_FOLD=0) or through an fp32 scratch (=1): both
    match float64 with tails each way, causal and not, and with scores large
    enough that lse / scale needs more than one 16-bit piece."""
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_FOLD", "1" if fold == "0" else "0")
    _check(device, 1, 2, 33, 33, 32, True, seed=11)
    _check(device, 1, 1, 25, 41, 16, False, seed=12)
    b, h, s, d = 1, 2, 27, 32
    q, k, v, do = _inputs(b, h, s, s, d, 13)
    q, k = ((np.asarray(x, np.float32) * 6.0).astype(np.float16) for x in (q, k))
    o, lse = device.attention(q, k, v, causal=True, return_lse=True)
    assert float(np.abs(lse).max()) * np.sqrt(d) > 300.0, "scores too small to need the pieces"
    want = reference_attention_backward(q, k, v, do, causal=True)
    got = device.attention_backward(q, k, v, o, do, lse, causal=True)
    for name, g, w in zip(("dq", "dk", "dv"), got, want[:3]):
        r = check_close(g, w, atol=0.05, rtol=0.02)
        assert r.passed, f"{name} large scores, fold={fold}: {r.line()}"


def test_backward_kernel_stats(device, monkeypatch):
    """The backward's two kernels' driver statistics, folded or not: a dict each
    (empty where the driver offers none), the fallback's two passes too; a variant
    the backward does not take is refused as by the backward itself."""
    for fold in ("0", "1"):
        monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_FOLD", fold)
        for var in (None, "fa-scalar"):
            stats = device.attention_kernel_stats(32, var, causal=True, backward=True)
            assert set(stats) == {"dq", "dkdv"} and all(isinstance(s, dict) for s in stats.values())
    if device.info["cooperative_matrix"]:
        with pytest.raises(helios.UnsupportedError, match="fa-coop:8x8x8:sg4:wq1:bc256"):
            device.attention_kernel_stats(32, "fa-coop:8x8x8:sg4:wq1:bc256", backward=True)


def test_fold_switch_refuses_a_bad_value(device, monkeypatch):
    if not device.default_attention_variant(32, backward=True).startswith("fa-coop:"):
        pytest.skip("the switch is read by the coop kernels only; this device runs the fallback")
    q, k, v, do = _inputs(1, 1, 8, 8, 32, 0)
    o, lse = device.attention(q, k, v, return_lse=True)
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_FOLD", "maybe")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_ATTENTION_BWD_FOLD"):
        device.attention_backward(q, k, v, o, do, lse)


@pytest.mark.gpu
def test_backward_default_follows_the_head_dim(device, monkeypatch):
    """On a GPU with 16x16x16 fragments: the measured preferences (two row tiles a subgroup
    at d <= 64; one above, eight subgroups, 32-query tiles, and with dS in registers 64-key
    tiles for the dQ kernel at 64 < d < 128)."""
    if not device.attention_variants(64, backward=True)[0].startswith("fa-coop:16"):
        pytest.skip("this GPU's cooperative-matrix shapes are not the measured ones")
    dq = ":dq64" if _ds_in_registers(device) else ""
    assert device.default_attention_variant(64, backward=True) == "fa-coop:16x16x16:sg4:wq2:bc32"
    assert device.default_attention_variant(128, backward=True) == "fa-coop:16x16x16:sg8:wq1:bc32"
    assert device.default_attention_variant(128, causal=True, backward=True) == "fa-coop:16x16x16:sg8:wq1:bc32"
    for d in (80, 96, 112):
        assert device.default_attention_variant(d, backward=True) == "fa-coop:16x16x16:sg8:wq1:bc32" + dq
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS", "1")
    assert device.default_attention_variant(96, backward=True) == "fa-coop:16x16x16:sg8:wq1:bc32"


def _ds_in_registers(device) -> bool:
    """Whether the dQ kernel may hand dS over in registers here (the conversions)."""
    return bool(device.info["cooperative_matrix"]) and bool(
        device.info["cooperative_matrix2_features"].get("conversions")
    )


def _dq_variants(device, d: int) -> list[str]:
    """The default's fragment shape with dQ key tiles of their own: as wide as the
    dK/dV kernel's query tile, twice it, and one that is neither (three fragments)."""
    base = device.default_attention_variant(d, backward=True).split(":dq")[0]
    f = helios._helios.attention_variant_fields(base)
    return [f"{base}:dq{f['bc']}", f"{base}:dq{2 * f['bc']}", f"{base}:dq{3 * f['tn']}"]


@pytest.mark.slow
def test_dq_key_tile_hands_ds_over_in_registers(device):
    """A variant with a dQ key tile of its own (`dq`) runs the dQ kernel with dS converted to
    A operands in registers and its masks on P's fragments: float64 with key tiles wider,
    equal and unequal to the dK/dV kernel's query tile, tails on every side, causal (the
    diagonal inside a tile, and a tile past a subgroup's rows) and not, S_kv != S_q. The
    head dim is a constant of the same code: a CPU device's default run takes d=16 for the
    cases at d=32 (every dQ tile is its own JIT compile there), --full and a GPU d=32."""
    if not _ds_in_registers(device):
        pytest.skip(
            "the device offers no cooperative-matrix conversions (NV cooperative matrix 2): dS goes through "
            "shared memory and a dq tile is refused (test_dq_key_tile_refusals)"
        )
    d = 16 if cpu_default_run() else 32
    for i, v in enumerate(_dq_variants(device, d)):
        _check(device, 1, 2, 45, 45, 16, False, variant=v, seed=20 + i)
        _check(device, 1, 1, 41, 41, d, True, variant=v, seed=30 + i)
        _check(device, 2, 1, 33, 50, d, False, variant=v, seed=40 + i)
    # Every score far below zero and a key tail: P of a tail key would be exp(-lse) = inf
    # unmasked (its K row is zero, and inf * 0 is NaN in dS K).
    q, k, vv, do = _inputs(1, 1, 19, 37, d, 60)
    q = (np.asarray(q, np.float32) * 0.1 + 10.0).astype(np.float16)  # scores about -100 sqrt(d)
    k = (np.asarray(k, np.float32) * 0.1 - 10.0).astype(np.float16)
    o, lse = device.attention(q, k, vv, return_lse=True)
    assert float(np.max(lse)) < -300.0, "scores not far enough below zero"
    want = reference_attention_backward(q, k, vv, do)
    for v in _dq_variants(device, d):
        got = device.attention_backward(q, k, vv, o, do, lse, variant=v)
        for name, g, w in zip(("dq", "dk", "dv"), got, want[:3]):
            r = check_close(g, w, atol=0.02, rtol=0.01)
            assert np.isfinite(np.asarray(g, np.float32)).all() and r.passed, f"{name} scores << 0, {v}: {r.line()}"


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_dq_key_tile_at_the_measured_head_dims(device, causal):
    """d=96 at the default (64-key dQ tiles where the conversions are) and d=128 with them
    named, several tiles each way with tails."""
    _check(device, 1, 2, 200, 200, 96, causal, seed=50)
    if _ds_in_registers(device):
        base = device.default_attention_variant(128, backward=True)
        _check(device, 1, 2, 200, 200, 128, causal, variant=base + ":dq64", seed=51)


def test_dq_key_tile_refusals(device, monkeypatch):
    """A dq tile is a backward matter, needs the conversions, and its switch refuses it."""
    coop = [x for x in device.attention_variants(32, backward=True) if x.startswith("fa-coop:")]
    if not coop:
        pytest.skip("this device runs the fallback: no coop variant to name a dQ tile on")
    f = helios._helios.attention_variant_fields(coop[0])
    v = f"{coop[0]}:dq{2 * f['bc']}"
    assert helios._helios.attention_variant_fields(v)["dq_bc"] == 2 * f["bc"]
    q, k, vv, do = _inputs(1, 1, 8, 8, 32, 0)
    o, lse = device.attention(q, k, vv, return_lse=True)
    with pytest.raises(helios.UnsupportedError, match="belongs to backward variants"):
        device.attention(q, k, vv, variant=v)
    with pytest.raises(helios.UnsupportedError, match=r"dq\d+.*multiple of TN and TK"):
        device.attention_backward(q, k, vv, o, do, lse, variant=f"{coop[0]}:dq{f['tn'] + 4}")
    if not _ds_in_registers(device):
        with pytest.raises(helios.UnsupportedError, match="conversions"):
            device.attention_backward(q, k, vv, o, do, lse, variant=v)
        return
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS", "1")
    with pytest.raises(helios.UnsupportedError, match="HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS"):
        device.attention_backward(q, k, vv, o, do, lse, variant=v)
    assert ":dq" not in device.default_attention_variant(96, backward=True)
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS", "0")
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_FOLD", "1")
    with pytest.raises(helios.UnsupportedError, match="HELIOS_DISABLE_ATTENTION_BWD_FOLD"):
        device.attention_backward(q, k, vv, o, do, lse, variant=v)
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_FOLD", "0")
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS", "sometimes")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_ATTENTION_BWD_DS_IN_REGISTERS"):
        device.attention_backward(q, k, vv, o, do, lse, variant=v)


@pytest.mark.slow
def test_coop_is_the_default_where_offered(device):
    if not device.info["cooperative_matrix"]:
        pytest.skip("this device offers no cooperative matrices: the fallback is the default")
    assert device.default_attention_variant(64, backward=True).startswith("fa-coop:")
    assert device.default_attention_variant(32, backward=True).startswith("fa-coop:")
    q, k, v, do = _inputs(1, 1, 20, 20, 32, 3)  # d=32: kernels the other tests compile too
    o, lse = device.attention(q, k, v, return_lse=True)
    device.reset_telemetry()
    device.attention_backward(q, k, v, o, do, lse)
    assert device.telemetry()["coop_attentions"] == 1


def test_tensors_in_and_out(device):
    """Tensor operands give Tensor gradients (written in place with grads unchanged
    on the host side); a Tensor forward returns the lse as a float32 Tensor."""
    q, k, v, do = _inputs(1, 2, 24, 24, 32, 11)
    ts = [device.upload(x) for x in (q, k, v)]
    o, lse = device.attention(*ts, causal=True, return_lse=True)
    assert isinstance(o, helios.Tensor) and isinstance(lse, helios.Tensor)
    assert lse.shape == (1, 2, 24) and lse.dtype == np.float32
    dq, dk, dv = device.attention_backward(*ts, o, device.upload(do), lse, causal=True)
    assert all(isinstance(g, helios.Tensor) for g in (dq, dk, dv))
    want = reference_attention_backward(q, k, v, do, causal=True)
    for g, w in zip((dq, dk, dv), want):
        assert check_close(g.numpy(), w)


def test_time_attention_backward(device):
    t = device.time_attention(1, 2, 33, 32, causal=True, iters=3, warmup=1, backward=True)
    assert t.backward and len(t.samples_ms) == 3 and all(x > 0 for x in t.samples_ms)
    assert t.flops == pytest.approx(2.5 * 4 * 2 * 33 * 33 * 32 / 2)
    assert t.variant == device.default_attention_variant(32, causal=True, backward=True)
    q, k, v = random_qkv(1, 2, 33, 33, 32, 0)
    do = np.random.default_rng(1).standard_normal((1, 2, 33, 32), dtype=np.float32).astype(np.float16)
    want = reference_attention_backward(q, k, v, do, causal=True)
    for g, w in zip(t.grads, want):
        assert check_close(g, w)


def _bad_cases():
    def run(dev, **over):
        q, k, v, do = _inputs(1, 2, 6, 6, 16, 0)
        o, lse = dev.attention(q, k, v, return_lse=True)
        args = {"q": q, "k": k, "v": v, "o": o, "do": do, "lse": lse}
        args.update(over)
        return dev.attention_backward(
            args["q"],
            args["k"],
            args["v"],
            args["o"],
            args["do"],
            args["lse"],
            **{x: y for x, y in args.items() if x not in ("q", "k", "v", "o", "do", "lse")},
        )

    return [
        (lambda d: run(d, do=np.ones((1, 2, 5, 16), np.float16)), ValueError, "do .* must have q's shape"),
        (lambda d: run(d, o=np.ones((1, 2, 6, 8), np.float16)), ValueError, "o .* must have q's shape"),
        (lambda d: run(d, lse=np.ones(5, np.float32)), ValueError, "lse holds 5 values"),
        (lambda d: run(d, k=np.ones((1, 2, 7, 16), np.float16)), ValueError, "must have the same shape"),
        (
            lambda d: run(d, causal=True, k=np.ones((1, 2, 7, 16), np.float16), v=np.ones((1, 2, 7, 16), np.float16)),
            helios.UnsupportedError,
            "S_q == S_kv",
        ),
        (lambda d: run(d, scale=float("nan")), ValueError, "scale must be finite"),
        (lambda d: run(d, variant="fa-coop:8x8x8:sg4:wq1:bc256"), helios.UnsupportedError, "bc256|shared memory"),
        (lambda d: run(d, variant="tile64"), ValueError, "variant"),
        (lambda d: run(d, q="q"), TypeError, "must be an array"),
        (lambda d: d.attention_variants(16, backward="yes"), TypeError, "backward"),
    ]


BAD = _bad_cases()


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input(device, case):
    fn, exc, match = BAD[case]
    with pytest.raises(exc, match=match):
        fn(device)


def test_outputs_may_not_alias_inputs(device):
    q, k, v, do = _inputs(1, 1, 8, 8, 16, 0)
    ts = [device.upload(x) for x in (q, k, v)]
    o, lse = device.attention(*ts, return_lse=True)
    tdo = device.upload(do)
    grads = (device.empty(q.shape), device.empty(k.shape), device.empty(k.shape))
    from helios.attention import run_attention_backward

    with pytest.raises(ValueError, match="does not run in place"):
        run_attention_backward(device, *ts, o, tdo, lse, grads=(ts[0], grads[1], grads[2]))
    with pytest.raises(ValueError, match="same memory"):
        run_attention_backward(device, *ts, o, tdo, lse, grads=(grads[0], grads[1], grads[1]))
    with pytest.raises(ValueError, match="lse must be a packed float32 Tensor"):
        run_attention_backward(device, *ts, o, tdo, device.empty((1, 1, 8), "float16"))


def test_no_leak_over_calls(device):
    q, k, v, do = _inputs(1, 2, 33, 33, 32, 8)
    o, lse = device.attention(q, k, v, return_lse=True)
    device.attention_backward(q, k, v, o, do, lse)
    base = device.telemetry()
    for _ in range(10):
        device.attention_backward(q, k, v, o, do, lse, causal=False)
    end = device.telemetry()
    # each call uploads its host operands into Tensors that are freed with it
    assert (end["live_buffers"], end["live_memory"]) == (base["live_buffers"], base["live_memory"])


def test_bench_backward_json(device, tmp_path):
    out = tmp_path / "bwd.json"
    rc = main(
        [
            "bench",
            "--workload=attention",
            "--backward",
            "--shapes",
            "1x2x40x32",
            "--iters",
            "2",
            "--warmup",
            "1",
            "--ref",
            "numpy",
            "--out",
            str(out),
            "--causal",
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    assert res["status"] == "ok" and res["backward"] is True and res["causal"] is True
    (row,) = res["rows"]
    assert row["shape"] == "1x2x40x32-causal-bwd" and row["valid"] and row["backward"]
    assert row["heliosTflops"] == pytest.approx(2.5 * 4 * 2 * 40 * 40 * 32 / 2 / (row["heliosMs"] * 1e-3) / 1e12)
    assert row["helios"]["check"][0]["heads_checked"] and row["helios"]["check"][0]["passed"]
    assert "x 2.5 (backward)" in res["environment"]["flops"]
    assert " backward vs numpy" in (tmp_path / "bwd.md").read_text()


def test_bench_backward_gate_failure(device, tmp_path, monkeypatch):
    """A backward whose gradients are wrong fails the gate before anything is timed."""
    import helios.harness.workloads.attention as ab

    real = ab.reference_attention_backward
    monkeypatch.setattr(ab, "reference_attention_backward", lambda *a, **k: tuple(x + 1.0 for x in real(*a, **k)))
    out = tmp_path / "bad.json"
    rc = main(
        [
            "bench",
            "--workload=attention",
            "--backward",
            "--shapes",
            "1x1x16x16",
            "--iters",
            "2",
            "--ref",
            "numpy",
            "--out",
            str(out),
        ]
    )
    assert rc != 0
    res = json.loads(out.read_text())
    assert res["status"] != "ok" and not res.get("rows")


@pytest.mark.slow
def test_check_backward_exit_codes(device, capsys):
    # the default variant: with none named the fuzz cycles every variant, each its own
    # compile on a CPU device (test_every_variant covers them)
    v = device.default_attention_variant(16, backward=True)
    argv = ["check", "--attention", "--backward", "--matrix", "none", "--fuzz", "4", "--head-dims", "16,32"]
    argv += ["--variant", v]
    assert main(argv + ["--oracle", "float64", "-v"]) == 0
    out = capsys.readouterr().out
    assert "4 passed, 0 failed (attention backward fuzz seed 0" in out and out.count("ok   #") == 4
    rc = main(argv + ["--oracle", "sdpa"])
    out = capsys.readouterr().out
    assert rc in (0, 2) and ("skipped: no CUDA oracle" in out) == (rc == 2)
    assert main(["check", "--backward"]) == 2
    assert "--backward belongs to --attention" in capsys.readouterr().err


def test_check_backward_reports_failures(device, capsys, monkeypatch):
    import helios.harness.workloads.attention_fuzz as af

    real = af.reference_attention_backward
    monkeypatch.setattr(af, "reference_attention_backward", lambda *a, **k: tuple(x * 1.5 for x in real(*a, **k)))
    rc = main(
        [
            "check",
            "--attention",
            "--backward",
            "--matrix",
            "none",
            "--fuzz",
            "2",
            "--oracle",
            "float64",
            "--head-dims",
            "16",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1 and out.count("FAIL #") == 2 and "0 passed, 2 failed" in out


def test_pass_split_for_measurement(device):
    """passes=1 / 2 record one kernel each (the sweep's time split); 3 both; 4 refused."""
    from helios.attention import run_attention_backward

    q, k, v, do = _inputs(1, 1, 20, 20, 16, 0)
    ts = [device.upload(x) for x in (q, k, v)]
    o, lse = device.attention(*ts, return_lse=True)
    tdo = device.upload(do)
    run_attention_backward(device, *ts, o, tdo, lse)  # delta for the dK/dV pass alone
    device.reset_telemetry()
    for p in (1, 2, 3):
        samples = run_attention_backward(device, *ts, o, tdo, lse, timing={"iters": 2, "passes": p})[3][0]
        assert len(samples) == 2 and all(x > 0 for x in samples)
    with pytest.raises(ValueError, match="passes must be 0..3"):
        run_attention_backward(device, *ts, o, tdo, lse, timing={"passes": 4})


def _rows_case(device, b, h, s, d, seed):
    """A QKV product's rows (B*S, 3*H*d) and an output gradient's (B*S, H*d), with
    their (B, H, S, d) views for the reference."""
    rng = np.random.default_rng(seed)
    qkv = (rng.standard_normal((b, s, 3, h, d)) / 2).astype(np.float16)
    do = rng.standard_normal((b, s, h, d)).astype(np.float16)
    q, k, v = (np.ascontiguousarray(qkv[:, :, i].transpose(0, 2, 1, 3)) for i in range(3))
    return qkv, do, (q, k, v, np.ascontiguousarray(do.transpose(0, 2, 1, 3)))


@pytest.mark.parametrize("variant", [None, "fa-scalar"], ids=["default", "scalar"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_row_layout_reads_a_qkv_product_and_writes_merged_heads(device, variant, causal):
    """layout=(heads, qkv_rs, o_rs, q_off, k_off, v_off): Q, K and V read straight out
    of one (B*S, 3*H*d) tensor, O written as (B*S, H*d) rows, dO read from such rows,
    dQ, dK and dV written into one (B*S, 3*H*d) tensor where Q, K and V lie (what
    helios.torch's decoder runs instead of layout copies); tails in S; against the
    packed float64 reference."""
    b, h, s, d = 2, 3, 21, 16
    width = h * d
    qkv, do_rows, (q, k, v, do) = _rows_case(device, b, h, s, d, 7)
    tqkv = device.upload(qkv.reshape(b * s, 3 * width))
    o, lse = device.empty((b * s, width)), device.empty((b * h, s), "float32")
    layout = (h, 3 * width, width, 0, width, 2 * width)
    scale = 1 / np.sqrt(d)
    kw = {"causal": causal, "scale": scale, "layout": layout}
    if variant:
        kw["variant"] = variant
    device._attention(tqkv, tqkv, tqkv, b * h, s, s, d, out=o, lse=lse, **kw)
    got_o = o.numpy().reshape(b, s, h, d).transpose(0, 2, 1, 3)
    r = check_close(got_o, reference_attention(q, k, v, causal=causal))
    assert r.passed, r.line()
    g = device.empty((b * s, 3 * width))
    device._attention_backward(
        tqkv, tqkv, tqkv, o, device.upload(do_rows.reshape(b * s, width)), lse, g, g, g, b * h, s, s, d, **kw
    )
    want = reference_attention_backward(q, k, v, do, causal=causal)
    got = g.numpy().reshape(b, s, 3, h, d)
    atol, rtol = tolerances("float16")
    for i, name in enumerate(("dq", "dk", "dv")):
        r = check_close(got[:, :, i].transpose(0, 2, 1, 3), want[i], atol=atol, rtol=rtol)
        assert r.passed, f"{name} {variant} causal={causal}: {r.line()}"
    np.testing.assert_allclose(lse.numpy().reshape(b, h, s), want[3], rtol=1e-5, atol=LSE_ATOL["float16"])


def test_row_layout_refusals(device):
    b, h, s, d = 1, 2, 8, 16
    width = h * d
    qkv, do_rows, _ = _rows_case(device, b, h, s, d, 8)
    t = device.upload(qkv.reshape(b * s, 3 * width))
    o, lse = device.empty((b * s, width)), device.empty((b * h, s), "float32")
    good = (h, 3 * width, width, 0, width, 2 * width)

    def fwd(layout, q=t, out=o):
        device._attention(q, t, t, b * h, s, s, d, scale=0.25, out=out, lse=lse, layout=layout)

    with pytest.raises(TypeError, match="layout must be"):
        fwd((h, 3 * width))
    with pytest.raises(ValueError, match="heads 5 must divide batch\\*heads 2"):
        fwd((5, 3 * width, width, 0, width, 2 * width))
    with pytest.raises(ValueError, match="qkv_rs 36 must be a multiple of 8"):
        fwd((h, 36, width, 0, 0, 0))
    with pytest.raises(ValueError, match="o_rs 16 must be a multiple of 8 and hold the 2 x 16 heads"):
        fwd((h, 3 * width, 16, 0, width, 2 * width))
    with pytest.raises(ValueError, match="v_off 80 must be a multiple of 8 with its 32 heads inside a row"):
        fwd((h, 3 * width, width, 0, width, 80))
    with pytest.raises(ValueError, match="offsets need a row layout"):
        fwd((h, 0, 0, 0, width, 0))
    with pytest.raises(ValueError, match="a row layout takes tensors"):
        fwd(good, q=qkv.reshape(b * s, 3 * width))
    with pytest.raises(ValueError, match="tensor q holds"):
        fwd(good, q=device.upload(qkv.reshape(b * s, 3 * width)[:, :width].copy()))
    fwd(good)
    g = device.empty((b * s, 3 * width))
    tdo = device.upload(do_rows.reshape(b * s, width))
    with pytest.raises(ValueError, match="dq and dk are the same memory"):  # their columns overlap
        device._attention_backward(
            t, t, t, o, tdo, lse, g, g, g, b * h, s, s, d, scale=0.25, layout=(h, 3 * width, width, 0, 8, 2 * width)
        )

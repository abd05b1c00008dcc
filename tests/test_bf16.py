"""bfloat16: products and attention against float64 on every path the device
offers for it (bf16 cooperative matrices where the device has them, the scalar
fp32 kernels elsewhere), the refusals where it has none, the kill switch, and
bfloat16 Tensors. On lavapipe (no VK_KHR_shader_bfloat16) the coop tests say why
they are skipped and the fallback and refusal tests run; on the H100 both run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import rand

import helios
from helios.check import check_close, reference_matmul, tolerances
from helios.cli import main

BF16 = helios.bfloat16
ATOL, RTOL = tolerances("bfloat16")


def bf16(shape, seed):
    return rand(shape, seed, np.float32).astype(BF16)


def bf16_variants(device) -> list[str]:
    """Every matmul variant valid for bfloat16 here (scalar at least)."""
    out = []
    for v in device.variants():
        try:
            out.append(device.check_variant(v, "bfloat16"))
        except helios.UnsupportedError:
            pass
    return out


def coop_or_skip(device):
    why = device.info["bf16_coop_unavailable"]
    if why:
        pytest.skip(f"no bfloat16 cooperative-matrix kernels here: {why}")


def test_info_says_where_bf16_runs(device):
    info = device.info
    assert isinstance(info["bf16_cooperative_matrix"], bool)
    assert info["bf16_coop_enabled"] == (info["bf16_coop_unavailable"] is None)
    dflt = device.default_variant(512, 512, 512, dtype="bfloat16")
    assert dflt.startswith("coop:" if info["bf16_coop_enabled"] else "scalar:")
    if info["bf16_coop_enabled"]:  # the fragment shape is one the table offers for bf16
        rows = info["cooperative_matrix_properties"]
        assert any(r["a"] == "bf16" and r["c"] == "f32" for r in rows)


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 47, 29), (64, 64, 64), (5, 128, 40), (130, 70, 257)])
@pytest.mark.parametrize("out", ["bfloat16", "float32"])
def test_matmul_every_bf16_variant_vs_float64(device, shape, out):
    m, n, k = shape
    a, b = bf16((m, k), 1), bf16((k, n), 2)
    want = reference_matmul(a, b)
    for v in bf16_variants(device):
        c = device.matmul(a, b, out_dtype=out, variant=v)
        assert c.dtype == np.dtype(out) and c.shape == (m, n)
        r = check_close(c, want, atol=ATOL, rtol=RTOL)
        assert r, f"{v} {shape} -> {out}: {r.line()}"


def test_bf16_keeps_float32_range(device):
    """Values past float16's range (65504) multiply correctly: bfloat16 is never
    carried through float16."""
    a = np.full((16, 32), 3.0e4, np.float32).astype(BF16)
    b = np.full((32, 24), 4.0e3, np.float32).astype(BF16)
    c = device.matmul(a, b, out_dtype="float32")
    want = reference_matmul(a, b)
    assert np.all(np.isfinite(c)) and check_close(c, want, atol=ATOL, rtol=RTOL)
    c16 = device.matmul(a, b)
    assert c16.dtype == BF16 and np.all(np.isfinite(c16.astype(np.float64)))


def test_layouts_batches_and_epilogue(device):
    a, b = bf16((3, 40, 24), 3), bf16((24, 56), 4)
    bias = rand((56,), 5, np.float32)
    got = device.matmul(a, b, bias=bias, activation="relu", alpha=0.5)
    want = np.maximum(0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + bias, 0.0)
    assert got.dtype == BF16 and check_close(got, want, atol=ATOL, rtol=RTOL)
    at = bf16((24, 40), 6)
    got = device.matmul(at, b, trans_a=True, out_dtype="float32")
    assert check_close(got, reference_matmul(at.T, b), atol=ATOL, rtol=RTOL)
    c = bf16((40, 56), 7)
    got = device.matmul(a[0], b, c=c, beta=2.0)
    want = reference_matmul(a[0], b) + 2.0 * c.astype(np.float64)
    assert check_close(got, want, atol=ATOL, rtol=RTOL)


def test_float32_inputs_round_to_bf16_beside_a_bf16_operand(device):
    a = rand((20, 30), 8, np.float32)
    b = bf16((30, 10), 9)
    got = device.matmul(a, b)
    assert got.dtype == np.float32  # a float32 input: float32 out (NumPy's result type)
    assert check_close(got, reference_matmul(a.astype(BF16), b), atol=ATOL, rtol=RTOL)


def test_mixed_16_bit_inputs_are_refused(device):
    with pytest.raises(TypeError, match="mix float16 and bfloat16"):
        device.matmul(bf16((4, 4), 1), rand((4, 4), 2))
    with pytest.raises(ValueError, match="one of bfloat16, float32"):
        device.matmul(bf16((4, 4), 1), bf16((4, 4), 2), out_dtype="float16")
    t = device.upload(rand((4, 4), 3))  # a float16 Tensor is never converted in place
    with pytest.raises(TypeError, match="mix float16 and bfloat16"):
        device.matmul(t, bf16((4, 4), 2))


def test_tensors_and_chains(device):
    x = bf16((48, 64), 10)
    t = device.upload(x)
    assert t.dtype == BF16 and np.array_equal(t.numpy().view(np.uint16), x.view(np.uint16))
    r = device.upload(rand((3, 5), 11, np.float32), dtype="bfloat16")
    assert r.numpy().dtype == BF16
    np.testing.assert_array_equal(
        r.numpy().view(np.uint16), rand((3, 5), 11, np.float32).astype(BF16).view(np.uint16)
    )  # rounded once, to nearest even, as ml_dtypes rounds
    w = device.upload(bf16((64, 32), 12))
    w2 = device.prepack(bf16((32, 16), 13))
    assert w2.dtype == BF16
    with device.chain() as ch:
        h = ch.matmul(t, w, activation="gelu")
        y = ch.matmul(h, w2)
    assert y.dtype == BF16
    h_ref = device.matmul(x, w.numpy(), activation="gelu")
    assert check_close(y.numpy(), reference_matmul(h_ref, w2.numpy()), atol=ATOL, rtol=RTOL)
    with pytest.raises(BufferError, match="exportable=True"):
        t.__dlpack__()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_attention_every_bf16_variant_vs_float64(device, causal, d):
    q, k, v = (bf16((1, 2, 70, d), s) for s in (20, 21, 22))
    want = helios.reference_attention(q, k, v, causal=causal)
    variants = device.attention_variants(d, dtype="bfloat16")
    assert any(x == "fa-scalar" for x in variants)
    for var in variants:
        o = device.attention(q, k, v, causal=causal, variant=var)
        assert o.dtype == BF16
        r = check_close(o, want, atol=ATOL, rtol=RTOL)
        assert r, f"{var} d={d} causal={causal}: {r.line()}"


def test_coop_bf16_refused_where_absent(device):
    why = device.info["bf16_coop_unavailable"]
    if why is None:
        pytest.skip("this device runs bfloat16 on cooperative matrices (the refusal cannot happen)")
    coop = [v for v in device.variants() if v.startswith("coop:")]
    if not coop:
        pytest.skip("no coop variants here at all")
    with pytest.raises(helios.UnsupportedError, match="no bfloat16 cooperative-matrix kernels") as e:
        device.check_variant(coop[0], "bfloat16")
    assert why in str(e.value)
    assert device.default_attention_variant(64, dtype="bfloat16") == "fa-scalar"
    with pytest.raises(helios.UnsupportedError, match="bfloat16"):
        device.matmul(bf16((8, 8), 1), bf16((8, 8), 2), variant=coop[0])


def test_bf16_runs_on_cooperative_matrices_where_offered(device):
    coop_or_skip(device)
    v = device.default_variant(1024, 1024, 1024, dtype="bfloat16")
    assert v.startswith("coop:") and "acc=f32" in v
    assert device.default_attention_variant(128, dtype="bfloat16").startswith("fa-coop:")
    assert device.kernel_stats(v, in_dtype="bfloat16") is not None
    with pytest.raises(helios.UnsupportedError, match="f16 inputs|bfloat16"):
        device.check_variant(v.replace("acc=f32", "acc=f16"), "bfloat16")


def test_kill_switch_sends_bf16_to_the_scalar_path(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_BF16_COOP", "1")
    with helios.Device() as dev:
        assert dev.info["bf16_coop_enabled"] is False
        assert dev.default_variant(256, 256, 256, dtype="bfloat16").startswith("scalar:")
        a, b = bf16((40, 24), 1), bf16((24, 16), 2)
        assert check_close(dev.matmul(a, b), reference_matmul(a, b), atol=ATOL, rtol=RTOL)
        # float16 is untouched by the switch
        assert dev.default_variant(256, 256, 256) == device.default_variant(256, 256, 256)


def test_bench_bfloat16_end_to_end(device, tmp_path):
    out = tmp_path / "bf16.json"
    rc = main(
        [
            "bench",
            "--dtype=bfloat16",
            "--shapes=64x64x64,33x17x129",
            "--iters=3",
            "--warmup=1",
            "--checkShape=64x64x64",
            "--ref=numpy",
            f"--out={out}",
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["dtype"] == "bfloat16" and data["out_dtype"] == "bfloat16" and data["check"]["passed"]
    assert data["rtol"] == RTOL
    assert all(r["valid"] and r["roofFraction"] is None for r in data["rows"])
    try:
        import jsonschema
    except ImportError:
        return
    schema = json.loads(
        (__import__("pathlib").Path(__file__).parent.parent / "docs/reference/helios-bench-1.schema.json").read_text()
    )
    jsonschema.validate(data, schema)


def test_check_fuzzes_bfloat16(device, capsys):
    assert main(["check", "--fuzz", "10", "--dtype", "bfloat16", "--max-dim", "150", "--seed", "3"]) == 0
    text = capsys.readouterr().out
    assert "bfloat16 inputs:" in text and f"rtol={RTOL}" in text and "10 passed, 0 failed" in text
    rc = main(
        ["check", "--attention", "--matrix", "none", "--fuzz", "4", "--dtype", "bfloat16", "--max-seq", "80"]
        + ["--oracle", "float64"]
    )
    assert rc == 0
    assert "Helios bfloat16 in/out" in capsys.readouterr().out

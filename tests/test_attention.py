"""Attention: the flash-attention forward against float64 over odd shapes, every
variant the device offers, causal and not; the fallback and its kill switch; the
API's bad-input battery; Tensors; timing; the bench workload and the fuzz CLI.
On lavapipe the coop kernel runs 8x8x8 fragments; on a GPU its own shapes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import attention_test_variants, head_dims_under_test

import helios
from helios.attention import LSE_ATOL, random_qkv, reference_attention
from helios.check import check_close, tolerances
from helios.cli import main
from helios.flops import attention_flops

# (B, H, S_q, S_kv, d, causal): tails on every side, S_kv != S_q, one row, one key.
SHAPES = [
    (1, 2, 37, 37, 64, False),
    (2, 1, 50, 70, 32, False),
    (1, 1, 33, 33, 64, True),
    (1, 2, 100, 100, 32, True),
    (1, 1, 1, 1, 64, False),
    (2, 2, 9, 1, 32, False),
    (1, 1, 130, 130, 16, True),
]


def _check(dev, b, h, s, skv, d, causal, variant=None, scale=None, seed=0):
    q, k, v = random_qkv(b, h, s, skv, d, seed)
    out = dev.attention(q, k, v, causal=causal, variant=variant, scale=scale)
    assert out.shape == (b, h, s, d) and out.dtype == np.float16
    assert np.isfinite(out).all(), "unwritten (poisoned) or non-finite output"
    r = check_close(out, reference_attention(q, k, v, causal=causal, scale=scale))
    assert r.passed, f"{b}x{h}x{s}x{d} S_kv={skv} causal={causal} {variant}: {r.line()}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:5])) + ("c" if s[5] else ""))
def test_default_variant_matches_float64(device, shape):
    _check(device, *shape)


def _variants(d: int) -> list[str]:
    return attention_test_variants(d)


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", _variants(16))
def test_every_variant(device, variant):
    """Every variant at d=16 (a short compile on lavapipe), with key and query tails
    and several key tiles; causal on the same shape."""
    _check(device, 1, 2, 45, 45, 16, False, variant=variant, seed=1)


@pytest.mark.every_variant
@pytest.mark.parametrize("variant", _variants(16)[::4] + ["fa-scalar"])
def test_variants_causal(device, variant):
    _check(device, 2, 1, 61, 61, 16, True, variant=variant, seed=2)


@pytest.mark.every_variant
@pytest.mark.gpu
@pytest.mark.parametrize("d", [64, 128])
def test_every_variant_gpu_head_dims(device, d):
    """On a GPU: every variant at the head dims the anchors use, causal and not."""
    for var in device.attention_variants(d):
        for causal in (False, True):
            _check(device, 2, 3, 257, 257, d, causal, variant=var, seed=d)


@pytest.mark.gpu
def test_long_context_sampled(device):
    b, h, s, d = 1, 4, 2048, 128
    q, k, v = random_qkv(b, h, s, s, d, 5)
    rows = np.arange(0, s, 97)
    for causal in (False, True):
        out = device.attention(q, k, v, causal=causal)
        assert np.isfinite(out).all()
        r = check_close(out[:, :, rows], reference_attention(q, k, v, causal=causal, rows=rows))
        assert r.passed, r.line()


def test_scale_and_fallback_head_dims(device):
    _check(device, 1, 2, 21, 30, 64, False, scale=0.37)
    for d in (1, 7, 40, 100):  # not all multiples of the coop shapes: the fallback where needed
        _check(device, 1, 1, 19, 23, d, False)
    assert device.default_attention_variant(7) == "fa-scalar"


@pytest.mark.parametrize("scale", [None, 1.0, 3.0])
def test_running_max_keeps_moving(device, scale):
    """Scores that grow along the keys move every row's running max tile after
    tile (the lazy rescale's slow path), with large logits."""
    q, k, v = random_qkv(1, 2, 90, 150, 32, 5)
    ramp = (np.arange(150) / 150.0 * 6).astype(np.float32)[None, None, :, None]
    k = (k.astype(np.float32) + ramp * q.astype(np.float32).mean(axis=2, keepdims=True)).astype(np.float16)
    for var in (device.default_attention_variant(32), "fa-scalar"):
        out = device.attention(q, k, v, scale=scale, variant=var)
        assert check_close(out, reference_attention(q, k, v, scale=scale)).passed, var
        outc = device.attention(q, k[:, :, :90], v[:, :, :90], causal=True, scale=scale, variant=var)
        assert check_close(outc, reference_attention(q, k[:, :, :90], v[:, :, :90], causal=True, scale=scale)).passed, (
            var
        )


def _lse_reference(q: np.ndarray, k: np.ndarray, causal: bool) -> np.ndarray:
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(k.shape[2])[None, :] > np.arange(q.shape[2])[:, None], -np.inf, s)
    mx = s.max(axis=-1, keepdims=True)
    return (mx + np.log(np.exp(s - mx).sum(axis=-1, keepdims=True)))[..., 0]


@pytest.mark.parametrize("path", ["rows", "fold", "scratch"])
def test_softmax_paths_match_float64(device, monkeypatch, path):
    """The coop forward's three softmax paths: the rows in registers through the
    accumulator's probed layout (the default where the layout allows it), the running
    max folded into the score product with tiles' softmax on the fragments where it can
    (HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS=1), and every tile through the fp32
    scratch (both switches set). Each matches float64, output and log-sum-exp: tails
    each way, causal and not; scores large enough that the max needs all three 16-bit
    pieces; and maxima that grow late in the row, so that tiles leave the fast path
    after it was taken."""
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS", "0" if path == "rows" else "1")
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_FOLD", "1" if path == "scratch" else "0")
    _check(device, 1, 2, 70, 70, 32, True, seed=21)
    _check(device, 1, 1, 37, 90, 16, False, seed=22)
    q, k, v = random_qkv(1, 2, 150, 150, 32, 23)
    big = [(np.asarray(x, np.float32) * 6.0).astype(np.float16) for x in (q, k)]
    # keys growing along the row: later tiles' scores exceed the earlier max by more
    # than fp16's range (several whole key tiles on any device's fragments)
    ramp = np.linspace(0.5, 10.0, 150, dtype=np.float32)[None, None, :, None]
    late = (np.asarray(k, np.float32) * ramp).astype(np.float16)
    # every score of every row far below zero (about -300 in log2 units): a row's first
    # maximum must not rescale its (empty) sums by 2^300 (inf times 0: NaN)
    low = [(np.abs(np.asarray(x, np.float32)) * sign * 8.0).astype(np.float16) for x, sign in ((q, 1.0), (k, -1.0))]
    cases = ((big[0], big[1], "large scores"), (q, late, "late maxima"), (low[0], low[1], "scores far below zero"))
    for qq, kk, what in cases:
        for causal in (False, True):
            out, lse = device.attention(qq, kk, v, causal=causal, return_lse=True)
            r = check_close(out, reference_attention(qq, kk, v, causal=causal))
            assert r.passed, f"{what}, causal={causal}, {path}: {r.line()}"
            r = check_close(lse, _lse_reference(qq, kk, causal), atol=LSE_ATOL["float16"], rtol=1e-5)
            assert r.passed, f"lse, {what}, causal={causal}, {path}: {r.line()}"
    assert float(np.abs(lse).max()) > 0  # lse of the last case was read, not a placeholder


@pytest.mark.parametrize(
    "switch",
    [
        "HELIOS_DISABLE_ATTENTION_FOLD",
        "HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS",
        "HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS",
    ],
)
def test_softmax_switches_refuse_a_bad_value(device, monkeypatch, switch):
    q, k, v = random_qkv(1, 1, 8, 8, 32, 0)
    coop = device.default_attention_variant(32).startswith("fa-coop:")
    monkeypatch.setenv(switch, "maybe")
    if not coop:
        device.attention(q, k, v)  # the fallback does not read it
        pytest.skip("the switch is read by the coop kernel only; this device runs the fallback")
    with pytest.raises(ValueError, match=switch):
        device.attention(q, k, v)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_p_in_registers_matches_float64(device, monkeypatch, dtype):
    """Where the device has NV cooperative matrix 2's conversions, the rows path at d <= 128
    hands P to P V as A operands converted in registers (HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS=1:
    through shared memory, as everywhere else): a kernel of its own (its binary differs),
    and both match float64 at d=64 and d=128 (d=128 with --full on a CPU device), causal and
    not, with tails, large scores and maxima that grow late in the row."""
    if not device.info["cooperative_matrix2_features"].get("conversions"):
        pytest.skip(
            "the device offers no cooperative-matrix conversions (NV cooperative matrix 2): P goes through shared memory"
        )
    if dtype == "bfloat16" and device.info.get("bf16_coop_unavailable"):
        pytest.skip(f"no bfloat16 cooperative kernels here: {device.info['bf16_coop_unavailable']}")
    dt = np.float16 if dtype == "float16" else helios.bfloat16
    binaries = []
    for off in ("1", "0"):
        monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS", off)
        binaries.append(device.attention_kernel_stats(64, causal=True, dtype=dtype).get("Binary Size"))
        dims = head_dims_under_test((64, 128))
        for b, h, s, skv, d, causal, seed in (
            (1, 2, 150, 150, 64, True, 31),
            (1, 2, 70, 133, 64, False, 32),
            (1, 2, 200, 200, 128, True, 33),
            (1, 2, 90, 170, 128, False, 34),
        ):
            if d not in dims:
                continue
            q, k, v = random_qkv(b, h, s, skv, d, seed)
            ramp = np.linspace(0.5, 6.0, skv, dtype=np.float32)[None, None, :, None]
            k = np.asarray(k, np.float32) * ramp  # late maxima, large scores
            q, k, v = (np.asarray(x, np.float32).astype(dt) for x in (q, k, v))
            out = device.attention(q, k, v, causal=causal)
            atol, rtol = tolerances(dtype)
            r = check_close(
                np.asarray(out, np.float32), reference_attention(q, k, v, causal=causal), atol=atol, rtol=rtol
            )
            assert r.passed, f"{b}x{h}x{s}x{d} S_kv={skv} causal={causal} {dtype} switch={off}: {r.line()}"
    assert binaries[0] is None or binaries[0] != binaries[1], binaries


def test_accumulator_layouts_are_reported(device):
    """Each f16 -> f32 cooperative-matrix shape's probed accumulator layout: where the
    rows can stay in registers, slots a power of two and the row-sharing lanes a mask
    within the subgroup; where not, the reason. lavapipe's 8x8 fragments (lane l holds
    column l, element i row i) must allow it: CI runs the register path there."""
    info = device.info
    layouts = info["accumulator_layouts"]
    if not info["cooperative_matrix_enabled"]:
        assert layouts == []
        return
    shapes = [s["shape"] for s in layouts]
    assert len(shapes) == len(set(shapes)) and shapes
    for s in layouts:
        if s["rows_in_registers"]:
            assert s["slots"] & (s["slots"] - 1) == 0 and 0 <= s["lanes"] < info["subgroup_size"], s
            assert s["why"] is None
        else:
            assert s["why"], s
    if "llvmpipe" in info["name"]:
        assert {"shape": "8x8x8", "rows_in_registers": True, "slots": 8, "shift": 0, "lanes": 7, "why": None} in layouts


def test_kernel_stats(device):
    stats = device.attention_kernel_stats(64)
    digest = stats.pop("code_digest")  # the SPIR-V and constants the driver was given
    assert isinstance(digest, str) and len(digest) == 16 and int(digest, 16) >= 0
    assert isinstance(stats, dict) and all(isinstance(v, float) for v in stats.values())
    assert device.attention_kernel_stats(64, causal=True)["code_digest"] != digest  # another kernel
    assert device.attention_kernel_stats(64, "fa-scalar", causal=True) is not None
    with pytest.raises(helios.UnsupportedError):
        device.attention_kernel_stats(64, "fa-coop:8x8x8:sg4:wq1:bc256")


def test_kill_switch(device, monkeypatch):
    monkeypatch.setenv("HELIOS_DISABLE_COOP_ATTENTION", "1")
    assert device.default_attention_variant(64) == "fa-scalar"
    q, k, v = random_qkv(1, 1, 20, 20, 64, 3)
    device.reset_telemetry()
    device.attention(q, k, v)
    t = device.telemetry()
    assert (t["attentions"], t["coop_attentions"], t["last_variant"]) == (1, 0, "fa-scalar")
    monkeypatch.setenv("HELIOS_DISABLE_COOP_ATTENTION", "maybe")
    with pytest.raises(ValueError, match="HELIOS_DISABLE_COOP_ATTENTION"):
        device.default_attention_variant(64)


def test_coop_is_the_default_where_offered(device):
    if not device.info["cooperative_matrix"]:
        pytest.skip("this device offers no cooperative matrices: the fallback is the default")
    assert device.default_attention_variant(64).startswith("fa-coop:")
    q, k, v = random_qkv(1, 1, 20, 20, 64, 3)
    device.reset_telemetry()
    device.attention(q, k, v)
    assert device.telemetry()["coop_attentions"] == 1


def test_float32_inputs_and_torch_cpu(device):
    q, k, v = (x.astype(np.float32) for x in random_qkv(1, 2, 17, 17, 32, 4))
    out = device.attention(q, k, v)
    assert check_close(
        out, reference_attention(q.astype(np.float16), k.astype(np.float16), v.astype(np.float16))
    ).passed
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_numpy(x.astype(np.float16)) for x in (q, k, v))
    assert np.array_equal(device.attention(tq, tk, tv), out)


def test_tensors_in_and_out(device):
    q, k, v = random_qkv(2, 2, 40, 40, 32, 6)
    want = device.attention(q, k, v, causal=True)
    tq, tk, tv = (device.upload(x) for x in (q, k, v))
    t = device.attention(tq, tk, tv, causal=True)
    assert isinstance(t, helios.Tensor) and t.shape == q.shape
    assert np.array_equal(t.numpy(), want)
    out = device.empty(q.shape)
    assert device.attention(tq, tk, tv, causal=True, out=out) is out
    assert np.array_equal(out.numpy(), want)
    with pytest.raises(ValueError, match="in place"):
        device.attention(tq, tk, tv, out=tq)


def test_module_function_and_time_attention(device):
    q, k, v = random_qkv(1, 2, 24, 24, 32, 7)
    assert np.array_equal(helios.attention(q, k, v, device=device), device.attention(q, k, v))
    t = device.time_attention(1, 2, 24, 32, iters=3, warmup=1, inputs=(q, k, v))
    assert len(t.samples_ms) == 3 and all(x > 0 for x in t.samples_ms) and t.batch_ms > 0
    assert t.variant == device.default_attention_variant(32, 24)
    assert t.flops == attention_flops(1, 2, 24, 24, 32) == 4 * 2 * 24 * 24 * 32
    assert check_close(t.output, reference_attention(q, k, v)).passed
    tc = device.time_attention(1, 1, 16, 32, causal=True, iters=2, warmup=0)
    assert tc.flops == attention_flops(1, 1, 16, 16, 32) / 2


BAD = [
    (
        lambda d, q, k, v: d.attention(q[0], k, v),
        ValueError,
        r"q must be 4-D \(B, H, S, d\) or, as torch SDPA's unbatched form, 3-D \(N, S, d\), got shape \(2, 5, 16\)",
    ),
    (
        lambda d, q, k, v: d.attention(q, np.concatenate([k, k]), np.concatenate([v, v])),
        ValueError,
        "must agree on B, H and d",
    ),
    (lambda d, q, k, v: d.attention(q, k[:, :1], v[:, :1]), ValueError, "must agree on B, H and d"),
    (lambda d, q, k, v: d.attention(q, k[..., :8], v[..., :8]), ValueError, "must agree on B, H and d"),
    (lambda d, q, k, v: d.attention(q, k, v[:, :, :3]), ValueError, "same shape"),
    (lambda d, q, k, v: d.attention(q.astype(np.int32), k, v), TypeError, "dtype int32"),
    (
        lambda d, q, k, v: d.attention(q, k[:, :, :4], v[:, :, :4], causal=True),
        helios.UnsupportedError,
        "causal masking needs S_q == S_kv",
    ),
    (lambda d, q, k, v: d.attention(q, k, v, scale=float("nan")), ValueError, "scale must be finite"),
    (lambda d, q, k, v: d.attention(q, k, v, scale="0.1"), TypeError, "scale must be a real number"),
    (lambda d, q, k, v: d.attention(q, k, v, variant="fa-coop:16x16"), ValueError, "malformed attention variant"),
    (
        # d=64: 256-key tiles need 73 KB of shared memory (at d=16 they fit beside P in registers)
        lambda d, q, k, v: d.attention(*random_qkv(1, 1, 5, 5, 64, 0), variant="fa-coop:8x8x8:sg4:wq1:bc256"),
        helios.UnsupportedError,
        "fa-coop:8x8x8:sg4:wq1:bc256",
    ),
    (
        lambda d, q, k, v: d.attention(q, k, v, variant="fa-coop:48x48x48:sg4:wq1:bc48"),
        helios.UnsupportedError,
        "48x48x48",
    ),
    (lambda d, q, k, v: d.attention(q[:, :, :0], k, v), ValueError, "every dimension must be >= 1"),
    (
        lambda d, q, k, v: d.attention(
            np.ones((1, 1, 2, 300), np.float16),
            np.ones((1, 1, 2, 300), np.float16),
            np.ones((1, 1, 2, 300), np.float16),
        ),
        helios.UnsupportedError,
        "head dimension 300",
    ),
    (lambda d, q, k, v: d.attention(q, k, v, out=np.empty_like(q)), ValueError, "out must be a float16 Tensor"),
    (lambda d, q, k, v: d.attention("q", k, v), TypeError, "must be an array"),
    (lambda d, q, k, v: d.time_attention(1, 1, 8, 16, iters=0), ValueError, "iters must be in 1"),
    (lambda d, q, k, v: d.attention_variants(0), ValueError, "head_dim must be in 1"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_input(device, case):
    fn, exc, match = BAD[case]
    q, k, v = random_qkv(1, 2, 5, 6, 16, 0)
    with pytest.raises(exc, match=match):
        fn(device, q, k, v)


def test_closed_and_other_device(device):
    q, k, v = random_qkv(1, 1, 8, 8, 16, 0)
    with helios.Device() as other:
        tq = other.upload(q)
        with pytest.raises(ValueError, match="another Device"):
            device.attention(tq, device.upload(k), device.upload(v))
    d2 = helios.Device()
    d2.close()
    with pytest.raises(helios.DeviceClosedError):
        d2.attention(q, k, v)


def test_no_leak_over_calls(device):
    q, k, v = random_qkv(1, 2, 33, 33, 32, 8)
    device.attention(q, k, v)
    base = device.telemetry()
    for _ in range(20):
        device.attention(q, k, v, causal=True)
    end = device.telemetry()
    assert (end["live_buffers"], end["live_memory"], end["device_bytes"]) == (
        base["live_buffers"],
        base["live_memory"],
        base["device_bytes"],
    )


# ---- the CLI: bench workload and fuzz -------------------------------------------


def test_bench_attention_json(device, tmp_path, capsys):
    out = tmp_path / "attn.json"
    rc = main(
        [
            "bench",
            "--workload=attention",
            "--shapes",
            "1x2x40x32,2x1x33x16",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--warmup-ms",
            "0",
            "--repeats",
            "2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr()
    r = json.loads(out.read_text())
    assert (r["schema"], r["workload"], r["status"]) == ("helios-bench/1", "attention", "ok")
    assert r["check"]["fails"] == 0 and len(r["check"]["cases"]) >= 4  # both head dims, causal and not
    assert [x["shape"] for x in r["rows"]] == ["1x2x40x32", "2x1x33x16"]
    row = r["rows"][0]
    assert row["valid"] and row["heliosMs"] > 0 and row["referenceMs"] > 0 and row["referenceBackend"]
    # a CPU reference's backend is never the seeds' cudaBackend (it was "numpy" there)
    assert (row["cudaBackend"] is None) == (r["reference"] == "numpy")
    for key in (
        "mean_ms",
        "median_ms",
        "std_ms",
        "min_ms",
        "max_ms",
        "p95_ms",
        "p99_ms",
        "gflops",
        "bandwidth_gbs",
        "queries_per_s",
    ):
        assert row["helios"][key] > 0 or key == "std_ms", key
    assert len(row["helios"]["samples_ms"]) == 2 and len(row["helios"]["samples_ms"][0]) == 3
    assert row["helios"]["check"][0]["passed"] and row["helios"]["check"][0]["all_finite"]
    if not r["cuda"].get("gpu"):
        assert r["reference"] == "numpy" and "NOT CUDA" in r["cuda"]["label"]
    md = out.with_suffix(".md").read_text()
    assert "| 1x2x40x32 |" in md and "variants:" in md
    # the bench's JSON compares like a matmul bench's
    assert main(["compare", str(out), str(out)]) == 0


def test_bench_attention_runs_are_recorded_per_round(device, tmp_path, capsys):
    """--runs reaches the attention workload (it was once dropped there): each run its own
    clock ramp, every round labelled with its run on both sides, as the matmul bench's."""
    out = tmp_path / "runs.json"
    args = ["bench", "--workload=attention", "--shapes", "1x2x40x32", "--iters", "2", "--warmup", "1"]
    rc = main(args + ["--warmup-ms", "0", "--repeats", "2", "--runs", "2", "--out", str(out)])
    assert rc == 0, capsys.readouterr()
    r = json.loads(out.read_text())
    assert r["runs"] == 2 and len(r["clock_warmups"]) == 2
    row = r["rows"][0]
    assert row["helios"]["round_runs"] == [0, 0, 1, 1] == row["cuda"]["round_runs"]
    assert len(row["helios"]["samples_ms"]) == 4
    capsys.readouterr()
    assert main(["compare", str(out), str(out)]) == 0
    assert "| 2x2 / 2x2 |" in capsys.readouterr().out  # two runs of two rounds each, a side


def test_bench_attention_causal_and_cold(device, tmp_path):
    out = tmp_path / "c.json"
    assert (
        main(
            [
                "bench",
                "--workload=attention",
                "--causal",
                "--flush-l2",
                "--shapes",
                "1x1x24x16",
                "--iters",
                "2",
                "--warmup",
                "0",
                "--warmup-ms",
                "0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    row = r["rows"][0]
    assert row["shape"] == "1x1x24x16-causal" and row["causal"] and row["valid"]
    assert r["flush_l2"] and r["flush_bytes"] > 0  # cold mode: both sides flush before each sample


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--workload=attention", "--shapes", "1x2x3"],
        ["bench", "--workload=attention", "--ref", "torch"],
        ["bench", "--workload=attention", "--sdpa-backends", "flash,turbo"],
        ["bench", "--causal", "--shapes", "16x16x16"],
        ["bench", "--ref", "sdpa", "--shapes", "16x16x16"],
    ],
)
def test_bench_attention_usage_errors(device, argv, capsys):
    assert main(argv) == 2
    assert "error" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cpu", "discrete_gpu"])
def test_the_fuzz_keeps_to_small_head_dims_on_a_cpu_device(kind):
    """On a CPU device the fuzz draws d <= 64 unless head dims are named (each d is
    minutes of JIT there); a GPU draws every head dim. A stand-in device records them."""
    from helios.harness.workloads.attention_fuzz import CPU_HEAD_DIMS, HEAD_DIMS, attention_fuzz

    seen: set[int] = set()

    class Dev:
        info = {"device_type": kind}

        def attention_variants(self, d, dtype, backward):
            return ["fa-scalar"]

        def attention(self, q, k, v, causal, scale, variant):
            seen.add(q.shape[3])
            return reference_attention(q, k, v, causal=causal, scale=scale).astype(q.dtype)

    assert all(c.passed for c in attention_fuzz(Dev(), 40, 1, matrix=False, max_seq=24))
    assert seen == set(CPU_HEAD_DIMS if kind == "cpu" else HEAD_DIMS)
    seen.clear()
    assert all(c.passed for c in attention_fuzz(Dev(), 3, 1, matrix=False, max_seq=24, head_dims=(80,)))
    assert seen == {80}


def test_check_attention_exit_codes(device, capsys):
    argv = [
        "check",
        "--attention",
        "--matrix",
        "none",
        "--fuzz",
        "4",
        "--max-seq",
        "40",
        "--seed",
        "3",
        "--head-dims",
        "16,32",
    ]  # each head dim is a JIT compile on a CPU driver
    rc = main(argv + ["--oracle", "float64"])
    out = capsys.readouterr().out
    assert rc == 0 and "4 passed, 0 failed" in out and "environment:" in out
    rc = main(argv)
    out = capsys.readouterr().out
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    assert rc == (0 if cuda else 2), out
    if not cuda:
        assert "skipped: no CUDA oracle" in out
    assert main(argv + ["--oracle", "float64", "--variant", "fa-scalar"]) == 0


def test_check_attention_reports_failures(device, capsys, monkeypatch):
    """A wrong kernel is caught: exit 1 and the failing case named."""
    import helios.harness.workloads.attention_fuzz as af

    real = af.reference_attention
    monkeypatch.setattr(af, "reference_attention", lambda *a, **kw: real(*a, **kw) + 0.5)
    assert (
        main(
            [
                "check",
                "--attention",
                "--matrix",
                "none",
                "--fuzz",
                "2",
                "--max-seq",
                "20",
                "--oracle",
                "float64",
                "--head-dims",
                "16",
            ]
        )
        == 1
    )
    assert "FAIL #0" in capsys.readouterr().out


@pytest.mark.gpu
def test_check_attention_grid_gpu(device, capsys):
    assert main(["check", "--attention", "--fuzz", "20"]) == 0, capsys.readouterr().out


@pytest.mark.gpu
def test_default_follows_the_shape(device, monkeypatch):
    """On a GPU with 16x16x16 and 16x8x16 fragments: the measured preferences."""
    if not device.attention_variants(64)[0].startswith("fa-coop:16"):
        pytest.skip("this GPU's cooperative-matrix shapes are not the measured ones")
    if device.info["cooperative_matrix2_features"].get("conversions"):
        # P in registers too (its scratch freed): 64-key tiles; one row tile a subgroup
        # causal at d <= 64 (32-key tiles) and at d = 128 (eight subgroups)
        assert device.default_attention_variant(64, 128) == "fa-coop:16x16x16:sg4:wq2:bc64"
        assert device.default_attention_variant(64, 4096) == "fa-coop:16x16x16:sg4:wq2:bc64"
        assert device.default_attention_variant(64, 4096, causal=True) == "fa-coop:16x16x16:sg4:wq1:bc32"
        assert device.default_attention_variant(128, 4096) == "fa-coop:16x16x16:sg8:wq1:bc64"
        assert device.default_attention_variant(128, 4096, causal=True) == "fa-coop:16x16x16:sg8:wq1:bc64"
        # between: two row tiles still fit without a mask (16 keys), causal as at d=128
        assert device.default_attention_variant(96, 2048) == "fa-coop:16x16x16:sg4:wq2:bc16"
        assert device.default_attention_variant(96, 2048, causal=True) == "fa-coop:16x16x16:sg8:wq1:bc64"
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_P_IN_REGISTERS", "1")  # as measured before it
    assert device.default_attention_variant(64, 128) == "fa-coop:16x16x16:sg4:wq2:bc32"
    # d <= 64, rows in registers (or the running max folded): 32-key tiles and 16x16x16
    # fragments, causal too; causal d=128 with its rows in registers takes 16x16x16 too
    assert device.default_attention_variant(64, 4096) == "fa-coop:16x16x16:sg4:wq2:bc32"
    assert device.default_attention_variant(64, 4096, causal=True) == "fa-coop:16x16x16:sg4:wq2:bc32"
    assert device.default_attention_variant(128, 4096) == "fa-coop:16x16x16:sg4:wq2:bc16"
    assert device.default_attention_variant(128, 4096, causal=True) == "fa-coop:16x16x16:sg4:wq2:bc16"
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_ROWS_IN_REGISTERS", "1")  # the fold's, as measured before
    assert device.default_attention_variant(64, 4096, causal=True) == "fa-coop:16x16x16:sg4:wq2:bc32"
    assert device.default_attention_variant(128, 4096, causal=True) == "fa-coop:16x8x16:sg4:wq2:bc16"
    monkeypatch.setenv("HELIOS_DISABLE_ATTENTION_FOLD", "1")  # the unfolded kernel's preferences
    assert device.default_attention_variant(64, 4096) == "fa-coop:16x16x16:sg4:wq2:bc16"
    assert device.default_attention_variant(64, 4096, causal=True) == "fa-coop:16x8x16:sg4:wq2:bc16"


def test_unbatched_inputs_as_torch_sdpa_takes_them(device):
    """(N, S, d) host arrays are SDPA's unbatched form: one batch of N heads, O (N, S, d)."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((3, 40, 32)).astype(np.float16) for _ in range(3))
    o3 = device.attention(q, k, v, is_causal=True)
    o4 = device.attention(q[None], k[None], v[None], is_causal=True)
    assert o3.shape == (3, 40, 32) and o3.dtype == np.float16
    np.testing.assert_array_equal(o3, o4[0])

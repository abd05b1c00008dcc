"""Helios (default and each seed switch), torch.cuda and cuBLASLt over shapes.
The benchmark statistics are GPU time (see gpuclock.py)."""
from __future__ import annotations

import numpy as np
import pytest

import helios
from conftest import WARMUP_MS, clocks_up, inputs, np_check, rounds, tflops
from helios.device import warmup_launches
from gpuclock import CLOCK, replay
from helios.gpustate import gpu_state, low_clock

# The seeds' switches, each as an implementation of its own.
SWITCHES = {
    "default": {},
    "direct_load": {"HELIOS_COOP_DIRECT_LOAD": "1"},
    "f16_accum": {"HELIOS_COOP_F16_ACCUM": "1"},
    "sg2x2": {"HELIOS_COOP_F16IN_SUBGROUP_TILES": "2x2"},
    "tile16x16x16": {"HELIOS_COOP_TILE": "16x16x16"},
}


def _finish(benchmark, shape, extra):
    med_ms = benchmark.stats.stats.median * 1e3
    benchmark.extra_info.update(extra)
    st = extra.get("gpu_state") or {}
    benchmark.extra_info["low_clock"] = low_clock(st.get("before"), st.get("after"))
    benchmark.extra_info["tflops"] = tflops(shape, med_ms)
    benchmark.extra_info["gpu_time_source"] = extra.get("gpu_time_source")


@pytest.mark.benchmark(group="matmul", timer=CLOCK, disable_gc=True)
@pytest.mark.parametrize("impl", list(SWITCHES))
def test_helios(benchmark, dev, shape, impl, flush_bytes, monkeypatch):
    for k, v in SWITCHES[impl].items():
        monkeypatch.setenv(k, v)
    try:
        variant = dev.default_variant()
    except helios.UnsupportedError as e:
        pytest.skip(f"switch {impl} not available on {dev.info['name']}: {e}")
    m, n, k = shape
    a, b = inputs(shape)
    if "acc=f16" in variant:
        # fp16 accumulation cannot meet the gate on random normals: check it exactly on
        # small integers (every partial sum exact in fp16), time it on the normals.
        ai = np.sign(a).astype(np.float16)
        bi = np.sign(b).astype(np.float16)
        c = dev.matmul(ai, bi, out_dtype="float32", variant=variant)
        ok = bool(np.array_equal(c, ai.astype(np.float32) @ bi.astype(np.float32)))
        check = {"kind": "exact small integers", "passed": ok}
    else:
        check = {"kind": "float64 rows + finite",
                 **np_check(dev.matmul(a, b, out_dtype="float16", variant=variant), a, b)}
    assert check["passed"], f"{variant} failed its check on {shape}: {check}"
    ramp = clocks_up(dev)
    before = gpu_state()
    r, w = rounds(dev)
    est = dev.time_matmul(m, n, k, iters=2, warmup=1, variant=variant, inputs=(a, b))
    w = warmup_launches(est.median_ms, w, WARMUP_MS)
    t = dev.time_matmul(m, n, k, iters=r, warmup=w, variant=variant, inputs=(a, b), flush_bytes=flush_bytes)
    replay(benchmark, t.samples_ms)
    _finish(benchmark, shape, {"impl": f"helios:{impl}", "variant": variant, "check": check,
                               "device": dev.info["name"], "gpu_state": {"before": before, "after": gpu_state()}, "clock_warmup": ramp,
                               "flush_bytes": flush_bytes, "warmup_launches": w,
                               "gpu_time_source": "vulkan timestamps"})


@pytest.mark.cuda
@pytest.mark.benchmark(group="matmul", timer=CLOCK, disable_gc=True)
def test_torch(benchmark, dev, shape, flush_bytes):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda is not available")
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = inputs(shape)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.matmul(ta, tb)
    check = {"kind": "float64 rows + finite", **np_check(tc.cpu().numpy(), a, b)}
    assert check["passed"], check
    flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda") if flush_bytes else None
    ramp = clocks_up(dev)
    before = gpu_state()
    r, w = rounds(dev)
    s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s0.record()
    torch.matmul(ta, tb, out=tc)
    e0.record()
    e0.synchronize()
    for _ in range(warmup_launches(s0.elapsed_time(e0), w, WARMUP_MS)):
        torch.matmul(ta, tb, out=tc)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(r)]
    from helios.reference import torch_block
    torch_block(torch, r)                 # enqueue ahead: no host gaps inside the samples
    for i, (s, e) in enumerate(events):   # back to back, one sync: as helios bench times it
        if flush is not None:
            flush.fill_(i & 0xff)
        s.record()
        torch.matmul(ta, tb, out=tc)
        e.record()
    torch.cuda.synchronize()
    replay(benchmark, [s.elapsed_time(e) for s, e in events])
    _finish(benchmark, shape, {"impl": "torch", "variant": None, "check": check,
                               "device": torch.cuda.get_device_name(0),
                               "gpu_state": {"before": before, "after": gpu_state()}, "clock_warmup": ramp,
                               "flush_bytes": flush_bytes, "gpu_time_source": "cuda events"})


@pytest.mark.cuda
@pytest.mark.benchmark(group="matmul", timer=CLOCK, disable_gc=True)
def test_cublas(benchmark, dev, shape, flush_bytes):
    try:
        from helios import _cublas
    except ImportError:
        pytest.skip("helios._cublas was not built (no CUDA toolkit at build time)")
    a, b = inputs(shape)
    c, _, _ = _cublas.matmul(a, b)
    check = {"kind": "float64 rows + finite", **np_check(c, a, b)}
    assert check["passed"], check
    ramp = clocks_up(dev)
    before = gpu_state()
    r, w = rounds(dev)
    _, est, _ = _cublas.matmul(a, b, 1, 2)
    _, samples, _ = _cublas.matmul(a, b, warmup_launches(min(est), w, WARMUP_MS), r, flush_bytes)
    replay(benchmark, samples)
    _finish(benchmark, shape, {"impl": "cublas", "variant": None, "check": check,
                               "device": _cublas.info()["gpu"],
                               "gpu_state": {"before": before, "after": gpu_state()}, "clock_warmup": ramp,
                               "flush_bytes": flush_bytes, "gpu_time_source": "cuda events"})

"""Helios (default and each seed switch), torch.cuda and cuBLASLt over shapes.
The benchmark statistics are GPU time (see gpuclock.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import WARMUP_MS, clocks_up, inputs, np_check, rounds, tflops
from gpuclock import CLOCK, replay

import helios
from helios.harness.protocol.gpustate import gpu_state, low_clock
from helios.matmul_timing import warmup_launches

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
        check = {
            "kind": "float64 rows + finite",
            **np_check(dev.matmul(a, b, out_dtype="float16", variant=variant), a, b),
        }
    assert check["passed"], f"{variant} failed its check on {shape}: {check}"
    ramp = clocks_up(dev)
    before = gpu_state()
    r, w = rounds(dev)
    est = dev.time_matmul(m, n, k, iters=2, warmup=1, variant=variant, inputs=(a, b))
    w = warmup_launches(est.median_ms, w, WARMUP_MS)
    t = dev.time_matmul(m, n, k, iters=r, warmup=w, variant=variant, inputs=(a, b), flush_bytes=flush_bytes)
    replay(benchmark, t.samples_ms)
    _finish(
        benchmark,
        shape,
        {
            "impl": f"helios:{impl}",
            "variant": variant,
            "check": check,
            "device": dev.info["name"],
            "gpu_state": {"before": before, "after": gpu_state()},
            "clock_warmup": ramp,
            "flush_bytes": flush_bytes,
            "warmup_launches": w,
            "gpu_time_source": "vulkan timestamps",
        },
    )


@pytest.mark.cuda
@pytest.mark.benchmark(group="matmul", timer=CLOCK, disable_gc=True)
@pytest.mark.parametrize("ref_name", ["torch", "cublas"])
def test_reference(benchmark, dev, shape, ref_name, flush_bytes):
    """The CUDA references through helios.harness.workloads.references: the very code helios bench uses."""
    from helios.harness.workloads.references import make_reference

    try:
        ref = make_reference(ref_name, dev.info["uuid"])
    except RuntimeError as e:
        pytest.skip(str(e))
    a, b = inputs(shape)
    ramp = clocks_up(dev)
    before = gpu_state()
    r, w = rounds(dev)
    est = ref.time(a, b, 2, 1)
    t = ref.time(a, b, r, warmup_launches(float(np.median(est.samples_ms)), w, WARMUP_MS), flush_bytes)
    check = {"kind": "float64 rows + finite", **np_check(t.output, a, b)}
    assert check["passed"], check
    replay(benchmark, t.samples_ms)
    meta = ref.metadata()
    _finish(
        benchmark,
        shape,
        {
            "impl": ref_name,
            "variant": None,
            "check": check,
            "device": meta["gpu"],
            "label": meta["label"],
            "batch_ms": t.batch_ms,
            "batch_mode": t.batch_mode,
            "gpu_state": {"before": before, "after": gpu_state()},
            "clock_warmup": ramp,
            "flush_bytes": flush_bytes,
            "gpu_time_source": "cuda events",
        },
    )

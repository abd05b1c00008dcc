"""The attention workload of `helios bench --workload=attention` in the
pytest-benchmark suite: Helios's flash-attention forward (GPU timestamps) and
each torch SDPA backend (CUDA events), each output checked against float64
(sampled rows, all finite) before its samples are replayed as rounds.
Sizes: 1x2x64x64 on a CPU Vulkan device; the baseline 32x8x512x64 and
1x32x4096x128 on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import WARMUP_MS, rounds
from gpuclock import CLOCK, replay

from helios.attention import random_qkv, reference_attention
from helios.check import check_close
from helios.flops import attention_flops
from helios.harness.protocol.gpustate import gpu_state, low_clock, ramp_clocks
from helios.harness.workloads.sdpa import BACKENDS
from helios.matmul_timing import warmup_launches

CPU_SHAPES = [(1, 2, 64, 64)]
GPU_SHAPES = [(32, 8, 512, 64), (1, 32, 4096, 128)]


def pytest_generate_tests(metafunc):
    if "attn_shape" in metafunc.fixturenames:
        from conftest import device

        try:
            gpu = device().info["device_type"] != "cpu"
        except Exception:  # no device: the dev fixture skips, saying why
            gpu = False
        shapes = GPU_SHAPES if gpu else CPU_SHAPES
        metafunc.parametrize("attn_shape", shapes, ids=["x".join(map(str, s)) for s in shapes])


def _inputs(shape):
    b, h, s, d = shape
    q, k, v = random_qkv(b, h, s, s, d, seed=s + d)
    rows = np.arange(0, s, max(1, s // 16))[:16]
    return q, k, v, rows, reference_attention(q, k, v, rows=rows)


def _checked(out, rows, want) -> dict:
    r = check_close(out[:, :, rows], want)
    d = r.as_dict()
    d["all_finite"] = bool(np.isfinite(out).all())
    d["passed"] = r.passed and d["all_finite"]
    return d


@pytest.mark.benchmark(group="attention", timer=CLOCK, disable_gc=True)
@pytest.mark.parametrize("impl", ["helios"] + [f"sdpa_{b}" for b in BACKENDS])
def test_attention(benchmark, dev, attn_shape, impl):
    b, h, s, d = attn_shape
    q, k, v, rows, want = _inputs(attn_shape)
    r, w = rounds(dev)
    before = gpu_state()
    if impl == "helios":
        ramp = ramp_clocks(lambda: dev.time_attention(b, h, s, d, iters=20, warmup=0, inputs=(q, k, v)))
        est = dev.time_attention(b, h, s, d, iters=2, warmup=1, inputs=(q, k, v))
        t = dev.time_attention(
            b, h, s, d, iters=r, warmup=warmup_launches(est.median_ms, w, WARMUP_MS), inputs=(q, k, v)
        )
        samples, out, variant, source = t.samples_ms, t.output, t.variant, "vulkan timestamps"
    else:
        from helios.harness.workloads.sdpa import SdpaReference

        try:
            ref = SdpaReference(dev.info["uuid"])
        except (ImportError, RuntimeError) as e:
            pytest.skip(f"{impl}: no CUDA reference here ({e})")
        backend = impl[len("sdpa_") :]
        if backend == "math" and s > 1024:
            pytest.skip("sdpa_math: the unfused reference at long context is not a timing of interest")
        ramp = {"done": False, "reason": "SDPA warms with its own launches"}
        est = ref.run(q, k, v, causal=False, scale=1.0 / np.sqrt(d), backend=backend, iters=2, warmup=1)
        if est.timing is None:
            pytest.skip(f"{impl}: the backend refused this shape ({est.error})")
        run = ref.run(
            q,
            k,
            v,
            causal=False,
            scale=1.0 / np.sqrt(d),
            backend=backend,
            iters=r,
            warmup=warmup_launches(float(np.median(est.timing.samples_ms)), w, WARMUP_MS),
        )
        samples, out, variant, source = run.timing.samples_ms, run.output, backend, "cuda events"
    chk = _checked(out, rows, want)
    assert chk["passed"], chk
    replay(benchmark, samples)
    med = float(np.median(samples))
    after = gpu_state()
    gflops = attention_flops(b, h, s, s, d) / (med * 1e-3) / 1e9
    benchmark.extra_info.update(
        impl=f"attention:{impl}",
        variant=variant,
        check=chk,
        shape="x".join(map(str, attn_shape)),
        device=dev.info["name"] if impl == "helios" else ref.metadata().get("gpu"),
        gflops=gflops,
        tflops=gflops / 1e3,
        gpu_time_source=source,
        flush_bytes=0,
        gpu_state={"before": before, "after": after},
        low_clock=low_clock(before, after),
        clock_warmup=ramp,
    )

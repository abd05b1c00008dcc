"""The MLP block of `helios suite mlp` (y = gelu(x@W1+b1)@W2+b2) in the
pytest-benchmark suite: Helios as one chain on prepacked resident weights, torch
eager and torch.compile on CUDA. Each adapter passes the suite's gate before its
GPU samples (timestamps / CUDA events, one per forward) are replayed as rounds.
Sizes: tokens=32, d=64, hidden=256 on a CPU Vulkan device; 2048 x 4096 x 14336
on a GPU."""

from __future__ import annotations

import pytest
from conftest import rounds
from gpuclock import CLOCK, replay

from helios.harness.workloads import mlp


def _config(dev) -> tuple[mlp.MlpConfig, int]:
    cpu = dev.info["device_type"] == "cpu"
    r, w = rounds(dev)
    tokens, d, h = (32, 64, 256) if cpu else (2048, 4096, 14336)
    return mlp.MlpConfig(tokens=[tokens], d_model=d, hidden=h, iters=r, warmup=w), tokens


@pytest.mark.benchmark(group="mlp", timer=CLOCK, disable_gc=True)
@pytest.mark.parametrize("adapter", ["helios", "torch_eager", "torch_compile"])
def test_mlp(benchmark, dev, adapter):
    cfg, tokens = _config(dev)
    wl = mlp.make_workload(tokens, cfg.d_model, cfg.hidden, cfg.seed)
    if adapter == "helios":
        row = mlp.run_helios(dev, wl, cfg)
    else:
        row = mlp.run_torch(wl, cfg, adapter == "torch_compile", dev.info["uuid"])
        if row["status"].startswith("skipped"):
            pytest.skip(f"{adapter}: {row['status']}")
    assert row["status"] == "ok", row
    replay(benchmark, row["samples_ms"])
    st = row.get("gpu_state") or {}
    benchmark.extra_info.update(
        impl=f"mlp:{adapter}",
        variant=row.get("variants"),
        check=row["check"],
        device=dev.info["name"] if adapter == "helios" else row.get("gpu"),
        gpu_state=st,
        tflops=row["tflops"],
        low_clock=row["low_clock"],
        flush_bytes=0,
        clock_warmup=row.get("clock_warmup"),
        gpu_time_source="vulkan timestamps" if adapter == "helios" else "cuda events",
        tokens=tokens,
        d_model=cfg.d_model,
        hidden=cfg.hidden,
        throughput_tokens_per_sec=row["throughput_tokens_per_sec"],
        peak_memory_bytes=row["peak_memory_bytes"],
    )

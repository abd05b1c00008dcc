"""`helios bench --workload=attention`: seeds 003/004's attention suite in the
matmul bench's protocol. Per shape: a gate (every variant that will be timed,
against float64, on a fixed small case) before anything is timed; then rounds
that time Helios (GPU timestamps) and every torch SDPA backend (CUDA events),
alternating which goes first; every timed output is checked (sampled rows vs
float64, all finite); statistics per side; the GPU state around each round.
Rows keep helios-bench/1's fields (shape, heliosMs, cudaMs, ...: `helios
compare` reads them) with the seeds' metrics beside them. Without CUDA the
reference is numpy on the CPU, labelled NOT CUDA. --backward times the backward instead (dQ, dK, dV from an
untimed forward's O and log-sum-exp; torch's side: autograd.grad through each
SDPA backend's backward), checked on sampled heads against float64."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..._helios import MAX_LAUNCHES, attention_variant_fields
from ...attention import random_qkv, reference_attention, reference_attention_backward
from ...check import check_close
from ...flops import attention_backward_bytes, attention_backward_flops, attention_bytes, attention_flops, tflops
from ...roof import roof_fraction
from ..protocol.energy import row_energy
from ..protocol.gpustate import low_clock, throttled
from ..protocol.rounds import (
    ProtocolConfig,
    Workload,
)
from ..protocol.stats import bootstrap_ratio_ci, summarize
from ..results.rows import BenchRow, reference_fields, reference_ms
from ..results.schema import to_row
from .attention_refs import make_reference
from .attention_sides import AttentionSides
from .bench import helios_side, run_workload

WORKLOAD = "attention"
GATE_SHAPE = (2, 2, 97, 64)  # odd S: tails on every side; small enough for the float64 reference


def shape_label(shape: tuple[int, int, int, int], causal: bool, backward: bool = False) -> str:
    """'BxHxSxd[-causal][-bwd]': a backward row never compares with a forward one."""
    return "x".join(str(x) for x in shape) + ("-causal" if causal else "") + ("-bwd" if backward else "")


@dataclass
class AttnBenchConfig(ProtocolConfig):
    """helios bench --workload=attention: the protocol's settings (dtype: Q, K, V and
    O), the shapes, the mask, the SDPA backends and the direction."""

    shapes: list[tuple[int, int, int, int]]
    causal: bool = False
    backends: tuple[str, ...] = ("flash", "cudnn", "efficient", "math")  # ref: auto, sdpa or numpy
    backward: bool = False  # time dQ, dK, dV instead of O


def _seed_metrics(stats: dict, shape: tuple[int, int, int, int], causal: bool, backward: bool = False) -> dict:
    """The seeds' metrics from a side's statistics: latency figures, GFLOP/s
    (4*B*H*S^2*d, halved when causal; x2.5 for a backward), GB/s (Q, K, V, O once;
    a backward's eight tensors and the log-sum-exp) and queries/s."""
    b, h, s, d = shape
    flops = (attention_backward_flops if backward else attention_flops)(b, h, s, s, d, causal)
    moved = (attention_backward_bytes if backward else attention_bytes)(b, h, s, s, d)
    med = stats["median"]
    std = stats["cv"] * stats["mean"]
    return {
        "mean_ms": stats["mean"],
        "median_ms": med,
        "std_ms": std,
        "min_ms": stats["min"],
        "max_ms": stats["max"],
        "p95_ms": stats["p95"],
        "p99_ms": stats["p99"],
        "gflops": flops / (med * 1e-3) / 1e9,
        "bandwidth_gbs": moved / (med * 1e-3) / 1e9,
        "queries_per_s": b * h * s / (med * 1e-3),
    }


def run_attention_bench(
    cfg: AttnBenchConfig, *, progress: Optional[bool] = None, log: Callable[[str], None] = lambda s: None
) -> dict:
    """Run the protocol over attention shapes; returns the helios-bench/1 dict."""
    return run_workload(AttentionWorkload(cfg), progress=progress, log=log)


class AttentionWorkload:
    """The attention workload of the bench's driver (bench.py): BxHxSxd shapes, the
    variant per shape (given or the default for its d and S), every SDPA backend
    opposite (NumPy without CUDA), forward or backward."""

    def __init__(self, cfg: AttnBenchConfig) -> None:
        self.cfg = cfg
        self.label = lambda x: shape_label(x, cfg.causal, cfg.backward)
        self.backends: list[str] = list(cfg.backends)  # numpy alone where the reference is not CUDA

    def check_config(self) -> None:
        if self.cfg.dtype not in ("float16", "bfloat16"):
            raise ValueError(f"attention bench dtype {self.cfg.dtype!r}: float16 or bfloat16")

    def header(self) -> dict:
        cfg = self.cfg
        return {
            "workload": WORKLOAD,
            "causal": cfg.causal,
            "backward": cfg.backward,
            "environment": {
                "dtype": cfg.dtype,
                "tf32": False,
                "scale": "1/sqrt(d)",
                "layout": "(B, H, S, d) contiguous",
                "flops": "4*B*H*S^2*d (halved when causal)" + (" x 2.5 (backward)" if cfg.backward else ""),
            },
        }

    def reference(self, uuid: str) -> Any:
        return make_reference(self.cfg.ref, uuid)

    def choose(self, dev: Any) -> dict:
        cfg, dt, bwd = self.cfg, self.cfg.dtype, self.cfg.backward
        return {
            s: (
                dev._attention_variants(s[3], cfg.variant, dtype=dt, backward=bwd)[0]
                if cfg.variant
                else dev.default_attention_variant(s[3], s[2], cfg.causal, dtype=dt, backward=bwd)
            )
            for s in cfg.shapes
        }

    def variant_fields(self, dev: Any, chosen: dict, ref: Any) -> tuple[dict, dict]:
        self.backends = list(self.cfg.backends) if ref.is_cuda else ["numpy"]
        return {"variants": sorted(set(chosen.values()))}, {"backends": self.backends}

    def gate(self, dev: Any, chosen: dict, atol: float, rtol: float,
             log: Callable[[str], None]) -> tuple[dict, str, str, str]:  # fmt: skip
        """A case with tails on every side, causal and not, for every variant that will be timed."""
        gate = _gate(self.cfg, dev, chosen, atol, rtol, log)
        return gate, "x".join(map(str, GATE_SHAPE[:3])) + "xd", "cases", "attention gate failed: {cases}"

    def rounds(self, dev: Any, ref: Any, chosen: dict, flush: int, tol: tuple[float, float],
               log: Callable[[str], None]) -> Workload:  # fmt: skip
        sides = AttentionSides(self.cfg, dev, ref, chosen, self.backends, flush, tol, self.label, log)
        return Workload(self.cfg.shapes, sides.new_slot, sides.sides, self.label, sides.clock_work)

    def row(self, shape: tuple[int, int, int, int], slot: dict, variant: str, ref: Any) -> dict:
        return _row(shape, slot, variant, self.cfg.causal, ref, self.cfg.backward)

    def roof_fraction(self, info: dict, row: dict) -> Optional[float]:
        """fa-coop:TMxTNxTK... runs f16 x f16 -> f32 fragments (the roof measures f16 only)."""
        return _roof_fraction(info, row)

    def kernel_stats(self, dev: Any, row: dict) -> dict:
        cfg = self.cfg
        return dev.attention_kernel_stats(
            row["head_dim"], row["variant"], cfg.causal, cfg.dtype, cfg.backward, machine_code=True
        )

    def energy(self, dev: Any, counter: Any, shape: tuple[int, int, int, int], row: dict, ref: Any) -> dict:
        return _energy(dev, counter, self.cfg, shape, row, ref)


def _gate(cfg: AttnBenchConfig, dev: Any, chosen: dict, atol: float, rtol: float, log: Callable[[str], None]) -> dict:
    """Every variant that will be timed against float64 on GATE_SHAPE at each head
    dimension, causal and not: {case label: CheckResult}."""
    gate = {}
    dt, bwd = cfg.dtype, cfg.backward
    for d in sorted({s[3] for s in cfg.shapes}):
        b, h, s, _ = GATE_SHAPE
        q, k, v = random_qkv(b, h, s, s, d, seed=cfg.seed + 7919, dtype=dt)
        do = random_qkv(b, h, s, s, d, seed=cfg.seed + 7920, dtype=dt)[0]
        for causal in (False, True):
            if bwd:
                want = np.concatenate([x.ravel() for x in reference_attention_backward(q, k, v, do, causal=causal)[:3]])
            else:
                want = reference_attention(q, k, v, causal=causal)
            for var in sorted({chosen[x] for x in cfg.shapes if x[3] == d}):
                if bwd:
                    o, lse = dev.attention(q, k, v, causal=causal, return_lse=True)
                    got = dev.attention_backward(q, k, v, o, do, lse, causal=causal, variant=var)
                    r = check_close(np.concatenate([g.ravel() for g in got]), want, atol=atol, rtol=rtol)
                else:
                    o = dev.attention(q, k, v, causal=causal, variant=var)
                    r = check_close(o, want, atol=atol, rtol=rtol)
                gate[f"{b}x{h}x{s}x{d}{'-causal' if causal else ''} {var}"] = r
                log(f"check {b}x{h}x{s}x{d} causal={causal} {var}: {r.line()} -> {'PASS' if r.passed else 'FAIL'}")
    return gate


def _energy(dev: Any, counter: Any, cfg: AttnBenchConfig, shape: tuple[int, int, int, int], row: dict, ref) -> dict:
    """The row's energy windows (protocol/energy.py): the timed shape's inputs, its variant, and
    the SDPA backend that was the row's reference."""
    (b, h, s, d), si, bwd = shape, list(cfg.shapes).index(shape), cfg.backward
    qkv = random_qkv(b, h, s, s, d, seed=cfg.seed + si, dtype=cfg.dtype)
    do = random_qkv(b, h, s, s, d, seed=cfg.seed + si + 104729, dtype=cfg.dtype)[0] if bwd else None
    grad_kw = {"backward": True, "grad_output": do} if bwd else {}
    kw = {"causal": cfg.causal, "warmup": 0}

    def helios(n: int) -> None:
        dev.time_attention(b, h, s, d, iters=n, variant=row["variant"], inputs=qkv, dtype=cfg.dtype, **kw, **grad_kw)

    def reference(n: int) -> None:
        run = ref.run_backward if bwd else ref.run
        run(*qkv, *([do] if bwd else []), scale=1.0 / np.sqrt(d), backend=row["referenceBackend"], iters=n, **kw)

    flops = (attention_backward_flops if bwd else attention_flops)(b, h, s, s, d, cfg.causal)
    return row_energy(
        counter, (helios, row["heliosMs"]), (reference, reference_ms(row)), ref.is_cuda, flops, MAX_LAUNCHES
    )


def _roof_fraction(info: dict, row: dict) -> Optional[float]:
    f = attention_variant_fields(row["variant"])
    if f["path"] != "fa-coop":
        return None
    return roof_fraction(info, row["variant"], row.get("heliosTflops"), {**f, "acc": "f32"})


def _row(shape: tuple[int, int, int, int], s: dict, variant: str, causal: bool, ref, backward: bool = False) -> dict:
    b, h, sq, d = shape
    flops = (attention_backward_flops if backward else attention_flops)(b, h, sq, sq, d, causal)
    hs = summarize([x for r in s["h"] for x in r])
    valid = all(c["passed"] for c in s["hchk"])
    per_backend = {}
    for be, runs in s["r"].items():
        if be in s["err"] or not runs:
            per_backend[be] = {"available": False, "error": s["err"].get(be, "not run")}
            continue
        st = summarize([x for r in runs for x in r])
        ok = all(c["passed"] for c in s["rchk"][be])
        per_backend[be] = {
            "available": True,
            "valid": ok,
            "stats": st,
            **_seed_metrics(st, shape, causal, backward),
            "samples_ms": runs,
            "batch_ms": s["rb"][be],
            "batch_mode": s["mode"].get(be),
            "check": s["rchk"][be],
        }
    usable = {be: x for be, x in per_backend.items() if x["available"] and x["valid"]}
    best = min(usable, key=lambda be: usable[be]["stats"]["median"]) if usable else None
    states = [st[w] for st in s["state"] for w in ("before", "after")]
    cuda_ms = usable[best]["stats"]["median"] if best else None
    hmed = hs["median"]
    ci = (
        bootstrap_ratio_ci([x for r in s["r"][best] for x in r], [x for r in s["h"] for x in r])
        if best and valid
        else None
    )
    return to_row(
        BenchRow(
            shape=shape_label(shape, causal, backward),
            batch=b,
            heads=h,
            seq=sq,
            head_dim=d,
            causal=causal,
            backward=backward,
            heliosMs=hmed if valid else None,
            heliosTflops=tflops(flops, hmed) if valid else None,
            **reference_fields(ref.is_cuda, cuda_ms, flops),
            # the seeds' cudaBackend only where the reference ran on CUDA (null for NumPy, whose
            # time is never labelled CUDA); referenceBackend always
            cudaBackend=best if ref.is_cuda else None,
            referenceBackend=best,
            speedup=cuda_ms / hmed if valid and cuda_ms else None,
            speedup_ci95=list(ci) if ci else None,
            valid=valid,
            throttled=throttled(*states),
            low_clock=low_clock(*states),
            variant=variant,
            reference=ref.name,
            helios=helios_side(
                hs, s, [float(np.median(r)) for r in s["h"]], **_seed_metrics(hs, shape, causal, backward)
            ),
            cuda={
                "backend": best,
                "samples_ms": usable[best]["samples_ms"] if best else [],
                "batch_ms": usable[best]["batch_ms"] if best else [],
                "round_medians_ms": [float(np.median(r)) for r in usable[best]["samples_ms"]] if best else [],
                "round_runs": s["run"] if best else [],
                **({"stats": usable[best]["stats"]} if best else {}),
            },
            backends=per_backend,
            gpu_state=s["state"],
        )
    )

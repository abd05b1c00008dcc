"""The cooperative-matrix MMA roof: the TF/s a device's matrix units give a
register-only loop (no memory traffic), per fragment shape and accumulator type.
It is the ceiling a kernel of this instruction class can approach, measured on
the device at hand, so any GPU's numbers can be read as a fraction of it."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _helios


def mma_roof(
    dev: Any,
    shapes: Optional[list[tuple[int, int, int]]] = None,
    accs: tuple[str, ...] = ("f32", "f16"),
    iters: int = 4096,
    reps: int = 10,
    warmup: int = 3,
) -> list[dict]:
    """One row per (subgroup f16 coop shape the device lists, accumulator type):
    TF/s of the median and best of `reps` timed dispatches (GPU timestamps).
    shapes: default every f16-input shape of the device's table. Each dispatch runs
    enough workgroups to fill the device several times over (8 per SM where the
    SM count is known)."""
    info = dev.info
    table = [
        r
        for r in info["cooperative_matrix_properties"]
        if r["a"] == "f16" and r["b"] == "f16" and r["scope"] == "subgroup" and r["c"] == r["result"]
    ]
    if shapes is None:
        shapes = sorted({(r["m"], r["n"], r["k"]) for r in table}, key=lambda s: -s[0] * s[1] * s[2])
    groups = 8 * info["sm_count"] if info.get("sm_count") else 1024
    rows = []
    for m, n, k in shapes:
        for acc in accs:
            if not any((r["m"], r["n"], r["k"], r["c"]) == (m, n, k, acc) for r in table):
                continue
            samples, flops = dev._mma_roof(m, n, k, acc, iters, groups, warmup, reps)
            tf = [flops / (ms * 1e-3) / 1e12 for ms in samples]
            rows.append(
                {
                    "shape": f"{m}x{n}x{k}",
                    "acc": acc,
                    "tflops": float(np.median(tf)),
                    "tflops_max": float(max(tf)),
                    "samples_ms": [float(x) for x in samples],
                    "flops_per_dispatch": flops,
                    "iters": iters,
                    "workgroups": groups,
                }
            )
    if not rows:
        raise _helios.UnsupportedError(f"{info['name']} lists no f16 subgroup cooperative-matrix shape to measure")
    return rows

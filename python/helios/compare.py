"""`helios compare`: is NEW faster than OLD, per shape, from the raw samples?

Verdicts: SAME (medians within the 2% noise floor the seeds use), FASTER /
SLOWER (beyond it, the bootstrap 95% CI of the ratio of medians excludes 1 and
the rank test agrees, p < 0.05), INCONCLUSIVE otherwise. Several files per side
are pooled (the seeds' repeat protocol)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from .stats import bootstrap_ratio_ci, mann_whitney_p

NOISE = 0.02
ALPHA = 0.05


class CompareError(ValueError):
    """Inputs that cannot be compared (wrong schema, failed run, other device)."""


@dataclass
class ShapeVerdict:
    shape: str
    old_ms: float
    new_ms: float
    ratio: float                 # new / old time: < 1 is faster
    ci95: tuple[float, float]
    p_value: float
    n_old: int
    n_new: int
    verdict: str

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0


def classify(old: Sequence[float], new: Sequence[float]) -> tuple[str, float, tuple[float, float], float]:
    """(verdict, ratio, ci, p) for two sample sets of times."""
    import numpy as np
    ratio = float(np.median(new) / np.median(old))
    lo, hi = bootstrap_ratio_ci(new, old)
    p = mann_whitney_p(new, old)
    if abs(ratio - 1.0) <= NOISE:
        verdict = "SAME"
    elif ratio > 1.0 and lo > 1.0 and p < ALPHA:
        verdict = "SLOWER"
    elif ratio < 1.0 and hi < 1.0 and p < ALPHA:
        verdict = "FASTER"
    else:
        verdict = "INCONCLUSIVE"
    return verdict, ratio, (lo, hi), p


def load(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CompareError(f"{path}: cannot read a JSON result ({e})") from None
    if data.get("schema") != "helios-bench/1":
        raise CompareError(f"{path}: schema is {data.get('schema')!r}, expected 'helios-bench/1'")
    if data.get("status") != "ok":
        raise CompareError(f"{path}: the run failed ({data.get('failure')}); it has no valid timings")
    return data


def _device_key(d: dict) -> tuple:
    h = d.get("helios", {})
    return (h.get("name"), h.get("driver_version"))


def _pool(files: list[dict]) -> dict[str, list[float]]:
    pooled: dict[str, list[float]] = {}
    for d in files:
        for row in d.get("rows", []):
            if not row.get("valid"):
                continue
            samples = [x for rnd in row["helios"]["samples_ms"] for x in rnd]
            pooled.setdefault(row["shape"], []).extend(samples)
    return pooled


def compare(old: list[dict], new: list[dict], *, ignore_device: bool = False) -> list[ShapeVerdict]:
    if not old or not new:
        raise CompareError("need at least one result file on each side")
    keys = {_device_key(d) for d in old + new}
    if len(keys) > 1 and not ignore_device:
        raise CompareError("results come from different devices or drivers: "
                           + "; ".join(f"{n} (driver {v})" for n, v in sorted(keys, key=str))
                           + " (use --ignore-device to compare anyway)")
    po, pn = _pool(old), _pool(new)
    out = []
    for shape in po:
        if shape not in pn:
            continue
        verdict, ratio, ci, p = classify(po[shape], pn[shape])
        import numpy as np
        out.append(ShapeVerdict(shape, float(np.median(po[shape])), float(np.median(pn[shape])), ratio,
                                ci, p, len(po[shape]), len(pn[shape]), verdict))
    if not out:
        raise CompareError("the two sides share no shape with valid rows")
    return out


def _gpu_label(d: dict) -> str:
    name = (d.get("helios", {}).get("name") or "GPU").replace("NVIDIA ", "")
    return name.split()[0]


def _shape_label(shape: str) -> str:
    m, n, k = shape.split("x")
    return m if m == n == k else shape


def commit_line(verdicts: list[ShapeVerdict], gpu: str, summary: str = "<change summary>") -> str:
    """The seeds' commit-message line."""
    if all(v.verdict == "SAME" for v in verdicts):
        return f"perf: {summary} ({gpu} net ~0%, correctness preserved)"
    parts = [f"{_shape_label(v.shape)} {v.old_ms:.4g}->{v.new_ms:.4g} {v.pct:+.1f}%" for v in verdicts]
    return f"perf: {summary} ({gpu}: {', '.join(parts)})"


def table(verdicts: list[ShapeVerdict]) -> str:
    lines = ["| shape | old ms | new ms | change | ratio 95% CI | p (rank test) | n old / new | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v.shape} | {v.old_ms:.4f} | {v.new_ms:.4f} | {v.pct:+.2f}% | "
                     f"{v.ci95[0]:.4f}-{v.ci95[1]:.4f} | {v.p_value:.3g} | {v.n_old} / {v.n_new} | "
                     f"**{v.verdict}** |")
    return "\n".join(lines)

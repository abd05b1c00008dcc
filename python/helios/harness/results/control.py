"""The reference as an in-run control: a control-normalized verdict for `helios
compare` and `helios ci`.

Every bench round times the reference (cuBLAS / SDPA through torch, or NumPy on a
CPU device) beside Helios's kernel, on the same device, in the same round. What
moves both — clocks, a power cap, thermal state, a co-tenant, a driver's mood —
moves the ratio Helios / reference far less than either time. The normalized
change between two sides is the change of that per-round ratio: the same noise
model as the plain verdict (compare.py: runs, rounds, a floor, a rank test), fed
with log(Helios round median / reference round median) instead of log(Helios
round median).

It is sound only where the reference itself did not change between the sides:
the same reference (torch or numpy), the same build of it (torch and CUDA
runtime versions, or NumPy's), and the same device (UUID). Otherwise the
normalized verdict is refused and the reason given; the plain verdict stands.

When each is the right one: the plain verdict answers "did Helios get slower on
this machine", including through the environment; the normalized verdict answers
"did Helios get slower relative to the reference measured beside it", which is
the question a code change asks on a shared or drifting machine. A change that
also slows the reference (a driver update) shows in the plain verdict and not in
the normalized one; a change to Helios alone shows in both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ...optional import require
from .format import md_cell
from .rows import bench_rows


@dataclass
class ControlVerdict:
    """The control-normalized verdict of one shape: the change of Helios's time
    over the reference's (new / old, as a ratio of ratios)."""

    verdict: str
    ratio: float
    ci95: tuple[float, float]
    p_value: float
    mde: float
    old_ratio: float  # each side's centre of Helios / reference time
    new_ratio: float
    # var(normalized level) / var(plain level) from the runs (shown), and the one-sided
    # p that the normalized run means truly vary less (helps_p): the normalized verdict
    # is offered only where that is shown at OFFER_LEVEL
    var_ratio: Optional[float] = None
    helps_p: Optional[float] = None

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def offered(self) -> bool:
        """Dividing by the control is shown to lower the variance here (helps_p below
        1 - OFFER_LEVEL): a ratio under 1 estimated from a few runs is not enough (an
        H200 A/A pair was offered at 0.97 and read a false SLOWER)."""
        return self.helps_p is not None and self.helps_p < 1.0 - OFFER_LEVEL


def reference_identity(d: dict) -> tuple:
    """What must match for the reference to serve as a control: which reference,
    its build, and the device it ran on."""
    c: dict = d["cuda"] if isinstance(d.get("cuda"), dict) else {}
    h: dict = d["helios"] if isinstance(d.get("helios"), dict) else {}
    ref = c.get("reference") or d.get("reference")
    build = (c.get("torch_version"), c.get("cuda_runtime"), c.get("numpy_version"))
    device = str(c.get("gpu_uuid") or h.get("uuid") or "").lower().removeprefix("gpu-")
    return (ref, build, device)


def refusal(old: list[dict], new: list[dict]) -> Optional[str]:
    """Why the reference cannot serve as a control between these sides, or None."""
    ids = {reference_identity(d) for d in old + new}
    refs = {i[0] for i in ids}
    if None in refs:
        return "a side has no reference timed beside Helios (bench --ref)"
    if len(refs) > 1:
        return f"the sides' references differ ({', '.join(sorted(map(str, refs)))})"
    builds = {i[1] for i in ids}
    if len(builds) > 1:
        shown = "; ".join(
            ", ".join(f"{k} {v}" for k, v in zip(("torch", "CUDA", "numpy"), b) if v) or "unknown"
            for b in sorted(builds, key=str)
        )
        return f"the reference's build differs between the sides ({shown})"
    devices = {i[2] for i in ids}
    if len(devices) > 1 or devices == {""}:
        return "the sides ran on different devices (UUIDs)" if len(devices) > 1 else "no device UUID in the results"
    return None


def ratio_rounds(files: list[dict]) -> dict[str, tuple[list[list[float]], list[float], int]]:
    """shape -> (per-round Helios / reference median ratios grouped by run, all of
    them, sample count), from rows whose reference rounds pair with Helios's."""
    grouped: dict[str, dict[tuple[int, int], list[float]]] = {}
    ratios: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for fi, d in enumerate(files):
        for row in bench_rows(d):
            h, c = row.helios, row.cuda
            if not row.valid or not isinstance(h, dict) or not isinstance(c, dict):
                continue
            hs, cs = h.get("samples_ms") or [], c.get("samples_ms") or []
            if len(hs) != len(cs) or not hs:
                continue
            runs = h.get("round_runs") or [0] * len(hs)
            for run, hr, cr in zip(runs, hs, cs):
                if not hr or not cr:
                    continue
                r = float(np.median(hr)) / float(np.median(cr))
                if not (math.isfinite(r) and r > 0):
                    continue
                grouped.setdefault(row.shape, {}).setdefault((fi, run), []).append(r)
                ratios.setdefault(row.shape, []).append(r)
                counts[row.shape] = counts.get(row.shape, 0) + len(hr)
    return {s: (list(g.values()), ratios[s], counts[s]) for s, g in grouped.items()}


Rounds = tuple[list[list[float]], list[float], int]  # grouped by run, all, sample count
# The plain verdict's judgement of one shape (compare.judge): (old rounds, new
# rounds, shape) -> (verdict, ratio, ratio CI, p, MDE, old centre, new centre)
Judge = Callable[[Rounds, Rounds, str], tuple[str, float, tuple[float, float], float, float, float, float]]


def _run_means(runs: list) -> np.ndarray:
    """Each run's mean log value (runs: lists of values > 0)."""
    return np.array([np.log(np.asarray(r, dtype=np.float64)).mean() for r in runs if len(r)])


def _pooled_run_var(sides: tuple) -> Optional[float]:
    """The variance of the run means of log values, pooled over the two sides (each a
    list of runs, each a list of values); None where a side has one run."""
    num, dof = 0.0, 0
    for runs in sides:
        means = _run_means(runs)
        if means.size < 2:
            return None
        num += float(((means - means.mean()) ** 2).sum())
        dof += means.size - 1
    return num / dof


OFFER_LEVEL = 0.95  # how sure the runs must make it that normalizing lowers the variance


def _helps_p(normalized: tuple, plain: tuple) -> Optional[float]:
    """One-sided p that the normalized run means vary less than the plain ones. The two
    come from the same runs, so the test is Pitman and Morgan's for paired variances:
    var(N) < var(P) exactly when corr(N + P, N - P) < 0; N and P are each run's mean log
    value, centred on its side's mean, the two sides pooled. None where the runs do not
    pair (a side's normalized and plain runs differ in number) or are too few (a side
    with one run; with two a side one degree of freedom is left, and only a near-perfect
    correlation passes)."""
    stats = require("scipy.stats", "the control's variance test (Student t)")
    xs, ys = [], []
    for n_runs, p_runs in zip(normalized, plain):
        n, p = _run_means(n_runs), _run_means(p_runs)
        if n.size != p.size or n.size < 2:
            return None
        n, p = n - n.mean(), p - p.mean()
        xs.append(n + p)
        ys.append(n - p)
    x, y = np.concatenate(xs), np.concatenate(ys)
    df = x.size - len(xs) - 1  # each side's mean spent, and the correlation's own
    sx, sy = float(np.sqrt((x**2).sum())), float(np.sqrt((y**2).sum()))
    if df < 1 or sx == 0.0 or sy == 0.0:
        return None
    r = float((x * y).sum()) / (sx * sy)
    if r <= -1.0 or r >= 1.0:
        return 0.0 if r < 0 else 1.0
    return float(stats.t.cdf(r * math.sqrt(df / (1.0 - r * r)), df))


def _var_ratio(normalized: tuple, plain: tuple) -> Optional[float]:
    """var(normalized run means) / var(plain run means), unfloored (compare's floor on the
    run noise would hide which is noisier); None where a side has one run."""
    vn, vp = _pooled_run_var(normalized), _pooled_run_var(plain)
    if vn is None or vp is None:
        return None
    return vn / vp if vp > 0 else math.inf


def control_verdicts(
    old: list[dict], new: list[dict], judge: Judge, plain: tuple[dict, dict]
) -> tuple[dict[str, ControlVerdict], Optional[str]]:
    """(shape -> normalized verdict, None), or ({}, why it was refused). judge is the
    plain verdict's rule, applied here to the per-round ratios; plain: the sides' plain
    rounds (compare's), for each verdict's variance ratio."""
    why = refusal(old, new)
    if why:
        return {}, why
    so, sn = ratio_rounds(old), ratio_rounds(new)
    po, pn = plain
    out = {}
    for shape in so:
        if shape not in sn:
            continue
        paired = shape in po and shape in pn
        sides = ((so[shape][0], sn[shape][0]), (po[shape][0], pn[shape][0]))
        out[shape] = ControlVerdict(
            *judge(so[shape], sn[shape], shape),
            var_ratio=_var_ratio(*sides) if paired else None,
            helps_p=_helps_p(*sides) if paired else None,
        )
    if not out:
        return {}, "no row has reference rounds that pair with Helios's"
    return out, None


CONTROL_NOTE = (
    "control-normalized: the change of Helios's time over the reference's, per round (what moves "
    "both, such as clocks, power or a co-tenant, cancels); valid where both sides timed the same "
    "reference build on the same device. The plain verdict asks whether Helios got slower on this "
    "machine; the normalized one whether it got slower against the reference beside it."
)


VAR_NOTE = (
    "var ratio: the variance of the normalized level over the plain one's, from the runs; the "
    f"normalized verdict is offered (and --gate normalized reads it) only where the runs show it below 1 "
    f"(one-sided p < {1 - OFFER_LEVEL:.2g}, p in brackets)."
)


def control_table(verdicts: Sequence[Any]) -> str:
    """The control-normalized verdicts of compare's ShapeVerdicts (below its plain
    table), or the reason there are none."""
    rows = [v for v in verdicts if v.control is not None]
    if not rows:
        why = next((v.control_refused for v in verdicts if v.control_refused), "no paired reference rounds")
        return f"control-normalized verdict: not given ({why})"
    lines = [
        "| shape | helios/ref old | helios/ref new | normalized change | ratio 95% CI | MDE | var ratio "
        "| normalized verdict | plain verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in rows:
        c = v.control
        assert c is not None
        vr = v.control_var_ratio
        why_not = "the control adds noise here" if vr is None or vr >= 1.0 else "the runs do not show it helps"
        shown = f"**{c.verdict}**" if c.offered else f"not offered: {why_not} ({c.verdict})"
        ratio = "-" if vr is None else f"{vr:.2f}" + ("" if c.helps_p is None else f" (p {c.helps_p:.2g})")
        lines.append(
            f"| {md_cell(v.shape)} | {c.old_ratio:.4f} | {c.new_ratio:.4f} | {c.pct:+.2f}% | "
            f"{c.ci95[0]:.4f}-{c.ci95[1]:.4f} | {c.mde:.1%} | {ratio} | {shown} | {v.verdict} |"
        )
    return "\n".join(lines + ["", CONTROL_NOTE, VAR_NOTE])

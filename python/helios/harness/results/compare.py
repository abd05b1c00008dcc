"""`helios compare`: is NEW faster than OLD, per shape, beyond run-to-run noise?

The noise model (what varies independently is a *run*, not a launch):

    log(time) = side level + run effect (sd s_b) + round effect (sd s_w) + launch jitter

Per-launch samples only estimate each round's median. Each side's level is the
mean over its runs of the run's mean log round median. Its variance:

* two or more runs on a side (``helios bench --runs N``, or several files):
  var(run means) / R, but never below RUN_NOISE^2 / R (a few runs that happen to
  agree do not make a side certain); Student t with R - 1 degrees of freedom;
* one run: RUN_NOISE^2 (the between-run variance cannot be seen from one run; it
  is assumed) + the within-run variance of the rounds / rounds; normal quantiles.

The difference of the two levels gets a 95% interval (--level) and a two-sided
p: Student t on the pooled run variance when both sides have several runs
(A/A is the null hypothesis, so one variance; pooling keeps a side whose few
runs happen to agree from looking certain), normal quantiles otherwise. MDE is the change this noise would
detect with 80% power. Verdicts:

* SLOWER / FASTER: the interval excludes 0 and |change| > NOISE (2%, the seeds' floor),
  and, where both sides have enough runs for it to reach the level (4+ a side at
  95%), a rank test on the run means agrees (distribution-free: a heavy-tailed
  device such as a CPU driver cannot fake confidence with runs that happen to agree);
* SAME: |change| <= NOISE, or the interval includes 0 and MDE <= MAX_MDE (5%);
* INCONCLUSIVE: the interval includes 0 but MDE > MAX_MDE (too noisy to say SAME).

Exit status of the CLI: 0 no confident regression, 1 a confident regression
(larger than --fail-on-regression PCT when given), 2 bad input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from ...optional import require
from ..protocol.energy import energy_rounds, energy_table
from .compare_load import CompareError
from .control import ControlVerdict, control_table, control_verdicts
from .format import md_cell
from .rows import code_identity, row_identities

NOISE = 0.02  # the seeds' noise floor: changes within 2% are SAME
RUN_NOISE = 0.015  # assumed between-run sd of log time (~1.5% CV) where it cannot be estimated
MAX_MDE = 0.05  # SAME needs a test that could have seen a 5% change
LEVEL = 0.95
POWER = 0.80


@dataclass
class SideNoise:
    level: float  # mean log time
    run_means: list  # mean log round median of each run
    var: float  # variance of `level`
    df: float  # degrees of freedom of `var` (inf: assumed, not estimated)
    runs: int
    rounds: int
    run_cv: float  # estimated between-run sd of log time (nan with one run)
    round_cv: float  # within-run sd of log round medians (nan with one round per run)
    median_ms: float
    samples: int


@dataclass
class ShapeVerdict:
    shape: str
    old_ms: float
    new_ms: float
    ratio: float  # new / old time: < 1 is faster
    ci95: tuple[float, float]  # of the ratio
    p_value: float
    mde: float  # minimum detectable change (fraction) at this noise
    old: SideNoise
    new: SideNoise
    verdict: str
    assumed_noise: bool = False  # a side had one run: its run-to-run noise was assumed, not measured
    floor: float = NOISE  # the noise floor this shape was judged with (helios ci: per tier and device)
    control: Optional[ControlVerdict] = None  # the reference as an in-run control (control.py)
    control_refused: Optional[str] = None  # why there is no control-normalized verdict
    code: str = "unknown"  # "same" / "changed" / "unknown": the kernel that ran on each side (code_identity)
    energy: Optional[ControlVerdict] = None  # Helios's J/op between the sides (old/new_ratio: J/op each)

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def n_old(self) -> int:
        return self.old.samples

    @property
    def n_new(self) -> int:
        return self.new.samples


def side_noise(
    runs: Sequence[Sequence[float]], medians_ms: Sequence[float], samples: int, run_noise: float = RUN_NOISE
) -> SideNoise:
    """Level and variance from round medians grouped by run (all > 0, finite)."""
    logs = [np.log(np.asarray(r, dtype=np.float64)) for r in runs if len(r)]
    if not logs:
        raise CompareError("a side has no round medians")
    means = np.array([x.mean() for x in logs])
    n_rounds = sum(x.size for x in logs)
    within = [x for x in logs if x.size > 1]
    dof_w = sum(x.size - 1 for x in within)
    sw2 = sum(((x - x.mean()) ** 2).sum() for x in within) / dof_w if dof_w else float("nan")
    r_count = len(logs)
    if r_count >= 2:
        sb2 = float(means.var(ddof=1))
        var = max(sb2, run_noise**2) / r_count
        df = float(r_count - 1)
        run_cv = math.sqrt(sb2)
    else:
        var = run_noise**2 + (sw2 / n_rounds if dof_w else 0.0)
        df = math.inf
        run_cv = float("nan")
    return SideNoise(
        level=float(means.mean()),
        run_means=[float(x) for x in means],
        var=var,
        df=df,
        runs=r_count,
        rounds=n_rounds,
        run_cv=run_cv,
        round_cv=math.sqrt(sw2) if dof_w else float("nan"),
        median_ms=float(np.median(medians_ms)),
        samples=samples,
    )


def classify(
    old: SideNoise, new: SideNoise, *, noise: float = NOISE, max_mde: float = MAX_MDE, level: float = LEVEL
) -> tuple[str, float, tuple[float, float], float, float]:
    """(verdict, ratio, ratio CI, p, MDE) from the two sides' noise models."""
    stats = require("scipy.stats", "helios compare (Student t intervals)")
    d = new.level - old.level
    if math.isinf(old.df) or math.isinf(new.df):
        se, df = math.sqrt(old.var + new.var), math.inf
    else:  # pooled: var * R is each side's run variance (floored)
        ro, rn = old.df + 1, new.df + 1
        pooled = (old.df * old.var * ro + new.df * new.var * rn) / (old.df + new.df)
        se, df = math.sqrt(pooled * (1 / ro + 1 / rn)), old.df + new.df
    dist = stats.norm if math.isinf(df) else stats.t(df)
    q = float(dist.ppf(0.5 + level / 2))
    lo, hi = d - q * se, d + q * se
    p = float(2 * dist.sf(abs(d) / se)) if se > 0 else (0.0 if d else 1.0)
    mde = _exp((q + float(dist.ppf(POWER))) * se) - 1.0
    ratio = _exp(d)
    change = ratio - 1.0
    rank_ok = True
    if old.runs >= 2 and new.runs >= 2 and 2.0 / math.comb(old.runs + new.runs, old.runs) < 1.0 - level:
        # only where complete separation of the runs can reach the level (4+ runs a side at 95%)
        p_rank = float(stats.mannwhitneyu(new.run_means, old.run_means, alternative="two-sided", method="exact").pvalue)
        rank_ok = p_rank < 1.0 - level
        p = max(p, p_rank)
    if abs(change) <= noise:
        verdict = "SAME"
    elif lo > 0 and rank_ok:
        verdict = "SLOWER"
    elif hi < 0 and rank_ok:
        verdict = "FASTER"
    elif lo > 0 or hi < 0:
        verdict = "INCONCLUSIVE"  # the interval says so, the runs' ranks do not
    elif mde <= max_mde:
        verdict = "SAME"
    else:
        verdict = "INCONCLUSIVE"
    return verdict, ratio, (_exp(lo), _exp(hi)), p, mde


def _exp(x: float) -> float:
    """exp that saturates instead of raising: two extreme but valid sides (energy of
    1e308 J against 5e-324) give a huge ratio, not an OverflowError."""
    return math.exp(min(x, 709.0))


def _device_key(d: dict) -> tuple:
    h = d.get("helios", {}) if isinstance(d.get("helios"), dict) else {}
    return (h.get("name"), h.get("driver_version"))


def _side(files: list[dict]) -> dict[str, tuple[list[list[float]], list[float], int]]:
    """shape -> (round medians grouped by run, all round medians, sample count).
    Runs of different files are different runs."""
    grouped: dict[str, dict[tuple[int, int], list[float]]] = {}
    meds: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for fi, d in enumerate(files):
        for row in d.get("rows", []):
            if not row.get("valid"):
                continue
            h = row["helios"]
            runs = h.get("round_runs") or [0] * len(h["samples_ms"])
            for run, rnd in zip(runs, h["samples_ms"]):
                m = float(np.median(rnd))
                grouped.setdefault(row["shape"], {}).setdefault((fi, run), []).append(m)
                meds.setdefault(row["shape"], []).append(m)
                counts[row["shape"]] = counts.get(row["shape"], 0) + len(rnd)
    return {s: (list(g.values()), meds[s], counts[s]) for s, g in grouped.items()}


def compare(
    old: list[dict],
    new: list[dict],
    *,
    ignore_device: bool = False,
    run_noise: float = RUN_NOISE,
    level: float = LEVEL,
    noise_for: Optional[Callable[[str], float]] = None,
) -> list[ShapeVerdict]:
    """Per-shape verdicts; noise_for(shape) gives a shape's noise floor (its tier:
    helios ci gives small, noisier shapes a wider one), NOISE otherwise."""
    if not old or not new:
        raise CompareError("need at least one result file on each side")
    keys = {_device_key(d) for d in old + new}
    if len(keys) > 1 and not ignore_device:
        raise CompareError(
            "results come from different devices or drivers: "
            + "; ".join(f"{md_cell(n)} (driver {md_cell(v)})" for n, v in sorted(keys, key=str))
            + " (use --ignore-device to compare anyway)"
        )
    floor_for = noise_for if noise_for is not None else (lambda shape: NOISE)

    def judge(old_rounds: tuple, new_rounds: tuple, shape: str) -> tuple:
        o = side_noise(old_rounds[0], old_rounds[1], old_rounds[2], run_noise)
        n = side_noise(new_rounds[0], new_rounds[1], new_rounds[2], run_noise)
        floor = floor_for(shape)
        verdict, ratio, ci, p, mde = classify(o, n, noise=floor, max_mde=max(MAX_MDE, floor), level=level)
        if (math.isinf(o.df) or math.isinf(n.df)) and verdict in ("SLOWER", "FASTER"):
            # With one run a side the between-run noise was assumed (--run-noise), not
            # measured: a verdict that could fail CI needs it measured (--runs 3).
            verdict = "INCONCLUSIVE"
        # The centres the change compares (exp of each side's level: the geometric mean
        # over runs of a run's round medians), so that old, new and the change agree; a
        # plain median of all rounds can sit far from them on a noisy device.
        return verdict, ratio, ci, p, mde, _exp(o.level), _exp(n.level), o, n, floor

    so, sn = _side(old), _side(new)
    ids_o, ids_n = row_identities(old), row_identities(new)
    controls, refused = control_verdicts(old, new, lambda a, b, s: judge(a, b, s)[:7])
    eo, en = energy_rounds(old), energy_rounds(new)
    out = []
    for shape in so:
        if shape not in sn:
            continue
        verdict, ratio, ci, p, mde, old_ms, new_ms, o, n, floor = judge(so[shape], sn[shape], shape)
        assumed = math.isinf(o.df) or math.isinf(n.df)
        v = ShapeVerdict(shape, old_ms, new_ms, ratio, ci, p, mde, o, n, verdict, assumed, floor)
        v.control = controls.get(shape)
        v.control_refused = refused if refused else (None if v.control else "no paired reference rounds")
        v.code = code_identity(ids_o.get(shape, set()), ids_n.get(shape, set()))
        if shape in eo and shape in en:
            v.energy = ControlVerdict(*judge(eo[shape], en[shape], shape)[:7])
        out.append(v)
    if not out:
        raise CompareError("the two sides share no shape with valid rows")
    return out


GATES = ("plain", "normalized")


def gated(v: ShapeVerdict, gate: str = "plain") -> tuple[str, float]:
    """(verdict, change %) a gate reads: the plain verdict, or with gate "normalized"
    the control-normalized one where the reference could serve as a control (the
    plain verdict where it could not)."""
    if gate == "normalized" and v.control is not None:
        return v.control.verdict, v.control.pct
    return v.verdict, v.pct


def exit_status(verdicts: list[ShapeVerdict], fail_on_regression: float | None = None, gate: str = "plain") -> int:
    """1 for a confident regression (larger than fail_on_regression percent when
    given) in the verdict the gate reads, else 0."""
    limit = 0.0 if fail_on_regression is None else fail_on_regression
    return 1 if any(verdict == "SLOWER" and pct > limit for verdict, pct in (gated(v, gate) for v in verdicts)) else 0


def verdict_dict(v: ShapeVerdict) -> dict:
    """One shape's verdicts for machines (compare --json, ci.json): every interval,
    MDE and the rule that decided each."""
    c = v.control
    return {
        "shape": v.shape,
        "old_ms": v.old_ms,
        "new_ms": v.new_ms,
        "change_pct": v.pct,
        "ratio_ci95": list(v.ci95),
        "p": v.p_value,
        "mde_pct": v.mde * 100,
        "noise_floor_pct": v.floor * 100,
        "verdict": v.verdict,
        "verdict_reason": _reason(v),
        "runs": [v.old.runs, v.new.runs],
        "rounds": [v.old.rounds, v.new.rounds],
        "run_cv_pct": [v.old.run_cv * 100, v.new.run_cv * 100],
        "assumed_run_noise": v.assumed_noise,
        "control": None
        if c is None
        else {
            "verdict": c.verdict,
            "change_pct": c.pct,
            "ratio_ci95": list(c.ci95),
            "p": c.p_value,
            "mde_pct": c.mde * 100,
            "old_ratio": c.old_ratio,
            "new_ratio": c.new_ratio,
        },
        "control_refused": v.control_refused,
        "code": v.code,
        "energy": None
        if v.energy is None
        else {
            "verdict": v.energy.verdict,
            "change_pct": v.energy.pct,
            "ratio_ci95": list(v.energy.ci95),
            "mde_pct": v.energy.mde * 100,
            "old_joules_per_op": v.energy.old_ratio,
            "new_joules_per_op": v.energy.new_ratio,
        },
    }


def _reason(v: ShapeVerdict) -> str:
    """The rule that gave the plain verdict, in words."""
    if v.verdict == "SAME":
        return same_reason(v).strip(" ()")
    if v.verdict == "INCONCLUSIVE":
        if v.assumed_noise and abs(v.pct) > v.floor * 100:
            return "one run a side: run-to-run noise assumed, not measured"
        if v.ci95[0] > 1 or v.ci95[1] < 1:
            return "the interval excludes no change but the runs' ranks do not agree"
        return f"the interval includes no change and MDE {v.mde:.1%} is above {max(MAX_MDE, v.floor):.0%}"
    same = "; same code, driver and device on both sides: environment or noise" if v.code == "same" else ""
    return f"the {LEVEL:.0%} interval excludes no change and |change| > the {v.floor:.0%} floor{same}"


def device_label(d: dict) -> str:
    name = (d.get("helios", {}).get("name") or "GPU").replace("NVIDIA ", "")
    return name.split()[0]


def _shape_label(shape: str) -> str:
    """A cube's edge ('2048' for 2048x2048x2048), else the label as it is."""
    dims = shape.split("x")
    return dims[0] if len(dims) == 3 and len(set(dims)) == 1 else shape


def commit_line(verdicts: list[ShapeVerdict], gpu: str, summary: str = "<change summary>") -> str:
    """The seeds' commit-message line."""
    if all(v.verdict == "SAME" for v in verdicts):
        return f"perf: {summary} ({gpu} net ~0%, correctness preserved)"
    parts = [f"{_shape_label(v.shape)} {v.old_ms:.4g}->{v.new_ms:.4g} {v.pct:+.1f}%" for v in verdicts]
    return f"perf: {summary} ({gpu}: {', '.join(parts)})"


def _cv(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.1f}%"


def same_reason(v: ShapeVerdict) -> str:
    """Why a change is SAME: inside the noise floor it was judged with (say which: 30% on a
    CPU device reads very differently from 2%), or below what this noise could detect."""
    if abs(v.pct) <= v.floor * 100:
        return f" (within the {v.floor:.0%} noise floor)"
    return f" (< MDE {v.mde:.1%} at this noise)"


def _runs_rounds(side: SideNoise) -> str:
    """'3x2': three runs of two rounds each; '3 runs, 7 rounds' where runs differ."""
    if side.rounds % side.runs == 0:
        return f"{side.runs}x{side.rounds // side.runs}"
    return f"{side.runs} runs, {side.rounds} rounds"


TABLE_NOTE = (
    "old / new ms: each side's centre, the geometric mean over its runs of each run's mean round "
    "median (what the change compares); runs x rounds: runs, and rounds in each run. A SLOWER or "
    "FASTER row whose kernel (its machine code where both sides recorded it, else its SPIR-V and "
    "constants), driver and device are the same on both "
    "sides says so: the change came from the environment or noise, not the code."
)


def table(verdicts: list[ShapeVerdict]) -> str:
    lines = [
        "| shape | old ms | new ms | change | ratio 95% CI | p | runs x rounds old / new "
        "| run CV old / new | round CV old / new | MDE | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        why = ""
        if v.verdict == "INCONCLUSIVE" and v.assumed_noise and abs(v.pct) > v.floor * 100:
            why = " (one run a side: run-to-run noise assumed, not measured; rerun with --runs 3)"
        elif v.verdict == "SAME":
            why = same_reason(v)
        elif v.code == "same" and v.verdict in ("SLOWER", "FASTER"):
            why = " (same code: environment or noise)"
        lines.append(
            f"| {md_cell(v.shape)} | {v.old_ms:.4f} | {v.new_ms:.4f} | {v.pct:+.2f}% | "
            f"{v.ci95[0]:.4f}-{v.ci95[1]:.4f} | {v.p_value:.3g} | "
            f"{_runs_rounds(v.old)} / {_runs_rounds(v.new)} | "
            f"{_cv(v.old.run_cv)} / {_cv(v.new.run_cv)} | "
            f"{_cv(v.old.round_cv)} / {_cv(v.new.round_cv)} | {v.mde:.1%} | **{v.verdict}**{why} |"
        )
    return "\n".join(lines + ["", TABLE_NOTE, "", control_table(verdicts)]) + energy_table(verdicts)

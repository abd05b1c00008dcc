"""`helios compare`: is NEW faster than OLD, per shape, beyond run-to-run noise?

The noise model (what varies independently is a *run*, not a launch):

    log(time) = side level + run effect (sd s_b) + round effect (sd s_w) + launch jitter

Per-launch samples only estimate each round's median. Each side's level is the
mean over its runs of the run's mean log round median. Its variance:

* two or more runs on a side (``helios bench --runs N``, or several files):
  var(run means) / R as measured, never below RUN_NOISE_FLOOR^2 / R (0.25%: a GPU's
  processes vary by 0.1-0.6%, so runs that agree more closely than that agreed by
  chance); Student t with R - 1 degrees of freedom, whose quantiles already widen the
  interval where the runs are few;
* one run: RUN_NOISE^2 (the between-run variance cannot be seen from one run; it
  is assumed) + the within-run variance of the rounds / rounds; normal quantiles.

The difference of the two levels gets a 95% interval (--level) and a two-sided
p: Student t on the pooled run variance when both sides have several runs
(A/A is the null hypothesis, so one variance; pooling keeps a side whose few
runs happen to agree from looking certain), normal quantiles otherwise. MDE is the change this noise would
detect with 80% power. Verdicts:

* SLOWER / FASTER: the interval excludes no change and |change| > NOISE (2%, the seeds'
  floor), and a guard agrees: where both sides have enough runs for it to reach the
  level (4+ a side at 95%), a rank test on the run means (distribution-free: a
  heavy-tailed device such as a CPU driver cannot fake confidence with runs that happen
  to agree); with fewer, the interval at the assumed run noise (RUN_NOISE) excludes no
  change too;
* SAME: the whole interval lies within +-NOISE (an equivalence test: the runs rule out
  any change beyond the floor, not merely fail to show one);
* INCONCLUSIVE: anything else, with the MDE and the runs a side it would take to decide
  (``runs_to_decide``).

Exit status of the CLI: 0 no confident regression, 1 a confident regression
(larger than --fail-on-regression PCT when given), 2 bad input.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from ...optional import require
from .compare_load import CompareError
from .control import ControlVerdict, control_verdicts
from .energy import energy_rounds
from .format import md_cell
from .rows import bench_rows, code_identity, row_identities

NOISE = 0.02  # the seeds' noise floor: SAME when the interval rules out changes beyond 2%
RUN_NOISE = 0.015  # assumed between-run sd of log time (~1.5% CV) where it cannot be estimated (one run)
# The least between-run sd taken from measured runs. The interval narrows with the
# measured noise down to here: re-judged pair by pair as ci adds them, the committed
# A/A series (48 rows on H200s) read 46 SAME and no SLOWER or FASTER at this floor
# against 11 SAME at RUN_NOISE, and every planted change of +2.7% or more (45 rows)
# still read SLOWER (results/h200-ci-aa-rejudged, COMMANDS.md there).
RUN_NOISE_FLOOR = 0.0025
MAX_RUNS_TO_DECIDE = 1000  # runs_to_decide's answer above this: "more than 1000"
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
    guard_var: Optional[float] = None  # `var` with the runs' spread at least the assumed run noise (None: var)


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
    # "same" / "changed" / "unknown": the kernel that ran on each side (code_identity);
    # ci's "launch": the same kernel from two engine builds
    code: str = "unknown"
    energy: Optional[ControlVerdict] = None  # Helios's J/op between the sides (old/new_ratio: J/op each)

    @property
    def pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def control_var_ratio(self) -> Optional[float]:
        """var(normalized level) / var(plain level) from the runs (control.py)."""
        return None if self.control is None else self.control.var_ratio

    @property
    def n_old(self) -> int:
        return self.old.samples

    @property
    def n_new(self) -> int:
        return self.new.samples


def side_noise(
    runs: Sequence[Sequence[float]],
    medians_ms: Sequence[float],
    samples: int,
    run_noise: float = RUN_NOISE,
    run_floor: float = RUN_NOISE_FLOOR,
) -> SideNoise:
    """Level and variance from round medians grouped by run (all > 0, finite): the runs'
    measured spread, at least run_floor, or with one run run_noise assumed."""
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
        var = max(sb2, run_floor**2) / r_count
        guard_var = max(sb2, run_noise**2) / r_count
        df = float(r_count - 1)
        run_cv = math.sqrt(sb2)
    else:
        var = guard_var = run_noise**2 + (sw2 / n_rounds if dof_w else 0.0)
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
        guard_var=guard_var,
    )


def classify(
    old: SideNoise, new: SideNoise, *, noise: float = NOISE, level: float = LEVEL
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
    if old.runs >= 2 and new.runs >= 2 and 2.0 / math.comb(old.runs + new.runs, old.runs) < 1.0 - level:
        # where complete separation of the runs can reach the level (4+ runs a side at 95%)
        p_rank = float(stats.mannwhitneyu(new.run_means, old.run_means, alternative="two-sided", method="exact").pvalue)
        rank_ok = p_rank < 1.0 - level
        p = max(p, p_rank)
    else:  # too few runs for the rank test: the change must also clear the assumed run noise
        guard = q * math.sqrt((old.var if old.guard_var is None else old.guard_var)
                              + (new.var if new.guard_var is None else new.guard_var))  # fmt: skip
        rank_ok = d - guard > 0 or d + guard < 0
    if abs(change) > noise and lo > 0 and rank_ok:
        verdict = "SLOWER"
    elif abs(change) > noise and hi < 0 and rank_ok:
        verdict = "FASTER"
    elif math.log1p(-noise) <= lo and hi <= math.log1p(noise):
        verdict = "SAME"  # equivalence: the whole interval inside the floor
    else:
        verdict = "INCONCLUSIVE"
    return verdict, ratio, (_exp(lo), _exp(hi)), p, mde


def aa_mde(side: SideNoise, level: float = LEVEL) -> float:
    """The MDE of comparing a side with another of the same noise (an A/A of these runs):
    the change such a comparison would detect with 80% power at `level`."""
    stats = require("scipy.stats", "the MDE of a side (Student t quantiles)")
    se = math.sqrt(2.0 * side.var)
    dist = stats.norm if math.isinf(side.df) else stats.t(2.0 * side.df)
    return _exp((float(dist.ppf(0.5 + level / 2)) + float(dist.ppf(POWER))) * se) - 1.0


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
        for row in bench_rows(d):
            if not row.valid:
                continue
            h = row.helios
            runs = h.get("round_runs") or [0] * len(h["samples_ms"])
            for run, rnd in zip(runs, h["samples_ms"]):
                m = float(np.median(rnd))
                grouped.setdefault(row.shape, {}).setdefault((fi, run), []).append(m)
                meds.setdefault(row.shape, []).append(m)
                counts[row.shape] = counts.get(row.shape, 0) + len(rnd)
    return {s: (list(g.values()), meds[s], counts[s]) for s, g in grouped.items()}


def run_identity(d: dict) -> str:
    """A file's runs by their content (each row's shape and Helios samples): two files
    with one identity hold the same runs, however they were named or copied."""
    h = hashlib.sha256()
    for row in bench_rows(d):
        helios: dict = row.helios if isinstance(row.helios, dict) else {}
        h.update(json.dumps([row.shape, helios.get("samples_ms")], default=str).encode())
    return h.hexdigest()


def distinct_runs(files: list[dict], labels: Optional[Sequence[str]] = None) -> tuple[list[dict], list[str]]:
    """The files of one side with each run counted once: a file whose runs an earlier
    file already holds is dropped, with a note naming both (a repeated file, or a glob
    that matched a copy, must not pass for more evidence)."""
    names = list(labels) if labels is not None else [f"file {i + 1}" for i in range(len(files))]
    seen: dict[str, str] = {}
    out, notes = [], []
    for d, name in zip(files, names):
        key = run_identity(d)
        if key in seen:
            notes.append(f"{name} holds the same runs as {seen[key]}: counted once")
            continue
        seen[key] = name
        out.append(d)
    return out, notes


def compare(
    old: list[dict],
    new: list[dict],
    *,
    ignore_device: bool = False,
    run_noise: float = RUN_NOISE,
    level: float = LEVEL,
    noise_for: Optional[Callable[[str], float]] = None,
    run_floor: float = RUN_NOISE_FLOOR,
) -> list[ShapeVerdict]:
    """Per-shape verdicts; noise_for(shape) gives a shape's noise floor (its tier:
    helios ci gives small, noisier shapes a wider one), NOISE otherwise."""
    if not old or not new:
        raise CompareError("need at least one result file on each side")
    old, new = distinct_runs(old)[0], distinct_runs(new)[0]  # a run counts once
    keys = {_device_key(d) for d in old + new}
    if len(keys) > 1 and not ignore_device:
        raise CompareError(
            "results come from different devices or drivers: "
            + "; ".join(f"{md_cell(n)} (driver {md_cell(v)})" for n, v in sorted(keys, key=str))
            + " (use --ignore-device to compare anyway)"
        )
    floor_for = noise_for if noise_for is not None else (lambda shape: NOISE)

    def judge(old_rounds: tuple, new_rounds: tuple, shape: str) -> tuple:
        o = side_noise(old_rounds[0], old_rounds[1], old_rounds[2], run_noise, run_floor)
        n = side_noise(new_rounds[0], new_rounds[1], new_rounds[2], run_noise, run_floor)
        floor = floor_for(shape)
        verdict, ratio, ci, p, mde = classify(o, n, noise=floor, level=level)
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
    controls, refused = control_verdicts(old, new, lambda a, b, s: judge(a, b, s)[:7], (so, sn))
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


def normalizing_helps(v: ShapeVerdict) -> bool:
    """The control-normalized verdict is offered for this row: the reference could serve
    as a control, and the runs show that dividing by it lowers the variance of the level
    (ControlVerdict.offered; where the reference's noise is not Helios's, dividing by it
    only adds noise)."""
    return v.control is not None and v.control.offered


def gated(v: ShapeVerdict, gate: str = "plain") -> tuple[str, float]:
    """(verdict, change %) a gate reads: the plain verdict, or with gate "normalized"
    the control-normalized one where it is offered (normalizing_helps; the plain
    verdict elsewhere)."""
    if gate == "normalized" and v.control is not None and normalizing_helps(v):
        return v.control.verdict, v.control.pct
    return v.verdict, v.pct


def exit_status(verdicts: list[ShapeVerdict], fail_on_regression: float | None = None, gate: str = "plain") -> int:
    """1 for a confident regression (larger than fail_on_regression percent when
    given) in the verdict the gate reads, else 0."""
    limit = 0.0 if fail_on_regression is None else fail_on_regression
    return 1 if any(verdict == "SLOWER" and pct > limit for verdict, pct in (gated(v, gate) for v in verdicts)) else 0


def runs_to_decide(v: ShapeVerdict) -> Optional[int]:
    """About how many runs a side (both alike) would decide an INCONCLUSIVE shape at its
    noise: the interval's half-width shrinks as 1/sqrt(runs) and must fall below the
    change (to exclude no change, the change beyond the floor) or below the floor's
    distance from the change (for SAME). None where the verdict is decided;
    MAX_RUNS_TO_DECIDE + 1 for more than that (a change sitting on the floor never
    decides)."""
    if v.verdict != "INCONCLUSIVE":
        return None
    lo, hi, d = math.log(v.ci95[0]), math.log(v.ci95[1]), math.log(v.ratio)
    half, floor = (hi - lo) / 2, math.log1p(v.floor)
    room = abs(d) if abs(d) > floor else floor - abs(d)
    runs = min(v.old.runs, v.new.runs)
    if room <= 0 or half <= 0:
        return MAX_RUNS_TO_DECIDE + 1
    return min(max(math.ceil(runs * (half / room) ** 2), runs + 1), MAX_RUNS_TO_DECIDE + 1)

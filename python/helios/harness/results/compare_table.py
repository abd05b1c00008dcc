"""compare's verdicts in words: the JSON record of each (`--json`, ci.json), the rule
that decided it, the table with its note, and the seeds' commit-message line."""

from __future__ import annotations

import math
from typing import Optional

from .compare import LEVEL, MAX_RUNS_TO_DECIDE, ShapeVerdict, SideNoise, normalizing_helps, runs_to_decide
from .control import control_table
from .energy import energy_table
from .format import md_cell


def verdict_dict(v: ShapeVerdict) -> dict:
    """One shape's verdicts for machines (compare --json, ci.json): every interval,
    MDE and the rule that decided each."""
    c = v.control
    return {
        "shape": v.shape,
        # each side's centre (the geometric mean over runs of a run's round medians: the
        # level the change compares), not a pooled median of samples like bench's heliosMs
        "old_centre_ms": v.old_ms,
        "new_centre_ms": v.new_ms,
        "change_pct": v.pct,
        "ratio_ci95": list(v.ci95),
        "p": v.p_value,
        "mde_pct": v.mde * 100,
        "noise_floor_pct": v.floor * 100,
        "verdict": v.verdict,
        "verdict_reason": _reason(v),
        "runs_to_decide": runs_to_decide(v),
        "runs": [v.old.runs, v.new.runs],
        "rounds": [v.old.rounds, v.new.rounds],
        "rounds_per_run": [_per_run(v.old), _per_run(v.new)],
        "run_cv_pct": [None if math.isnan(cv) else cv * 100 for cv in (v.old.run_cv, v.new.run_cv)],  # one run: none
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
        "control_var_ratio": v.control_var_ratio,
        "control_helps_p": None if c is None else c.helps_p,
        "control_offered": normalizing_helps(v),
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


def _runs_words(n: Optional[int]) -> str:
    return f"more than {MAX_RUNS_TO_DECIDE}" if n and n > MAX_RUNS_TO_DECIDE else f"about {n}"


def _reason(v: ShapeVerdict) -> str:
    """The rule that gave the plain verdict, in words."""
    if v.verdict == "SAME":
        return same_reason(v).strip(" ()")
    if v.verdict == "INCONCLUSIVE":
        if v.assumed_noise and abs(v.pct) > v.floor * 100 and (v.ci95[0] > 1 or v.ci95[1] < 1):
            return "one run a side: run-to-run noise assumed, not measured"
        if (v.ci95[0] > 1 or v.ci95[1] < 1) and abs(v.pct) > v.floor * 100:
            return "the interval excludes no change but the runs' ranks do not agree"
        return (
            f"the {LEVEL:.0%} interval {v.ci95[0]:.4f}-{v.ci95[1]:.4f} neither excludes no change beyond the "
            f"{v.floor:.0%} floor nor lies within it (MDE {v.mde:.1%}); {_runs_words(runs_to_decide(v))} runs a "
            "side would decide"
        )
    same = {
        "same": "; same code, driver and device on both sides: environment or noise",
        "launch": "; the same kernel code, launched by another engine build",
    }.get(v.code, "")
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
    """Why a change is SAME: its whole interval lies inside the noise floor it was judged
    with (say which: 30% on a CPU device reads very differently from 2%)."""
    return f" (the interval lies within the {v.floor:.0%} noise floor)"


def _per_run(side: SideNoise) -> Optional[int]:
    """Rounds in each run, where every run has as many (None where they differ)."""
    return side.rounds // side.runs if side.rounds % side.runs == 0 else None


def _runs_rounds(side: SideNoise) -> str:
    """'3x2': three runs of two rounds each (--json: runs 3, rounds_per_run 2, rounds 6);
    '3 runs, 7 rounds' where runs differ."""
    per = _per_run(side)
    return f"{side.runs}x{per}" if per is not None else f"{side.runs} runs, {side.rounds} rounds"


TABLE_NOTE = (
    "centre ms: each side's centre, the geometric mean over its runs of each run's mean round "
    "median (what the change compares; bench's table shows the median of all samples, named so); "
    "runs x rounds: runs, and rounds in each run. A SLOWER or "
    "FASTER row whose kernel (its machine code where both sides recorded it, else its SPIR-V and "
    "constants), driver and device are the same on both "
    "sides says so: the change came from the environment or noise, not the code."
)


def table(verdicts: list[ShapeVerdict]) -> str:
    lines = [
        "| shape | old centre ms | new centre ms | change | ratio 95% CI | p | runs x rounds old / new "
        "| run CV old / new | round CV old / new | MDE | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        why = ""
        if v.verdict == "INCONCLUSIVE" and v.assumed_noise and abs(v.pct) > v.floor * 100:
            why = " (one run a side: run-to-run noise assumed, not measured; rerun with --runs 3)"
        elif v.verdict == "INCONCLUSIVE":
            why = f" ({_runs_words(runs_to_decide(v))} runs a side would decide)"
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

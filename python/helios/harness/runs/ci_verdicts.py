"""ci's verdicts: compare's judgment of the pooled runs with ci's noise floors, the
rows that failed their check, and which SLOWER rows fail the job."""

from __future__ import annotations

from pathlib import Path

from ..results.compare import ShapeVerdict, compare, gated
from ..results.compare_load import load
from ..results.compare_table import verdict_dict
from ..results.rows import bench_rows, read_result
from .floors import assumed_run_noise, noise_floor, run_noise_floor


def latest_rows(results: list[dict]) -> dict:
    """The last result with its rows replaced by each shape's row from the last result
    that measured it, in the order shapes were first measured: a rerun measures only
    the shapes that read SLOWER, so its file alone would leave the others out."""
    rows: dict = {}
    for res in results:
        for r in res.get("rows", []):
            rows[r["shape"]] = r
    return {**results[-1], "rows": list(rows.values())}


def failed_checks(files: list[Path]) -> list[dict]:
    """The rows of bench files whose timed output failed its check (the bench marks
    them invalid and compare leaves them out): file, shape and why."""
    out = []
    for p in files:
        for r in bench_rows(read_result(p)):
            if r.valid is not False:
                continue
            checks = r.helios.get("check") if isinstance(r.helios, dict) else None
            bad = [c for c in checks or [] if isinstance(c, dict) and not c.get("passed")]
            why = (
                ", ".join(
                    f"max abs err {c.get('max_abs_err')}, {c.get('nonfinite_total', 0)} non-finite" for c in bad[:2]
                )
                or "no passing check"
            )
            out.append({"file": Path(p).name, "shape": r.shape, "why": why})
    return out


def verdicts_of(files: dict) -> list[ShapeVerdict]:
    return judge_sides([load(str(p)) for p in files["base"]], [load(str(p)) for p in files["head"]])


def judge_sides(old: list[dict], new: list[dict]) -> list[ShapeVerdict]:
    """compare's verdicts with ci's noise for the head's kind of device: each shape's
    floor (noise_floor) and the least run spread (run_noise_floor)."""
    kind = str(new[0].get("helios", {}).get("device_type", ""))
    return compare(
        old,
        new,
        noise_for=lambda shape: noise_floor(shape, kind),
        run_noise=assumed_run_noise(kind),
        run_floor=run_noise_floor(kind),
    )


def mark_launches(verdicts: list[ShapeVerdict], engines: dict) -> None:
    """The same kernel code from two engine builds (or builds not known to be one) is
    marked "launch": the host may launch it otherwise (grid, push constants)."""
    if not engines or engines.get("base") != engines.get("head"):
        for v in verdicts:
            v.code = "launch" if v.code == "same" else v.code


def failing(
    verdicts: list[ShapeVerdict], gate: str, limit_pct: float, strict: bool
) -> tuple[list[ShapeVerdict], list[ShapeVerdict]]:
    """(the regressions that fail the job, the confident regressions that do not
    because nothing that runs on the GPU changed). A SLOWER verdict (the one `gate`
    reads) beyond limit_pct fails the job unless its code is "same": the same kernel
    code (SPIR-V, constants, driver and device) from the same engine build, which
    chooses each launch's grid and push constants (_judge marks the same kernel from
    two builds "launch"); then it is the environment or noise, reported but not
    failed, unless strict."""
    confident = [v for v in verdicts if (g := gated(v, gate))[0] == "SLOWER" and g[1] > limit_pct]
    fail = [v for v in confident if strict or v.code != "same"]
    return fail, [v for v in confident if v not in fail]


def head_verdict(v: ShapeVerdict) -> dict:
    """compare's verdict_dict with ci's names for the sides (base_ms, head_ms)."""
    d = verdict_dict(v)
    d["base_ms"], d["head_ms"] = d.pop("old_centre_ms"), d.pop("new_centre_ms")  # ci.json's names: the centres
    return d

"""The results history: `helios ci --history FILE` appends, `helios report --history
FILE` reads.

The store is a JSON-lines file, one line per (run, shape) of the head's bench:
date, commit, GPU name and UUID, driver, dtype, shape, Helios ms, CUDA ms, the
ratio, the variant. Lines rather than a database: kept in a results folder or
branch, a file of lines diffs and merges as text, any tool reads it, and an
append never rewrites what is there. Trends are for reading, not for gating (the
gate is base against head, measured fresh in one job: helios ci).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Optional

from ...files import append_lines, read_lines
from .rows import bench_rows

STEP = 0.05  # a point this far from the median of the points before it is flagged
WINDOW = 3  # points that median is taken over


def device_fields(result: dict) -> dict:
    """The GPU a result was measured on: name, UUID, driver (what history lines and
    the helios ci comment key on)."""
    h = result.get("helios", {})
    return {k: h.get(k) for k in ("name", "uuid", "driver_name", "driver_info", "driver_version")}


def append_history(path: Path, result: dict, commit: str, date: str) -> int:
    """Appends one line per valid row of a bench result; returns how many."""
    h = device_fields(result)
    lines = []
    path.parent.mkdir(parents=True, exist_ok=True)
    for r in bench_rows(result):
        if not r.valid:
            continue
        line = {
            "date": date,
            "commit": commit,
            "gpu": h.get("name"),
            "gpu_uuid": h.get("uuid"),
            "driver": h.get("driver_info") or h.get("driver_version"),
            "dtype": result.get("dtype", "float16"),
            "shape": r.shape,
            "helios_ms": r.heliosMs,
            "cuda_ms": r.cudaMs,
            "speedup": r.speedup,
            "variant": r.variant,
        }
        lines.append(json.dumps(line, sort_keys=True))
    append_lines(path, lines)
    return len(lines)


# What a history line must hold to be read (files.check kinds; '?' may be null).
LINE_FIELDS = {
    "shape": "str",
    "helios_ms": "positive",
    "cuda_ms": "positive?",
    "speedup": "number?",
    "date": "str?",
    "commit": "str?",
    "gpu": "str?",
    "gpu_uuid": "str?",
    "driver": "str?",
    "dtype": "str?",
    "variant": "str?",
}
MAX_HISTORY_BYTES = 256 << 20  # years of nightly lines; /dev/zero is refused, not read


def read_history(path: Path) -> list[dict]:
    """The readable lines of a history file; a torn, non-JSON or mistyped line is
    skipped with one warning naming it (FileError for a file that cannot be read)."""
    return read_lines(path, LINE_FIELDS, MAX_HISTORY_BYTES, "a Helios history (JSON lines)")


def series(lines: list[dict]) -> dict[tuple, list[dict]]:
    """Points per (GPU UUID, driver, dtype, shape), in date order."""
    out: dict[tuple, list[dict]] = {}
    for x in sorted(lines, key=lambda x: (x.get("date") or "", x.get("commit") or "")):
        key = (x.get("gpu_uuid"), x.get("driver"), x.get("dtype", "float16"), x["shape"])
        out.setdefault(key, []).append(x)
    return out


def steps(points: list[dict], step: float = STEP) -> list[Optional[float]]:
    """Per point: its change against the median of the WINDOW points before it
    when that exceeds `step` (a step change), else None."""
    flags: list[Optional[float]] = []
    for i, p in enumerate(points):
        prev = [q["helios_ms"] for q in points[max(0, i - WINDOW) : i] if q.get("helios_ms")]
        if not prev or not p.get("helios_ms"):
            flags.append(None)
            continue
        change = p["helios_ms"] / statistics.median(prev) - 1.0
        flags.append(change if abs(change) > step else None)
    return flags


def history_report(lines: list[dict], step: float = STEP) -> str:
    """Per series: commit, date, Helios ms, CUDA ms, Helios/CUDA time and the step
    changes (a point more than `step` from the median of the points before it)."""
    out: list[str] = []
    for (uuid, driver, dtype, shape), pts in series(lines).items():
        gpu = pts[-1].get("gpu") or "?"
        out.append(f"{shape} {dtype} on {gpu} ({uuid}), driver {driver}: {len(pts)} points")
        out.append("  commit        date                  helios ms    cuda ms   helios/cuda  step")
        for p, flag in zip(pts, steps(pts, step)):
            cuda: Any = p.get("cuda_ms")
            ratio = f"{p['helios_ms'] / cuda:.2f}" if cuda and p.get("helios_ms") else "-"
            mark = f"STEP {flag * 100:+.1f}%" if flag is not None else ""
            out.append(
                f"  {str(p.get('commit'))[:12]:<12}  {str(p.get('date'))[:20]:<20}  "
                f"{p['helios_ms']:>9.4f}  {'-' if cuda is None else f'{cuda:9.4f}':>9}  {ratio:>11}  {mark}"
            )
        out.append("")
    flagged = sum(f is not None for pts in series(lines).values() for f in steps(pts, step))
    out.append(f"{len(lines)} points, {len(series(lines))} series, {flagged} step change(s) beyond {step:.0%}")
    return "\n".join(out)

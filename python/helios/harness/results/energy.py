"""What a file's energy windows say (protocol/energy.py measures them): a row's
measured window or why there is none, the bench's energy table, and Helios's joules
per operation between two sides for helios compare."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from .rows import BenchRow, bench_rows, read_row

WINDOW_NUMBERS = ("joules_per_op", "watts", "tflops_per_watt")


def measured_window(row: BenchRow | dict, side: str, numbers: Sequence[str] = WINDOW_NUMBERS) -> Optional[dict]:
    """A row's energy window of one side ("helios" or "reference") where it measured:
    status "ok" and the numbers read finite and >= 0; None for anything else (no
    window, a failed one, or a file whose energy block is junk). row: a BenchRow, or a
    row as written (a dict)."""
    e = (row if isinstance(row, BenchRow) else read_row(BenchRow, row)).energy
    w = e.get(side) if isinstance(e, dict) else None
    if not isinstance(w, dict) or w.get("status") != "ok":
        return None
    ok = all(
        isinstance(w.get(k), (int, float)) and not isinstance(w.get(k), bool) and math.isfinite(w[k]) and w[k] >= 0
        for k in numbers
    )
    return w if ok else None


def window_status(row: BenchRow, side: Optional[str] = None) -> Optional[str]:
    """Why a row (or one side of it) has no measured window, as the file says, or None."""
    e = row.energy
    if side is not None:
        e = e.get(side) if isinstance(e, dict) else None
    s = e.get("status") if isinstance(e, dict) else None
    return str(s) if s is not None else None


def energy_lines(raw_rows: list[dict], reference: Optional[str]) -> list[str]:
    """The markdown's energy table (rows with a measured Helios window), or one line
    saying why there is none."""
    rows = [read_row(BenchRow, r) for r in raw_rows]
    measured = [r for r in rows if measured_window(r, "helios")]
    if not measured:
        whys = {s for r in rows if (s := window_status(r))}
        return [f"energy: not measured ({'; '.join(sorted(whys))})"] if whys else []
    out = [
        "",
        f"| shape | helios J/op | helios W | helios TF/s/W | {reference} J/op | {reference} W | {reference} TF/s/W |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in measured:
        h, c = measured_window(r, "helios"), measured_window(r, "reference")
        assert h is not None  # measured above
        ref = (
            f"{c['joules_per_op']:.4g} | {c['watts']:.0f} | {c['tflops_per_watt']:.3g}"
            if c is not None
            else f"- | - | - ({window_status(r, 'reference')})"
        )
        out.append(f"| {r.shape} | {h['joules_per_op']:.4g} | {h['watts']:.0f} | {h['tflops_per_watt']:.3g} | {ref} |")
    out += ["", "energy: NVML's counter over a window of back-to-back launches per side after the rounds"]
    return out


def energy_rounds(files: list[dict]) -> dict[str, tuple[list[list[float]], list[float], int]]:
    """shape -> (Helios's joules per operation grouped by file: each file is a run,
    all of them, how many windows), from rows whose Helios window measured."""
    grouped: dict[str, list[list[float]]] = {}
    for d in files:
        for row in bench_rows(d):
            h = measured_window(row, "helios", ("joules_per_op",))
            if row.valid and h is not None and h["joules_per_op"] > 0:
                grouped.setdefault(row.shape, []).append([float(h["joules_per_op"])])
    return {s: (g, [x[0] for x in g], len(g)) for s, g in grouped.items()}


def energy_table(verdicts: Sequence[Any]) -> str:
    """Helios's energy per operation between the sides, per shape with windows on both
    (the same noise model as time: each file one run), or nothing."""
    rows = [v for v in verdicts if getattr(v, "energy", None) is not None]
    if not rows:
        return ""
    lines = [
        "| shape | old J/op | new J/op | energy change | ratio 95% CI | MDE | energy verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in rows:
        e = v.energy
        lines.append(
            f"| {v.shape} | {e.old_ratio:.4g} | {e.new_ratio:.4g} | {e.pct:+.2f}% | "
            f"{e.ci95[0]:.4f}-{e.ci95[1]:.4f} | {e.mde:.1%} | **{e.verdict}** |"
        )
    note = (
        "energy: Helios's joules per operation (NVML's counter, one window per row and file); each file "
        "is one run, so one file a side gives an assumed run noise and no confident verdict."
    )
    return "\n".join(["", *lines, "", note])

"""Cells of the tables every report prints: times, rates, sizes, ratios, and text made
safe for a markdown cell."""

from __future__ import annotations

from typing import Any, Optional


def fmt_ms(x: Optional[float]) -> str:
    """Milliseconds in tables: 4 decimals (what the seeds' tables show)."""
    return "-" if x is None else f"{x:.4f}"


def fmt_rate(x: Optional[float]) -> str:
    """A rate in tables (TFLOP/s, GB/s): 3 significant digits, so small shapes on a CPU
    device read 0.0123, not 0.0; one decimal from 100 up."""
    if x is None:
        return "-"
    return f"{x:.1f}" if x >= 100 else f"{x:.3g}"


fmt_tflops = fmt_rate  # TFLOP/s


def fmt_mib(nbytes: Optional[float]) -> str:
    """A memory size in MiB, in fmt_rate's digits: a small workload's 0.25 MiB reads
    0.25, not 0."""
    return "-" if nbytes is None else fmt_rate(nbytes / 2**20)


def fmt_ratio(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def md_cell(x: Any, limit: int = 200) -> str:
    """Text from a result file made safe for one markdown table cell (and one
    terminal line): pipes escaped, line breaks and control characters shown as
    escapes, at most `limit` characters (a status that carries advice: more)."""
    text = str(x)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def stopping_line(result: dict) -> Optional[str]:
    """--target-mde's outcome in one line (None without it): the target, the runs, what
    stopped them, and the rows that did not reach it."""
    s = result.get("stopping")
    if not isinstance(s, dict):
        return None
    runs = len(result.get("clock_warmups") or [])
    missed = s.get("not_reached") or []
    tail = f"; not reached: {', '.join(md_cell(x) for x in missed)}" if missed else "; every row reached it"
    return f"target MDE {s.get('target_mde_pct'):g}%: {runs} runs, stopped by {md_cell(s.get('stopped_by'))}{tail}"


def fmt_num(x: Any, digits: int = 3) -> str:
    """A number to `digits` places, '-' for none (a field a row or file left out)."""
    return "-" if x is None else f"{x:.{digits}f}"


def fmt_field(x: Any) -> str:
    """A configuration value as a table shows it: '?' where the file left it out."""
    return "?" if x is None else md_cell(x)


def status_word(status: str) -> str:
    """A result's status as its table's headline word: INTERRUPTED for a run stopped by a
    signal (its rows hold what completed), FAILED for one that failed."""
    return "INTERRUPTED" if status == "interrupted" else "FAILED"


STATUS_CELL = 640  # a suite row's status cell: a failure's whole message (the engine's are at most 640)

"""`helios report --html DIR`: one self-contained static page (index.html, no
network: styles inline, charts as inline SVG drawn here, no script) from result
files and a history:

- history: per (GPU, driver, dtype, shape) series of the JSON-lines history
  (helios ci --history), Helios ms and CUDA ms over commits, one chart each,
  step changes marked;
- the latest bench table of each helios-bench/1 file (matmul or attention):
  Helios and reference ms and TF/s, the ratio, the roof fraction, flags;
- the fleet spread: where several bench files come from different GPUs, per
  shape the fastest, median and slowest Helios ms and which GPU;
- suite results (helios-suite/1) and helios ci records (helios-ci/1).

Every number drawn or tabled carries its exact value in a data-value attribute,
and every chart says its series and points (data-series, data-points), so a
browser test can check the page against the JSON it came from.
"""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional

from ...files import Target
from .format import fmt_rate
from .history import series, steps
from .rows import (
    BENCH_SCHEMA,
    SUITE_SCHEMA,
    SUITE_SCHEMAS,
    SuiteRow,
    bench_rows,
    read_result,
    read_row,
    reference_ms,
    reference_tflops,
)
from .suite_tables import suite_text

CI_SCHEMA = "helios-ci/1"
COLORS = ("#1f6feb", "#d1242f", "#1a7f37", "#8250df")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1f2328; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; }
th { background: #f6f8fa; } td.l, th.l { text-align: left; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; vertical-align: top; }
figcaption { font-size: 0.9em; color: #57606a; max-width: 520px; }
.legend span { margin-right: 1em; } .step { color: #d1242f; font-weight: 600; }
.SLOWER { color: #d1242f; font-weight: 600; } .FASTER { color: #1a7f37; font-weight: 600; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Optional[float], fmt: str = "{:.4g}") -> str:
    """A table cell holding a number: shown formatted, exact in data-value."""
    if x is None:
        return '<td data-value="">-</td>'
    return f'<td data-value="{float(x)!r}">{fmt.format(x)}</td>'


def _rate(x: Optional[float]) -> str:
    """A TF/s cell in the tables' significant digits (fmt_rate)."""
    if x is None:
        return '<td data-value="">-</td>'
    return f'<td data-value="{float(x)!r}">{fmt_rate(x)}</td>'


def line_chart(
    title: str,
    labels: list[str],
    named: list[tuple[str, list[Optional[float]]]],
    unit: str,
    marks: Optional[list[bool]] = None,
) -> str:
    """An SVG line chart: one polyline and one circle per defined point per series."""
    w, h, left, bottom, top, right = 520, 240, 60, 40, 16, 12
    vals = [v for _, ys in named for v in ys if v is not None]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    lo, hi = (lo * 0.9, hi * 1.1) if lo == hi else (lo - (hi - lo) * 0.08, hi + (hi - lo) * 0.08)
    n = len(labels)

    def x(i: int) -> float:
        return left + (w - left - right) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return top + (h - top - bottom) * (1 - (v - lo) / (hi - lo))

    parts = [
        f'<svg class="chart" role="img" width="{w}" height="{h}" data-series="{len(named)}" '
        f'data-points="{n}" aria-label="{_e(title)}">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#8c959f"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#8c959f"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        tick = lo + (hi - lo) * frac
        parts.append(f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" font-size="10" text-anchor="end">{tick:.3g}</text>')
    parts.append(f'<text x="4" y="{top + 4}" font-size="10">{_e(unit)}</text>')
    step = max(1, n // 6)
    for i in range(0, n, step):
        parts.append(
            f'<text x="{x(i):.1f}" y="{h - bottom + 14}" font-size="9" text-anchor="middle">{_e(labels[i])}</text>'
        )
    for si, (name, ys) in enumerate(named):
        color = COLORS[si % len(COLORS)]
        pts = [(x(i), y(v)) for i, v in enumerate(ys) if v is not None]
        coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        parts.append(
            f'<polyline class="series" data-name="{_e(name)}" fill="none" stroke="{color}" stroke-width="2" '
            f'points="{coords}"/>'
        )
        for i, v in enumerate(ys):
            if v is None:
                continue
            marked = marks is not None and si == 0 and marks[i]
            parts.append(
                f'<circle class="point{" step" if marked else ""}" data-series="{_e(name)}" '
                f'data-value="{float(v)!r}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="{5 if marked else 3}" '
                f'fill="{"#d1242f" if marked else color}"><title>{_e(labels[i])}: {v:.4g} {_e(unit)}</title></circle>'
            )
    parts.append("</svg>")
    legend = "".join(
        f'<span style="color:{COLORS[i % len(COLORS)]}">&#9632; {_e(nm)}</span>' for i, (nm, _) in enumerate(named)
    )
    return (
        f'<figure class="history"><figcaption><b>{_e(title)}</b> <span class="legend">{legend}</span></figcaption>'
        + "".join(parts)
        + "</figure>"
    )


def history_section(lines: list[dict]) -> str:
    if not lines:
        return ""
    out = [
        "<h2>History</h2>",
        "<p>Helios and CUDA time per commit, in date order, and their ratio; a red point is a step change "
        "(more than 5% from the median of the three points before it).</p>",
    ]
    for (uuid, driver, dtype, shape), pts in series(lines).items():
        labels = [str(p.get("commit") or "?")[:8] for p in pts]
        marks = [f is not None for f in steps(pts)]
        where = f" ({uuid})" if uuid else ""
        title = f"{shape} {dtype} on {pts[-1].get('gpu') or '?'}{where}, driver {driver}"
        named = [("Helios ms", [p.get("helios_ms") for p in pts]), ("CUDA ms", [p.get("cuda_ms") for p in pts])]
        named = [s for s in named if any(v is not None for v in s[1])]
        out.append(line_chart(title, labels, named, "ms", marks))
        ratio = [p["helios_ms"] / p["cuda_ms"] if p.get("helios_ms") and p.get("cuda_ms") else None for p in pts]
        if any(r is not None for r in ratio):  # the parity view: Helios time over CUDA's on the same GPU
            out.append(line_chart(f"{shape} {dtype}: Helios / CUDA time", labels, [("Helios/CUDA", ratio)], "x"))
    return "\n".join(out)


def bench_section(d: dict, name: str) -> str:
    h = d.get("helios", {})
    work = d.get("workload", "matmul")
    ref = d.get("reference", "?")
    rows = bench_rows(d)
    out = [
        f"<h3>{_e(name)}: {_e(work)} on {_e(h.get('name'))}, {_e(d.get('dtype', 'float16'))}, reference {_e(ref)}</h3>",
        f'<table class="bench" data-file="{_e(name)}"><tr><th class="l">shape</th><th>Helios median ms</th>'
        "<th>Helios TF/s</th><th>reference median ms</th><th>reference TF/s</th><th>Helios/reference time</th>"
        '<th>roof</th><th class="l">flags</th></tr>',
    ]
    for r in rows:
        rms = reference_ms(r)
        ratio = r.heliosMs / rms if r.heliosMs and rms else None
        flags = ", ".join(f for f, on in (("throttled", r.throttled), ("low_clock", r.low_clock)) if on) or (
            "" if r.valid or r.valid is None else "invalid"
        )
        out.append(
            f'<tr data-shape="{_e(r.shape)}"><td class="l">{_e(r.shape)}</td>'
            + _num(r.heliosMs)
            + _rate(r.heliosTflops)
            + _num(rms)
            + _rate(reference_tflops(r))
            + _num(ratio, "{:.2f}")
            + _num(r.roofFraction, "{:.0%}")
            + f'<td class="l">{_e(flags)}</td></tr>'
        )
    out.append("</table>")
    return "\n".join(out)


def fleet_section(benches: list[tuple[str, dict]]) -> str:
    """Per GPU model, dtype, workload and shape, over the GPUs (UUIDs) that ran it:
    fastest, median and slowest Helios ms. Only groups of two or more GPUs."""
    groups: dict[tuple, dict[str, float]] = {}
    for _, d in benches:
        h = d.get("helios", {})
        uuid = str(h.get("uuid"))
        for r in bench_rows(d):
            if r.heliosMs:
                key = (str(h.get("name")), d.get("dtype", "float16"), d.get("workload", "matmul"), r.shape)
                groups.setdefault(key, {})[uuid] = r.heliosMs
    rows = {k: v for k, v in groups.items() if len(v) >= 2}
    if not rows:
        return ""
    out = [
        "<h2>Fleet spread</h2>",
        '<table class="fleet"><tr><th class="l">GPU</th><th class="l">dtype</th><th class="l">shape</th><th>GPUs</th>'
        "<th>fastest ms</th><th>median ms</th><th>slowest ms</th><th>slowest / fastest</th>"
        '<th class="l">slowest GPU</th></tr>',
    ]
    for (name, dtype, _work, shape), by_uuid in sorted(rows.items()):
        vals = sorted((v, u) for u, v in by_uuid.items())
        ms = [v for v, _ in vals]
        out.append(
            f'<tr><td class="l">{_e(name)}</td><td class="l">{_e(dtype)}</td><td class="l">{_e(shape)}</td>'
            f"{_num(len(ms), '{:d}')}{_num(ms[0])}{_num(statistics.median(ms))}{_num(ms[-1])}"
            f'{_num(ms[-1] / ms[0], "{:.2f}")}<td class="l">{_e(vals[-1][1])}</td></tr>'
        )
    out.append("</table>")
    return "\n".join(out)


def suite_section(d: dict, name: str) -> str:
    out = [
        f"<h3>{_e(name)}: suite {_e(d.get('tag', d.get('workload', '')))}</h3>",
        '<table class="suite"><tr><th>tokens</th><th class="l">adapter</th><th class="l">status</th><th>p50 ms</th>'
        "<th>tokens/s</th><th>TF/s</th></tr>",
    ]
    for r in (read_row(SuiteRow, x) for x in d.get("rows", [])):
        lat = r.latency_ms or {}
        out.append(
            f'<tr>{_num(r.tokens, "{:d}")}<td class="l">{_e(r.adapter)}</td>'
            f'<td class="l">{_e("ok" if r.status is None else r.status)}</td>{_num(lat.get("p50"))}'
            f"{_num(r.throughput_tokens_per_sec, '{:.0f}')}{_rate(r.tflops)}</tr>"
        )
    out.append("</table>")
    return "\n".join(out)


def markdown_section(text: str, title: str) -> str:
    """A suite's markdown (report's tables of a decode or train file) as HTML: its tables
    as tables, its other lines as paragraphs."""
    out, table = [f"<h3>{_e(title)}</h3>"], False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is not None and all(set(c) <= set("-:") and c for c in cells):
            continue  # the header's rule
        if cells is not None:
            tag = "th" if not table else "td"
            out.append(("<table class=\"suite\">" if not table else "") + "<tr>"
                       + "".join(f'<{tag} class="l">{_e(c)}</{tag}>' for c in cells) + "</tr>")  # fmt: skip
            table = True
            continue
        if table:
            out.append("</table>")
            table = False
        if line.strip():
            out.append(f"<p>{_e(line.strip())}</p>")
    if table:
        out.append("</table>")
    return "\n".join(out)


def ci_section(d: dict, name: str) -> str:
    out = [
        f"<h3>{_e(name)}: head {_e(str(d.get('head'))[:12])} vs base {_e(str(d.get('base'))[:12])}: "
        f"exit {_e(d.get('exit'))} ({_e(d.get('reason', ''))})</h3>",
        '<table class="ci"><tr><th class="l">shape</th><th>base ms</th><th>head ms</th><th>change %</th>'
        '<th class="l">verdict</th></tr>',
    ]
    for v in d.get("verdicts", []):
        out.append(
            f'<tr><td class="l">{_e(v["shape"])}</td>{_num(v["base_ms"])}{_num(v["head_ms"])}'
            f'{_num(v["change_pct"], "{:+.1f}")}<td class="l {_e(v["verdict"])}">{_e(v["verdict"])}</td></tr>'
        )
    out.append("</table>")
    return "\n".join(out)


def render(files: Iterable[str], history: Optional[list[dict]] = None, title: str = "Helios results") -> str:
    benches, suites, cis = [], [], []
    for f in files:
        d = read_result(f)
        name = Path(f).name
        schema = d.get("schema")
        if schema == BENCH_SCHEMA:
            benches.append((name, d))
        elif schema in SUITE_SCHEMAS:
            suites.append((name, d))
        elif schema == CI_SCHEMA:
            cis.append((name, d))
        else:
            raise ValueError(
                f"{f}: schema {schema!r}: the page takes {', '.join((BENCH_SCHEMA, *SUITE_SCHEMAS, CI_SCHEMA))}"
            )
    body = [f"<h1>{_e(title)}</h1>"]
    if cis:
        body.append("<h2>helios ci</h2>")
        body += [ci_section(d, n) for n, d in cis]
    if benches:
        body.append("<h2>Latest bench tables</h2>")
        body += [bench_section(d, n) for n, d in benches]
        body.append(fleet_section(benches))
    if suites:
        body.append("<h2>Suites</h2>")
        body += [suite_section(d, n) if d["schema"] == SUITE_SCHEMA else
                 markdown_section(suite_text(d), f"{n}: suite {d['schema'].split('-')[1].split('/')[0]}")
                 for n, d in suites]  # fmt: skip
    body.append(history_section(history or []))  # last: one chart per series, the longest part
    meta = json.dumps({"files": [n for n, _ in benches + suites + cis], "history_points": len(history or [])})
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{STYLE}</style>"
        f'<meta name="helios-report" content="{_e(meta)}"></head><body>\n'
        + "\n".join(b for b in body if b)
        + "\n</body></html>\n"
    )


def write_html(out_dir: Path, files: list[str], history: Optional[list[dict]] = None) -> Path:
    page = render(files, history)  # everything read and rendered before the folder or the old page is touched
    out_dir.mkdir(parents=True, exist_ok=True)
    return Target(out_dir / "index.html", "--html", replace=True).write(page)

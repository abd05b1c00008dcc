"""Tables and figures from committed results: `helios report` and the notebook.

Reads helios-bench/1 (bench), helios-time/1, helios-sweep/1 (one shape) or
helios-sweep/2 (variants x shapes, tools/kernel/sweep.py), and the suites'
helios-suite/1, helios-decode/1 (ms/token against context length) and
helios-train/1 (loss curves) files. Figures
need matplotlib (the [notebook] extra); tables need nothing beyond NumPy."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ...optional import require
from .energy import measured_window
from .format import fmt_rate, md_cell
from .rows import (
    BENCH_SCHEMA,
    DECODE_SCHEMA,
    SUITE_SCHEMAS,
    SWEEP_SCHEMAS,
    TIME_SCHEMA,
    TRAIN_SCHEMA,
    BenchRow,
    DecodeRow,
    SweepRow,
    TrainRow,
    bench_rows,
    commit_label,
    read_result,
    read_row,
    reference_ms,
    reference_tflops,
    shape_flops,
    time_as_bench,
)
from .suite_tables import suite_text

REPORT_SCHEMAS = (BENCH_SCHEMA, TIME_SCHEMA, *SUITE_SCHEMAS, *SWEEP_SCHEMAS)  # what report reads
PARITY = 1.25  # the seeds' target: helios_ms <= 1.25 * cuda_ms


def load_all(paths: Iterable[str]) -> tuple[list[dict], list[dict], list[dict]]:
    """(bench-like results, sweeps, suites: helios-suite/1, helios-decode/1, helios-train/1); each
    dict gets a `_path`. Bench-like:
    helios-bench/1 (matmul and attention) and helios-time/1 (its rows given the
    bench rows' shape). Any other schema is a ValueError naming the file."""
    benches, sweeps, suites = [], [], []
    for p in paths:
        d = read_result(p)
        if not isinstance(d.get("rows", []), list) or not all(isinstance(r, dict) for r in d.get("rows", [])):
            raise ValueError(f"{p}: 'rows' must be a list of objects")
        d["_path"] = p
        schema = d.get("schema")
        if schema == BENCH_SCHEMA:
            benches.append(d)
        elif schema == TIME_SCHEMA:
            benches.append(time_as_bench(d))
        elif schema in SWEEP_SCHEMAS:
            sweeps.append(d)
        elif schema in SUITE_SCHEMAS:
            suites.append(d)
        else:
            raise ValueError(f"{p}: schema {md_cell(schema)!r} is none of {', '.join(REPORT_SCHEMAS)}")
    return benches, sweeps, suites


def load(paths: Iterable[str]) -> tuple[list[dict], list[dict]]:
    """(bench-like results, sweeps) of load_all; suite files are refused here."""
    benches, sweeps, suites = load_all(paths)
    if suites:
        raise ValueError(f"{suites[0]['_path']}: a {suites[0]['schema']} file; use load_all")
    return benches, sweeps


def _draw_sweep(sweep: dict, ax: Any) -> None:
    plot_sweep(sweep, ax)


def _label(d: dict) -> str:
    return f"{md_cell(os.path.basename(d['_path']))} ({commit_label(d)}, vs {md_cell(d.get('reference'))})"


def _ratio(r: BenchRow) -> Optional[float]:
    """Helios time over the reference's, where both were measured."""
    ref = reference_ms(r)
    return r.heliosMs / ref if r.heliosMs and ref else None


def summary_rows(benches: list[dict]) -> list[dict]:
    """One row per (file, shape) with medians, ratio, batch and run-to-run CV."""
    out = []
    for d in benches:
        for r in bench_rows(d):
            hm = r.helios["round_medians_ms"]
            ref_batch = [x for x in r.cuda["batch_ms"] if x is not None]
            out.append(
                {
                    "file": _label(d),
                    "shape": md_cell(r.shape),
                    "helios_ms": r.heliosMs,
                    "ref_ms": reference_ms(r),
                    "ratio": _ratio(r),
                    "helios_tflops": r.heliosTflops,
                    "ref_tflops": reference_tflops(r),
                    "helios_batch_ms": float(np.median(r.helios["batch_ms"])) if r.helios["batch_ms"] else None,
                    "ref_batch_ms": float(np.median(ref_batch)) if ref_batch else None,
                    "round_cv": float(np.std(hm, ddof=1) / np.mean(hm)) if len(hm) > 1 else None,
                    "valid": r.valid,
                    "throttled": r.throttled,
                    "reference": d.get("reference"),
                }
            )
    return out


def table(benches: list[dict], *, markdown: bool = True) -> str:
    rows = summary_rows(benches)
    head = [
        "file",
        "shape",
        "helios median ms",
        "ref median ms",
        "helios/ref",
        "helios TF/s",
        "ref TF/s",
        "helios batch ms",
        "ref batch ms",
        "round CV",
        "flags",
    ]

    def f(x, p=4):
        return "-" if x is None else f"{x:.{p}f}"

    body = [
        [
            r["file"],
            r["shape"],
            f(r["helios_ms"]),
            f(r["ref_ms"]),
            f(r["ratio"], 2),
            fmt_rate(r["helios_tflops"]),
            fmt_rate(r["ref_tflops"]),
            f(r["helios_batch_ms"]),
            f(r["ref_batch_ms"]),
            f(r["round_cv"], 4),
            ",".join(x for x, on in (("INVALID", not r["valid"]), ("throttled", r["throttled"])) if on),
        ]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(lines)


# ---- figures -----------------------------------------------------------------
def _plt():
    matplotlib = require("matplotlib", "figures (helios report --png, the notebook)")
    if not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _shapes(benches: list[dict]) -> list[str]:
    shapes = {r.shape for d in benches for r in bench_rows(d)}
    return sorted(shapes, key=shape_flops)


def _per_shape(benches: list[dict], ax, series, ylabel: str, title: str):
    """One line per (file, series) over the shapes of all files, in FLOP order.
    series: [(label_fn(d), value_fn(row) -> float | None, style)]."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(8, 4))[1]
    shapes = _shapes(benches)
    x = np.arange(len(shapes))
    for d in benches:
        by = {r.shape: r for r in bench_rows(d)}
        for label, value, style in series:
            y = [(value(by[s]) if s in by else None) for s in shapes]
            ax.plot(x, [np.nan if v is None else v for v in y], style, label=label(d))
    ax.set_xticks(x, shapes, rotation=20)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return ax


def plot_tflops(benches: list[dict], ax=None):
    """TFLOP/s vs shape for Helios and the reference of each file."""
    ax = _per_shape(
        benches,
        ax,
        [
            (lambda d: f"Helios: {_label(d)}", lambda r: r.heliosTflops, "o-"),
            (lambda d: f"{d.get('reference')}: {_label(d)}", reference_tflops, "s--"),
        ],
        "TFLOP/s (median)",
        "Throughput by shape",
    )
    ax.legend(fontsize=7)
    return ax


def plot_attention(result: dict, ax=None):
    """Attention bench (workload 'attention'): TFLOP/s per shape, Helios beside each
    torch SDPA backend (a missing bar: the backend refused the shape)."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(10, 4))[1]
    rows = bench_rows(result)
    sides = ["helios"] + list(result.get("backends", []))
    x = np.arange(len(rows))
    width = 0.8 / max(1, len(sides))
    for i, side in enumerate(sides):
        ys = []
        for r in rows:
            if side == "helios":
                ys.append(r.heliosTflops or np.nan)
            else:
                b = (r.backends or {}).get(side, {})
                ys.append(
                    shape_flops(r.shape) / (b["median_ms"] * 1e-3) / 1e12
                    if b.get("available") and b.get("valid")
                    else np.nan
                )
        ax.bar(
            x + (i - (len(sides) - 1) / 2) * width, ys, width, label="Helios" if side == "helios" else f"SDPA {side}"
        )
    ax.set_xticks(x, [r.shape for r in rows], rotation=25, fontsize=8)
    ax.set_ylabel("TFLOP/s (median)")
    ax.set_title(f"Attention on {result.get('helios', {}).get('name', '?')}")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    return ax


def plot_train(result: dict, ax=None):
    """helios-train/1: the loss per step of each adapter that trained (helios suite
    train), its largest deviation from torch_eager's in the legend."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(10, 4))[1]
    for r in (read_row(TrainRow, x) for x in result.get("rows", [])):
        if r.loss is None:
            continue
        dev = r.loss_max_rel_dev_vs_eager
        extra = f" (max dev {dev * 100:.2f}%)" if dev is not None else ""
        ax.plot(np.arange(len(r.loss)), r.loss, label=f"{r.adapter}{extra}", lw=1.2)
    c = result.get("config", {})
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats)")
    ax.set_title(
        f"{result.get('device', '?')}: {c.get('layers')} layers, d={c.get('d_model')}, seq {c.get('seq')}, "
        f"batch {c.get('batch')}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return ax


def plot_decode(result: dict, ax=None):
    """helios-decode/1: ms/token (p50) against the context length, per adapter."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(10, 4))[1]
    for r in (read_row(DecodeRow, x) for x in result.get("rows", [])):
        pts = r.contexts or []
        if pts:
            ax.plot([p["context"] for p in pts], [p["ms_per_token_p50"] for p in pts], "o-", label=r.adapter)
    c = result.get("config", {})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (cached positions)")
    ax.set_ylabel("ms/token (p50)")
    ax.set_title(f"{result.get('device', '?')}: {c.get('layers')} layers, d={c.get('d_model')}, batch 1", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return ax


def plot_ratio(benches: list[dict], ax=None):
    """Helios time / reference time per shape, against the 1.25x parity line."""
    ax = _per_shape(
        benches,
        ax,
        [(_label, _ratio, "o-")],
        "Helios time / reference time",
        "Distance to parity (lower is better)",
    )
    ax.axhline(PARITY, color="red", ls="--", label=f"parity target ({PARITY}x)")
    ax.axhline(1.0, color="gray", ls=":")
    ax.legend(fontsize=7)
    return ax


def sweep_matrix(sweep: dict) -> tuple[list[str], list[str], np.ndarray]:
    """helios-sweep/1: rows are coop shape + accumulator, columns subgroup tiling, load
    path, stages. helios-sweep/2: rows are variants, columns shapes. TF/s (NaN:
    rejected or absent)."""
    variants = [read_row(SweepRow, r) for r in sweep["rows"]]
    if sweep.get("schema") == "helios-sweep/2":
        shapes = list(sweep["shapes"])
        rows = [r.variant.replace("coop:", "").replace(":acc=f32", "").replace(":load=shared", "") for r in variants]
        m = np.full((len(rows), len(shapes)), np.nan)
        for i, r in enumerate(variants):
            for j, s in enumerate(shapes):
                t = (r.timings or {}).get(s)
                if r.check_fails == 0 and t:
                    m[i, j] = t["tflops"]
        return rows, shapes, m
    cells: dict[tuple[str, str], float] = {}
    for r in variants:
        parts = r.variant.split(":")
        if parts[0] == "scalar":
            row, col = "scalar", "scalar"
        else:
            row = f"{parts[1]} {parts[4]}"
            col = " ".join([parts[3], parts[5].replace("load=", ""), parts[6]])
        cells[(row, col)] = (np.nan if r.tflops is None else r.tflops) if r.check_fails == 0 else np.nan
    rows = sorted({k[0] for k in cells})
    cols = sorted({k[1] for k in cells})
    m = np.full((len(rows), len(cols)), np.nan)
    for (name, c), v in cells.items():
        m[rows.index(name), cols.index(c)] = v
    return rows, cols, m


def plot_sweep(sweep: dict, ax=None):
    plt = _plt()
    rows, cols, m = sweep_matrix(sweep)
    ax = ax or plt.subplots(figsize=(max(8, len(cols) * 0.5), 1 + 0.5 * len(rows)))[1]
    im = ax.imshow(m, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    for i in range(len(rows)):
        for j in range(len(cols)):
            if np.isfinite(m[i, j]):
                ax.text(j, i, f"{m[i, j]:.0f}", ha="center", va="center", fontsize=6, color="white")
    ax.figure.colorbar(im, ax=ax, label="TF/s (blank: rejected or absent)")
    where = sweep.get("shape") or f"{len(cols)} shapes"
    ax.set_title(f"Variant sweep at {where} ({sweep.get('device', {}).get('name', '?')})")
    return ax


def plot_variance(benches: list[dict], ax=None):
    """Round medians of each shape, normalised to their mean: run-to-run spread."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(8, 4))[1]
    data, labels = [], []
    for s in _shapes(benches):
        for side in ("helios", "ref"):
            meds = [
                m
                for d in benches
                for r in bench_rows(d)
                if r.shape == s
                for m in (r.helios if side == "helios" else r.cuda)["round_medians_ms"]
            ]
            if len(meds) > 1:
                data.append(np.asarray(meds) / np.mean(meds))
                labels.append(f"{s}\n{side}")
    if data:
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=6)
    ax.set_ylabel("round median / mean")
    ax.set_title("Run-to-run variance")
    ax.grid(alpha=0.3)
    return ax


def plot_energy(benches: list[dict], ax=None):
    """TF/s against average watts of each row's energy windows (bench rows with
    ``energy``): Helios and the reference, one point per row and side."""
    plt = _plt()
    ax = ax or plt.subplots(figsize=(7, 4.5))[1]
    for side, marker in (("helios", "o"), ("reference", "s")):
        pts = [
            (w["watts"], w["tflops_per_watt"] * w["watts"], str(r.shape))
            for d in benches
            for r in bench_rows(d)
            if (w := measured_window(r, side)) is not None
        ]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=side)
            for x, y, shape in pts:
                ax.annotate(shape, (x, y), fontsize=6)
    ax.set_xlabel("average W over the energy window")
    ax.set_ylabel("TF/s")
    ax.set_title("Throughput against power (NVML energy windows)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return ax


def write_pngs(benches: list[dict], sweeps: list[dict], outdir: str, suites: Iterable[dict] = ()) -> list[str]:
    plt = _plt()
    os.makedirs(outdir, exist_ok=True)
    paths = []
    jobs: list[tuple[str, Callable[[Any], Any]]] = []
    decodes = [s for s in suites if s.get("schema") == DECODE_SCHEMA]
    for i, s in enumerate(decodes):
        jobs.append((f"decode{i}.png", functools.partial(plot_decode, s)))
    trains = [s for s in suites if s.get("schema") == TRAIN_SCHEMA]
    for i, s in enumerate(trains):
        jobs.append((f"train{i}.png", functools.partial(plot_train, s)))
    if benches:
        jobs += [
            ("tflops.png", lambda ax: plot_tflops(benches, ax)),
            ("ratio.png", lambda ax: plot_ratio(benches, ax)),
            ("variance.png", lambda ax: plot_variance(benches, ax)),
        ]
    for i, s in enumerate(sweeps):
        jobs.append((f"sweep{i}.png", functools.partial(_draw_sweep, s)))
    for name, draw in jobs:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        draw(ax)
        fig.tight_layout()
        path = os.path.join(outdir, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _sweep2_summary(s: dict) -> str:
    timed = [r for r in (read_row(SweepRow, x) for x in s["rows"]) if r.check_fails == 0 and r.timings]
    lines = [
        f"sweep {os.path.basename(s['_path'])}: {len(s['rows'])} variants x {len(s['shapes'])} shapes, "
        f"{len(s['rows']) - len(timed)} rejected"
    ]
    for shape in s["shapes"]:
        have = [r for r in timed if shape in r.timings]
        if have:
            best = max(have, key=lambda r: r.timings[shape]["tflops"])
            lines.append(f"  {shape}: best {best.variant} {fmt_rate(best.timings[shape]['tflops'])} TF/s")
    return "\n".join(lines)


def report(paths: list[str], *, markdown: bool = False, png_dir: Optional[str] = None) -> str:
    benches, sweeps, suites = load_all(paths)
    parts = []
    if benches:
        parts.append(table(benches, markdown=markdown))
    for s in suites:
        parts.append(f"{md_cell(os.path.basename(s['_path']))} ({commit_label(s)}):\n" + suite_text(s).rstrip())
    for s in sweeps:
        if s.get("schema") == "helios-sweep/2":
            parts.append(_sweep2_summary(s))
            continue
        passed = [r for r in (read_row(SweepRow, x) for x in s["rows"]) if r.check_fails == 0 and r.tflops is not None]
        best = max(passed, key=lambda r: r.tflops or 0.0) if passed else None
        parts.append(
            f"sweep {os.path.basename(s['_path'])} at {s.get('shape')}: {len(s['rows'])} variants, "
            f"{len(s['rows']) - len(passed)} rejected"
            + (f"; best {best.variant} {fmt_rate(best.tflops)} TF/s" if best else "")
        )
    if png_dir:
        parts.append("\n".join(f"wrote {p}" for p in write_pngs(benches, sweeps, png_dir, suites)))
    return "\n\n".join(parts)

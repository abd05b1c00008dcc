"""The markdown table of an attention bench result (helios-bench/1 rows with every
SDPA backend beside them)."""

from __future__ import annotations

from .energy import energy_lines
from .format import fmt_ms, fmt_rate, fmt_ratio, fmt_tflops, status_word, stopping_line
from .rows import bench_rows, reference_ms


def attention_markdown(result: dict) -> str:
    ref = result.get("reference", "?")
    lines = [
        f"Helios attention{' backward' if result.get('backward') else ''} vs {ref} on {result.get('helios', {}).get('name', '?')} ({result.get('dtype', 'float16')}, "
        f"{'causal' if result.get('causal') else 'non-causal'}, iters={result['iters']}, "
        f"repeats={result['repeats']}{', cold L2' if result.get('flush_l2') else ''}; "
        f"FLOPs {result['environment']['flops']})",
        "",
    ]
    if result.get("check"):
        lines += [f"gate: {result['check']['line']}", ""]
    if result["status"] != "ok":
        lines += [f"**{status_word(result['status'])}**: {result.get('failure')}", ""]
    backends = result.get("backends", [])

    f = fmt_ms
    lines.append(
        "| B x H x S x d | helios median ms | TFLOP/s | "
        + " | ".join(f"{b} ms" for b in backends)
        + " | best | helios/best time | GB/s h | queries/s h | p95 / p99 h ms | flags |"
    )
    lines.append("|---" * (9 + len(backends)) + "|")
    for r in bench_rows(result):
        cells = []
        for be in backends:
            x = (r.backends or {}).get(be, {})
            cells.append(f(x["median_ms"]) if x.get("available") and x.get("valid") else "n/a")
        ref_ms = reference_ms(r)
        ratio = r.heliosMs / ref_ms if r.heliosMs and ref_ms else None
        flags = ",".join(
            x for x, on in (("INVALID", not r.valid), ("throttled", r.throttled), ("low_clock", r.low_clock)) if on
        )
        hh = r.helios
        lines.append(
            f"| {r.shape} | {f(r.heliosMs)} | {fmt_tflops(r.heliosTflops)} | "
            + " | ".join(cells)
            + f" | {r.referenceBackend or r.cudaBackend or '-'} | {fmt_ratio(ratio)} | {fmt_rate(hh['bandwidth_gbs'])} | "
            f"{hh['queries_per_s']:.3g} | {f(hh['p95_ms'])} / {f(hh['p99_ms'])} | {flags} |"
        )
    if result.get("rows"):
        lines += ["", "variants:"] + [f"- {r.shape}: {r.variant}" for r in bench_rows(result)]
    lines.extend(energy_lines(result.get("rows", []), result.get("reference")))
    stop = stopping_line(result)
    if stop:
        lines.append(stop)
    return "\n".join(lines) + "\n"

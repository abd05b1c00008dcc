"""The suites' tables: `helios suite mlp` (helios-suite/1) and `helios suite decode`
(helios-decode/1) as markdown, for the suite's own output and for `helios report`."""

from __future__ import annotations

from typing import Optional

from .format import fmt_mib, fmt_tflops, md_cell
from .rows import DecodeRow, SuiteRow, read_row


def suite_markdown(result: dict) -> str:
    w = result["workload"]
    lines = [
        f"# helios suite mlp ({result['tag']}): {w['formula']}, d={w['d_model']}, hidden={w['hidden']}",
        "",
        f"device: {result.get('helios', {}).get('name')}; iters {result['iters']}, "
        f"warmup {result['warmup']}; commit {result['git'].get('commit')}",
        "",
        "| tokens | adapter | status | p50 ms | p95 ms | mean ms | tokens/s | TF/s | peak memory MiB | "
        "host wall p50 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (read_row(SuiteRow, x) for x in result["rows"]):
        lat = r.latency_ms
        if lat:
            wall = (r.wall_ms or {}).get("p50")
            status = "ok, low clock" if r.low_clock else "ok"
            if r.untrusted:
                status += ", not gated"
            lines.append(
                f"| {r.tokens} | {md_cell(r.adapter)} | {status} | {lat['p50']:.4f} | {lat['p95']:.4f} | "
                f"{lat['mean']:.4f} | {r.throughput_tokens_per_sec:.0f} | {fmt_tflops(r.tflops)} | "
                f"{fmt_mib(r.peak_memory_bytes)} | {'' if wall is None else f'{wall:.3f}'} |"
            )
        else:
            lines.append(f"| {r.tokens} | {md_cell(r.adapter)} | {md_cell(r.status)} | | | | | | | |")
    lines += [
        "",
        "helios, torch_*: GPU time per forward (timestamps / CUDA events); helios_per_call: host "
        "wall clock (uploads + downloads included); helios_torch: CUDA events on torch's stream like "
        "torch_*, forwards queued back to back (device-to-device staging, and per forward one pair of "
        "switches between the CUDA and the Vulkan context, included; ordered without host waits where the "
        "device shares a semaphore with CUDA), its host wall column one forward waited for alone. Peak memory: Helios's device-local "
        "allocations (weights, activations, workspace), torch.cuda.max_memory_allocated for torch.",
    ]
    ext = result.get("external_adapters") or {}
    if ext:
        lines += ["", "External adapters (their own timers, as each reports; 'not gated': it saved no output):"]
        lines += [f"- {md_cell(n)}: `{md_cell(c)}`" for n, c in ext.items()]
    return "\n".join(lines) + "\n"


def _f(x: Optional[float], digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _ramp(r: Optional[dict]) -> str:
    """The SM clock the roof's read ran at, where a ramp read it."""
    if not r or not r.get("done"):
        return ""
    return f"; SM clock {r['sm_clock_mhz']:.0f} of {r['max_sm_clock_mhz']:.0f} MHz after the ramp"


def decode_markdown(result: dict) -> str:
    c = result["config"]
    roof = result.get("roof_gb_s")
    lines = [
        f"Greedy decoding at batch 1 on {result.get('device')}: {c['layers']} layers, d={c['d_model']}, "
        f"{c['heads']} heads, vocab {c['vocab']}, {result.get('weight_bytes', 0) / 1e6:.1f} MB of 16-bit weights; "
        f"prompt {c['prompt']}, {c['new']} new tokens; memory roof "
        + (
            f"{roof:.0f} GB/s (1 GiB read, CUDA events{_ramp(result.get('roof_clock_warmup'))})"
            if roof
            else "not measured (no CUDA)"
        ),
        "",
        "| adapter | status | tokens/s | ms/token p50 | p95 | host ms | GPU ms | % roof | same tokens as eager | "
        "peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [read_row(DecodeRow, x) for x in result["rows"]]
    for r in rows:
        if r.tokens_per_s is None:
            lines.append(f"| {r.adapter} | {md_cell(r.status)} |" + " - |" * 8)
            continue
        same, div = r.same_tokens, r.first_divergence
        same_s = "-" if same is None else "yes" if same else f"no: at {div}" + (" (a tie)" if r.tie else "")
        lines.append(
            f"| {r.adapter} | {r.status} | {r.tokens_per_s:.0f} | {_f(r.ms_per_token_p50)} | "
            f"{_f(r.ms_per_token_p95)} | {_f(r.host_ms_p50, 4)} | {_f(r.gpu_ms_p50)} | "
            f"{_f(r.roof_pct, 1)} | {same_s} | {fmt_mib(r.peak_memory_bytes)} |"
        )
    ctx = [r for r in rows if r.contexts]
    if ctx:
        lens = [x["context"] for x in ctx[0].contexts]
        lines += ["", "ms/token (p50) by context length (GPU ms, % roof):", ""]
        lines.append("| adapter | " + " | ".join(str(n) for n in lens) + " |")
        lines.append("|---|" + "---|" * len(lens))
        for r in ctx:
            cells = [
                f"{x['ms_per_token_p50']:.3f} ({_f(x.get('gpu_ms_p50'))}, {_f(x.get('roof_pct'), 1)}%)"
                for x in r.contexts
            ]
            lines.append(f"| {r.adapter} | " + " | ".join(cells) + " |")
    lines += [f"\n{r.adapter}: {r.dispatches} dispatches and {r.barriers} barriers a step" for r in rows
              if r.dispatches is not None]  # fmt: skip
    return "\n".join(lines) + "\n"

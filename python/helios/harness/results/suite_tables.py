"""The suites' tables: `helios suite mlp` (helios-suite/1) and `helios suite decode`
(helios-decode/1) as markdown, for the suite's own output and for `helios report`."""

from __future__ import annotations

from typing import Any, Optional

from .format import STATUS_CELL, fmt_field, fmt_mib, fmt_num, fmt_tflops, md_cell
from .rows import DECODE_SCHEMA, TRAIN_SCHEMA, DecodeRow, SuiteRow, TrainRow, read_row


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
            lines.append(f"| {r.tokens} | {md_cell(r.adapter)} | {md_cell(r.status, STATUS_CELL)} | | | | | | | |")
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


_f = fmt_num


def _ramp(r: Optional[dict]) -> str:
    """The SM clock the roof's read ran at, where a ramp read it."""
    if not r or not r.get("done"):
        return ""
    return f"; SM clock {r['sm_clock_mhz']:.0f} of {r['max_sm_clock_mhz']:.0f} MHz after the ramp"


def bench_text(build: Any, tests: list) -> str:
    """llama-bench's tests as it names them (pp512, tg128 @ d1024): tokens/s, avg +- stddev."""

    def num(v: Any) -> str:  # the file's numbers only: anything else shows as '-'
        return fmt_num(v if isinstance(v, (int, float)) and not isinstance(v, bool) else None, 1)

    out = []
    for t in (t for t in tests if isinstance(t, dict)):
        kind = f"pp{md_cell(t.get('n_prompt'))}" if t.get("n_prompt") else f"tg{md_cell(t.get('n_gen'))}"
        at = f" @ d{md_cell(t['n_depth'])}" if t.get("n_depth") else ""
        out.append(f"{kind}{at} {num(t.get('avg_ts'))} +- {num(t.get('stddev_ts'))} tokens/s")
    b = build if isinstance(build, dict) else {}
    where = ", ".join(md_cell(b[k]) for k in ("backend", "gpu_info", "build_commit") if b.get(k))
    return "; ".join(out) + (f"; {where}" if where else "")


def step_counts(r: DecodeRow) -> str:
    """A plan's step: its dispatches and barriers, and where the GPU time and % roof are
    known, the GPU time off the roof over its barriers of both kinds (what a barrier costs
    at most: everything off the roof counted against them)."""
    grid = r.grid_barriers or 0
    text = f"{r.dispatches} dispatches, {r.barriers} barriers and {grid} grid barriers a step"
    if r.run_grid:
        regs = f", {r.run_registers} registers a thread" if r.run_registers else ""
        text += f" (runs of {r.run_grid} workgroups{regs})"
    waits = r.barriers + grid
    if r.gpu_ms_p50 and r.roof_pct and waits:
        off_us = r.gpu_ms_p50 * 1e3 * (1.0 - r.roof_pct / 100.0)
        text += f"; {off_us:.0f} us off the roof, {off_us / waits:.2f} us a barrier at most"
    return text


def decode_markdown(result: dict) -> str:
    """The decode suite's tables; a field the file leaves out (its schema's config is
    open) shows as '?' or '-'."""
    c = {k: fmt_field(v) for k, v in (result.get("config") or {}).items()}
    c = {k: c.get(k, "?") for k in ("layers", "d_model", "heads", "vocab", "prompt", "new")}
    roof = result.get("roof_gb_s")
    wbytes = result.get("weight_bytes")
    lines = [
        f"Greedy decoding at batch 1 on {md_cell(result.get('device'))}: {c['layers']} layers, d={c['d_model']}, "
        f"{c['heads']} heads, vocab {c['vocab']}, {'?' if wbytes is None else f'{wbytes / 1e6:.1f}'} MB of 16-bit "
        f"weights; prompt {c['prompt']}, {c['new']} new tokens; memory roof "
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
            lines.append(f"| {md_cell(r.adapter)} | {md_cell(r.status, STATUS_CELL)} |" + " - |" * 8)
            continue
        same, div = r.same_tokens, r.first_divergence
        same_s = "-" if same is None else "yes" if same else f"no: at {div}" + (" (a tie)" if r.tie else "")
        lines.append(
            f"| {md_cell(r.adapter)} | {md_cell(r.status, STATUS_CELL)} | {_f(r.tokens_per_s, 0)} | {_f(r.ms_per_token_p50)} | "
            f"{_f(r.ms_per_token_p95)} | {_f(r.host_ms_p50, 4)} | {_f(r.gpu_ms_p50)} | "
            f"{_f(r.roof_pct, 1)} | {same_s} | {fmt_mib(r.peak_memory_bytes)} |"
        )
    ctx = [r for r in rows if r.contexts]
    if ctx:
        lens = sorted({x["context"] for r in ctx for x in r.contexts})
        lines += ["", "ms/token (p50) by context length (GPU ms, % roof):", ""]
        lines.append("| adapter | " + " | ".join(str(n) for n in lens) + " |")
        lines.append("|---|" + "---|" * len(lens))
        for r in ctx:
            at = {x["context"]: x for x in r.contexts}
            cells = [
                f"{at[n]['ms_per_token_p50']:.3f} ({_f(at[n].get('gpu_ms_p50'))}, {_f(at[n].get('roof_pct'), 1)}%)"
                if n in at
                else "-"
                for n in lens
            ]
            lines.append(f"| {md_cell(r.adapter)} | " + " | ".join(cells) + " |")
    lines += [f"\n{r.adapter}: {step_counts(r)}" for r in rows if r.dispatches is not None]
    lines += [f"\n{r.adapter}: llama-bench's own tests ({bench_text(r.build, r.llama_bench)})" for r in rows
              if r.llama_bench]  # fmt: skip
    pre = [r for r in rows if r.prefill_ms_p50 is not None]
    if pre:
        lines += ["", f"Prefill of a {pre[0].prefill_tokens}-token prompt, the first token included (p50):", "",
                  "| adapter | ms to the first token | GPU ms | prompt tokens/s |", "|---|---|---|---|"]  # fmt: skip
        lines += [f"| {md_cell(r.adapter)} | {r.prefill_ms_p50:.3f} | {_f(r.prefill_gpu_ms_p50)} | "
                  f"{_f(r.prefill_tokens_per_s, 0)} |" for r in pre]  # fmt: skip
    why = result.get("helios_bf16_coop_unavailable")
    if why:
        lines += ["", f"Helios's bfloat16 products ran on the scalar fp32 path, not on cooperative matrices: "
                      f"{md_cell(why)}. A bfloat16 prompt's rows measure that path."]  # fmt: skip
    return "\n".join(lines) + "\n"


# How a training run averaged gradients (helios-train/1's distributed.grad_sync).
GRAD_SYNC_WORDS = {
    "ddp": "DistributedDataParallel",
    "after-backward": "one all-reduce of the gradients after the backward",
    "none": "no gradient averaging (the replicas drift apart)",
}


def train_markdown(result: dict) -> str:
    c = {k: fmt_field(v) for k, v in (result.get("config") or {}).items()}
    c = {k: c.get(k, "?") for k in ("layers", "d_model", "heads", "seq", "batch", "vocab", "steps")}
    batch = (result.get("config") or {}).get("batch")
    rows = [read_row(TrainRow, r) for r in result["rows"]]
    lines = [
        f"Training through each adapter on {result.get('device')}: {c['layers']} layers, d={c['d_model']}, "
        f"{c['heads']} heads, seq {c['seq']}, batch {c['batch']}, vocab {c['vocab']}, {c['steps']} steps "
        f"(bf16 products, fp32 master weights, AdamW)"
        + (
            f"; {world} GPUs, {GRAD_SYNC_WORDS.get(dist.get('grad_sync') or 'ddp', md_cell(dist.get('grad_sync')))} over NCCL, "
            f"global batch {'?' if batch is None else world * batch}"
            + (
                "; comm hooks: " + ", ".join(f"{r.adapter} {r.ddp_comm_hook}" for r in hooked)
                if (hooked := [r for r in rows if r.ddp_comm_hook])
                else ""
            )
            if (world := (dist := result.get("distributed") or {}).get("world_size") or 1) > 1
            else ""
        ),
        "",
        "| adapter | status | tokens/s | per GPU | step ms | fwd / bwd / opt ms | Helios GPU spans | first loss | "
        "last loss | max dev vs eager | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r.loss or r.step_ms_p50 is None:
            lines.append(f"| {r.adapter} | {md_cell(r.status, STATUS_CELL)} | - | - | - | - | - | - | - | - | - |")
            continue
        hk, dev = r.helios_kernel_ms_p50, r.loss_max_rel_dev_vs_eager
        share = f"{hk:.3f} ms ({hk / r.step_ms_p50 * 100:.0f}%)" if hk is not None and r.step_ms_p50 else "-"
        per_gpu = r.tokens_per_s if r.tokens_per_s_per_gpu is None else r.tokens_per_s_per_gpu
        lines.append(
            f"| {md_cell(r.adapter)} | {md_cell(r.status, STATUS_CELL)} | {_f(r.tokens_per_s, 0)} | {_f(per_gpu, 0)} | "
            f"{r.step_ms_p50:.3f} | {_f(r.forward_ms_p50)} / {_f(r.backward_ms_p50)} / "
            f"{_f(r.optimizer_ms_p50)} | {share} | "
            f"{r.loss[0]:.4f} | {r.loss[-1]:.4f} | {'-' if dev is None else f'{dev * 100:.2f}%'} | "
            f"{fmt_mib(r.peak_memory_bytes)} |"
        )
    for r in rows:
        if r.op_split_ms:
            split = ", ".join(f"{k} {v:.3f}" for k, v in r.op_split_ms.items() if isinstance(v, (int, float)))
            lines += ["", f"{md_cell(r.adapter)}: GPU ms by kind of op, each kind replayed alone: {split}"]
    inf = result.get("inference")
    if inf and _smoke_readable(inf):
        divs = [e["first_divergence"] for e in inf["prompts"]]
        rates = inf["decode_tokens_per_s"]
        lines += [
            "",
            f"Inference smoke (greedy, KV cache, {inf['new_tokens']} new tokens from each of 3 prompts, the "
            f"torch_eager-trained weights; Helios through the decode plan): same tokens: {inf['same_tokens']} (first divergence per prompt: "
            f"{divs}{'; each at a tie of torch logits' if not inf['same_tokens'] and inf.get('same_tokens_up_to_ties') else ''}"
            f"); decode tokens/s torch {rates['torch']:.0f}, helios {rates['helios']:.0f}",
        ]
    elif inf:
        lines += ["", f"Inference smoke: {md_cell(inf.get('error'))}"]
    if any(r.helios_kernel_ms_p50 is not None for r in rows):
        lines += [
            "",
            "Helios GPU spans: the step's ordered Helios submissions, timestamp to timestamp, summed (p50 "
            "over the timed steps) and as a share of the step. Each span also holds the GPU's switches "
            "between the CUDA and the Vulkan context and any CUDA work time-sliced into it: an upper "
            "bound on the time in Helios kernels, not its measure.",
        ]
    return "\n".join(lines) + "\n"


def _smoke_readable(inf: dict) -> bool:
    """The inference smoke's block has what its line reads (an open part of the schema)."""
    prompts, rates = inf.get("prompts"), inf.get("decode_tokens_per_s")
    return (
        isinstance(prompts, list)
        and all(isinstance(e, dict) and "first_divergence" in e for e in prompts)
        and isinstance(rates, dict)
        and all(isinstance(rates.get(k), (int, float)) for k in ("torch", "helios"))
        and "new_tokens" in inf
        and "same_tokens" in inf
    )


def suite_text(result: dict) -> str:
    """A suite file's markdown tables, by its schema."""
    schema = result.get("schema")
    if schema == DECODE_SCHEMA:
        return decode_markdown(result)
    return train_markdown(result) if schema == TRAIN_SCHEMA else suite_markdown(result)

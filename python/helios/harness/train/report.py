"""The training result as a markdown table."""

from __future__ import annotations

from ..results.format import fmt_mib, md_cell
from ..results.rows import TrainRow, read_row
from .config import GRAD_SYNC_WORDS


def train_markdown(result: dict) -> str:
    c = result["config"]
    rows = [read_row(TrainRow, r) for r in result["rows"]]
    lines = [
        f"Training through each adapter on {result.get('device')}: {c['layers']} layers, d={c['d_model']}, "
        f"{c['heads']} heads, seq {c['seq']}, batch {c['batch']}, vocab {c['vocab']}, {c['steps']} steps "
        f"(bf16 products, fp32 master weights, AdamW)"
        + (
            f"; {world} GPUs, {GRAD_SYNC_WORDS[result['distributed'].get('grad_sync') or 'ddp']} over NCCL, "
            f"global batch {world * c['batch']}"
            + (
                "; comm hooks: " + ", ".join(f"{r.adapter} {r.ddp_comm_hook}" for r in hooked)
                if (hooked := [r for r in rows if r.ddp_comm_hook])
                else ""
            )
            if (world := result.get("distributed", {}).get("world_size", 1)) > 1
            else ""
        ),
        "",
        "| adapter | status | tokens/s | per GPU | step ms | fwd / bwd / opt ms | Helios GPU spans | first loss | "
        "last loss | max dev vs eager | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.loss is None:
            lines.append(f"| {r.adapter} | {md_cell(r.status)} | - | - | - | - | - | - | - | - | - |")
            continue
        hk, dev = r.helios_kernel_ms_p50, r.loss_max_rel_dev_vs_eager
        share = f"{hk:.3f} ms ({hk / r.step_ms_p50 * 100:.0f}%)" if hk is not None else "-"
        per_gpu = r.tokens_per_s if r.tokens_per_s_per_gpu is None else r.tokens_per_s_per_gpu
        lines.append(
            f"| {r.adapter} | {r.status} | {r.tokens_per_s:.0f} | {per_gpu:.0f} | {r.step_ms_p50:.3f} | "
            f"{r.forward_ms_p50:.3f} / {r.backward_ms_p50:.3f} / {r.optimizer_ms_p50:.3f} | {share} | "
            f"{r.loss[0]:.4f} | {r.loss[-1]:.4f} | {'-' if dev is None else f'{dev * 100:.2f}%'} | "
            f"{fmt_mib(r.peak_memory_bytes)} |"
        )
    inf = result.get("inference")
    if inf and "prompts" in inf:
        divs = [e["first_divergence"] for e in inf["prompts"]]
        rates = inf["decode_tokens_per_s"]
        lines += [
            "",
            f"Inference smoke (greedy, KV cache, {inf['new_tokens']} new tokens from each of 3 prompts, the "
            f"torch_eager-trained weights): same tokens: {inf['same_tokens']} (first divergence per prompt: "
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

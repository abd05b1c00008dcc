#!/usr/bin/env python3
"""Writes notebooks/explore.ipynb (without outputs) from the cells below.
Outputs come from executing it: tools/run_notebook.py."""

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    new_markdown_cell("""# Helios: explore the device and the results

What the Vulkan cooperative-matrix matmul can do on this machine, and how it
compares with CUDA. Runs headless (`tools/run_notebook.py`); CI executes it on
lavapipe with small shapes (`HELIOS_NOTEBOOK_QUICK=1`), so it cannot rot."""),
    new_code_cell("""import glob, json, os
import matplotlib.pyplot as plt
import helios
from helios.harness.results import report
from helios.harness import BenchConfig, bench_markdown, run_bench

dev = helios.Device()
QUICK = os.environ.get("HELIOS_NOTEBOOK_QUICK") == "1" or dev.info["device_type"] == "cpu"
# Committed measurements live in a checkout's results/ (HELIOS_RESULTS elsewhere).
RESULTS = os.environ.get("HELIOS_RESULTS") or os.path.join("..", "results")
print("committed results:", os.path.abspath(RESULTS) if os.path.isdir(RESULTS) else
      f"{RESULTS} not found: set HELIOS_RESULTS to a checkout's results/ (those cells stay empty)")
print("helios", helios.__version__, "| quick mode" if QUICK else "| full mode")"""),
    new_markdown_cell(
        "## The device\nCapabilities as Vulkan reports them; kernels are chosen from the cooperative-matrix table, never from the name."
    ),
    new_code_cell("""info = dev.info
for key in ("name", "driver_name", "driver_info", "api_version", "subgroup_size", "shared_memory_bytes",
            "timestamp_period_ns", "cooperative_matrix", "cooperative_matrix2", "bf16"):
    print(f"{key:22} {info[key]}")
print("\\ncooperative matrix shapes (f16 inputs):")
for r in info["cooperative_matrix_properties"]:
    if r["a"] == "f16":
        print(f"  {r['m']}x{r['n']}x{r['k']}  -> {r['c']}")
print("\\ndefault variant:", dev.default_variant(), f"({len(dev.variants())} variants valid here)")"""),
    new_markdown_cell(
        "## A quick bench\nThe same protocol as `helios bench`: the 384^3 gate, then GPU-timed medians for both sides."
    ),
    new_code_cell("""shapes = [(64, 64, 64), (127, 129, 65)] if QUICK else [(1024,) * 3, (2048,) * 3, (4096,) * 3]
dev.close()   # run_bench opens its own Device
quick = run_bench(BenchConfig(shapes=shapes, iters=5 if QUICK else 50, warmup=2 if QUICK else 10,
                              repeats=2, ref="auto"), progress=False)
quick["_path"] = "this run"
print(bench_markdown(quick))"""),
    new_markdown_cell(
        "## Committed results\nEvery set in `results/` was measured on a leased GPU, with the commit it measured (`results/README.md`)."
    ),
    new_code_cell("""benches, sweeps = report.load(sorted(glob.glob(os.path.join(RESULTS, "*gemm*", "gemm*.json")) +
                                   glob.glob(os.path.join(RESULTS, "*sweep*", "sweep*.json"))))
print(report.table(benches, markdown=False))"""),
    new_markdown_cell("## Throughput and distance to parity\nThe seeds' target is Helios time <= 1.25x CUDA time."),
    new_code_cell("""fig, axes = plt.subplots(1, 2, figsize=(15, 4.5))
report.plot_tflops(benches + [quick], axes[0])
report.plot_ratio(benches + [quick], axes[1])
fig.tight_layout()
plt.show()"""),
    new_markdown_cell(
        "## Variant sweep\nTF/s per variant at one shape; blank cells were rejected by the correctness gate (fp16 accumulation) or do not exist."
    ),
    new_code_cell("""for s in sweeps:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    report.plot_sweep(s, ax)
    fig.tight_layout()
    plt.show()"""),
    new_markdown_cell(
        "## Attention\nThe flash-attention forward against every torch SDPA backend (`helios bench --workload=attention`): "
        "the gate, then GPU-timed medians per shape. Without CUDA the reference is numpy on the CPU, labelled so."
    ),
    new_code_cell("""from helios.harness import AttnBenchConfig, attention_markdown, parse_attention_shapes, run_attention_bench
attn = run_attention_bench(AttnBenchConfig(shapes=parse_attention_shapes("small" if QUICK else "short,baseline,anchor"),
                                           iters=3 if QUICK else 50, warmup=1 if QUICK else 10,
                                           warmup_ms=0 if QUICK else 200), progress=False)
print(attention_markdown(attn))
fig, ax = plt.subplots(figsize=(12, 4))
report.plot_attention(attn, ax)
fig.tight_layout()
plt.show()"""),
    new_markdown_cell("Committed H100 attention results (Helios vs each SDPA backend, same protocol):"),
    new_code_cell("""committed_attn = []
for path in glob.glob(os.path.join(RESULTS, "h100-attn-*", "attn*.json")):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") == "helios-bench/1":   # the bench files (sweeps sit beside them)
        committed_attn.append((doc, path))
committed_attn.sort(key=lambda x: x[0]["timestamp"])   # the latest non-causal and causal runs
for committed, path in committed_attn[-2:]:
    fig, ax = plt.subplots(figsize=(12, 4))
    report.plot_attention(committed, ax)
    ax.set_title(f"{os.path.relpath(path, RESULTS)} ({(committed.get('git') or {}).get('commit')})")
    fig.tight_layout()
    plt.show()"""),
    new_markdown_cell(
        "## Training\nThe GPT-style decoder of `helios suite train` through each adapter from the same weights "
        "and batches: the loss curves should lie on top of each other. Here the `--tiny` preset (a few steps; on a "
        "machine without CUDA Helios runs on host arrays), then the newest committed H100 run at the default size "
        "(its table says each adapter's tokens/s: the whole decoder as one Helios group per direction, a group per "
        "block, an op per linear, torch eager and torch.compile)."
    ),
    new_code_cell("""from helios.harness.workloads.train import TINY, TrainConfig, train_markdown
from helios.harness.workloads.train.loop import run_train
tiny = run_train(TrainConfig(**TINY, adapters=["torch_eager", "helios"]))
print(train_markdown(tiny))
committed = []
for path in glob.glob(os.path.join(RESULTS, "*train*", "train.json")):
    with open(path) as f:
        committed.append(json.load(f))
committed.sort(key=lambda r: r.get("timestamp", ""))
runs = [tiny] + committed[-1:]  # the newest H100 run
if committed:
    print(train_markdown(committed[-1]))
fig, axes = plt.subplots(1, len(runs), figsize=(7 * len(runs), 4), squeeze=False)
for run, ax in zip(runs, axes[0]):
    report.plot_train(run, ax)
fig.tight_layout()
plt.show()"""),
    new_markdown_cell(
        "## Energy\nTF/s against average watts from each row's energy window (NVML's counter, `helios bench` on an "
        "NVIDIA GPU): this run's rows where it has the counter, and the committed H100 set."
    ),
    new_code_cell("""energy_sets = [d for d in report.load(sorted(glob.glob(os.path.join(RESULTS, "*energy*", "energy*.json"))))[0]]
fig, ax = plt.subplots(figsize=(8, 4.5))
report.plot_energy(energy_sets + [quick], ax)
fig.tight_layout()
plt.show()"""),
    new_markdown_cell(
        "## Run-to-run variance\nRound medians of each shape, normalised to their mean; the seeds treat < 2% as noise."
    ),
    new_code_cell("""fig, ax = plt.subplots(figsize=(12, 4))
report.plot_variance(benches, ax)
fig.tight_layout()
plt.show()"""),
]


def build():
    return new_notebook(
        cells=CELLS, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )


if __name__ == "__main__":
    nbformat.write(build(), "notebooks/explore.ipynb")
    print("wrote notebooks/explore.ipynb")

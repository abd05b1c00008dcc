"""What a result file is: schema ids, the row fields every workload shares, and
reading a file with its fields checked.

Naming rule for result fields: the fields the user's original protocol named
keep their names verbatim (camelCase: ``shape``, ``heliosMs``,
``heliosTflops``, ``cudaMs``, ``cudaTflops``; metadata ``timestamp``,
``iters``, ``warmup``, ``dtype``), so the documented ``jq`` one-liners keep
working; every field Helios added is snake_case.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

from ...flops import attention_backward_flops, attention_flops, matmul_flops, tflops
from .schema import ABSENT, col, fields_schema, reader_fields

BENCH_SCHEMA = "helios-bench/1"  # helios bench (matmul and attention workloads)
TIME_SCHEMA = "helios-time/1"  # helios time
SUITE_SCHEMA = "helios-suite/1"  # helios suite mlp
DECODE_SCHEMA = "helios-decode/1"  # helios suite decode
TRAIN_SCHEMA = "helios-train/1"  # helios suite train
FLEET_SCHEMA = "helios-fleet/1"  # helios bench --devices: the per-GPU summary
SWEEP_SCHEMAS = ("helios-sweep/1", "helios-sweep/2")  # tools/kernel/sweep.py

R = TypeVar("R")

SHAPE_PATTERN = "^[0-9]+(x[0-9]+){2,3}(-causal)?(-bwd)?$"  # MxNxK, or BxHxSxd[-causal][-bwd]


@dataclass(slots=True, kw_only=True)
class BenchRow:
    """A row of helios-bench/1: one shape timed on both sides (the matmul and the
    attention workloads).

    Fields with no default every writer sets; ABSENT ones only the attention workload
    or the extras after the rounds (kernel identity, energy windows)."""

    shape: str = col("str", "MxNxK, or BxHxSxd[-causal][-bwd] (attention)", required=True,
                     schema={"type": "string", "pattern": SHAPE_PATTERN})  # fmt: skip
    batch: int = col("count", "attention: B", default=ABSENT)
    heads: int = col("count", "attention: H", default=ABSENT)
    seq: int = col("count", "attention: S (queries and keys)", default=ABSENT)
    head_dim: int = col("count", "attention: d", default=ABSENT)
    causal: bool = col("bool", "attention: the causal mask", default=ABSENT)
    backward: bool = col("bool", "attention: dQ, dK, dV timed instead of O", default=ABSENT)
    heliosMs: Optional[float] = col("positive?", "Helios's median ms (null: the row failed its check)", required=True)
    heliosTflops: Optional[float] = col("number?", "Helios's TFLOP/s at that median", required=True)
    cudaMs: Optional[float] = col("positive?", "the reference's median ms where it ran on CUDA, else null",
                                  required=True)  # fmt: skip
    cudaTflops: Optional[float] = col("number?", "cudaMs as TFLOP/s", required=True)
    referenceMs: Optional[float] = col("positive?", "the reference's median ms, whatever ran it", required=True)
    referenceTflops: Optional[float] = col("number?", "referenceMs as TFLOP/s", required=True)
    cudaBackend: Optional[str] = col("str?", "attention: the fastest valid SDPA backend (CUDA only)", default=ABSENT)
    referenceBackend: Optional[str] = col("str?", "attention: the backend referenceMs is of", default=ABSENT)
    speedup: Optional[float] = col("number?", "reference ms / Helios ms", required=True)
    speedup_ci95: Optional[list] = col("numbers?", "the speedup's 95% bootstrap interval", required=True,
                                       schema={"type": "array", "items": {"type": "number"}, "minItems": 2,
                                               "maxItems": 2})  # fmt: skip
    valid: bool = col("bool", "every timed output of Helios passed its check", required=True)
    throttled: bool = col("bool", "a clock-throttle reason was seen around a round", required=True)
    low_clock: bool = col("bool", "the SM clock was low around a round", default=False)
    variant: str = col("str", "the variant this row ran (per shape)", required=True)
    reference: str = col("str", "what timed the other side: torch, cublas, sdpa or numpy", required=True)
    helios: dict = col("object", "Helios's side: statistics, samples per round, checks, telemetry", required=True,
                       schema={"allOf": [{"$ref": "#/$defs/side"}, {"required": ["telemetry"]}]})  # fmt: skip
    cuda: dict = col("object", "the reference's side (named before other references existed)", required=True,
                     schema={"$ref": "#/$defs/reference_side"})  # fmt: skip
    backends: dict = col("object", "attention: every SDPA backend's side, or why it did not run", default=ABSENT)
    gpu_state: list = col("list", "the GPU's state before and after each round", required=True,
                          schema={"type": "array", "items": {"type": "object",
                                                             "required": ["round", "before", "after"]}})  # fmt: skip
    roofFraction: Optional[float] = col("number?", "Helios's TFLOP/s over helios roof's ceiling (float16)",
                                        default=ABSENT)  # fmt: skip
    kernel: Optional[dict] = col("object?", "the kernel's identity: SPIR-V and machine-code digests",
                                 default=ABSENT)  # fmt: skip
    energy: Optional[dict] = col("object?", "energy windows per side (NVML), or why none", default=ABSENT)
    mde_target: Optional[dict] = col("object?", "--target-mde: the target, the row's MDE and whether it reached it",
                                     default=ABSENT)  # fmt: skip


@dataclass(slots=True, kw_only=True)
class TimeRow:
    """A row of helios-time/1: one shape, Helios's launches and torch's, not interleaved."""

    shape: str = col("str", "MxNxK", required=True)
    heliosMs: float = col("positive", "Helios's median ms", required=True)
    heliosTflops: float = col("number", "Helios's TFLOP/s", required=True)
    heliosBatchMs: Optional[float] = col("number?", "ms per launch of one batch timed as a whole", required=True)
    heliosSamplesMs: list = col("numbers", "Helios's per-launch ms", required=True)
    cudaMs: Optional[float] = col("positive?", "torch's median ms (null: not timed)", required=True)
    cudaTflops: Optional[float] = col("number?", "cudaMs as TFLOP/s", required=True)
    referenceMs: Optional[float] = col("positive?", "the same as cudaMs", required=True)
    referenceTflops: Optional[float] = col("number?", "the same as cudaTflops", required=True)
    cudaSamplesMs: Optional[list] = col("numbers?", "torch's per-launch ms", required=True)
    variant: str = col("str", "the variant that ran", required=True)


@dataclass(slots=True, kw_only=True)
class SuiteRow:
    """A row of helios-suite/1: one adapter's forwards at one token count (helios suite mlp).

    An adapter fills it field by field as it runs; the fields it did not reach (a
    skipped or failed adapter) are left out."""

    adapter: str = col("str", "helios, helios_per_call, helios_torch, torch_* or an external adapter", required=True)
    tokens: int = col("count", "tokens per forward (rows of x)", default=ABSENT)
    status: Optional[str] = col("str?", "ok, or why the adapter has no numbers", default=ABSENT)
    timer: str = col("str", "what timed the forwards", default=ABSENT)
    check: dict = col("object", "the gate of its output against float64 (passed, errors)", default=ABSENT)
    variants: list = col("list", "helios: the variant of each product in the chain", default=ABSENT)
    operands: str = col("str", "helios_torch: where its operands lived", default=ABSENT)
    torch: str = col("str", "torch_*: torch's version", default=ABSENT)
    compile_s: float = col("number", "torch_compile: seconds to compile", default=ABSENT)
    gpu: str = col("str", "torch_*: the CUDA device's name", default=ABSENT)
    gpu_uuid: Optional[str] = col("str?", "torch_*: the CUDA device's UUID", default=ABSENT)
    clock_warmup: dict = col("object", "the clock ramp before timing", default=ABSENT)
    warmup_launches: int = col("count", "warm-up forwards before the timed ones", default=ABSENT)
    gpu_state: dict = col("object", "the GPU's state before and after the timed forwards", default=ABSENT)
    wall_ms: dict = col("object", "host wall clock of one forward waited for alone: p50, p95 ...", default=ABSENT)
    low_clock: Optional[bool] = col("bool?", "the SM clock was low around the adapter's run", default=ABSENT)
    latency_ms: Optional[dict] = col("object?", "p50, p95, mean ... of a forward", default=ABSENT)
    samples_ms: Optional[list] = col("numbers?", "each timed forward's ms", default=ABSENT)
    throughput_tokens_per_sec: float = col("number", "tokens / p50", default=ABSENT)
    tflops: Optional[float] = col("number?", "TFLOP/s at the p50", default=ABSENT)
    peak_memory_bytes: Optional[int] = col("count?", "the adapter's peak device memory", default=ABSENT)
    external: bool = col("bool", "an external adapter (--adapter NAME=COMMAND)", default=ABSENT)
    command: str = col("str", "external: the command run", default=ABSENT)
    exit_status: Optional[int] = col("int?", "external: the command's exit status", default=ABSENT)
    report: Optional[dict] = col("object?", "external: the JSON report it printed", default=ABSENT)
    note: str = col("str", "external: what Helios made of its report", default=ABSENT)
    stderr_tail: str = col("str", "external: the end of its stderr", default=ABSENT)
    untrusted: bool = col("bool", "external: saved no output, so no gate judged it", default=ABSENT)


# a decode row's contexts[] entries (read_result checks them; DecodeRow publishes them)
CONTEXT_FIELDS = {"context": "count", "ms_per_token_p50": "positive", "gpu_ms_p50": "positive?",
                  "host_ms_p50": "number?", "roof_pct": "number?"}  # fmt: skip


@dataclass(slots=True, kw_only=True)
class DecodeRow:
    """A row of helios-decode/1: one adapter decoding greedily at batch 1 (helios suite decode)."""

    adapter: str = col("str", "torch_eager, torch_cuda_graphs, torch_compile, hf_transformers and llama_cpp (Llama), "
                       "helios_torch or helios_plan", required=True)  # fmt: skip
    status: str = col("str", "ok, or why the adapter has no numbers", required=True)
    tokens: list = col("list", "the tokens it generated", default=ABSENT)
    tokens_per_s: float = col("number", "new tokens per second of wall time", default=ABSENT)
    ms_per_token_p50: float = col("number", "wall ms per token, median", default=ABSENT)
    ms_per_token_p95: float = col("number", "wall ms per token, 95th percentile", default=ABSENT)
    host_ms_p50: Optional[float] = col("number?", "host ms per token (helios_plan: record and submit)", default=ABSENT)
    gpu_ms_p50: Optional[float] = col("number?", "GPU ms per token where the adapter times it", default=ABSENT)
    roof_pct: Optional[float] = col("number?", "percent of the memory roof at the middle context", default=ABSENT)
    same_tokens: bool = col("bool", "the tokens are torch_eager's", default=ABSENT)
    first_divergence: Optional[int] = col("count?", "the first token that differs from eager's", default=ABSENT)
    margin_to_pick: float = col("number", "the reference's logit margin at the first divergence (eager's; "
                                "hf_transformers: its own)", default=ABSENT)  # fmt: skip
    tie: bool = col("bool", "that margin is within bfloat16 rounding, or the model in float32 separates the "
                    "two picks by less than eager's error on them, or the adapter's logits there are no farther "
                    "from the float32 model's than eager's (RMS): a tie, not an error", default=ABSENT)  # fmt: skip
    float32_margin: float = col("number", "the model in float32: its logit margin between the two picks "
                                "(judged where eager's margin is past bfloat16 rounding)", default=ABSENT)  # fmt: skip
    eager_error: float = col("number", "eager's error on those two logits against the model in float32",
                             default=ABSENT)  # fmt: skip
    eager_rms: float = col("number", "eager's logits against the model in float32 there, RMS over the vocabulary "
                           "(where the two picks' margin is past eager's error)", default=ABSENT)  # fmt: skip
    adapter_rms: float = col("number", "the adapter's own logits against the model in float32 there, RMS over the "
                             "vocabulary (helios_plan)", default=ABSENT)  # fmt: skip
    contexts: list = col("list", "ms per token at each context length", default=ABSENT,
                         schema={"type": "array", "items": fields_schema(CONTEXT_FIELDS)})  # fmt: skip
    peak_memory_bytes: Optional[int] = col("count?", "the adapter's peak device memory", default=ABSENT)
    prefill_tokens: int = col("count", "--prefill: the prompt's tokens", default=ABSENT)
    prefill_ms_p50: float = col("number", "--prefill: wall ms from the prompt to the first token, median",
                                default=ABSENT)  # fmt: skip
    prefill_gpu_ms_p50: Optional[float] = col("number?", "--prefill: GPU ms of the prefill where timed",
                                              default=ABSENT)  # fmt: skip
    prefill_tokens_per_s: float = col("number", "--prefill: prompt tokens per second of wall time", default=ABSENT)
    dispatches: int = col("count", "helios_plan: the dispatches its recorded step runs", default=ABSENT)
    barriers: int = col("count", "helios_plan: the barriers its recorded step runs", default=ABSENT)
    grid_barriers: int = col("count", "helios_plan: the grid barriers inside its step's persistent runs",
                             default=ABSENT)  # fmt: skip
    run_grid: int = col("count", "helios_plan: its persistent runs' grid in workgroups (the smallest run's; 0 "
                        "without runs)", default=ABSENT)  # fmt: skip
    run_registers: int = col("count", "helios_plan: the most registers a thread of its runs' kernels takes, as "
                             "the driver reports (0: not reported)", default=ABSENT)  # fmt: skip
    llama_bench: list = col("list", "llama_cpp: llama-bench's own tests (n_prompt, n_gen, n_depth, avg_ts, "
                            "stddev_ts, samples_ts: tokens/s over its repeats)", default=ABSENT)  # fmt: skip
    build: dict = col("object", "llama_cpp: the llama.cpp build (commit, backends, GPU)", default=ABSENT)


@dataclass(slots=True, kw_only=True)
class TrainRow:
    """A row of helios-train/1: one adapter training the suite's GPT (helios suite train).

    An adapter fills it as it runs: its gate, then the timed steps' numbers, or why it
    stopped (status, error_log)."""

    adapter: str = col(
        "str", "torch_eager, torch_compile, helios, helios_plan, helios_blocks or helios_per_op", required=True
    )
    ops: str = col("str", "the ops the adapter's model calls", default=ABSENT)
    gate: dict = col("object", "the first step against torch_eager's: loss and gradient errors, passed", default=ABSENT)
    status: str = col("str", "ok, non-finite, gate failed, skipped or error: why", default=ABSENT)
    error_log: str = col("str", "the error's whole text (its first line is in status)", default=ABSENT)
    ddp_comm_hook: str = col("str", "under DDP: the gradient all-reduce's comm hook", default=ABSENT)
    tokens_per_s: float = col("number", "tokens per second of the step, over every GPU", default=ABSENT)
    tokens_per_s_per_gpu: float = col("number", "tokens per second of one GPU", default=ABSENT)
    step_ms_p50: float = col("number", "ms per step, median over the timed steps", default=ABSENT)
    forward_ms_p50: float = col("number", "ms of the forward", default=ABSENT)
    backward_ms_p50: float = col("number", "ms of the backward", default=ABSENT)
    optimizer_ms_p50: float = col("number", "ms of the optimizer step", default=ABSENT)
    helios_kernel_ms_p50: Optional[float] = col("number?", "the step's ordered Helios submissions, summed",
                                                default=ABSENT)  # fmt: skip
    host_forward_ms_p50: float = col("number", "host ms to issue the forward", default=ABSENT)
    host_backward_ms_p50: float = col("number", "host ms to issue the backward", default=ABSENT)
    peak_memory_bytes: Optional[int] = col("count?", "torch's peak CUDA memory (null without CUDA)", default=ABSENT)
    loss: list = col("numbers", "the loss at every step", default=ABSENT)
    grad_norm: list = col("numbers", "the gradient norm at every step", default=ABSENT)
    loss_max_rel_dev_vs_eager: float = col("number", "the loss curve's largest relative distance from eager's",
                                           default=ABSENT)  # fmt: skip
    op_split_ms: dict = col("object", "helios_plan: the step's GPU ms by kind of op, each kind replayed alone, "
                            "and the whole step's (step)", default=ABSENT)  # fmt: skip


@dataclass(slots=True, kw_only=True)
class SweepRow:
    """A row of helios-sweep (tools/kernel/sweep.py): one variant, checked, then timed
    at each shape (helios-sweep/2's timings) or at one (helios-sweep/1's numbers)."""

    variant: str = col("str", "the variant", required=True)
    checked: Optional[bool] = col("bool?", "it was checked (false: --no-check)", default=ABSENT)
    check_fails: int = col("int", "0 passed; 1 a shape failed its check; -1 the variant could not run", default=ABSENT)
    check_failure: str = col("str", "why its check failed", default=ABSENT)
    error: str = col("str", "the engine's error where it could not run", default=ABSENT)
    kernel_stats: dict = col("object", "the driver's statistics of its compiled code", default=ABSENT)
    timings: dict = col("object", "helios-sweep/2: per shape, its median ms, TF/s, samples, GPU state", default=ABSENT)
    median_ms: Optional[float] = col("positive?", "helios-sweep/1: the median ms", default=ABSENT)
    tflops: Optional[float] = col("number?", "helios-sweep/1: TF/s at that median", default=ABSENT)
    batch_ms: Optional[float] = col("number?", "helios-sweep/1: ms per launch of one batch timed whole", default=ABSENT)
    samples_ms: Optional[list] = col("list?", "helios-sweep/1: per-launch ms", default=ABSENT)


ROW_TYPES = {BENCH_SCHEMA: BenchRow, TIME_SCHEMA: TimeRow, SUITE_SCHEMA: SuiteRow, DECODE_SCHEMA: DecodeRow,
             TRAIN_SCHEMA: TrainRow, **{s: SweepRow for s in SWEEP_SCHEMAS}}  # fmt: skip

# A result file's fields as every reader (report, compare, the HTML page, ci, the
# fleet summary) may use them: checked when the file is read (read_result), so a
# hand-edited or foreign file is refused naming the file and the field, never
# half-read. Row fields are checked where present: the kinds the file's row type
# declares (READER_FIELDS), or every type's for another schema (ROW_FIELDS).
RESULT_FIELDS = {"schema": "str", "status": "str?", "helios": "object?", "dtype": "str?", "rows": "list?"}
HELIOS_FIELDS = {"name": "str?", "uuid": "str?", "driver_info": "str?", "device_type": "str?"}
ROW_FIELDS = reader_fields(BenchRow, TimeRow, SweepRow)  # the suites' rows name other things alike
# The suites' files are read by their own row types, their required fields required.
SUITE_SCHEMAS = (SUITE_SCHEMA, DECODE_SCHEMA, TRAIN_SCHEMA)
READER_FIELDS = {schema: reader_fields(t, required=schema in SUITE_SCHEMAS) for schema, t in ROW_TYPES.items()}
# Beyond the rows: what a suite's file holds that its tables read, checked as the rows
# are (helios.files' kinds) and published in its JSON Schema (tools/result_schemas.py).
DECODE_CONFIG_FIELDS = {"layers": "count?", "d_model": "count?", "heads": "count?", "vocab": "count?",
                        "prompt": "count?", "new": "count?", "contexts": "numbers?", "context_steps": "count?",
                        "train_steps": "count?", "seed": "int?", "adapters": "list?", "model": "str?",
                        "preset": "str?", "checkpoint": "str?"}  # fmt: skip
TRAIN_CONFIG_FIELDS = {"layers": "count?", "d_model": "count?", "heads": "count?", "seq": "count?",
                       "batch": "count?", "vocab": "count?", "steps": "count?", "warmup_steps": "count?",
                       "seed": "int?", "adapters": "list?"}  # fmt: skip
FILE_FIELDS = {
    DECODE_SCHEMA: {
        "config": "object",
        "device": "str?",
        "roof_gb_s": "positive?",
        "weight_bytes": "count?",
        "prompt": "list?",
        "helios_device": "str?",
        "helios_wait_spin_us": "count?",
        "helios_bf16_coop_unavailable": "str?",
    },
    TRAIN_SCHEMA: {"config": "object", "device": "str?", "distributed": "object?", "inference": "object?"},
}
NESTED_FIELDS = {  # a file's objects: (schema, the object's path) -> its fields
    (DECODE_SCHEMA, "config"): DECODE_CONFIG_FIELDS,
    (TRAIN_SCHEMA, "config"): TRAIN_CONFIG_FIELDS,
    (TRAIN_SCHEMA, "distributed"): {"world_size": "count?", "rank": "int?", "grad_sync": "str?"},
}
MAX_RESULT_BYTES = 64 << 20


def read_result(path: str | os.PathLike[str], what: str = "a helios result") -> dict:
    """A result file (any Helios schema), its fields checked (RESULT_FIELDS,
    HELIOS_FIELDS, ROW_FIELDS); FileError naming the file, the row and the field."""
    from ...files import FileError, check, read_object

    where = os.fspath(path)
    d = read_object(path, what, MAX_RESULT_BYTES)
    check(d, RESULT_FIELDS, where)
    if d.get("helios") is not None:
        check(d["helios"], HELIOS_FIELDS, f"{where}: helios")
    schema = d["schema"]
    check(d, FILE_FIELDS.get(schema, {}), where)
    for (of, name), fields in NESTED_FIELDS.items():
        if of == schema and isinstance(d.get(name), dict):
            check(d[name], fields, f"{where}: {name}")
    if schema in SUITE_SCHEMAS and not isinstance(d.get("rows"), list):
        raise FileError(f"{where}: {schema} needs 'rows', a list of objects")
    fields = READER_FIELDS.get(schema, ROW_FIELDS)
    for i, row in enumerate(d.get("rows") or []):
        if not isinstance(row, dict):
            raise FileError(f"{where}: rows[{i}] must be an object, got {type(row).__name__}")
        check(row, fields, f"{where}: rows[{i}]")
        if schema == DECODE_SCHEMA:
            for j, entry in enumerate(row.get("contexts") or []):
                if not isinstance(entry, dict):
                    raise FileError(f"{where}: rows[{i}].contexts[{j}] must be an object, got {type(entry).__name__}")
                check(entry, CONTEXT_FIELDS, f"{where}: rows[{i}].contexts[{j}]")
    return d


def read_row(row_type: type[R], row: Any) -> R:
    """A file's row as its type, for the readers: each declared field from the row,
    a field the row lacks (an older file, another workload's row) as its default, or
    None where it has none or is left out (ABSENT). read_result checked the kinds."""
    d = row if isinstance(row, dict) else {}
    kw = {}
    for f in dataclasses.fields(row_type):  # type: ignore[arg-type]
        default = f.default if f.default is not dataclasses.MISSING and f.default is not ABSENT else None
        kw[f.name] = d.get(f.name, default)
    return row_type(**kw)


def bench_rows(result: dict) -> list[BenchRow]:
    """The rows of a bench-like result (helios-bench/1, or helios-time/1 and suite rows
    as time_as_bench and compare's loader give them) as BenchRow."""
    return [read_row(BenchRow, r) for r in result.get("rows") or []]


def commit_label(result: dict) -> str:
    """A short commit for tables: the Helios build commit (older files: git.commit)."""
    c = (result.get("helios_build") or {}).get("build_commit") or (result.get("git") or {}).get("commit")
    return str(c)[:7] if c else "?"


def reference_fields(is_cuda: bool, ms: Optional[float], flops: float) -> dict[str, Any]:
    """The reference side of a row: ``referenceMs``/``referenceTflops`` always;
    the seeds' ``cudaMs``/``cudaTflops`` only when the reference ran on CUDA
    (a CPU number can never read as a CUDA one: there they are null)."""
    tf = tflops(flops, ms) if ms else None
    return {
        "cudaMs": ms if is_cuda else None,
        "cudaTflops": tf if is_cuda else None,
        "referenceMs": ms,
        "referenceTflops": tf,
    }


def kernel_identity(stats_of: Any) -> Optional[dict]:
    """A row's kernel as the driver was given it and as it compiled it: ``code_digest``
    (the SPIR-V of the permutation with its specialization constants; an attention
    backward's two kernels joined by '+'), the driver's statistics of the compiled
    code (registers, shared memory, binary size: whatever it reports) and
    ``machine_code`` (helios.machine_code: the digest of the code the driver's
    pipeline cache holds, or why there is none). stats_of() is the device's
    kernel_stats call with machine_code=True; None where it cannot say (the row then
    counts as changed code in `helios ci`)."""
    from ...machine_code import identify

    try:
        stats = stats_of()
    except (RuntimeError, ValueError):  # the engine's errors: an identity is a report, not a need
        return None
    parts = [stats["dq"], stats["dkdv"]] if "dq" in stats else [stats]
    if not all(isinstance(p, dict) and p.get("code_digest") for p in parts):
        return None
    codes = [identify(p.pop("pipeline_cache_data", b"")) for p in parts]
    missing = next((c for c in codes if "digest" not in c), None)
    return {
        "code_digest": "+".join(p["code_digest"] for p in parts),
        "stats": [{k: v for k, v in p.items() if k != "code_digest"} for p in parts],
        "machine_code": missing
        or {"digest": "+".join(c["digest"] for c in codes), "bytes": [c["bytes"] for c in codes]},
    }


def row_identities(files: list[dict]) -> dict[str, set]:
    """shape -> the (SPIR-V digest, machine-code digest, driver, device UUID) its
    valid rows ran; None in place of a digest a file did not record."""
    out: dict[str, set] = {}
    for d in files:
        h: dict = d["helios"] if isinstance(d.get("helios"), dict) else {}
        for row in bench_rows(d):
            if row.valid:
                k: dict = row.kernel if isinstance(row.kernel, dict) else {}
                mc: dict = k["machine_code"] if isinstance(k.get("machine_code"), dict) else {}
                ident = (k.get("code_digest"), mc.get("digest"), h.get("driver_version"), h.get("uuid"))
                out.setdefault(row.shape, set()).add(ident)
    return out


def code_identity(old: set, new: set) -> str:
    """'same' where both sides ran one kernel, identical in code, driver and device;
    'changed' where they differ; 'unknown' where a side recorded no digest. The code
    is the machine code where every row of both sides has its digest (two SPIR-V
    builds that compile to the same code are the same kernel), else the SPIR-V with
    its constants."""
    both = old | new
    if any(spirv is None for spirv, _, _, _ in both):
        return "unknown"
    key = 1 if all(machine is not None for _, machine, _, _ in both) else 0
    o, n = ({(x[key], x[2], x[3]) for x in side} for side in (old, new))
    return "same" if o == n and len(o) == 1 else "changed"


def _number(v: Any) -> Optional[float]:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def reference_ms(row: BenchRow | dict) -> Optional[float]:
    """A row's reference median: referenceMs, or cudaMs in files written before it existed."""
    r = row if isinstance(row, BenchRow) else read_row(BenchRow, row)
    return _number(r.referenceMs if r.referenceMs is not None else r.cudaMs)


def reference_tflops(row: BenchRow | dict) -> Optional[float]:
    r = row if isinstance(row, BenchRow) else read_row(BenchRow, row)
    return _number(r.referenceTflops if r.referenceTflops is not None else r.cudaTflops)


def shape_flops(shape: str) -> float:
    """FLOPs of a row's shape label: 'MxNxK' (a product) or 'BxHxSxd[-causal][-bwd]'
    (attention with S_q = S_kv; -bwd its backward); ValueError for anything else."""
    base, *tags = str(shape).split("-")
    try:
        dims = [int(x) for x in base.split("x")]
    except ValueError:
        raise ValueError(f"shape {shape!r}: expected MxNxK or BxHxSxd") from None
    if len(dims) == 4 and set(tags) <= {"causal", "bwd"}:
        b, h, s, d = dims
        count = attention_backward_flops if "bwd" in tags else attention_flops
        return count(b, h, s, s, d, "causal" in tags)
    if len(dims) == 3:
        return matmul_flops(*dims)
    raise ValueError(f"shape {shape!r}: expected MxNxK or BxHxSxd")


def time_as_bench(doc: dict) -> dict:
    """A helios-time/1 result in the bench rows' shape, for the readers of both
    (compare, report): one round of per-launch samples per shape, the device
    block under ``helios``."""
    rows = []
    for r in doc.get("rows", []):
        if not isinstance(r, dict):
            rows.append(r)  # the reader reports it as malformed
            continue
        t = read_row(TimeRow, r)
        rows.append(
            {
                **r,
                "valid": t.heliosSamplesMs is not None,
                "throttled": False,
                "helios": {
                    "samples_ms": [t.heliosSamplesMs],
                    "round_medians_ms": [t.heliosMs] if t.heliosMs else [],
                    "batch_ms": [t.heliosBatchMs] if t.heliosBatchMs else [],
                },
                "cuda": {"batch_ms": []},
            }
        )
    device = doc.get("device")
    return dict(doc, rows=rows, helios=device if isinstance(device, dict) else {})

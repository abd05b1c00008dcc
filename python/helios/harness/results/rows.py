"""What a result file is: schema ids, the row fields every workload shares, and
reading a file with its fields checked.

Naming rule for result fields: the fields the user's original protocol named
keep their names verbatim (camelCase: ``shape``, ``heliosMs``,
``heliosTflops``, ``cudaMs``, ``cudaTflops``; metadata ``timestamp``,
``iters``, ``warmup``, ``dtype``), so the documented ``jq`` one-liners keep
working; every field Helios added is snake_case.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from ...flops import attention_backward_flops, attention_flops, matmul_flops, tflops

BENCH_SCHEMA = "helios-bench/1"  # helios bench (matmul and attention workloads)
TIME_SCHEMA = "helios-time/1"  # helios time
SUITE_SCHEMA = "helios-suite/1"  # helios suite mlp
DECODE_SCHEMA = "helios-decode/1"  # helios suite decode
FLEET_SCHEMA = "helios-fleet/1"  # helios bench --devices: the per-GPU summary
SWEEP_SCHEMAS = ("helios-sweep/1", "helios-sweep/2")  # tools/kernel/sweep.py

# A result file's fields as every reader (report, compare, the HTML page, ci, the
# fleet summary) may use them: checked when the file is read (read_result), so a
# hand-edited or foreign file is refused naming the file and the field, never
# half-read. Row fields are checked where present (each schema has its own set).
RESULT_FIELDS = {"schema": "str", "status": "str?", "helios": "object?", "dtype": "str?", "rows": "list?"}
HELIOS_FIELDS = {"name": "str?", "uuid": "str?", "driver_info": "str?", "device_type": "str?"}
ROW_FIELDS = {
    **{k: "str?" for k in ("shape", "variant", "adapter", "reference", "referenceBackend", "cudaBackend", "status")},
    **{k: "bool?" for k in ("valid", "throttled", "low_clock", "causal", "backward", "checked")},
    **{k: "positive?" for k in ("heliosMs", "cudaMs", "referenceMs", "median_ms")},
    **{
        k: "number?"
        for k in ("heliosTflops", "cudaTflops", "referenceTflops", "speedup", "roofFraction", "tflops", "batch_ms")
    },
    **{k: "numbers?" for k in ("heliosSamplesMs", "cudaSamplesMs", "speedup_ci95")},
    "samples_ms": "list?",
    **{k: "object?" for k in ("helios", "cuda", "latency_ms")},
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
    for i, row in enumerate(d.get("rows") or []):
        if not isinstance(row, dict):
            raise FileError(f"{where}: rows[{i}] must be an object, got {type(row).__name__}")
        check(row, ROW_FIELDS, f"{where}: rows[{i}]")
    return d


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
        for row in d.get("rows", []):
            if row.get("valid"):
                k: dict = row["kernel"] if isinstance(row.get("kernel"), dict) else {}
                mc: dict = k["machine_code"] if isinstance(k.get("machine_code"), dict) else {}
                ident = (k.get("code_digest"), mc.get("digest"), h.get("driver_version"), h.get("uuid"))
                out.setdefault(row["shape"], set()).add(ident)
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


def reference_ms(row: dict) -> Optional[float]:
    """A row's reference median: referenceMs, or cudaMs in files written before it existed."""
    v = row.get("referenceMs", row.get("cudaMs"))
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def reference_tflops(row: dict) -> Optional[float]:
    v = row.get("referenceTflops", row.get("cudaTflops"))
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


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
        samples = r.get("heliosSamplesMs")
        rows.append(
            {
                **r,
                "valid": samples is not None,
                "throttled": False,
                "helios": {
                    "samples_ms": [samples],
                    "round_medians_ms": [r["heliosMs"]] if r.get("heliosMs") else [],
                    "batch_ms": [r["heliosBatchMs"]] if r.get("heliosBatchMs") else [],
                },
                "cuda": {"batch_ms": []},
            }
        )
    device = doc.get("device")
    return dict(doc, rows=rows, helios=device if isinstance(device, dict) else {})

"""What a result file is: schema ids, provenance, and the row fields every
workload shares.

Naming rule for result fields: the fields the user's original protocol named
keep their names verbatim (camelCase: ``shape``, ``heliosMs``,
``heliosTflops``, ``cudaMs``, ``cudaTflops``; metadata ``timestamp``,
``iters``, ``warmup``, ``dtype``), so the documented ``jq`` one-liners keep
working; every field Helios added is snake_case.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from typing import Any, Optional

import numpy as np

from .. import __version__, _helios
from ..flops import attention_backward_flops, attention_flops, matmul_flops, tflops

BENCH_SCHEMA = "helios-bench/1"  # helios bench (matmul and attention workloads)
TIME_SCHEMA = "helios-time/1"  # helios time
SUITE_SCHEMA = "helios-suite/1"  # helios suite
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
    from ..files import FileError, check, read_object

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


FLUSH_BYTES = 256 << 20  # --flush-l2: larger than any current GPU's L2 (H100 50 MB, H200 60 MB)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def helios_build() -> dict:
    """The Helios that measured: its version and the commit its engine was built
    from (baked in at build time; "+dirty" when the tree had local changes)."""
    return {"version": __version__, "build_commit": _helios.BUILD_COMMIT}


def _cwd_git() -> Optional[dict]:
    """The commit of the working directory's checkout, where there is one: the
    user's project, not necessarily Helios. HELIOS_COMMIT overrides."""
    env = os.environ.get("HELIOS_COMMIT")
    if env:
        return {"commit": env, "dirty": None, "source": "HELIOS_COMMIT"}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
        if not commit:
            return None
        dirty = (
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
            != ""
        )
        return {"commit": commit, "dirty": dirty, "source": "git", "cwd": os.getcwd()}
    except (OSError, subprocess.SubprocessError):
        return None


def provenance() -> dict:
    """Fields every result file starts with: when, which Helios (``helios_build``),
    the working directory's checkout (``cwd_git``, labelled: it is the caller's
    project), and the host. ``git`` keeps the old field for readers of older
    files: the Helios build commit."""
    build = helios_build()
    commit = build["build_commit"]
    known = commit != "unknown"
    return {
        "timestamp": now(),
        "helios_build": build,
        "git": {
            "commit": commit.removesuffix("+dirty") if known else None,
            "dirty": commit.endswith("+dirty") if known else None,
            "source": "helios build",
        },
        "cwd_git": _cwd_git(),
        "host": {
            "hostname": platform.node(),
            "os": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
    }


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
    from ..machine_code import identify

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


def md_cell(x: Any) -> str:
    """Text from a result file made safe for one markdown table cell (and one
    terminal line): pipes escaped, line breaks and control characters shown as
    escapes, at most 200 characters."""
    text = str(x)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    text = text.replace("|", "\\|")
    return text if len(text) <= 200 else text[:197] + "..."


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

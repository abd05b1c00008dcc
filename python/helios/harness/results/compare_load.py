"""Reading the result files helios compare judges: any comparable schema brought to
one form (rows of ``shape``, ``valid`` and ``helios.samples_ms`` rounds; the
device under ``helios``), and every field compare reads checked where it is read,
so a hand-edited or foreign file is refused naming the file and the field."""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from ...files import FileError, check, short
from .rows import (
    BENCH_SCHEMA,
    DECODE_SCHEMA,
    SHAPE_PATTERN,
    SUITE_SCHEMA,
    TIME_SCHEMA,
    TRAIN_SCHEMA,
    SuiteRow,
    read_result,
    read_row,
    time_as_bench,
)

COMPARABLE = (BENCH_SCHEMA, TIME_SCHEMA, SUITE_SCHEMA)


class CompareError(ValueError):
    """Inputs that cannot be compared (unreadable, wrong schema, failed run,
    malformed or non-finite samples, other device)."""


def load(path: str) -> dict:
    """A result file in the common comparable form (rows of ``shape``, ``valid``
    and ``helios.samples_ms`` rounds; the device under ``helios``), validated far
    enough to compare (CompareError otherwise). Reads every workload's results:
    helios-bench/1 (matmul and attention), helios-time/1 and helios-suite/1 (one
    row per adapter and token count, labelled ADAPTER@TOKENS)."""
    try:
        data = read_result(path)
    except ValueError as e:
        raise CompareError(str(e)) from None
    schema = data.get("schema")
    if schema in (DECODE_SCHEMA, TRAIN_SCHEMA):
        raise CompareError(
            f"{path}: a {schema} file; helios compare judges repeated timing samples per shape "
            f"({', '.join(COMPARABLE)}), which suite {schema[7:-2]} results do not hold: read them with helios report"
        )
    if schema not in COMPARABLE:
        raise CompareError(f"{path}: schema is {schema!r}; helios compare reads {', '.join(COMPARABLE)}")
    if data.get("status", "ok") not in ("ok", "interrupted"):
        raise CompareError(f"{path}: the run failed ({data.get('failure')}); it has no valid timings")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise CompareError(f"{path}: 'rows' must be a list")
    if schema == TIME_SCHEMA:
        data = time_as_bench(data)
    elif schema == SUITE_SCHEMA:
        data = dict(data, rows=[_suite_row(r) for r in rows])
    _check_identities(path, data)
    for i, row in enumerate(data["rows"]):
        _check_row(path, i, row)
        if schema != SUITE_SCHEMA and not re.fullmatch(SHAPE_PATTERN, row["shape"]):
            raise CompareError(f"{path}: rows[{i}]: shape {short(row['shape'])} is not MxNxK or BxHxSxd[-causal][-bwd]")
    dev = data.get("helios")
    if not isinstance(dev, dict) or not isinstance(dev.get("name"), str):
        raise CompareError(
            f"{path}: names no device (no 'helios' block with a 'name'); cannot tell "
            f"whether it compares with the other side"
        )
    return data


def _suite_row(row: Any) -> Any:
    """helios suite: each adapter at each token count is one comparable line."""
    if not isinstance(row, dict):
        return row
    r = read_row(SuiteRow, row)
    ok = r.status == "ok" and r.samples_ms is not None
    return {"shape": f"{r.adapter}@{r.tokens}", "valid": ok, "helios": {"samples_ms": [r.samples_ms]}}


# What a sample in ms can be: a kernel between a picosecond and eleven days. Outside
# it a file is not a measurement, and the log-ratio arithmetic would overflow.
SAMPLE_RANGE_MS = (1e-9, 1e9)
# The fields compare reads to decide whether two sides are alike (device, driver,
# reference build, kernel identity): each a string or a number where present.
IDENTITY_FIELDS = {
    "helios": {k: "scalar?" for k in ("name", "driver_version", "driver_info", "uuid", "device_type")},
    "cuda": {k: "scalar?" for k in ("reference", "torch_version", "cuda_runtime", "numpy_version", "gpu_uuid", "gpu")},
}


def _sample_ok(x: Any) -> bool:
    lo, hi = SAMPLE_RANGE_MS
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and lo <= x <= hi


def _check_identities(path: str, data: dict) -> None:
    try:
        check(data, {"reference": "scalar?", "helios": "object?", "cuda": "object?"}, path)
        for block, fields in IDENTITY_FIELDS.items():
            if isinstance(data.get(block), dict):
                check(data[block], fields, f"{path}: {block}")
        for i, row in enumerate(data["rows"]):
            if not isinstance(row, dict):
                continue
            k = row.get("kernel")
            if k is None:
                continue
            where = f"{path}: rows[{i}].kernel"
            if not isinstance(k, dict):
                raise FileError(f"{where} must be an object, got {short(k)}")
            check(k, {"code_digest": "str?", "machine_code": "object?"}, where)
            if isinstance(k.get("machine_code"), dict):
                check(k["machine_code"], {"digest": "str?"}, f"{where}.machine_code")
    except FileError as e:
        raise CompareError(str(e)) from None


def _rounds_error(samples: Any) -> Optional[str]:
    """Why a side's samples_ms (rounds of samples in ms) cannot be read, or None."""
    if not isinstance(samples, list) or not samples or not all(isinstance(r, list) and r for r in samples):
        return "must be a non-empty list of non-empty rounds"
    bad = [x for r in samples for x in r if not _sample_ok(x)]
    if bad:
        lo, hi = SAMPLE_RANGE_MS
        return f"samples must be finite and > 0 (from {lo:g} to {hi:g} ms); got {short(bad[0])}"
    return None


def _check_row(path: str, i: int, row: Any) -> None:
    where = f"{path}: rows[{i}]"
    if not isinstance(row, dict) or not isinstance(row.get("shape"), str):
        raise CompareError(f"{where}: not a result row (no 'shape')")
    if not row.get("valid"):
        return
    h = row.get("helios")
    why = _rounds_error(h.get("samples_ms") if isinstance(h, dict) else None)
    if why:
        raise CompareError(f"{where} ({row['shape']}): helios.samples_ms {why}")
    assert isinstance(h, dict)  # samples_ms was read from it above
    samples = h["samples_ms"]
    c = row.get("cuda")
    if isinstance(c, dict) and c.get("samples_ms") is not None:
        why = _rounds_error(c["samples_ms"])
        if why:  # the control-normalized verdict reads them
            raise CompareError(f"{where} ({row['shape']}): cuda.samples_ms {why}")
    runs = h.get("round_runs")
    if runs is not None and (
        not isinstance(runs, list) or len(runs) != len(samples) or not all(isinstance(x, int) and x >= 0 for x in runs)
    ):
        raise CompareError(f"{where} ({row['shape']}): helios.round_runs must give a run index per round")

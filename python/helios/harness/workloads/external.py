"""External adapters of `helios suite`: any stack (a compiler, a runtime, a
hand-written kernel) brought onto the suite's table as a command.

Where a command comes from: the original suite's environment variables
(TVM_BENCH_CMD, XLA_BENCH_CMD, TENSORRT_BENCH_CMD, PYC_GPU_BENCH_CMD,
GLOW_BENCH_CMD: adapters tvm, xla, tensorrt, pyc, glow) and
``--adapter-cmd NAME=COMMAND`` for any other.

The contract (README, "External adapters"). The command is run once per token
count with the workload as arguments::

    COMMAND --workload mlp --batch TOKENS --d-model D --hidden H --dtype float16
            --iters N --warmup W --seed S --device-uuid UUID --json

and as one JSON document on stdin (``schema: helios-adapter-request/1``: the
same fields, plus ``inputs``, an .npz with x, w1, b1, w2, b2, and ``output``,
where the command may save y as .npy so Helios gates it like the built-in
adapters). It prints one JSON object (the last line of stdout that is one)
with at least ``status`` ("ok" or why not), ``latency_ms`` with ``mean``,
``p50``, ``p95``, ``min``, ``max`` (finite, > 0), ``throughput_tokens_per_sec``
and ``peak_memory_bytes``; optionally ``samples_ms`` (what `helios compare`
reads) and ``gpu_uuid`` (refused when it is not the GPU under test).

Every way a command can fail ends in a row whose ``status`` says exactly how
(timeout, crash, no JSON, malformed JSON, another GPU, the gate), never in a
crash of the suite and never in a number that was not measured.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ...files import KINDS, FileError, parse_json, read_npy, run_capture, short

REQUEST_SCHEMA = "helios-adapter-request/1"
# The original suite's variables: adapter name -> environment variable.
SEED_ENV = {
    "tvm": "TVM_BENCH_CMD",
    "xla": "XLA_BENCH_CMD",
    "tensorrt": "TENSORRT_BENCH_CMD",
    "pyc": "PYC_GPU_BENCH_CMD",
    "glow": "GLOW_BENCH_CMD",
}
LATENCY_KEYS = ("mean", "p50", "p95", "min", "max")
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
STDERR_TAIL = 2000
# An adapter prints one JSON line at the end; its last 16 MiB are kept, so a chatty
# (or hostile) command cannot take the suite's memory.
MAX_OUTPUT_BYTES = 16 << 20


def external_adapters(specs: list[str], builtin: tuple[str, ...]) -> dict[str, str]:
    """Adapter name -> command: the seed's environment variables that are set,
    then each NAME=COMMAND given (which wins over a variable of the same name).
    ValueError for a malformed spec, a bad name or a built-in adapter's name."""
    out = {name: os.environ[var].strip() for name, var in SEED_ENV.items() if os.environ.get(var, "").strip()}
    for name, command in out.items():  # checked now, naming the variable, not when the adapter's turn comes
        try:
            shlex.split(command)
        except ValueError as e:
            raise ValueError(f"{SEED_ENV[name]}={command!r}: cannot split the command ({e})") from None
    for spec in specs:
        name, sep, command = spec.partition("=")
        name, command = name.strip(), command.strip()
        if not sep or not command:
            raise ValueError(f"--adapter-cmd {spec!r}: expected NAME=COMMAND")
        if not NAME.match(name):
            raise ValueError(f"--adapter-cmd {spec!r}: NAME must be letters, digits, '_', '-' or '.' (<= 40)")
        if name in builtin:
            raise ValueError(f"--adapter-cmd {spec!r}: {name} is a built-in adapter")
        try:
            shlex.split(command)
        except ValueError as e:
            raise ValueError(f"--adapter-cmd {spec!r}: cannot split the command ({e})") from None
        out[name] = command
    return out


def _finite_positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def validate_report(doc: Any) -> Optional[str]:
    """None when doc meets the contract (status ok), else what is wrong with it."""
    if not isinstance(doc, dict):
        return f"expected a JSON object, got {type(doc).__name__}"
    if "status" not in doc:
        return "no 'status'"
    lat = doc.get("latency_ms")
    if not isinstance(lat, dict):
        return "no 'latency_ms' object"
    for k in LATENCY_KEYS:
        if not _finite_positive(lat.get(k)):
            return f"latency_ms.{k} must be a finite number > 0, got {lat.get(k)!r}"
    if not lat["min"] <= lat["p50"] <= lat["max"]:
        return "latency_ms: min <= p50 <= max does not hold"
    if not _finite_positive(doc.get("throughput_tokens_per_sec")):
        return f"throughput_tokens_per_sec must be a finite number > 0, got {doc.get('throughput_tokens_per_sec')!r}"
    pm = doc.get("peak_memory_bytes")
    if pm is not None and not KINDS["count"](pm):
        return f"peak_memory_bytes must be an integer in 0..2^63-1 or null, got {short(pm)}"
    s = doc.get("samples_ms")
    if s is not None and (not isinstance(s, list) or not s or not all(_finite_positive(x) for x in s)):
        return "samples_ms must be a non-empty list of finite numbers > 0"
    return None


def _last_json(stdout: str) -> tuple[Optional[Any], Optional[str]]:
    """(the last line of stdout that parses as a JSON object, else the whole output;
    bounded depth, no NaN), or (None, why the last line that looked like one failed)."""
    why = None
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return parse_json(line, "stdout"), None
            except FileError as e:
                why = why or str(e).removeprefix("stdout: ")
    try:
        return parse_json(stdout, "stdout"), None
    except FileError:
        return None, why


def _bare(uuid: Any) -> str:
    u = str(uuid or "").strip().lower()
    return u[4:] if u.startswith("gpu-") else u.replace("-", "")


def _request(wl: Any, cfg: Any, uuid: str) -> tuple[dict, list[str]]:
    """The workload as the adapter receives it: the JSON on its stdin and its arguments."""
    req = {
        "schema": REQUEST_SCHEMA,
        "workload": "mlp",
        "formula": "y = gelu_tanh(x @ W1 + b1) @ W2 + b2",
        "tokens": wl.tokens,
        "d_model": wl.w1.shape[0],
        "hidden": wl.w1.shape[1],
        "dtype": "float16",
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "seed": cfg.seed,
        "device_uuid": uuid,
    }
    args = ["--workload", "mlp", "--batch", str(wl.tokens), "--d-model", str(req["d_model"]),
            "--hidden", str(req["hidden"]), "--dtype", "float16", "--iters", str(cfg.iters), "--warmup",
            str(cfg.warmup), "--seed", str(cfg.seed), "--device-uuid", uuid, "--json"]  # fmt: skip
    return req, args


def read_report(row: dict, r: Any, timeout_s: float, uuid: str) -> Any:
    """The adapter's run into the row: its JSON report when it ran, answered and ran on
    the GPU under test; None (row["status"] saying why) otherwise."""
    row["stderr_tail"] = r.stderr[-STDERR_TAIL:].decode("utf-8", "replace")
    if r.lingering:
        row["note"] = "processes it started kept its output open after it exited; they were killed"
    if r.returncode is None:
        row["status"] = f"timeout: no answer within {timeout_s:g} s"
        return None
    row["exit_status"] = r.returncode
    if r.returncode != 0:
        row["status"] = f"crashed: exit status {r.returncode}"
        return None
    doc, why = _last_json(r.stdout.decode("utf-8", "replace"))
    if doc is None:
        more = f" (only the last {MAX_OUTPUT_BYTES >> 20} MiB of its output were kept)" if r.truncated else ""
        row["status"] = f"malformed JSON: {why}" if why else f"no JSON: the command printed no JSON object{more}"
        return None
    row["report"] = doc
    if isinstance(doc, dict) and doc.get("status") not in (None, "ok"):
        row["status"] = f"reported: {str(doc.get('status'))[:200]}"
        return None
    why = validate_report(doc)
    if why:
        row["status"] = f"malformed JSON: {why}"
        return None
    if doc.get("gpu_uuid") and _bare(doc["gpu_uuid"]) != _bare(uuid):
        row["status"] = f"refused: it ran on GPU {doc['gpu_uuid']}, not the GPU under test ({uuid})"
        return None
    return doc


def _checked_output(row: dict, output: Path, wl: Any, cfg: Any, gate: Any) -> bool:
    """The adapter's saved output through the gate (row["check"]); False when it fails.
    No output: its timings are recorded as not correctness-gated."""
    if not output.exists():
        row["check"] = None
        row["untrusted"] = "the adapter saved no output: its timings are not correctness-gated"
        return True
    try:
        y = read_npy(output, 8 * wl.x.size + 4096)  # the header is checked before any allocation
        row["check"] = (
            gate(y, wl, cfg)
            if y.shape == wl.x.shape
            else {"passed": False, "why": f"output shape {y.shape}, expected {wl.x.shape}"}
        )
    except FileError as e:
        row["check"] = {"passed": False, "why": f"unreadable output ({e})"}
    if not row["check"]["passed"]:
        row["status"] = "check failed"
        return False
    return True


def run_external(name: str, command: str, wl: Any, cfg: Any, uuid: str, gate: Any, timeout_s: float) -> dict:
    """One external adapter at one token count: its row (status says what happened)."""
    row: dict = {"adapter": name, "external": True, "command": command, "timer": "reported by the adapter"}
    req, args = _request(wl, cfg, uuid)
    with tempfile.TemporaryDirectory(prefix=f"helios-adapter-{name}-") as tmp:
        inputs, output = Path(tmp) / "inputs.npz", Path(tmp) / "y.npy"
        np.savez(inputs, x=wl.x, w1=wl.w1, b1=wl.b1, w2=wl.w2, b2=wl.b2)
        req.update(inputs=str(inputs), output=str(output))
        try:
            r = run_capture(shlex.split(command) + args, json.dumps(req).encode(), timeout_s, MAX_OUTPUT_BYTES)
        except OSError as e:
            row["status"] = f"crashed: could not start ({e.strerror or e})"
            return row
        doc = read_report(row, r, timeout_s, uuid)
        if doc is None or not _checked_output(row, output, wl, cfg, gate):
            return row
    lat = {k: float(doc["latency_ms"][k]) for k in LATENCY_KEYS}
    row.update(
        status="ok",
        latency_ms=lat,
        throughput_tokens_per_sec=float(doc["throughput_tokens_per_sec"]),
        peak_memory_bytes=doc.get("peak_memory_bytes"),
        tflops=wl.flops / (lat["p50"] * 1e-3) / 1e12,
    )
    if doc.get("samples_ms"):
        row["samples_ms"] = [float(x) for x in doc["samples_ms"]]
    return row

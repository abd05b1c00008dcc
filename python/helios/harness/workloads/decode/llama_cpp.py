"""The decode suite's llama_cpp adapter: llama.cpp (its Vulkan backend, or what the
command builds) as an external command, the seeds' *_BENCH_CMD pattern:
LLAMA_CPP_BENCH_CMD names it (tools/adapters/llama_cpp/bench.py is one). The command
gets the workload as arguments (--workload decode-llama --checkpoint DIR --json) and
as a JSON request on stdin (helios-adapter-request/1: the checkpoint folder, the
prompt, the number of new tokens, each context's tokens, the untimed and timed steps
at each, the prefill's prompt), and answers with one JSON line: the external
adapters' fields (status, latency_ms, throughput_tokens_per_sec, peak_memory_bytes)
and the greedy tokens, each context's step times, the prefill's times, and
llama-bench's own pp and tg tests. The suite judges the tokens like every row's."""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any, Optional

from ....files import run_capture
from ....models import LlamaConfig, save_checkpoint
from ..external import MAX_OUTPUT_BYTES, REQUEST_SCHEMA, read_report

ENV = "LLAMA_CPP_BENCH_CMD"
TIMEOUT_ENV = "LLAMA_CPP_TIMEOUT_S"  # the command's limit: a first run builds llama.cpp and converts the model
DEFAULT_TIMEOUT_S = 3600.0


def unavailable() -> Optional[str]:
    """Why the adapter cannot run here (its row's status), or None."""
    if not os.environ.get(ENV, "").strip():
        return f"skipped: {ENV} is not set (tools/adapters/llama_cpp/bench.py is such a command: docs/guide/models.md)"
    try:
        shlex.split(os.environ[ENV])
    except ValueError as e:
        return f"skipped: {ENV}: cannot split the command ({e})"
    return None


def request(checkpoint: str, prompt: list[int], new: int, contexts: list[list[int]], warm: int, steps: int,
            prefill: Optional[list[int]]) -> dict:  # fmt: skip
    return {
        "schema": REQUEST_SCHEMA, "workload": "decode-llama", "checkpoint": checkpoint, "prompt": prompt,
        "new": new, "contexts": [{"context": len(c), "tokens": c} for c in contexts], "warm": warm,
        "steps": steps, "prefill": prefill, "bench_pp": 512, "bench_tg": 128,
    }  # fmt: skip


def run_command(lcfg: LlamaConfig, weights: dict, checkpoint: Optional[str], req: dict, uuid: str,
                log: Any) -> tuple[dict, Optional[dict]]:  # fmt: skip
    """The command's run: (the row's status fields, its report where it ran and answered
    "ok"). A preset's random weights go to a temporary checkpoint folder first."""
    command = os.environ[ENV]
    timeout = float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    row: dict = {"adapter": "llama_cpp", "status": "ok"}
    with tempfile.TemporaryDirectory(prefix="helios-llama-cpp-") as tmp:
        if checkpoint is None:
            log(f"decode: llama_cpp: the preset's weights into a checkpoint folder ({tmp})")
            checkpoint = str(save_checkpoint(Path(tmp) / "checkpoint", lcfg, weights))
        req = {**req, "checkpoint": checkpoint}
        args = ["--workload", "decode-llama", "--checkpoint", checkpoint, "--json"]
        log(f"decode: llama_cpp: {command} (a first run builds llama.cpp and converts the model: minutes; "
            f"at most {timeout:g} s, {TIMEOUT_ENV})")  # fmt: skip
        try:
            r = run_capture(shlex.split(command) + args, json.dumps(req).encode(), timeout, MAX_OUTPUT_BYTES)
        except OSError as e:
            return {**row, "status": f"crashed: could not start ({e.strerror or e})"}, None
        doc = read_report(row, r, timeout, uuid)
    out = {"adapter": "llama_cpp", "status": row["status"]}
    if doc is not None and not (isinstance(doc.get("tokens"), list) and len(doc["tokens"]) == req["new"]):
        out["status"], doc = f"malformed JSON: 'tokens' must list the {req['new']} greedy tokens", None
    return out, doc

"""tools/kernel/trace_kernels.py (torch's GPU kernels per name from a `helios suite train --trace`
file): per-step sums, launches and means on synthetic events, CPU events left out, and the
command line on a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import TOP
from tools.kernel import trace_kernels

SCRIPT = os.path.join(TOP, "tools/kernel", "trace_kernels.py")

EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 100.0},
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 300.0},
    {"ph": "X", "cat": "kernel", "name": "add", "dur": 10.0},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "dur": 2.0},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "dur": 5000.0},  # host time: not counted
    {"ph": "i", "cat": "kernel", "name": "instant"},  # no duration: not counted
    "not an event",
]


def test_kernels_are_summed_per_step_by_name():
    total, rows = trace_kernels.kernel_table(EVENTS, steps=2)
    assert total == pytest.approx((100 + 300 + 10 + 2) / 2 / 1e3)
    assert [r[0] for r in rows] == ["gemm", "add", "Memset (Device)"]  # largest first
    name, ms, launches, mean_us = rows[0]
    assert ms == pytest.approx(0.2) and launches == 1 and mean_us == pytest.approx(200.0)


def test_the_command_reads_a_trace_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    out = subprocess.run(
        [sys.executable, SCRIPT, str(path), "--steps", "1", "--top", "1"], capture_output=True, text=True, check=True
    ).stdout
    assert "GPU kernels 0.412 ms a step (3 names)" in out
    assert "gemm" in out and "add" not in out  # --top 1
    bad = subprocess.run([sys.executable, SCRIPT, str(path), "--steps", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--steps and --top must be at least 1" in bad.stderr

"""tools/kernel/attn_sweep.py (the attention kernel-design sweep): its pass order, and a tiny
sweep with two passes end to end (every row checked, each pass's rows recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import TOP
from tools.kernel import attn_sweep

SCRIPT = os.path.join(TOP, "tools/kernel", "attn_sweep.py")


def test_passes_alternate_the_order():
    assert attn_sweep.pass_order(["a", "b", "c"], 1) == [(0, "a"), (0, "b"), (0, "c")]
    assert attn_sweep.pass_order(["a", "b", "c"], 3) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c"),
    ]  # fmt: skip
    assert attn_sweep.pass_order([], 2) == []


def test_two_passes_end_to_end(device, tmp_path):
    coop = [x for x in device.attention_variants(16) if x.startswith("fa-coop:")][:1]
    variants = ",".join(coop + ["fa-scalar"])
    out = tmp_path / "sweep.json"
    cmd = [sys.executable, SCRIPT, "--no-sdpa", "--shapes", "1x1x24x16", "--variants", variants]
    r = subprocess.run([*cmd, "--passes", "2", "--iters", "2", "--warmup", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [x for x in json.loads(out.read_text())["rows"] if x.get("side") == "helios"]
    names = variants.split(",")
    assert [(x["pass"], x["variant"]) for x in rows] == [(0, v) for v in names] + [(1, v) for v in names[::-1]]
    assert all(x["check"]["passed"] and x["median_ms"] > 0 for x in rows)
    bad = subprocess.run([*cmd, "--passes", "0", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--passes must be at least 1" in bad.stderr

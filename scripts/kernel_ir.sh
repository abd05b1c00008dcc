#!/usr/bin/env bash
# What the driver's compiler made of the default kernels (#22), in one device
# call (a gpu_round.sh step): runs the default GEMM at 4096^3 (fp16, bf16) and
# the attention forward and backward at d=64 and d=128 (causal and not) with
# HELIOS_PIPELINE_IR set and a fresh pipeline cache, then looks for machine code
# in the pipeline caches (scripts/sass_from_cache.py). Writes $OUT/kernel-ir.tgz
# (the representations, any ELF images and their disassembly) and prints a summary.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
IR=/tmp/kernel-ir; rm -rf "$IR" /tmp/kernel-ir-cache /tmp/kernel-ir-sass; mkdir -p "$IR"
HELIOS_PIPELINE_IR=$IR HELIOS_PIPELINE_CACHE=/tmp/kernel-ir-cache python3 - <<'PY'
import json

import numpy as np

import helios
from helios.attention import random_qkv

with helios.Device() as d:
    a = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    for dt in (np.float16, helios.bfloat16):
        d.matmul(a.astype(dt), a.astype(dt))
    for dim in (64, 128):
        q, k, v = random_qkv(1, 4, 512, 512, dim)
        for causal in (False, True):
            o, lse = d.attention(q, k, v, causal=causal, return_lse=True)
            d.attention_backward(q, k, v, o, o, lse, causal=causal)
    print(json.dumps(d.info["pipeline_ir"]))
PY
echo "--- $IR"; ls -la "$IR" | head -40
python3 "$REPO/scripts/sass_from_cache.py" --out /tmp/kernel-ir-sass /tmp/kernel-ir-cache \
  "$HOME/.cache/nvidia" "$HOME/.nv" 2>&1 | head -60
tar -C /tmp -czf "$OUT/kernel-ir.tgz" kernel-ir kernel-ir-sass
ls -la "$OUT/kernel-ir.tgz"

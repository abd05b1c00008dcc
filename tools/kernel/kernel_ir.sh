#!/usr/bin/env bash
# What the driver's compiler made of the default kernels (#22), in one device
# call (a gpu_round.sh step): runs the default GEMM at 4096^3 (fp16, bf16) and
# the attention forward and backward at d=64 and d=128 (causal and not) with
# HELIOS_PIPELINE_IR set and a fresh pipeline cache, prints each kernel's
# "Binary Size" (the code size that names its disassembly below), then
# disassembles the code in the pipeline caches (tools/kernel/sass_from_cache.py:
# NVIDIA's driver keeps each pipeline's SASS, zstd-compressed, in its cache).
# Writes $OUT/kernel-ir-$KIR_TAG.tgz (default: default; the representations and
# every .sass) and prints
# one instruction-mix line per kernel. Needs `zstandard` on the machine: carry its
# wheel in .whl beside scikit-build-core's (the same `pip download` line, package
# zstandard); gpu_round.sh installs every wheel there.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/round
export PATH=$PATH:/usr/local/cuda/bin   # nvdisasm
IR=/tmp/kernel-ir; SASS=/tmp/kernel-sass
rm -rf "$IR" "$SASS" /tmp/kernel-ir-cache "$HOME/.cache/nvidia/GLCache"; mkdir -p "$IR" "$SASS"
HELIOS_PIPELINE_IR=$IR HELIOS_PIPELINE_CACHE=/tmp/kernel-ir-cache python3 - <<'PY'
import json

import numpy as np

import helios
from helios.attention import random_qkv

with helios.Device() as d:
    a = np.random.default_rng(0).standard_normal((4096, 4096), dtype=np.float32)
    for dt in (np.float16, helios.bfloat16):
        d.matmul(a.astype(dt), a.astype(dt))
    print("gemm fp16 default:", d.kernel_stats())
    for dim in (64, 128):
        q, k, v = random_qkv(1, 4, 512, 512, dim)
        for causal in (False, True):
            o, lse = d.attention(q, k, v, causal=causal, return_lse=True)
            d.attention_backward(q, k, v, o, o, lse, causal=causal)
            for bwd in (False, True):
                st = d.attention_kernel_stats(dim, causal=causal, backward=bwd)
                print(f"attention d={dim} causal={causal} backward={bwd}:", st)
    print("pipeline_ir:", json.dumps(d.info["pipeline_ir"]))
PY
python3 "$REPO/tools/kernel/sass_from_cache.py" --out "$SASS" /tmp/kernel-ir-cache > /tmp/round/sass.log 2>&1
cat /tmp/round/sass.log
rm -f "$SASS"/*.code
tar -C /tmp -czf "$OUT/kernel-ir-${KIR_TAG:-default}.tgz" kernel-ir kernel-sass
ls -la "$OUT/kernel-ir-${KIR_TAG:-default}.tgz"

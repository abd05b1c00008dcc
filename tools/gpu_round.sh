#!/usr/bin/env bash
# One round on a leased GPU machine (device tool): build as a user would,
# report capabilities, check every variant, sweep, and time the baseline.
# Expects .device-kit (../shared/device/kit.sh) and .whl (scikit-build-core
# wheels) carried; writes everything under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source .device-kit/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
# Few files come back from $OUT (8): logs stay in /tmp/round unless they explain a failure.
LOG=/tmp/round; mkdir -p "$LOG"
export HELIOS_COMMIT=${HELIOS_COMMIT:-unknown}   # the tree arrives without .git: pass it in
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python3 -m pip install -v --no-build-isolation --no-deps . > "$LOG/build.log" 2>&1 || { tail -40 "$LOG/build.log"; exit 1; }
grep -i "cuBLASLt reference" "$LOG/build.log" || true
REPO=$(pwd); export REPO
cd /tmp   # import the installed package, not the source tree
helios info | tee "$OUT/info.txt"
# A kit without tools/kit_glslc.sh builds no bf16 kernels: every bf16 number would be the scalar path's.
if grep -q "bf16 kernels  scalar fp32 path: this build's glslc" "$OUT/info.txt"; then
  echo "gpu_round: this build has no bf16 kernels (run tools/kit_glslc.sh on the kit); stopping" >&2; exit 3
fi
for step in "$@"; do
  echo "=== $step"
  eval "$step"
done

#!/usr/bin/env bash
# One round on a leased GPU machine (device tool): build as a user would,
# report capabilities, check every variant, sweep, and time the baseline.
# Expects .device-kit (../shared/device/kit.sh) and .whl (scikit-build-core
# wheels) carried; writes everything under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
source .device-kit/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
git rev-parse HEAD 2>/dev/null > "$OUT/commit.txt" || true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
python3 -m pip install --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
REPO=$(pwd); export REPO
cd /tmp   # import the installed package, not the source tree
helios info | tee "$OUT/info.txt"
for step in "$@"; do
  echo "=== $step"
  eval "$step"
done

#!/usr/bin/env bash
# A/B of two attention kernels on one GPU, one device call: NEW is the installed
# package (scripts/gpu_round.sh built it), OLD is built from .ab/old.tar into
# /tmp/oldsite; the default variants' sweep runs NEW, OLD, NEW, OLD so drift
# shows as a spread, not as a difference. Writes $OUT/ab-{new,old}-{1,2}.json.
# Usage (inside a gpu_round.sh step): bash $REPO/scripts/attn_ab.sh "SHAPES" [--causal]
set -uo pipefail
SHAPES=$1; shift
mkdir -p /tmp/old && tar -xf "$REPO/.ab/${AB_TAR:-old.tar}" -C /tmp/old
( cd /tmp/old && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/oldsite . ) \
  > /tmp/round/old-build.log 2>&1 || { tail -20 /tmp/round/old-build.log; exit 1; }
for i in 1 2; do
  for side in new old; do
    pp=$PYTHONPATH; [ $side = old ] && pp=/tmp/oldsite:$PYTHONPATH
    PYTHONPATH=$pp python3 "$REPO/scripts/attn_sweep.py" --no-sdpa --variants default --shapes "$SHAPES" \
      --iters 50 "$@" --out "$OUT/ab-$side-$i.json" 2>&1 | sed "s/^/$side$i /" | cut -c1-120
  done
done

#!/usr/bin/env bash
# A/B of two attention kernels on one GPU, one device call: NEW is the installed
# package (tools/gpu_round.sh built it), OLD is built from .ab/old.tar into
# /tmp/ab-$AB_NAME-site (AB_TAR: another tar under .ab); the default variants'
# sweep runs NEW, OLD, NEW, OLD so drift shows as a spread, not as a difference.
# Writes $OUT/ab-{new,$AB_NAME}-{1,2}.json.
# Usage (inside a gpu_round.sh step): bash $REPO/tools/kernel/attn_ab.sh "SHAPES" [--causal]
set -uo pipefail
SHAPES=$1; shift
NAME=${AB_NAME:-old}                       # the OLD side's label in file names and lines
SRC=/tmp/ab-$NAME; SITE=/tmp/ab-$NAME-site
rm -rf "$SRC" "$SITE"; mkdir -p "$SRC" && tar -xf "$REPO/.ab/${AB_TAR:-old.tar}" -C "$SRC"
( cd "$SRC" && python3 -m pip install -q --no-build-isolation --no-deps --target "$SITE" . ) \
  > /tmp/round/$NAME-build.log 2>&1 || { tail -20 /tmp/round/$NAME-build.log; exit 1; }
for i in 1 2; do
  for side in new $NAME; do
    pp=$PYTHONPATH; [ $side = $NAME ] && pp=$SITE:$PYTHONPATH
    PYTHONPATH=$pp python3 "$REPO/tools/kernel/attn_sweep.py" --no-sdpa --variants default --shapes "$SHAPES" \
      --iters 50 "$@" --out "$OUT/ab-$side-$i.json" 2>&1 | sed "s/^/$side$i /" | cut -c1-120
  done
done

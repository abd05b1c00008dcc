#!/usr/bin/env bash
# pchain probe, round 2: grid-barrier forms, weight words in flight, layers of 4 products
set -u
source .device-kit/setup.sh >/dev/null 2>&1
cd .ab/pchain
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
sh build.sh || exit 1
timeout 200 ./pchain pchain 24 30 264 396 > $OUT/pchain.jsonl 2> $OUT/pchain.err; echo rc=$?
cat $OUT/pchain.err; cut -c1-100 $OUT/pchain.jsonl

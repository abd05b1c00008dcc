#!/usr/bin/env bash
# call 6: fp32 atomic adds on the H200 (torch index_add_), for a fused up+down's split-K
set -u
source .device-kit/setup.sh >/dev/null 2>&1
W=/tmp/r6; mkdir -p $W; cd $W
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > gpu.txt
timeout 120 python3 $OLDPWD/.ab/atomics.py atomics.json > atomics.log 2>&1; cat atomics.log
tar -czf "$OUT/r6.tar.gz" *.txt *.json *.log

#!/usr/bin/env bash
# pchain probe: a grid barrier in one persistent dispatch against pipeline barriers
set -u
source .device-kit/setup.sh >/dev/null 2>&1
cd .ab/pchain
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $OUT/gpu.txt
glslc --target-env=vulkan1.2 -O pchain.comp -o pchain.spv && gcc -O2 -std=c11 pchain.c -o pchain -L$VULKAN_SDK/lib -lvulkan || exit 1
timeout 120 ./pchain pchain.spv 24 30 132 264 396 528 > $OUT/pchain.jsonl 2> $OUT/pchain.err; echo rc=$?
cat $OUT/pchain.err; cat $OUT/pchain.jsonl

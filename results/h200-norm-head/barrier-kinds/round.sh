#!/usr/bin/env bash
# call 9: what a stage boundary costs: the plan's barriers as they are, as execution dependencies only (no memory barrier), and none (timing only: both race)
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r9; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r9.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name kind
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  python3 - $d/csrc/core/plan.c $2 <<'PY'
import sys
p, kind = sys.argv[1], sys.argv[2]; s = open(p).read()
old = """            hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);"""
assert old in s
new = {"memory": old,
       "exec": "            vkCmdPipelineBarrier(p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 0, NULL, 0, NULL, 0, NULL);",
       "none": "            ;"}[kind]
open(p, "w").write(s.replace(old, new))
PY
  (cd $d && diff -ru $R/csrc $d/csrc) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in memory exec none; do mk $v $v & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
run memory memory
run exec exec
run none none
run memory memory_again
say done

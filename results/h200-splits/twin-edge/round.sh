#!/usr/bin/env bash
# call 21: the twin's threshold (LONG_ROUNDS) at 2 (2ffc016), 3 and never, positions around and past 3168
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r21; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r21.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name rounds
  local n=$1; local d=/tmp/t_$n; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  sed -i "s/^#define LONG_ROUNDS 2u/#define LONG_ROUNDS $2u/" $d/csrc/core/plan.c
  (cd $d && diff -ru $R/csrc $d/csrc) > $W/$n.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$n $d > $W/build_$n.log 2>&1 || echo "build $n failed"
}
mk r2 2 & mk r3 3 & mk never 1000 & wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
export POS=1024,3000,3167,3168,3300,3600,3960,4096,4300
inst() { python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || say "install $1 failed"; }
step() { cd $W; timeout 90 python3 $R/.ab/step2.py step_$1.json > step_$1.log 2>&1; say "$1: $(tail -1 step_$1.log)"; cd $R; }
inst r2; step r2; inst r3; step r3; inst never; step never
inst r2; step r2_again; inst r3; step r3_again; inst never; step never_again
say done

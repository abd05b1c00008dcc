#!/usr/bin/env bash
# call 20: the split's passes past its keys skipped (guard.patch) against 2ffc016, runs and apart; the twin's edge (position 3168 with 16 heads)
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r20; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r20.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name patches...
  local n=$1; shift; local d=/tmp/t_$n; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  patch -d $d -p1 -s < .ab/stats.patch
  for p in "$@"; do patch -d $d -p1 -s < .ab/$p.patch || echo "patch $p failed for $n"; done
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$n.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$n $d > $W/build_$n.log 2>&1 || echo "build $n failed"
}
mk tree & mk guard guard & wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
export POS=1024,256,1000,1030,1500,2047,3000,3100,3167,3168,3300,4096
inst() { python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || say "install $1 failed"; }
step() { cd $W; env HL_AB_STATS=1 ${2:-} timeout 90 python3 $R/.ab/step2.py step_$1.json > step_$1.log 2>&1; say "$1: $(grep -m2 'Register\|Shared' step_$1.log | tr '\n' ' ') $(tail -1 step_$1.log)"; cd $R; }
inst tree; step tree; step tree_apart HELIOS_DISABLE_PLAN_PERSISTENT=1
inst guard; step guard; step guard_apart HELIOS_DISABLE_PLAN_PERSISTENT=1
inst tree; step tree_again; step tree_apart_again HELIOS_DISABLE_PLAN_PERSISTENT=1
inst guard; step guard_again; step guard_apart_again HELIOS_DISABLE_PLAN_PERSISTENT=1
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider --full -n 16 --dist loadgroup -m "not timing" tests/test_plan_persist.py tests/test_plan_decode.py > $W/pytest_guard.txt 2>&1; say "pytest guard: $(tail -1 $W/pytest_guard.txt)"
cd $W; timeout 60 helios check --decode --fuzz 20 --max-seq 5000 > check-decode-guard.txt 2>&1; say "check guard: $(tail -1 check-decode-guard.txt)"
say done

#!/usr/bin/env bash
# call 11: a plan's products reading the next one's leading weights into the L2 (2, 4, 8 MB; off)
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r11; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r11.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name megabytes
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  sed -i "s/^#define PREFETCH_BYTES (4u << 20)/#define PREFETCH_BYTES ($2u << 20)/" $d/csrc/core/plan.c
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in pf2:2 pf4:4 pf8:8; do IFS=: read n c <<< "$v"; mk $n $c & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name [env]
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  env ${3:-} timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_pf4/*.whl > /dev/null 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_plan.py tests/test_plan_decode.py > $W/pytest.txt 2>&1; say "pytest: $(tail -1 $W/pytest.txt)"
run pf4 pf4
run pf4 off HELIOS_DISABLE_PLAN_PREFETCH=1
run pf2 pf2
run pf8 pf8
run pf4 pf4_again
run pf4 off_again HELIOS_DISABLE_PLAN_PREFETCH=1
say done

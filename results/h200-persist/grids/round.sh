#!/usr/bin/env bash
# call 15: which grids are resident (2 or 3 workgroups an SM) with a run member's norm holding 2 or 4 groups of 4 columns an invocation; the step at each
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r15; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r15.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name kind
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  case $2 in
    ln4) sed -i 's/^const uint LN_GROUPS = 2u;  \/\/ a run member/const uint LN_GROUPS = 4u;  \/\/ a run member/' $d/shaders/matmul_gemv_ln_head.glsl ;;
    products) sed -i 's/^    if (is_attention(o)) return 1;/    if (is_attention(o)) return 0;/' $d/csrc/core/plan_persist.c ;;
  esac
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in ln2:ln2 ln4:ln4 products:products; do IFS=: read n c <<< "$v"; mk $n $c & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name [env]
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  env ${3:-} timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
run ln2 ln2_264
run ln2 ln2_396 HELIOS_PLAN_PERSISTENT_GRID=396
run ln4 ln4_264
run products products_ln2_264
run products products_ln2_396 HELIOS_PLAN_PERSISTENT_GRID=396
run ln2 ln2_330 HELIOS_PLAN_PERSISTENT_GRID=330
run ln2 ln2_264_again
run ln2 ln2_396_again HELIOS_PLAN_PERSISTENT_GRID=396
say done

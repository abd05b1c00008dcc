#!/usr/bin/env bash
# call 17: release/acquire grid barrier, the attention's first split loaded before its wait, 128-key splits; the step over positions; register counts
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r17; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r17.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name patches...
  local n=$1; shift; local d=/tmp/t_$n; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  patch -d $d -p1 -s < .ab/stats.patch
  for p in "$@"; do
    case $p in
      c128) sed -i 's/^const uint CHUNK = 64u; /const uint CHUNK = 128u; /' $d/shaders/decode_attention.glsl
            sed -i 's/^#define DECODE_CHUNK 64u/#define DECODE_CHUNK 128u/' $d/csrc/core/decode.c
            sed -i 's/^#define ATTN_CHUNK 64u/#define ATTN_CHUNK 128u/' $d/csrc/core/plan.c ;;
      *) patch -d $d -p1 -s < .ab/$p.patch || echo "patch $p failed for $n" ;;
    esac
  done
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$n.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$n $d > $W/build_$n.log 2>&1 || echo "build $n failed"
}
mk base & mk relacq relacq & mk attpf attpf & mk both relacq attpf & mk c128 c128 & mk c128both c128 relacq attpf & wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
inst() { python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || say "install $1 failed"; }
run() {  # wheel name [env]
  inst $1; cd $W
  env HL_AB_STATS=1 ${3:-} timeout 90 python3 $R/.ab/step2.py step_$2.json > step_$2.log 2>&1; say "$2: $(grep -m3 'Register\|Shared' step_$2.log | tr '\n' ' ') $(tail -1 step_$2.log)"; cd $R
}
tst() {
  inst $1
  timeout 120 python3 -m pytest -q -x -p no:cacheprovider -n 8 tests/test_plan_persist.py tests/test_plan_decode.py > $W/pytest_$1.txt 2>&1; say "pytest $1: $(tail -1 $W/pytest_$1.txt)"
}
run base base
run relacq relacq
run attpf attpf
run both both
run c128 c128
run c128both c128both
run base base_again
run both both_again
run c128both c128both_again
tst both
tst c128both
say done

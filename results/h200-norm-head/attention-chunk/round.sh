#!/usr/bin/env bash
# call 7: the decode attention's keys per split workgroup (CHUNK 32 / 64 / 128) on the 24-layer step
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r7; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r7.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name chunk
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  sed -i "s/^#define DECODE_CHUNK 64u /#define DECODE_CHUNK $2u /" $d/csrc/core/decode.c
  sed -i "s/^const uint CHUNK = 64u; /const uint CHUNK = $2u; /" $d/shaders/decode.comp
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in c32:32 c64:64 c128:128; do IFS=: read n c <<< "$v"; mk $n $c & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W; timeout 60 helios check --decode --fuzz 8 --max-seq 3000 > check_$2.txt 2>&1
  timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 check_$2.txt) $(tail -1 step_$2.log)"; cd $R
}
run c64 c64
run c32 c32
run c128 c128
run c64 c64_again
say done

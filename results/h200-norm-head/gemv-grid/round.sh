#!/usr/bin/env bash
# call 8: the matrix-vector grid target (workgroups per SM before the workgroup shrinks: 1, 2, 4) on the 24-layer step
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r8; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r8.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name per_sm
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  sed -i "s/(uint64_t)(n + v.threads \/ sg - 1) \/ (v.threads \/ sg) < 4ull \* sms)/(uint64_t)(n + v.threads \/ sg - 1) \/ (v.threads \/ sg) < $2ull * sms)/" $d/csrc/core/variant_shape.c
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in g1:1 g2:2 g4:4; do IFS=: read n c <<< "$v"; mk $n $c & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
run g4 g4
run g2 g2
run g1 g1
run g4 g4_again
say done

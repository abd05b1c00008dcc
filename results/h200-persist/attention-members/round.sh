#!/usr/bin/env bash
# call 14: persistent runs with the decode attention as a member (runs of up to 16 ops) against runs of products only and apart; GPU tests; checks; the suites
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r14; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r14.tar.gz" *.txt *.json *.log *.md *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name kind
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  [ "$2" = products ] && sed -i 's/^    if (is_attention(o)) return 1;/    if (is_attention(o)) return 0;/' $d/csrc/core/plan_persist.c
  (cd $d && diff -ru $R/csrc $d/csrc; diff -ru $R/shaders $d/shaders) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in full:full products:products; do IFS=: read n c <<< "$v"; mk $n $c & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name [env]
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  env ${3:-} timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
run full full
run products products
run full apart HELIOS_DISABLE_PLAN_PERSISTENT=1
run full full_again
run products products_again
python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_full/*.whl > /dev/null 2>&1
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider --full -n 16 --dist loadgroup -m "not timing" tests/test_plan_persist.py tests/test_plan_decode.py tests/test_plan.py tests/test_gemv.py tests/test_suite_decode.py > $W/pytest.txt 2>&1; say "pytest: $(tail -1 $W/pytest.txt)"
cd $W
timeout 60 helios check --decode --fuzz 20 --max-seq 5000 > check-decode.txt 2>&1; say "check: $(tail -1 check-decode.txt)"
BIG="--layers 24 --d-model 2048 --heads 16 --train-steps 0"
timeout 120 helios suite decode $BIG --adapters torch_cuda_graphs,helios_plan --out decode-24x2048.json > d1.log 2>&1; say "24x2048: $(grep -A5 'by context' d1.log | tail -2 | tr '\n' ' ') $(grep '| helios_plan\|| torch_cuda' d1.log | head -2 | tr '\n' ' ')"
timeout 90 helios suite decode --adapters torch_eager,torch_cuda_graphs,helios_plan --out decode-8x1024.json > d2.log 2>&1; say "8x1024: $(grep '| helios_plan\|| torch_' d2.log | head -3 | tr '\n' ' ')"
say done

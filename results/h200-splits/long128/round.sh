#!/usr/bin/env bash
# call 18 (the tree to commit): splits of 128 keys past one pass of the grid, release/acquire grid barrier; against baad257; GPU tests; checks; suites
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r18; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r18.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mkb() { local d=/tmp/t_base; rm -rf $d; mkdir -p $d; tar -xzf .ab/base.tar.gz -C $d; patch -d $d -p1 -s < .ab/stats.patch; python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_base $d > $W/build_base.log 2>&1 || echo "build base failed"; }
mks() { local d=/tmp/t_stats; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  patch -d $d -p1 -s < .ab/stats.patch; python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_stats $d > $W/build_stats.log 2>&1 || echo "build stats failed"; }
mkb & mks & wait
say "variants built"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
inst() { python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || say "install $1 failed"; }
step() { cd $W; env HL_AB_STATS=1 ${2:-} timeout 90 python3 $R/.ab/step2.py step_$1.json > step_$1.log 2>&1; say "$1: $(grep -m2 'Register\|Shared' step_$1.log | tr '\n' ' ') $(tail -1 step_$1.log)"; cd $R; }
inst stats; step runs; step apart HELIOS_DISABLE_PLAN_PERSISTENT=1
inst base; step base_runs; step base_apart HELIOS_DISABLE_PLAN_PERSISTENT=1
inst stats; step runs_again
rm -rf build; python3 -m pip install -q --no-build-isolation --no-deps . > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 1; }
say "installed the tree"
cd $W
BIG="--layers 24 --d-model 2048 --heads 16 --train-steps 0"
timeout 150 helios suite decode $BIG --adapters torch_cuda_graphs,helios_plan --out decode-24x2048.json > d1.log 2>&1; say "24x2048: $(grep -A5 'by context' d1.log | tail -3 | tr '\n' ' ') $(grep '| helios_plan\|| torch_cuda' d1.log | head -2 | tr '\n' ' ')"
timeout 100 helios suite decode --adapters torch_eager,torch_cuda_graphs,helios_plan --out decode-8x1024.json > d2.log 2>&1; say "8x1024: $(grep '| helios_plan\|| torch_' d2.log | head -3 | tr '\n' ' ')"
cd $R
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider --full -n 16 --dist loadgroup -m "not timing" tests/test_plan_persist.py tests/test_plan_decode.py tests/test_plan.py tests/test_gemv.py tests/test_elementwise.py tests/test_suite_decode.py > $W/pytest.txt 2>&1; say "pytest: $(tail -1 $W/pytest.txt)"
cd $W
timeout 90 helios check --decode --fuzz 20 --max-seq 5000 > check-decode.txt 2>&1; say "check: $(tail -1 check-decode.txt)"
say done

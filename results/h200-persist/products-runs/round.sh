#!/usr/bin/env bash
# call 12: a plan's consecutive one-row products as one persistent dispatch (grid barriers): GPU tests, checks, the step with runs and apart, grids, the suites
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r12; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r12.tar.gz" *.txt *.json *.log *.md 2>/dev/null); }
trap pack EXIT
rm -rf build; python3 -m pip install -q --no-build-isolation --no-deps . > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 1; }
say installed
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
cd $W
timeout 60 python3 $R/.ab/step.py step-runs.json > step-runs.log 2>&1; say "runs: $(tail -1 step-runs.log)"
HELIOS_DISABLE_PLAN_PERSISTENT=1 timeout 60 python3 $R/.ab/step.py step-apart.json > step-apart.log 2>&1; say "apart: $(tail -1 step-apart.log)"
for g in 132 396; do HELIOS_PLAN_PERSISTENT_GRID=$g timeout 60 python3 $R/.ab/step.py step-grid$g.json > step-grid$g.log 2>&1; say "grid $g: $(tail -1 step-grid$g.log)"; done
timeout 60 python3 $R/.ab/step.py step-runs-again.json > step-runs-again.log 2>&1; say "runs again: $(tail -1 step-runs-again.log)"
cd $R
timeout 200 python3 -m pytest -q -rs -p no:cacheprovider --full -n 16 --dist loadgroup -m "not timing" tests/test_plan_persist.py tests/test_plan_decode.py tests/test_plan.py tests/test_gemv.py tests/test_suite_decode.py > $W/pytest.txt 2>&1; say "pytest: $(tail -1 $W/pytest.txt)"
cd $W
timeout 60 helios check --decode --fuzz 20 --max-seq 5000 > check-decode.txt 2>&1; say "check: $(tail -1 check-decode.txt)"
BIG="--layers 24 --d-model 2048 --heads 16 --train-steps 0"
timeout 120 helios suite decode $BIG --adapters torch_cuda_graphs,helios_plan --out decode-24x2048.json > d1.log 2>&1; say "24x2048: $(grep -A5 'by context' d1.log | tail -2 | tr '\n' ' ') $(grep '| helios_plan\|| torch_cuda' d1.log | head -2 | tr '\n' ' ')"
timeout 90 helios suite decode --adapters torch_eager,torch_cuda_graphs,helios_plan --out decode-8x1024.json > d2.log 2>&1; say "8x1024: $(grep '| helios_plan\|| torch_' d2.log | head -3 | tr '\n' ' ')"
say done

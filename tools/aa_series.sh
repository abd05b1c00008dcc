#!/usr/bin/env bash
# A/A series for `helios compare` (issue 8): N identical bench runs (each the
# seeds' 3-runs protocol, --runs 3) and one planted regression, packed in one
# archive. Usage (on the GPU machine, after the package is installed):
#   tools/aa_series.sh OUT_DIR N PLANTED_VARIANT [SHAPES]
# Then, anywhere: helios compare A.json B.json for every pair.
set -uo pipefail
OUTD=$1; N=$2; PLANTED=$3; SHAPES=${4:-2048x2048x2048,4096x4096x4096}
W=$(mktemp -d)
ARGS=(bench --suite=cuda "--shapes=$SHAPES" --iters=50 --warmup=10 --repeats=3 --runs=3 --ref=torch)
for i in $(seq 1 "$N"); do
  helios "${ARGS[@]}" "--out=$W/aa-$i.json" > "$W/aa-$i.log" 2>&1 || { echo "run $i failed"; tail -5 "$W/aa-$i.log"; }
done
HELIOS_VARIANT=$PLANTED helios "${ARGS[@]}" "--out=$W/planted.json" > "$W/planted.log" 2>&1 || echo "planted run failed"
(cd "$W" && tar czf "$OUTD/aa-series.tgz" ./*.json ./*.log)
for i in $(seq 2 "$N"); do helios compare "$W/aa-1.json" "$W/aa-$i.json" | grep -E "^\| [0-9]"; done
helios compare "$W/aa-1.json" "$W/planted.json"; echo "planted exit $?"

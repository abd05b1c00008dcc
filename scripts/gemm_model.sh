#!/usr/bin/env bash
# Timed models of the GEMM main loop (issue 22), in one device call: for each
# model named, a copy of the tree with MODEL_<NAME> defined at the top of
# shaders/matmul_coop.comp (the hooks and what each strips are listed there) is
# built into /tmp/model-<name>-site and swept with scripts/sweep.py --no-check
# (timing only: a model's results are wrong by construction); "real" is the
# installed package, checked as usual. Models and the real kernel alternate
# twice (real, models..., real, models...) so clock drift shows as a spread.
# Writes $OUT/model-<name>.json (the second pass; the first stays in /tmp/round)
# and prints ms per model x variant x shape.
# Usage (a gpu_round.sh step):
#   bash $REPO/scripts/gemm_model.sh VARIANTS SHAPES NO_GLOBAL NO_BARRIER MMA_ONLY STAGING_ONLY
set -uo pipefail
VARIANTS=$1; SHAPES=$2; shift 2
OUT=${OUT:-/tmp/out}; LOG=/tmp/round; mkdir -p "$OUT" "$LOG"
for m in "$@"; do
  name=$(echo "$m" | tr 'A-Z' 'a-z'); src=/tmp/model-$name; site=/tmp/model-$name-site
  [ -d "$site/helios" ] && continue
  rm -rf "$src" "$site"; mkdir -p "$src"
  tar -C "$REPO" --exclude=./build --exclude=./.device-kit -cf - . | tar -xf - -C "$src"
  sed -i "1a #define MODEL_$m" "$src/shaders/matmul_coop.comp"
  ( cd "$src" && python3 -m pip install -q --no-build-isolation --no-deps -C cmake.define.HELIOS_CUBLAS=OFF \
      --target "$site" . ) > "$LOG/model-$name-build.log" 2>&1 || { tail -20 "$LOG/model-$name-build.log"; exit 1; }
done
for pass in 1 2; do
  for m in real "$@"; do
    name=$(echo "$m" | tr 'A-Z' 'a-z'); pp=${PYTHONPATH:-}; flags=()
    if [ "$m" != real ]; then
      pp=/tmp/model-$name-site${pp:+:$pp}; flags=(--no-check)
      # A model must time its own build, not the installed package (an editable install's finder would win).
      PYTHONPATH=$pp python3 -c "import helios, sys; sys.exit(not helios.__file__.startswith('/tmp/model-$name-site/'))" \
        || { echo "model $m: 'import helios' does not load /tmp/model-$name-site; skipped"; continue; }
    fi
    f=$LOG/model-$name-$pass.json
    PYTHONPATH=$pp HELIOS_PIPELINE_CACHE=/tmp/model-cache-$name python3 "$REPO/scripts/sweep.py" "${flags[@]}" \
      --variants "$VARIANTS" --shapes "$SHAPES" --iters 30 --out "$f" > "$LOG/model-$name-$pass.log" 2>&1 \
      || { echo "model $m pass $pass failed:"; tail -5 "$LOG/model-$name-$pass.log"; }
    [ "$pass" = 2 ] && cp "$f" "$OUT/model-$name.json"
  done
done
python3 - "$LOG" real "$@" <<'PY'
import json, sys
log, names = sys.argv[1], [n.lower() for n in sys.argv[2:]]
docs = {(n, p): json.load(open(f"{log}/model-{n}-{p}.json")) for n in names for p in (1, 2)}
first = docs[(names[0], 1)]
print(f"{'variant / shape':<44}" + "".join(f"{n:>22}" for n in names) + "   (ms pass 1 / pass 2)")
for r0 in first["rows"]:
    for s in first["shapes"]:
        cells = []
        for n in names:
            ms = []
            for p in (1, 2):
                row = next((r for r in docs[(n, p)]["rows"] if r["variant"] == r0["variant"]), {})
                ms.append(row.get("timings", {}).get(s, {}).get("median_ms", float("nan")))
            cells.append(f"{ms[0]:>10.4f} /{ms[1]:>8.4f}")
        tag = r0["variant"].split(":")[1] + ":" + ":".join(x for x in r0["variant"].split(":")[2:] if x.startswith(("tile", "stages")))
        print(f"{tag[:28] + ' ' + s:<44}" + "".join(f"{c:>22}" for c in cells))
PY

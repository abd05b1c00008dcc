#!/usr/bin/env bash
# Timed models of a kernel's main loop (issue 22), in one device call: for each
# model named, a copy of the tree with the model hooks applied
# (tools/kernel/models/timing-hooks.patch: the shipped shaders carry none; the
# patch lists the hooks and what each strips) and MODEL_<NAME> defined at the top
# of shaders/$MODEL_SHADER (default matmul_coop.comp) is built into /tmp/model-<name>-site and
# timed unchecked (a model's results are wrong by construction); "real" is the
# installed package, checked as usual. Models and the real kernel alternate
# twice (real, models..., real, models...) so clock drift shows as a spread.
# Matmul models time with tools/kernel/sweep.py (VARIANTS: variant strings, SHAPES:
# MxNxK), attention models (MODEL_SHADER=attention_coop.comp) with
# tools/kernel/attn_sweep.py (VARIANTS: strings or "default", SHAPES: BxHxSxd; the
# backward's shaders, MODEL_SHADER=attention_bwd_*.comp, with --backward and
# MODEL_ARGS, e.g. "--causal --dtype bfloat16"; the forward takes MODEL_ARGS too).
# MODEL_SED (a sed script) with MODEL_SED_FILE (paths in the tree, space-separated) also
# edits those files in every model's copy: a model of the C side, e.g. a cap raised.
# MODEL_CHECK=1 checks the models too (for a model that is a real kernel candidate).
# MODEL_TOOL=forward|backward times attention where MODEL_SHADER is a shared include
# (e.g. attention_bwd_common.glsl, whose hooks both backward kernels take).
# Writes $OUT/model-<name>.json (the second pass; the first stays in /tmp/round)
# and prints ms per model x variant x shape.
# Usage (a gpu_round.sh step):
#   bash $REPO/tools/kernel/gemm_model.sh VARIANTS SHAPES NO_GLOBAL NO_BARRIER MMA_ONLY STAGING_ONLY
#   MODEL_SHADER=attention_coop.comp bash $REPO/tools/kernel/gemm_model.sh default 4x32x4096x128 REG_SOFTMAX
set -uo pipefail
VARIANTS=$1; SHAPES=$2; shift 2
SHADER=${MODEL_SHADER:-matmul_coop.comp}
OUT=${OUT:-/tmp/out}; LOG=/tmp/round; mkdir -p "$OUT" "$LOG"
for m in "$@"; do
  name=$(echo "$m" | tr 'A-Z' 'a-z'); src=/tmp/model-$name; site=/tmp/model-$name-site
  [ -d "$site/helios" ] && continue
  rm -rf "$src" "$site"; mkdir -p "$src"
  tar -C "$REPO" --exclude=./build --exclude=./.device-kit -cf - . | tar -xf - -C "$src"
  ( cd "$src" && git apply "$REPO/tools/kernel/models/timing-hooks.patch" ) \
    || { echo "model $m: tools/kernel/models/timing-hooks.patch does not apply to this tree"; exit 1; }
  sed -i "1a #define MODEL_$m" "$src/shaders/$SHADER"
  if [ -n "${MODEL_SED:-}" ]; then
    for f in ${MODEL_SED_FILE:?MODEL_SED needs MODEL_SED_FILE}; do sed -i "$MODEL_SED" "$src/$f"; done
  fi
  ( cd "$src" && python3 -m pip install -q --no-build-isolation --no-deps -C cmake.define.HELIOS_CUBLAS=OFF \
      --target "$site" . ) > "$LOG/model-$name-build.log" 2>&1 || { tail -20 "$LOG/model-$name-build.log"; exit 1; }
done
for pass in 1 2; do
  for m in real "$@"; do
    name=$(echo "$m" | tr 'A-Z' 'a-z'); pp=${PYTHONPATH:-}; flags=()
    if [ "$m" != real ]; then
      pp=/tmp/model-$name-site${pp:+:$pp}; [ "${MODEL_CHECK:-0}" = 1 ] || flags=(--no-check)
      # A model must time its own build, not the installed package (an editable install's finder would win).
      PYTHONPATH=$pp python3 -c "import helios, sys; sys.exit(not helios.__file__.startswith('/tmp/model-$name-site/'))" \
        || { echo "model $m: 'import helios' does not load /tmp/model-$name-site; skipped"; continue; }
    fi
    f=$LOG/model-$name-$pass.json
    tool=(sweep.py --variants "$VARIANTS")
    case ${MODEL_TOOL:-$SHADER} in
      attention_coop.comp|forward) tool=(attn_sweep.py --no-sdpa ${MODEL_ARGS:-} --variants "$VARIANTS");;
      attention_bwd_*|backward) tool=(attn_sweep.py --no-sdpa --backward ${MODEL_ARGS:-} --variants "$VARIANTS");;
    esac
    PYTHONPATH=$pp HELIOS_PIPELINE_CACHE=/tmp/model-cache-$name python3 "$REPO/tools/kernel/${tool[0]}" "${tool[@]:1}" \
      "${flags[@]}" --shapes "$SHAPES" --iters 30 --out "$f" > "$LOG/model-$name-$pass.log" 2>&1 \
      || { echo "model $m pass $pass failed:"; tail -5 "$LOG/model-$name-$pass.log"; }
    [ "$pass" = 2 ] && cp "$f" "$OUT/model-$name.json"
  done
done
python3 - "$LOG" real "$@" <<'PY'
import json, sys
log, names = sys.argv[1], [n.lower() for n in sys.argv[2:]]
docs = {(n, p): json.load(open(f"{log}/model-{n}-{p}.json")) for n in names for p in (1, 2)}


def cells(doc):
    # {(variant, shape): ms} from a sweep.py (rows x timings) or attn_sweep.py (one row per pair) file
    rows = doc["rows"]
    if not any("shape" in r for r in rows):
        return {(r["variant"], s): t["median_ms"] for r in rows for s, t in r.get("timings", {}).items()}
    out = {}
    for r in rows:
        if r.get("side") != "helios":
            continue
        out[(r["variant"], r["shape"])] = r.get("median_ms")
        for kernel, ms in (r.get("pass_ms") or {}).items():  # the backward's kernels, each alone
            out[(r["variant"] + " " + kernel, r["shape"])] = ms
    return out


got = {k: cells(d) for k, d in docs.items()}
keys = list(dict.fromkeys(k for n in names for p in (1, 2) for k in got[(n, p)]))  # a model may have more variants
print(f"{'variant / shape':<48}" + "".join(f"{n:>22}" for n in names) + "   (ms pass 1 / pass 2)")
for key in keys:
    row = ""
    for n in names:
        ms = [got[(n, p)].get(key) or float("nan") for p in (1, 2)]
        row += f"{ms[0]:>12.4f} /{ms[1]:>8.4f}"
    print(f"{(key[0][-30:] + ' ' + key[1])[:47]:<48}" + row)
PY

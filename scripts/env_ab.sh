#!/usr/bin/env bash
# Interleaved A/B of one environment switch on one GPU, in one device call (a
# gpu_round.sh step): the installed package runs `helios bench ARGS...` with
# VAR=NEW, then VAR=OLD, AB_PAIRS times (default 2), so clock drift hits both
# sides alike; then `helios compare` pools each side's files (OLD as the
# baseline). Writes $OUT/env-$AB_TAG-{new,old}-{i}.json and
# $OUT/env-$AB_TAG-compare.txt (AB_TAG names the round, default "bench").
# Usage: bash $REPO/scripts/env_ab.sh HELIOS_DISABLE_UNCHECKED_BUFFERS=0,1 --shapes=canonical --runs 1
set -uo pipefail
spec=$1; shift
VAR=${spec%%=*}; vals=${spec#*=}; NEW=${vals%%,*}; OLD=${vals#*,}
[ "$VAR" != "$spec" ] && [ "$NEW" != "$vals" ] || { echo "env_ab: want VAR=NEW,OLD, got '$spec'" >&2; exit 2; }
TAG=${AB_TAG:-bench}; PAIRS=${AB_PAIRS:-2}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/round
old_files=(); new_files=()
for i in $(seq 1 "$PAIRS"); do
  for side in new old; do
    val=$NEW; [ "$side" = old ] && val=$OLD
    f="$OUT/env-$TAG-$side-$i.json"
    env "$VAR=$val" python3 -m helios bench "$@" --out="$f" --force > "/tmp/round/env-$TAG-$side-$i.log" 2>&1
    echo "$VAR=$val ($side) $i: exit $?"
    if [ "$side" = new ]; then new_files+=("$f"); else old_files+=("$f"); fi
    rm -f "${f%.json}.md"   # few files come back from $OUT: the JSON holds the table's numbers
  done
done
python3 -m helios compare --old "${old_files[@]}" --new "${new_files[@]}" --summary "$TAG: $VAR=$NEW against $OLD" \
  | tee "$OUT/env-$TAG-compare.txt"

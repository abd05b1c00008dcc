#!/usr/bin/env bash
# Interleaved A/B of two Helios trees on one GPU, in one device call: NEW is the
# installed package (tools/gpu_round.sh built it), OLD is built from
# .ab/${AB_TAR:-old.tar} into /tmp/ab-$AB_NAME-site (once per machine). The same
# `helios bench ARGS...` runs NEW, OLD, NEW, OLD, ... (AB_PAIRS pairs, default 2)
# so drift hits both sides alike; then `helios compare` (NEW's) pools each
# side's files. Writes $OUT/ab-$AB_TAG-{new,$AB_NAME}-{i}.json (AB_TAG names the
# round, default "bench") and $OUT/ab-$AB_TAG-compare.txt. AB_OLD_COMMIT labels OLD's files.
# Usage (a gpu_round.sh step): bash $REPO/tools/ab_bench.sh --shapes=canonical --runs 3
set -uo pipefail
NAME=${AB_NAME:-old}; TAG=${AB_TAG:-bench}; PAIRS=${AB_PAIRS:-2}
SRC=/tmp/ab-$NAME; SITE=/tmp/ab-$NAME-site
if [ ! -d "$SITE/helios" ]; then
  rm -rf "$SRC" "$SITE"; mkdir -p "$SRC" && tar -xf "$REPO/.ab/${AB_TAR:-old.tar}" -C "$SRC"
  ( cd "$SRC" && python3 -m pip install -q --no-build-isolation --no-deps --target "$SITE" . ) \
    > /tmp/round/$NAME-build.log 2>&1 || { tail -20 /tmp/round/$NAME-build.log; exit 1; }
fi
old_files=(); new_files=()
for i in $(seq 1 "$PAIRS"); do
  for side in new "$NAME"; do
    pp=${PYTHONPATH:-}; commit=${HELIOS_COMMIT:-unknown}
    [ "$side" = "$NAME" ] && { pp=$SITE${PYTHONPATH:+:$PYTHONPATH}; commit=${AB_OLD_COMMIT:-$NAME}; }
    f="$OUT/ab-$TAG-$side-$i.json"
    HELIOS_COMMIT=$commit PYTHONPATH=$pp python3 -m helios bench "$@" --out="$f" --force > "/tmp/round/ab-$TAG-$side-$i.log" 2>&1
    echo "$side $i: exit $? ($(grep -c '^|' "/tmp/round/ab-$TAG-$side-$i.log") table lines)"
    if [ "$side" = new ]; then new_files+=("$f"); else old_files+=("$f"); fi
    rm -f "${f%.json}.md"   # few files come back from \$OUT: the JSON holds the table's numbers
  done
done
python3 -m helios compare --old "${old_files[@]}" --new "${new_files[@]}" --summary "$TAG A/B" \
  | tee "$OUT/ab-$TAG-compare.txt"

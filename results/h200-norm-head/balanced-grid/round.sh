#!/usr/bin/env bash
# call 3: the LayerNorm head's balanced grid: workgroups per SM 2, 3, 4, 6 and one column a subgroup (64)
set -u
export VARIANTS="b2:2:4 b3:3:4 b4:4:4 b6:6:4 b64:64:4"
sed -e 's/call 2:.*/call 3: balanced grids/' -e 's#/tmp/r2#/tmp/r3#' -e 's#r2.tar.gz#r3.tar.gz#' \
    -e '/^run s4u4 s4u4$/,$d' .ab/r2.sh > /tmp/r3_body.sh
cat >> /tmp/r3_body.sh <<'EOR'
run b4 b4
run b4 apart HELIOS_DISABLE_PLAN_NORM_FUSION=1
for v in b2 b3 b6 b64; do run $v $v; done
run b4 b4_again
run b2 b2_again
run b4 apart_again HELIOS_DISABLE_PLAN_NORM_FUSION=1
say done
EOR
bash /tmp/r3_body.sh

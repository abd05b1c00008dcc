#!/usr/bin/env bash
# A queue switch on one GPU (a gpu_round.sh step; $OUT, $REPO from it): per value of
# $QUEUE_VAR (default HELIOS_QUEUE_PRIORITY; "default" leaves it unset) the hop costs
# (semaphore_latency.py), CUDA work beside Helios (cuda_beside_vulkan.py), the MLP block
# (helios suite mlp) and the training step (torch_eager and helios); all in $OUT/queue.tgz.
set +e
VAR=${QUEUE_VAR:-HELIOS_QUEUE_PRIORITY}
R=/tmp/queue; mkdir -p $R
for P in ${QUEUE_VALUES:-default realtime high}; do
  if [ $P = default ]; then unset $VAR; else export $VAR=$P; fi
  echo "##### $VAR $P"
  helios info | grep -E "^queue"
  timeout 150 python3 $REPO/scripts/semaphore_latency.py --repeats 3 > $R/semlat-$P.txt 2>&1
  tail -1 $R/semlat-$P.txt > $R/semlat-$P.json
  python3 -c "
import json,sys; d=json.load(open('$R/semlat-$P.json'))
print({k:(round(v['wall_us_per_iter_p50'],1), round(v.get('helios_gpu_us_per_op') or 0,1)) if isinstance(v,dict) and 'wall_us_per_iter_p50' in v else v for k,v in d['modes'].items()})" 2>&1 | tail -2
  timeout 120 python3 $REPO/scripts/cuda_beside_vulkan.py --rounds 2 2>&1 | tee $R/beside-$P.txt | tail -8
  timeout 150 helios suite mlp --tokens 512,4096 --iters 30 --adapters helios,helios_torch --out $R/mlp-$P.json > $R/mlp-$P.log 2>&1; grep -E "^\| (512|4096) \| helios" $R/mlp-$P.md
  timeout 200 helios suite train --steps 60 --train-warmup 10 --adapters torch_eager,helios --out $R/train-$P.json > $R/train-$P.log 2>&1; grep -E "^\| (torch_eager|helios) " $R/train-$P.md | cut -c1-200
  unset $VAR
done
cd $R && tar czf $OUT/queue.tgz . && ls $R

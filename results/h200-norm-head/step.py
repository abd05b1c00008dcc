"""EXPERIMENT (not product): the 24x2048 decode step's plan (PlanDecoder) on random weights,
GPU ms a replay at positions 256/1024/4096 (median of SI replays), after SWARM warm replays."""
import json, os, sys, numpy as np, helios
from helios.harness.workloads.decode.plan_decoder import PlanDecoder
L, D, H, V, ML = int(os.environ.get("BL", 24)), int(os.environ.get("BD", 2048)), 16, 8192, 4352
rng = np.random.default_rng(0)
def r(*s, sc=0.02): return (rng.standard_normal(s, dtype=np.float32) * sc)
blk = {"ln1.weight": 1 + r(D), "ln1.bias": r(D), "qkv.weight": r(3 * D, D), "qkv.bias": r(3 * D),
       "proj.weight": r(D, D), "proj.bias": r(D), "ln2.weight": 1 + r(D), "ln2.bias": r(D),
       "up.weight": r(4 * D, D), "up.bias": r(4 * D), "down.weight": r(D, 4 * D), "down.bias": r(D)}
state = {"tok.weight": r(V, D), "pos.weight": r(ML, D), "lnf.weight": 1 + r(D), "lnf.bias": r(D)}
for i in range(L):
    for k, v in blk.items():
        state[f"blocks.{i}.{k}"] = v
out = {}
with helios.Device() as dev:
    dec = PlanDecoder(dev, state, L, H, ML)
    p = dec.plan
    out["counts"] = p.counts
    for pos in (1024, 256, 1024, 4096):  # the first absorbs the clock's ramp
        p.set_params([1, pos])
        t = p.time(int(os.environ.get("SI", 300)), int(os.environ.get("SWARM", 30)))
        out[f"gpu_ms_{pos}"] = t.median("gpu_ms")
    print(json.dumps(out), flush=True)
    dec.close()
json.dump(out, open(sys.argv[1], "w"))

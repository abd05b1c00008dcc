"""EXPERIMENT (not product): the 24x2048 decode step's plan (PlanDecoder) on random weights,
GPU ms a replay at each position of POS (median of SI replays after SWARM)."""
import json, os, sys, numpy as np, helios
from helios.harness.workloads.decode.plan_decoder import PlanDecoder
L, D, H, V, ML = int(os.environ.get("BL", 24)), int(os.environ.get("BD", 2048)), 16, 8192, 4352
POS = [int(x) for x in os.environ.get("POS", "1024,256,1000,1023,1030,1087,1100,1500,2047,2111,2200,3000,4096").split(",")]
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
    for i, pos in enumerate(POS):  # the first absorbs the clock's ramp
        p.set_params([1, pos])
        t = p.time(int(os.environ.get("SI", 200)), int(os.environ.get("SWARM", 30)))
        out[f"gpu_ms_{pos}" + ("_first" if i == 0 else "")] = round(t.median("gpu_ms"), 4)
    print(json.dumps(out), flush=True)
    dec.close()
json.dump(out, open(sys.argv[1], "w"))

"""EXPERIMENT (not product): where the 24x2048 decode step's GPU time goes. Each line a plan
of 24 'layers' of the step's pieces; GPU ms a replay (median of 200)."""
import json, sys, numpy as np, helios
import os
L, D = int(os.environ.get("BL", 24)), int(os.environ.get("BD", 2048))
rng = np.random.default_rng(0)
VAR = os.environ.get("BVAR") or None  # the variant of the products a norm follows (o, down)
out = {}
with helios.Device() as dev:
    bf = "bfloat16"
    def w(n, k): return dev.upload((rng.standard_normal((n, k)) * 0.02).astype(np.float32), dtype=bf)
    W = [dict(qkv=w(3 * D, D), o=w(D, D), up=w(4 * D, D), down=w(D, 4 * D)) for _ in range(L)]
    h0 = dev.upload((rng.standard_normal((1, D))).astype(np.float32), dtype=bf)
    a0 = dev.upload((rng.standard_normal((1, D))).astype(np.float32), dtype=bf)
    u0 = dev.upload((rng.standard_normal((1, 4 * D))).astype(np.float32), dtype=bf)
    x0 = dev.upload((rng.standard_normal((1, D))).astype(np.float32), dtype=np.float32)
    g = dev.upload(np.ones(D, np.float32), dtype=np.float32); b = dev.upload(np.zeros(D, np.float32), dtype=np.float32)
    only = os.environ.get("BONLY", "").split(",")
    def timed(name, build):
        if only != [""] and name not in only:
            return
        p = dev.plan(params=2)
        build(p); p.record()
        t = p.time(int(os.environ.get("BI", 200)), 20)
        out[name] = dict(gpu_ms=t.median("gpu_ms"), wall_ms=t.median("wall_ms"), counts=p.counts)
        print(name, out[name], flush=True); p.close()
    # only the two big ones, dependent chain up -> down -> up ...
    def chain(p, norms=False, all4=False):
        x = h0; s = x0
        for i in range(L):
            if all4:
                p.matmul(x, W[i]["qkv"], trans_b=True)  # qkv (its output unused: attention left out)
                x = p.matmul(x, W[i]["o"], trans_b=True, variant=VAR)
                if norms:
                    x, s = p.layernorm(s, g, b, residual=x, dtype=bf)
            u = p.matmul(x, W[i]["up"], trans_b=True, activation="gelu")
            x = p.matmul(u, W[i]["down"], trans_b=True, variant=VAR)
            if norms:
                x, s = p.layernorm(s, g, b, residual=x, dtype=bf)
    timed("warm", lambda p: chain(p, all4=True))  # the SM clock's ramp
    # 4 products a layer, none reading another's output: no barriers between them
    timed("products_independent", lambda p: [p.matmul(src, W[i][k], trans_b=True) for i in range(L)
        for k, src in (("qkv", h0), ("o", a0), ("up", h0), ("down", u0))])
    timed("up_down_chain", lambda p: chain(p))
    timed("up_down_chain_norms", lambda p: chain(p, norms=True))
    timed("four_chain", lambda p: chain(p, all4=True))
    timed("four_chain_norms", lambda p: chain(p, norms=True, all4=True))
    # norms alone, chained (each reads the last's stream)
    def norms(p):
        s = x0
        for i in range(2 * L):
            _, s = p.layernorm(s, g, b, residual=a0, dtype=bf)
    timed("norms_chain_48", norms)
    # attention alone: 24 dispatches on one cache (each writes its row: a barrier between them)
    H = 16
    ROWS = int(os.environ.get("BROWS", 4352))
    kc = dev.upload((rng.standard_normal((ROWS, D)) * 0.5).astype(np.float32), dtype=bf)
    vc = dev.upload(rng.standard_normal((ROWS, D)).astype(np.float32), dtype=bf)
    q3 = dev.upload(rng.standard_normal((1, 3 * D)).astype(np.float32), dtype=bf)
    for pos in ((256, 1024, 4096) if only == [""] else tuple(int(x) for x in os.environ.get("BPOS", "").split(",") if x)):
        if pos >= ROWS: continue
        p = dev.plan(params=2)
        for i in range(L):
            p.attention_decode(q3, kc, vc, heads=H, position=1)
        p.record(); p.set_params([0, pos])
        t = p.time(int(os.environ.get("BI", 200)), 20)
        out[f"attention_chain_{pos}_{ROWS}"] = dict(gpu_ms=t.median("gpu_ms"), counts=p.counts)
        print(f"attention_chain_{pos}_{ROWS}", out[f"attention_chain_{pos}_{ROWS}"], flush=True); p.close()
json.dump(out, open(sys.argv[1], "w"), indent=1)

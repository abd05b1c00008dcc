#!/usr/bin/env python3
"""Is a product slower on operands Vulkan imported from CUDA's pool than on Helios's
own memory? The same product (x W^T, fp16) GPU-timed (timestamps) on: operands
imported from helios.torch.memory_pool() (no copy), and the same values uploaded
into Helios tensors. Prints one JSON object."""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import helios.torch as ht


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", default="512,4096", help="rows of x (default 512,4096)")
    p.add_argument("--d", type=int, default=4096, help="in_features (default 4096)")
    p.add_argument("--out", type=int, default=14336, help="out_features (default 14336)")
    p.add_argument("--iters", type=int, default=30, help="timed launches (default 30)")
    args = p.parse_args()
    rows = []
    with ht.memory_pool():
        w = (torch.randn(args.out, args.d, device="cuda") / args.d**0.5).half()
    for tokens in (int(t) for t in args.tokens.split(",")):
        with ht.memory_pool():
            x = torch.randn(tokens, args.d, device="cuda").half()
        hx, hw = ht.to_helios(x, copy=False), ht.to_helios(w, copy=False)
        dev = hx.device
        own_x, own_w = dev.upload(x.cpu().numpy()), dev.upload(w.cpu().numpy())
        out = dev.empty((tokens, args.out))
        res = {"tokens": tokens}
        for name, a, b in (("imported", hx, hw), ("helios_memory", own_x, own_w)):
            fields = dict(a=a, b=b, m=tokens, n=args.out, k=args.d, trans_b=True, lda=args.d, ldb=args.d, out=out)
            _, samples, _, variant = dev._gemm(**fields, warmup=10, iters=args.iters)
            res[name] = {"gpu_ms_p50": float(np.median(samples)), "variant": variant}
        res["imported_over_own"] = res["imported"]["gpu_ms_p50"] / res["helios_memory"]["gpu_ms_p50"]
        rows.append(res)
    print(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

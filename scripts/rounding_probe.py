#!/usr/bin/env python3
"""How Helios rounds its 16-bit outputs, per kernel: each output compared with the
float64 reference rounded to nearest even (RNE) and rounded toward zero (RTZ);
the share that matches each, and the mean signed error in units of the last place
(over values above 1% of the largest: 0 for unbiased rounding, about
-0.5 for rounding toward zero). Kernels: the
product (default variant), the attention forward (O), the attention backward (dQ,
dK, dV), in float16 and bfloat16. Prints one line per kernel and dtype."""

from __future__ import annotations

import argparse

import numpy as np

import helios
from helios.attention import random_qkv, reference_attention, reference_attention_backward
from helios.dtypes import as_dtype


def rtz(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """x (float64) rounded toward zero to dt, through fp32 (exact for these magnitudes)."""
    f = x.astype(np.float32)
    bits = f.view(np.uint32)
    if dt == as_dtype("bfloat16"):
        return (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    y = f.astype(np.float16).astype(np.float64)  # nearest; step back where it rounded away from zero
    over = np.abs(y) > np.abs(f.astype(np.float64))
    step = np.nextafter(y.astype(np.float16), np.float16(0)).astype(np.float64)
    return np.where(over, step, y)


def line(name: str, got: np.ndarray, ref: np.ndarray, dt: np.dtype) -> str:
    got = np.asarray(got, np.float64).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    rne = ref.astype(np.float32).astype(dt).astype(np.float64)
    tz = rtz(ref, dt)
    differs = rne != tz  # only these tell the two roundings apart
    ulp = np.abs(np.spacing(rne.astype(dt)).astype(np.float64)) + 1e-30
    big = np.abs(ref) > 1e-2 * np.abs(ref).max()  # not the near-zero values, whose ulp is tiny
    signed = np.mean((np.sign(ref) * (got - ref) / ulp)[big])
    return (
        f"{name:28s} matches RNE {np.mean(got[differs] == rne[differs]):6.1%}  RTZ {np.mean(got[differs] == tz[differs]):6.1%}"
        f"  (of {int(differs.sum())} telling apart)  mean signed error {signed:+.3f} ulp"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    with helios.Device() as dev:
        print(f"{dev.info['name']}; bf16 kernels: {dev.info.get('bf16_coop_unavailable') or 'cooperative matrices'}")
        for dtype in ("float16", "bfloat16"):
            dt = as_dtype(dtype)
            a = rng.standard_normal((512, 256)).astype(dt)
            b = rng.standard_normal((256, 384)).astype(dt)
            ref = a.astype(np.float64) @ b.astype(np.float64)
            got = dev.matmul(a, b, out_dtype=dtype)
            print(line(f"matmul {dtype}", got, ref, dt))
            got = dev.matmul(a, b, out_dtype=dtype, bias=np.zeros(384))
            print(line(f"matmul+bias {dtype}", got, ref, dt))
            q, k, v = random_qkv(1, 4, 256, 256, 64, seed=1, dtype=dtype)
            do = random_qkv(1, 4, 256, 256, 64, seed=2, dtype=dtype)[0]
            for causal in (False, True):
                o, lse = dev.attention(q, k, v, causal=causal, return_lse=True)
                print(
                    line(
                        f"attention O {dtype}{' causal' if causal else ''}",
                        o,
                        reference_attention(q, k, v, causal=causal),
                        dt,
                    )
                )
                grads = dev.attention_backward(q, k, v, o, do, lse, causal=causal)
                want = reference_attention_backward(q, k, v, do, causal=causal)
                for nm, g, w in zip(("dQ", "dK", "dV"), grads, want[:3]):
                    print(line(f"attention {nm} {dtype}{' causal' if causal else ''}", g, w, dt))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

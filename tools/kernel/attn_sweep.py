#!/usr/bin/env python3
"""Sweep attention variants x shapes on one device and time torch SDPA's backends
beside them (a kernel-design tool; `helios bench --workload=attention` is the
harness). Every Helios number is gated by a sampled float64 check + all finite
(--backward: the gradients of one head, whole, against float64).

  python3 tools/kernel/attn_sweep.py --out sweep.json [--shapes 32x8x512x64,...] [--causal]
      [--backward] [--variants all|default|V1,V2] [--iters 30] [--no-sdpa] [--dtype bfloat16]
      [--env-sweep HELIOS_DISABLE_ATTENTION_BWD_FOLD=0,1] [--passes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import helios
from helios.attention import random_qkv, reference_attention, reference_attention_backward
from helios.check import check_close, tolerances
from helios.flops import attention_backward_flops, attention_flops
from helios.harness.protocol.gpustate import gpu_state, low_clock, ramp_clocks, select_gpu
from helios.matmul_timing import warmup_launches

ISSUE_SHAPES = "32x8x256x64,32x8x512x64,16x16x640x64,48x4x448x64,1x32x2048x128,1x32x4096x128,4x32x4096x128"


def pass_order(items: list, passes: int) -> list[tuple[int, object]]:
    """(pass, item) in the order a shape times them: the list as given, then reversed, then
    as given... so that no item always holds the slot after the previous shape (a first
    slot read 8% slow once: results/h100-bwd-dq-139779d/COMMANDS.md)."""
    return [(p, x) for p in range(passes) for x in (items if p % 2 == 0 else items[::-1])]


def _pass_split(dev, q, k, v, do, causal, var, iters, warmup) -> dict:
    """The backward's two kernels timed alone (median ms): where its time goes."""
    from helios.attention import run_attention_backward

    ts = [dev.upload(x) for x in (q, k, v)]
    o, lse = dev.attention(*ts, causal=causal, return_lse=True)
    tdo = dev.upload(do)
    out = {}
    for name, passes in (("dq", 1), ("dkdv", 2)):
        t = {"warmup": warmup, "iters": iters, "passes": passes}
        samples = run_attention_backward(dev, *ts, o, tdo, lse, causal=causal, variant=var, timing=t)[3][0]
        out[name] = float(np.median(samples))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=ISSUE_SHAPES, help="BxHxSxd list (default: the issue's table)")
    ap.add_argument("--variants", default="all", help="all, default, or a comma list")
    ap.add_argument("--match", default="", help="keep only variants containing this text (with --variants all)")
    ap.add_argument("--causal", action="store_true", help="causal masking")
    ap.add_argument("--backward", action="store_true", help="the backward's variants (and SDPA's backward)")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"), help="Q, K, V (default float16)")
    ap.add_argument(
        "--passes",
        type=int,
        default=1,
        help="time each shape's variants this many times, alternately in the given and the reversed "
        "order; rows record their pass (default 1)",
    )
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--no-sdpa", action="store_true", help="skip the torch SDPA backends")
    ap.add_argument(
        "--no-check",
        action="store_true",
        help="record times whatever the check says (timing models only: their results are wrong by construction)",
    )
    ap.add_argument(
        "--env-sweep",
        default="",
        metavar="NAME=V1,V2",
        help="time every variant once per value of this environment switch (e.g. "
        "HELIOS_DISABLE_ATTENTION_BWD_FOLD=0,1), in one process; rows record it under 'env'",
    )
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.passes < 1:
        ap.error(f"--passes must be at least 1, got {a.passes}")
    env_name, _, env_values = a.env_sweep.partition("=")
    settings = [(env_name, x) for x in env_values.split(",")] if env_name else [("", "")]
    dev = helios.Device()
    if dev.info.get("uuid"):
        select_gpu(dev.info["uuid"])
    sdpa = None
    if not a.no_sdpa:
        from helios.harness.workloads.sdpa import BACKENDS, SdpaReference

        sdpa = SdpaReference(dev.info["uuid"])
    rows = []
    for spec in a.shapes.split(","):
        b, h, s, d = (int(x) for x in spec.split("x"))
        dt = helios.bfloat16 if a.dtype == "bfloat16" else np.float16
        atol, rtol = tolerances(a.dtype)
        q, k, v = random_qkv(b, h, s, s, d, seed=1, dtype=dt)
        do = random_qkv(b, h, s, s, d, seed=2, dtype=dt)[0]
        rng = np.random.default_rng(0)
        sel = np.sort(rng.choice(s, size=min(16, s), replace=False))
        if a.backward:  # head (0, 0) whole
            gref = np.concatenate(
                [
                    x.ravel()
                    for x in reference_attention_backward(q[:1, :1], k[:1, :1], v[:1, :1], do[:1, :1], causal=a.causal)[
                        :3
                    ]
                ]
            )
        else:
            ref = reference_attention(q, k, v, causal=a.causal, rows=sel)
        flops = (attention_backward_flops if a.backward else attention_flops)(b, h, s, s, d, a.causal)
        bw = {"backward": True, "grad_output": do} if a.backward else {}

        def verdict(out):
            if a.backward:
                got = np.concatenate([np.asarray(g[:1, :1], np.float32).ravel() for g in out])
                return check_close(got, gref, atol=atol, rtol=rtol), all(
                    bool(np.isfinite(np.asarray(g, np.float32)).all()) for g in out
                )
            got = np.asarray(out[:, :, sel], np.float32)
            return check_close(got, ref, atol=atol, rtol=rtol), bool(np.isfinite(got).all())

        if a.variants == "all":
            vs = [x for x in dev.attention_variants(d, backward=a.backward) if a.match in x]
        else:
            vs = [
                dev.default_attention_variant(d, s, a.causal, backward=a.backward) if x == "default" else x
                for x in a.variants.split(",")
            ]
        for pass_no, (var, (env_key, env_value)) in pass_order([(x, e) for x in vs for e in settings], a.passes):
            if var == "fa-scalar" and s * s * b * h * d > 2**33:
                continue  # the fallback at long context: minutes, not a design point
            saved = os.environ.get(env_key) if env_key else None
            if env_key:
                os.environ[env_key] = env_value
            t0 = time.time()
            try:
                # warm-up of >= 150 ms of GPU work per variant: clocks drop while the host checks
                est = dev.time_attention(
                    b, h, s, d, causal=a.causal, iters=2, warmup=1, variant=var, inputs=(q, k, v), **bw
                )
                # clocks up first (an idle H100 stayed at 345 MHz through 200 ms of work)
                burst = warmup_launches(est.median_ms, 3, 50.0)
                ramp = ramp_clocks(
                    lambda: dev.time_attention(
                        b, h, s, d, causal=a.causal, iters=burst, warmup=0, variant=var, inputs=(q, k, v), **bw
                    )
                )
                w = warmup_launches(est.median_ms, a.warmup, 150.0)
                before = gpu_state()
                tm = dev.time_attention(
                    b, h, s, d, causal=a.causal, iters=a.iters, warmup=w, variant=var, inputs=(q, k, v), **bw
                )
                after = gpu_state()
                stats = dev.attention_kernel_stats(d, var, a.causal, dtype=a.dtype, backward=a.backward)
                regs = (
                    {k: s.get("Register Count") for k, s in stats.items()}
                    if a.backward
                    else stats.get("Register Count")
                )
                split = _pass_split(dev, q, k, v, do, a.causal, var, a.iters, w) if a.backward else None
            except helios.HeliosError as e:
                rows.append({"shape": spec, "variant": var, "error": str(e)})
                print(spec, var, "ERROR", e, flush=True)
                continue
            finally:
                # the next shape's "default" resolves as the caller's environment says
                if env_key:
                    if saved is None:
                        os.environ.pop(env_key, None)
                    else:
                        os.environ[env_key] = saved
            chk, fin = verdict(tm.grads if a.backward else tm.output)
            ok = chk.passed and fin
            timed = ok or a.no_check
            row = {
                "shape": spec,
                "side": "helios",
                "variant": tm.variant,
                "causal": a.causal,
                "backward": a.backward,
                "check": {**chk.as_dict(), "all_finite": fin, "passed": ok},
                "checked": not a.no_check,
                "median_ms": tm.median_ms if timed else None,
                "tflops": tm.tflops if timed else None,
                "batch_ms": tm.batch_ms if timed else None,
                "samples_ms": tm.samples_ms if timed else None,
                "registers": regs,
                "clock_warmup": ramp,
                "low_clock": low_clock(before, after),
                "pass_ms": split,
                "env": {env_key: env_value} if env_key else {},
                "wall_s": time.time() - t0,
                "pass": pass_no,
            }
            rows.append(row)
            print(
                f"{spec} {tm.variant:34s}{f' pass {pass_no + 1}' if a.passes > 1 else ''} {env_key + '=' + env_value if env_key else ''} regs {regs} split {split} {'PASS' if ok else 'FAIL'} {tm.median_ms:.4f} ms "
                f"{tm.tflops:.1f} TF/s (max err {chk.max_abs_err:.3g}){' LOW CLOCK' if row['low_clock'] else ''}",
                flush=True,
            )
        if sdpa is not None:
            for be in BACKENDS:
                if be == "math" and s * s * b * h > 2**29:
                    continue
                run, args = (sdpa.run_backward, (q, k, v, do)) if a.backward else (sdpa.run, (q, k, v))
                r = run(*args, causal=a.causal, scale=1.0 / np.sqrt(d), backend=be, iters=a.iters, warmup=a.warmup)
                if r.timing is None:
                    rows.append({"shape": spec, "side": "sdpa", "backend": be, "error": r.error})
                    print(spec, "sdpa", be, "unavailable:", r.error, flush=True)
                    continue
                chk, _ = verdict(r.output)
                med = float(np.median(r.timing.samples_ms))
                rows.append(
                    {
                        "shape": spec,
                        "side": "sdpa",
                        "backend": be,
                        "causal": a.causal,
                        "backward": a.backward,
                        "check": {**chk.as_dict(), "passed": chk.passed},
                        "median_ms": med,
                        "tflops": flops / med / 1e9,
                        "batch_ms": r.timing.batch_ms,
                        "batch_mode": r.timing.batch_mode,
                        "samples_ms": r.timing.samples_ms,
                    }
                )
                print(f"{spec} sdpa {be:10s} {med:.4f} ms {flops / med / 1e9:.1f} TF/s", flush=True)
    with open(a.out, "w") as f:
        json.dump(
            {
                "device": dev.info["name"],
                "driver": dev.info.get("driver_info"),
                "commit": __import__("os").environ.get("HELIOS_COMMIT"),
                "rows": rows,
            },
            f,
            indent=1,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

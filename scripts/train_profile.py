#!/usr/bin/env python3
"""Where a `helios suite train` step through helios.torch spends its time, on a
GPU with CUDA: each op of the step alone at the suite's shapes (helios.torch vs
torch, forward and forward+backward; wall per call with calls queued back to
back, and the Helios GPU time per submission from the ring's timestamps), then
a few whole training steps under cProfile with the engine's telemetry deltas
per step (submissions, allocations, imports, compiles, ring waits).

--decoder: the suite's `helios` adapter (helios.torch.decoder) step split
instead: per step the host time until the forward and the backward return
against their CUDA-event times (a direction whose host time reaches its GPU
time is bound by the host recording its group), the host time each direction
spends staging its operands before its group starts recording, the host time
from the step's start to the forward's milestones (the adapter's stack, the
decoder call, the group going live, its first op recorded), the Helios GPU
time and the barriers and overlapped ops the engine recorded, in the --modes
given, alternating round by round (an A/B in one process); then the GPU time of every Helios op
of two steps (Device._profile_start: each op alone between barriers, a
timestamp when done), summed per op kind and shape, with the time between
submissions; then one forward under cProfile.

Prints text: the per-op table, the telemetry per step, the cProfile top list."""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

import helios.torch as ht
from helios.harness.gpustate import gpu_state
from helios.harness.train import TrainConfig, build, markov_stream

# --decoder's modes: how each round of steps runs
MODES = {
    "default": "as the suite runs it (the GPU idle when each step starts: the step before was waited for)",
    "barriers": "HELIOS_DISABLE_GROUP_OVERLAP=1 (a barrier before and after every op of a group)",
    "full-chunks": "HELIOS_DISABLE_IDLE_FLUSH=1 (a group's chunk goes to the GPU only when it holds 8 ops)",
    "per-tensor-casts": "the adapter casts its bf16 weights itself, a .to() each (HeliosOps.fused_casts = False), "
    "instead of helios.torch.decoder(compute_dtype=) casting them",
    "uncached-casts": "HELIOS_DISABLE_CAST_CACHE=1 (the decoder casts its fp32 masters with a .to() each "
    "instead of refilling kept buffers with one call)",
    "no-stage-memo": "HELIOS_DISABLE_STAGE_MEMO=1 (stage_all looks every operand up, as before the memo)",
    "ahead": "the GPU kept busy ~40 ms before each step (torch.cuda._sleep), so the host records the step "
    "ahead of it: the step's time as the GPU alone bounds it",
}
AHEAD_CYCLES = 80_000_000  # ~40 ms at the H100's 1980 MHz: more than the host needs to record a step

KEYS = (
    "submits",
    "matmuls",
    "attentions",
    "async_timed",
    "async_gpu_ms",
    "async_slot_ms",
    "async_submit_ms",
    "record_ms",
    "plan_ms",
    "cuda_call_ms",
    "cuda_imports",
    "live_exports",
    "live_memory",
    "pipeline_compiles",
    "pipeline_compile_ms",
)


def per_call(fn: Callable[[], object], reps: int) -> tuple[float, float, int]:
    """(wall ms per call queued back to back, Helios GPU ms per submission, submissions per call)."""
    dev = ht.device_for(torch.zeros(1, device="cuda"))
    fn()
    torch.cuda.synchronize()
    t0 = dev.telemetry()
    a = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - a) / reps * 1e3
    t1 = dev.telemetry()
    n = t1["async_timed"] - t0["async_timed"]
    return wall, (t1["async_gpu_ms"] - t0["async_gpu_ms"]) / n if n else 0.0, n // reps


def decoder_split(cfg: TrainConfig, steps: int, rounds: int, modes: list[str]) -> None:
    """The decoder adapter's step: host vs GPU time per direction, in each mode (MODES)."""
    GPT, _, HeliosOps, _, _, _ = build(torch)
    torch.manual_seed(0)
    model = GPT(cfg).cuda()
    ops = HeliosOps()
    data = torch.from_numpy(markov_stream(cfg.vocab, cfg.batch * 4, cfg.seq + 1, 0)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    dev = ht.device_for(data)
    keys = (
        "host_fwd",
        "stage_fwd",
        "to_stack",
        "to_decoder",
        "to_live",
        "to_first_op",
        "gpu_fwd",
        "host_bwd",
        "stage_bwd",
        "gpu_bwd",
        "gpu_opt",
        "step",
        "helios_gpu",
        "barriers",
        "overlapped",
    )
    staged: list[float] = []  # host ms in each group's staging (ht._prestage), in call order
    prestage = ht._prestage

    def timed_prestage(*args: object) -> None:
        a = time.perf_counter()
        prestage(*args)  # type: ignore[arg-type]
        staged.append((time.perf_counter() - a) * 1e3)

    ht._prestage = timed_prestage  # type: ignore[assignment]
    # Host times (perf_counter) of the forward's milestones before its first Helios
    # op: the adapter's stack (after the embedding), helios.torch.decoder (after the
    # weight casts), the group going live (after the checks and the staging), the
    # group's first op recorded. The first of each per step is kept.
    seen: dict[str, float] = {}

    def first(name: str) -> None:
        seen.setdefault(name, time.perf_counter())

    def marked(name: str, fn: Callable) -> Callable:
        def call(*args: object, **kw: object) -> object:
            first(name)
            return fn(*args, **kw)

        return call

    ops.stack = marked("stack", ops.stack)  # type: ignore[method-assign]
    ht.decoder = marked("decoder", ht.decoder)  # type: ignore[assignment]
    ht._Group.live = marked("live", ht._Group.live)  # type: ignore[method-assign]
    ht._Group._op = marked("first_op", ht._Group._op)  # type: ignore[method-assign]
    ahead = [False]

    def step(i: int) -> dict:
        rows = data[(i % 4) * cfg.batch : (i % 4 + 1) * cfg.batch]
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        t0 = dev.telemetry()
        staged.clear()
        seen.clear()
        if ahead[0]:  # the GPU busy while the host records the step: its time bound by the GPU alone
            torch.cuda._sleep(AHEAD_CYCLES)
        ev[0].record()
        a = time.perf_counter()
        loss = model(rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), ops)
        b = time.perf_counter()
        ev[1].record()
        loss.backward()
        c = time.perf_counter()
        ev[2].record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ev[3].record()
        torch.cuda.synchronize()
        t1 = dev.telemetry()
        return {
            "host_fwd": (b - a) * 1e3,
            "stage_fwd": staged[0] if staged else 0.0,
            **{f"to_{k}": (seen[k] - a) * 1e3 if k in seen else 0.0 for k in ("stack", "decoder", "live", "first_op")},
            "gpu_fwd": ev[0].elapsed_time(ev[1]),
            "host_bwd": (c - b) * 1e3,
            "stage_bwd": staged[1] if len(staged) > 1 else 0.0,
            "gpu_bwd": ev[1].elapsed_time(ev[2]),
            "gpu_opt": ev[2].elapsed_time(ev[3]),
            "step": ev[0].elapsed_time(ev[3]),
            "helios_gpu": t1["async_gpu_ms"] - t0["async_gpu_ms"],
            "barriers": t1["barriers"] - t0["barriers"],
            "overlapped": t1["overlapped"] - t0["overlapped"],
        }

    for i in range(3):
        step(i)
    print("mode | " + " | ".join(keys) + "  (medians, ms; barriers and overlapped ops per step)")
    for r in range(rounds):
        for mode in modes:
            os.environ["HELIOS_DISABLE_GROUP_OVERLAP"] = "1" if mode == "barriers" else "0"
            os.environ["HELIOS_DISABLE_IDLE_FLUSH"] = "1" if mode == "full-chunks" else "0"
            os.environ["HELIOS_DISABLE_CAST_CACHE"] = "1" if mode == "uncached-casts" else "0"
            os.environ["HELIOS_DISABLE_STAGE_MEMO"] = "1" if mode == "no-stage-memo" else "0"
            ahead[0] = mode == "ahead"
            ops.fused_casts = mode != "per-tensor-casts"
            rows = [step(i) for i in range(steps)]
            med = [statistics.median(x[k] for x in rows) for k in keys]
            hot = gpu_state() or {}  # the clocks right after a round of steps (power and heat hold them down)
            print(
                f"round {r} {mode} | "
                + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in med)
                + f"  (after: SM {hot.get('sm_clock_mhz')} of {hot.get('max_sm_clock_mhz')} MHz, "
                f"{hot.get('power_w')} W, throttle {hot.get('throttle_reasons')})"
            )
    os.environ.pop("HELIOS_DISABLE_GROUP_OVERLAP")
    os.environ.pop("HELIOS_DISABLE_IDLE_FLUSH")
    os.environ.pop("HELIOS_DISABLE_CAST_CACHE")
    os.environ.pop("HELIOS_DISABLE_STAGE_MEMO")
    ahead[0] = False
    ops.fused_casts = True
    op_timeline(dev, step, 2)
    prof = cProfile.Profile()
    rows = data[: cfg.batch]
    prof.enable()
    loss = model(rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), ops)
    prof.disable()
    loss.backward()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
    print("one forward under cProfile:")
    print(s.getvalue())


def op_timeline(dev: object, step: Callable[[int], dict], steps: int) -> None:
    """Each Helios op's GPU time over `steps` steps (profiled: ops serialised), per label."""
    ht._profile_labels = []
    dev._profile_start(16384)
    try:
        for i in range(steps):
            step(i)
    finally:
        marks, dropped = dev._profile_stop()
        labels, ht._profile_labels = ht._profile_labels, None
    ops = [ms for kind, ms in marks if kind == "op"]
    if dropped or len(ops) != len(labels):
        print(f"profile: {len(ops)} op timestamps for {len(labels)} labelled ops ({dropped} dropped); no table")
        return
    per: dict[str, list[float]] = {}
    gaps: list[float] = []
    prev, k = 0.0, 0
    for i, (kind, ms) in enumerate(marks):
        if kind == "submission":
            if i:
                gaps.append(ms - prev)
        else:
            per.setdefault(labels[k], []).append(ms - prev)
            k += 1
        prev = ms
    total = sum(sum(v) for v in per.values()) / steps
    print(f"Helios ops, GPU ms per step (each op alone; {len(ops) // steps} ops per step, sum {total:.3f} ms):")
    print("op | per step | ms per step | us each (median)")
    for label, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        print(f"{label} | {len(v) // steps} | {sum(v) / steps:.3f} | {statistics.median(v) * 1e3:.1f}")
    kinds: dict[str, float] = {}
    for label, v in per.items():
        kind = label.split(" ")[0] + (" backward" if " backward" in label else "")
        kinds[kind] = kinds.get(kind, 0.0) + sum(v) / steps
    print("by kind: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    short = [g for g in gaps if g < 0.2]
    print(
        f"between submissions: {len(short) / steps:.1f} per step under 0.2 ms (chunk to chunk: "
        f"{sum(short) / steps:.3f} ms per step, median {statistics.median(short) * 1e3 if short else 0:.1f} us); "
        f"longer (torch's work between groups): {', '.join(f'{g:.3f}' for g in gaps if g >= 0.2)} ms"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=10, help="calls per op timing (default 10)")
    p.add_argument("--steps", type=int, default=3, help="training steps profiled (default 3; with --decoder per round)")
    p.add_argument("--decoder", action="store_true", help="the decoder adapter's step split and overlap A/B (above)")
    p.add_argument("--rounds", type=int, default=2, help="--decoder: rounds of the modes (default 2)")
    p.add_argument(
        "--modes",
        default="default,per-tensor-casts,ahead",
        help="--decoder: comma-separated modes, alternated each round: "
        + "; ".join(f"{k}: {v}" for k, v in MODES.items())
        + " (default default,per-tensor-casts,ahead)",
    )
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        p.error(f"--modes: a comma-separated list of {', '.join(MODES)}; got {args.modes!r}")
    cfg = TrainConfig()
    if args.decoder:
        decoder_split(cfg, args.steps, args.rounds, modes)
        return 0
    bf16 = torch.bfloat16
    tok = cfg.batch * cfg.seq
    hd = cfg.d_model // cfg.heads
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape: int, grad: bool = False) -> torch.Tensor:
        return (torch.randn(*shape, device="cuda", dtype=bf16, generator=g) / 16).requires_grad_(grad)

    print(f"ordering: {ht.ordering(torch.zeros(1, device='cuda'))}")
    print("op | helios wall ms | helios GPU ms/submit | submits/call | torch wall ms")
    for name, n_out in (("qkv", 3 * cfg.d_model), ("up", 4 * cfg.d_model), ("lm_head", cfg.vocab)):
        x, w = rnd(tok, cfg.d_model, grad=True), rnd(n_out, cfg.d_model, grad=True)
        for mode in ("fwd", "fwd+bwd"):

            def h() -> None:
                y = ht.linear(x, w)
                if mode != "fwd":
                    y.float().sum().backward()

            def t() -> None:
                y = F.linear(x, w)
                if mode != "fwd":
                    y.float().sum().backward()

            hw, hg, hn = per_call(h, args.reps)
            tw, _, _ = per_call(t, args.reps)
            print(f"linear {name} {tok}x{cfg.d_model}->{n_out} {mode} | {hw:.3f} | {hg:.3f} | {hn} | {tw:.3f}")
    q, k, v = (rnd(cfg.batch, cfg.heads, cfg.seq, hd, grad=True) for _ in range(3))
    for mode in ("fwd", "fwd+bwd"):

        def ha() -> None:
            o = ht.attention(q, k, v, causal=True)
            if mode != "fwd":
                o.float().sum().backward()

        def ta() -> None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if mode != "fwd":
                o.float().sum().backward()

        hw, hg, hn = per_call(ha, args.reps)
        tw, _, _ = per_call(ta, args.reps)
        print(f"attention {cfg.batch}x{cfg.heads}x{cfg.seq}x{hd} causal {mode} | {hw:.3f} | {hg:.3f} | {hn} | {tw:.3f}")

    GPT, _, HeliosOps, _, _, _ = build(torch)
    torch.manual_seed(0)
    model = GPT(cfg).cuda()
    ops = HeliosOps()
    data = torch.from_numpy(markov_stream(cfg.vocab, cfg.batch * (args.steps + 1), cfg.seq + 1, 0)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    dev = ht.device_for(data)

    def step(i: int) -> None:
        rows = data[i * cfg.batch : (i + 1) * cfg.batch]
        loss = model(rows[:, :-1].contiguous(), rows[:, 1:].contiguous(), ops)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    step(0)
    prof = cProfile.Profile()
    for i in range(1, args.steps + 1):
        t0 = dev.telemetry()
        a = time.perf_counter()
        prof.enable()
        step(i)
        prof.disable()
        wall = (time.perf_counter() - a) * 1e3
        t1 = dev.telemetry()
        delta = {k: round(t1[k] - t0[k], 3) for k in KEYS if k in t1}
        print(f"step {i}: {wall:.1f} ms wall; telemetry delta {delta}")
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

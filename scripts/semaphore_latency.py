#!/usr/bin/env python3
"""Where the time of an op ordered with torch goes: the cross-API hops of the
shared timeline semaphore, measured one at a time on a GPU with CUDA.

Each mode queues --ops iterations back to back (no host sync inside), then
synchronizes; the figure is wall time per iteration (p50 over --repeats). The
Helios op is a small product (--size^3, fp16), the torch op a one-element add.

Pipelined (the values stay in order: CUDA signals only after it waited):
  torch_only   torch op                                   (launch rate)
  vk_only      Helios op waiting for nothing CUDA signals  (submission rate)
  vk_to_cuda   Helios op (no wait); stream waits its signal; torch op
  round_trip   torch op; signal w; Helios op waits w; stream waits s  (helios.torch)
  chain2       torch op; signal w; two Helios ops, the second waiting for the
               first's signal (a Vulkan-side hop); stream waits the last
  two_ops      torch op; then two Helios ops each ordered alone (signal w,
               op, stream waits s), no torch kernel between them: what two
               helios.torch calls cost when only views separate them
  host_gated_wait / host_gated_spin
               round_trip with the host taking the CUDA -> Vulkan leg: after
               the stream's signal the host waits for w (a blocking wait, or
               polling the value), then submits the op (its wait already met)
  group4 / group4_host_gated_spin
               torch op; four Helios products as one group (one submission,
               helios.torch's path); the same gated by the polling host
One at a time (each iteration ends in a host wait; latency, not rate):
  iso_vk            Helios op; host waits its value
  iso_cuda_to_vk    torch op; signal w; Helios op waits w (not yet reached:
                    wait-before-signal); host waits s
  iso_presignaled   torch op; signal w; host syncs the stream (w reached);
                    Helios op waits w; host waits s
  iso_round_trip    round_trip's iteration, then a stream sync
  iso_torch_then_vk torch op; stream sync; Helios op waiting for nothing; host
                    waits s (a context switch, no semaphore wait)
  iso_signal_then_vk  torch op; signal w; stream sync; Helios op waiting for
                    nothing; host waits s
Overlap:
  overlap      an --big^3 torch product and an --big^3 Helios product with no
               dependency: do the two APIs' kernels run at once or in turn?

Prints one JSON object."""

from __future__ import annotations

import argparse
import json
import time
from typing import Callable

import numpy as np
import torch

import helios
import helios.torch as ht


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=200, help="iterations queued per timing (default 200)")
    p.add_argument("--repeats", type=int, default=5, help="timings per mode; p50 reported (default 5)")
    p.add_argument("--size", type=int, default=256, help="the Helios op: size^3 fp16 product (default 256)")
    p.add_argument("--big", type=int, default=8192, help="overlap mode: big^3 products (default 8192)")
    args = p.parse_args()

    x = torch.zeros(1, device="cuda")
    dev = ht.device_for(x)
    why = ht.ordering(x)
    out: dict = {"device": dev.info["name"], "ordering": why, "ops": args.ops, "size": args.size, "modes": {}}
    if why != "semaphore":
        print(json.dumps(out))
        return 1
    stream = torch.cuda.current_stream().cuda_stream
    rng = np.random.default_rng(0)
    a = dev.upload(rng.standard_normal((args.size, args.size)).astype(np.float16))
    b = dev.upload(rng.standard_normal((args.size, args.size)).astype(np.float16))
    c1, c2 = dev.empty((args.size, args.size)), dev.empty((args.size, args.size))

    def helios_op(w: int, s: int, dst: helios.Tensor = c1) -> None:
        dev.matmul(a, b, out=dst, order=(w, s))

    def torch_only() -> None:
        x.add_(1)

    def vk_only() -> None:
        _, s = dev._async_values()
        helios_op(0, s)

    def vk_to_cuda() -> None:
        _, s = dev._async_values()
        helios_op(0, s)
        dev._cuda_wait(stream, s)
        x.add_(1)

    def round_trip() -> None:
        x.add_(1)
        w, s = dev._async_values()
        dev._cuda_signal(stream, w)
        helios_op(w, s)
        dev._cuda_wait(stream, s)

    def chain2() -> None:
        x.add_(1)
        w, s1 = dev._async_values()
        _, s2 = dev._async_values()
        dev._cuda_signal(stream, w)
        helios_op(w, s1)
        helios_op(s1, s2, c2)
        dev._cuda_wait(stream, s2)

    def two_ops() -> None:
        x.add_(1)
        for dst in (c1, c2):
            w, s = dev._async_values()
            dev._cuda_signal(stream, w)
            helios_op(w, s, dst)
            dev._cuda_wait(stream, s)

    def host_gate(w: int, spin: bool) -> None:
        """The host takes the CUDA -> Vulkan leg: returns once the semaphore reached w
        (spin: polling its value; else a blocking wait)."""
        if spin:
            while dev._semaphore_value() < w:
                pass
        else:
            dev._host_wait(w, 10_000_000_000)

    def gated_by_host(spin: bool) -> Callable[[], None]:
        """round_trip with the CUDA -> Vulkan leg taken by the host: the stream signals
        w, the host waits until the semaphore reaches w (spin: polling its value;
        else a blocking wait), then submits the Helios op, whose wait is then already
        met; the stream waits for s as before."""

        def step() -> None:
            x.add_(1)
            w, s = dev._async_values()
            dev._cuda_signal(stream, w)
            host_gate(w, spin)
            helios_op(w, s)
            dev._cuda_wait(stream, s)

        return step

    def gated_group(spin: bool, ops: int) -> Callable[[], None]:
        """A torch op, then `ops` Helios products as one group gated by the host (as
        gated_by_host), then the next iteration's torch op waits for the group."""

        def step() -> None:
            x.add_(1)
            w, s = dev._async_values()
            dev._cuda_signal(stream, w)
            if spin:
                host_gate(w, spin)
            dev._group_begin(w, s)
            try:
                for i in range(ops):
                    dev.matmul(a, b, out=c1 if i % 2 == 0 else c2)
            finally:
                dev._group_end()
            dev._cuda_wait(stream, s)

        return step

    def host_wait(s: int) -> None:
        dev._host_wait(s, 10_000_000_000)

    def isolated(torch_op: bool, signal: bool, sync: bool, wait: bool) -> Callable[[], None]:
        """One iteration ending in a host wait: [torch op] [the stream signals w]
        [stream sync] the Helios op [waiting for w]."""

        def step() -> None:
            if torch_op:
                x.add_(1)
            w, s = dev._async_values()
            if signal:
                dev._cuda_signal(stream, w)
            if sync:
                torch.cuda.current_stream().synchronize()
            helios_op(w if wait else 0, s)
            host_wait(s)

        return step

    def iso_round_trip() -> None:
        round_trip()
        torch.cuda.current_stream().synchronize()

    def drain() -> None:
        _, s = dev._async_values()
        dev.matmul(a, b, out=c2, order=(0, s))  # after everything: the stream waits for the last value
        dev._cuda_wait(stream, s)
        torch.cuda.synchronize()

    def timed(step: Callable[[], None]) -> dict:
        for _ in range(10):
            step()
        drain()
        per = []
        tel0 = dev.telemetry()
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for _ in range(args.ops):
                step()
            host = time.perf_counter() - t0
            drain()
            per.append(((time.perf_counter() - t0) / args.ops * 1e6, host / args.ops * 1e6))
        tel1 = dev.telemetry()
        n = tel1["async_timed"] - tel0["async_timed"]
        gpu = (tel1["async_gpu_ms"] - tel0["async_gpu_ms"]) / n * 1e3 if n else None
        walls = sorted(w for w, _ in per)
        return {
            "wall_us_per_iter_p50": walls[len(walls) // 2],
            "wall_us_min": walls[0],
            "host_us_per_iter_p50": sorted(h for _, h in per)[len(per) // 2],
            "helios_gpu_us_per_op": gpu,
        }

    modes = {
        "torch_only": torch_only,
        "vk_only": vk_only,
        "vk_to_cuda": vk_to_cuda,
        "round_trip": round_trip,
        "chain2": chain2,
        "two_ops": two_ops,
        "host_gated_wait": gated_by_host(spin=False),
        "host_gated_spin": gated_by_host(spin=True),
        "group4": gated_group(spin=False, ops=4),
        "group4_host_gated_spin": gated_group(spin=True, ops=4),
        "iso_vk": isolated(torch_op=False, signal=False, sync=False, wait=False),
        "iso_cuda_to_vk": isolated(torch_op=True, signal=True, sync=False, wait=True),
        "iso_presignaled": isolated(torch_op=True, signal=True, sync=True, wait=True),
        "iso_round_trip": iso_round_trip,
        "iso_torch_then_vk": isolated(torch_op=True, signal=False, sync=True, wait=False),
        "iso_signal_then_vk": isolated(torch_op=True, signal=True, sync=True, wait=False),
    }
    for name, step in modes.items():
        out["modes"][name] = timed(step)
        print(name, out["modes"][name], flush=True)

    # overlap: one big product on each side, no dependency between them
    n = args.big
    ta = torch.randn(n, n, device="cuda", dtype=torch.float16)
    tb = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ba, bb, bc = dev.empty((n, n)), dev.empty((n, n)), dev.empty((n, n))
    dev.matmul(ba, bb, out=bc)  # compiled, warm

    def both(torch_side: bool, helios_side: bool) -> float:
        drain()
        t0 = time.perf_counter()
        if helios_side:
            _, s = dev._async_values()
            dev.matmul(ba, bb, out=bc, order=(0, s))
        if torch_side:
            ta @ tb
        if helios_side:
            dev._cuda_wait(stream, s)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3

    ov = {}
    for key, flags in {"torch_ms": (True, False), "helios_ms": (False, True), "both_ms": (True, True)}.items():
        both(*flags)
        ov[key] = sorted(both(*flags) for _ in range(args.repeats))[args.repeats // 2]
    out["overlap"] = {"big": n, **ov}
    print("overlap", out["overlap"], flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What CUDA work running beside Helios's Vulkan work does to it: a chain of
helios.torch products timed on the GPU (Helios's timestamps) alone, then with a
torch kernel spinning on a second CUDA stream the whole time (as a collective's
kernel spins while it waits for its peers), then with the spinner on torch's own
stream ahead of the products (ordered: never beside them). First, per round, one
ordered fp16 product beside a 200 ms spinner: when Helios signals, when torch's
stream is past its wait and when the spinner ends (which context runs first;
HELIOS_QUEUE_PRIORITY changes the answer).

    python3 scripts/cuda_beside_vulkan.py [--n 8192] [--ops 12] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import torch

import helios.torch as ht


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=8192, help="product size n x n x n, bf16 (default 8192)")
    ap.add_argument("--ops", type=int, default=12, help="products per timed chain (default 12)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three cases (default 3)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    with ht.memory_pool():
        a = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16) / args.n**0.5
        b = torch.randn(args.n, args.n, device=dev, dtype=torch.bfloat16) / args.n**0.5
    hdev = ht.device_for(a)
    assert ht.ordering(a) == "semaphore", "needs the semaphore ordering (CUDA and Vulkan sharing a timeline)"
    ht.matmul(a, b)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    hz = 1.98e9  # cycles per second of torch.cuda._sleep at the H100's SM clock (about right on others)

    def chain(spin: str) -> tuple[float, float]:
        torch.cuda.synchronize()
        g0 = hdev.telemetry()["async_gpu_ms"]
        t0 = time.perf_counter()
        cycles = int(hz * 0.4)  # longer than the chain
        if spin == "side":
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
        elif spin == "ordered":
            torch.cuda._sleep(int(hz * 0.02))
        x = a
        for _ in range(args.ops):
            x = ht.matmul(x, b)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
        gpu = hdev.telemetry()["async_gpu_ms"] - g0
        wall = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        return gpu, wall

    def one_beside() -> tuple[float, float, float]:
        """One ordered product (the stream signals, Helios waits, the stream waits
        back) with the spinner on the side stream: host ms until Helios's signal
        is seen, until the stream's event after its wait, and until the spinner
        ends. Which context runs first when both have work."""
        torch.cuda.synchronize()
        stream = torch.cuda.current_stream().cuda_stream
        spun = torch.cuda.Event()
        t0 = time.perf_counter()
        with torch.cuda.stream(side):
            torch.cuda._sleep(int(hz * 0.2))
            spun.record()
        w, s = hdev._async_values()
        hdev._cuda_signal(stream, w)
        hdev.matmul(ha, hb, out=hc, order=(w, s))
        hdev._cuda_wait(stream, s)
        done = torch.cuda.Event()
        done.record()
        t_vk = t_done = t_spin = 0.0
        while not (t_vk and t_done and t_spin):
            now = (time.perf_counter() - t0) * 1e3
            if not t_vk and hdev._semaphore_value() >= s:
                t_vk = now
            if not t_done and done.query():
                t_done = now
            if not t_spin and spun.query():
                t_spin = now
        return t_vk, t_done, t_spin

    ha, hb, hc = (hdev.empty((args.n, args.n)) for _ in range(3))
    hdev.matmul(ha, hb, out=hc)
    print(f"{torch.cuda.get_device_name()}: {args.ops} helios.torch products {args.n}^3 bf16 per chain")
    for r in range(args.rounds):
        t_vk, t_done, t_spin = one_beside()
        print(
            f"round {r} one ordered fp16 product beside a 200 ms spinner: Helios signalled at {t_vk:8.3f} ms, "
            f"the stream past its wait at {t_done:8.3f}, the spinner done at {t_spin:8.3f}"
        )
        for spin in ("none", "side", "ordered"):
            gpu, wall = chain(spin)
            print(
                f"round {r} spinner {spin:8s}: Helios GPU {gpu:9.3f} ms ({gpu / args.ops:.3f} per product), "
                f"host until the chain's end {wall:9.3f} ms"
            )


if __name__ == "__main__":
    main()

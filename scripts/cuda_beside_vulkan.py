"""What CUDA work running beside Helios's Vulkan work does to it: a chain of
helios.torch products timed on the GPU (Helios's timestamps) alone, then with a
torch kernel spinning on a second CUDA stream the whole time (as a collective's
kernel spins while it waits for its peers), then with the spinner on torch's own
stream ahead of the products (ordered: never beside them).

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

    print(f"{torch.cuda.get_device_name()}: {args.ops} helios.torch products {args.n}^3 bf16 per chain")
    for r in range(args.rounds):
        for spin in ("none", "side", "ordered"):
            gpu, wall = chain(spin)
            print(
                f"round {r} spinner {spin:8s}: Helios GPU {gpu:9.3f} ms ({gpu / args.ops:.3f} per product), "
                f"host until the chain's end {wall:9.3f} ms"
            )


if __name__ == "__main__":
    main()

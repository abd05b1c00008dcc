"""EXPERIMENT (not product): what fp32 atomic adds cost on this GPU, for a split-K down
product fused with up (each of P workgroups adding its 2048 partial sums into one fp32
row). torch's index_add_ (an atomic add per element, consecutive threads on consecutive
addresses) over P x 2048 elements into 2048, against a sum of the same P x 2048 values
with no atomics; CUDA events, median of 200, inside one CUDA graph of 20 calls each."""
import json, statistics, sys, torch
dev = "cuda"
out = {}
def timed(fn, reps=200, inner=20):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(inner): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / inner)
    return statistics.median(ts)
for parts in (1, 64, 128, 256, 512, 1024):
    y = torch.zeros(2048, device=dev)
    idx = torch.arange(2048, device=dev).repeat(parts)
    src = torch.randn(parts * 2048, device=dev)
    t_atomic = timed(lambda: y.index_add_(0, idx, src))
    t_sum = timed(lambda: torch.sum(src.view(parts, 2048), 0, out=y))
    out[parts] = dict(adds=parts * 2048, atomic_us=t_atomic, sum_us=t_sum)
    print(parts, out[parts], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)

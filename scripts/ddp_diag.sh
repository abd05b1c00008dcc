#!/usr/bin/env bash
# The training suite under DistributedDataParallel taken apart (run by scripts/gpu_round.sh
# as one step on a 2-GPU machine; $OUT, $REPO from it): the helios adapter's step under
# torchrun with torch's default gradient buckets and with one bucket, two single-GPU
# runs at once on the two GPUs (no NCCL) and one alone, no averaging, one all-reduce after
# the backward, one process under torchrun, DDP with host-wait ordering, a traced DDP run
# and DDP with Helios's queue at realtime priority, DDP whose comm hook sends nothing, and
# DDP with torch's own comm hook for the helios adapter (the suite's default is
# helios.torch.ddp_comm_hook there) (DIAG_PARTS picks them and their order: abcdefghijkl); one line per run. Each run is cut at DIAG_TIMEOUT
# seconds (default 240), so that one hung collective leaves the other parts' lines.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
H=$(command -v helios)
STEPS=${DIAG_STEPS:-40}
TMO=${DIAG_TIMEOUT:-240}
torchrun() { timeout "$TMO" "$(command -v torchrun)" "$@"; }
L=/tmp/round/ddp; mkdir -p "$L"
summ() {  # label file: one line per adapter, or the log's tail
  [ -s "$2" ] || { echo "$1: no result; ${2%.json}.log ends:"; tail -20 "${2%.json}.log"; } | tee -a "$OUT/diag.txt"
  [ -s "$2" ] || return 0
  python3 - "$1" "$2" <<'PY' | tee -a "$OUT/diag.txt"
import json, sys
label, path = sys.argv[1:]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"{label}: no result ({e})"); sys.exit()
for r in d["rows"]:
    if "step_ms_p50" not in r:
        print(f"{label} {r['adapter']}: {r.get('status')}"); continue
    hk = r.get("helios_kernel_ms_p50")
    print(f"{label} {r['adapter']}: step {r['step_ms_p50']:.3f} fwd {r['forward_ms_p50']:.3f} "
          f"bwd {r['backward_ms_p50']:.3f} opt {r['optimizer_ms_p50']:.3f} helios_gpu "
          f"{'-' if hk is None else f'{hk:.3f}'} host fwd/bwd {r.get('host_forward_ms_p50', 0):.3f}/"
          f"{r.get('host_backward_ms_p50', 0):.3f} tok/s/gpu {r['tokens_per_s_per_gpu']:.0f} "
          f"cpus {d['distributed'].get('cpus')}")
PY
}
PARTS=${DIAG_PARTS:-abcdefghijkl}  # run in the order given
common=(suite train --steps "$STEPS" --train-warmup 10 --adapters helios --force)
part_a() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --out "$L/a.json" > "$L/a.log" 2>&1
  summ "ddp default buckets" "$L/a.json"
}
part_b() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --ddp-bucket-mb 4096 --out "$L/b.json" > "$L/b.log" 2>&1
  summ "ddp one bucket" "$L/b.json"
}
part_c() {
  CUDA_VISIBLE_DEVICES=0 "$H" "${common[@]}" --out "$L/c0.json" > "$L/c0.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=1 "$H" "${common[@]}" --out "$L/c1.json" > "$L/c1.log" 2>&1
  wait
  summ "two single runs at once, GPU0" "$L/c0.json"
  summ "two single runs at once, GPU1" "$L/c1.json"
}
part_d() {
  "$H" "${common[@]}" --out "$L/d.json" > "$L/d.log" 2>&1
  summ "one single run alone" "$L/d.json"
}
# Which part of DDP: no averaging at all, one all-reduce after the backward, and one
# process under the launcher (its variables, no NCCL).
part_e() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --grad-sync none --out "$L/e.json" > "$L/e.log" 2>&1
  summ "torchrun, no averaging" "$L/e.json"
}
part_f() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --grad-sync after-backward --out "$L/f.json" > "$L/f.log" 2>&1
  summ "torchrun, one all-reduce after the backward" "$L/f.json"
}
part_g() {
  torchrun --nproc_per_node=1 "$H" "${common[@]}" --out "$L/g.json" > "$L/g.log" 2>&1
  summ "torchrun, one process" "$L/g.json"
}
part_h() {
  HELIOS_DISABLE_SEMAPHORE_ORDERING=1 torchrun --nproc_per_node=2 "$H" "${common[@]}" --out "$L/h.json" > "$L/h.log" 2>&1
  summ "ddp, ordered by host waits" "$L/h.json"
}
part_i() { # torch.profiler's view of rank 0: did another stream's kernel run in Helios's gaps?
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --trace "$L/trace" --out "$L/i.json" > "$L/i.log" 2>&1
  summ "ddp, traced warm-up" "$L/i.json"
  python3 "$REPO/scripts/trace_overlap.py" "$L/trace-helios-rank0.json" 2>&1 | tail -25 | tee -a "$OUT/diag.txt"
}
# Realtime priority: on one H100 (h100-priority-e0343ea/) Helios's work then waits for a
# CUDA kernel running beside it instead of time-slicing with it (3x slower); costly alone
# (one GPU's step 35 -> 51 ms), but under DDP the kernel beside it may be NCCL's.
part_j() {
  HELIOS_QUEUE_PRIORITY=realtime torchrun --nproc_per_node=2 "$H" "${common[@]}" --out "$L/j.json" > "$L/j.log" 2>&1
  summ "ddp, Helios's queue at realtime priority" "$L/j.json"
}
# DDP's buckets, copies and hooks with no collective: does DDP itself, or its all-reduces,
# cost Helios's backward its time?
part_k() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --ddp-comm-hook none --out "$L/k.json" > "$L/k.log" 2>&1
  summ "ddp, comm hook sending nothing" "$L/k.json"
}
# torch's default comm hook for the helios adapter too: its all-reduces on NCCL's stream
# beside Helios's backward (what parts a, b, h, i and j ran before 2026-11-26).
part_l() {
  torchrun --nproc_per_node=2 "$H" "${common[@]}" --ddp-comm-hook torch --out "$L/l.json" > "$L/l.log" 2>&1
  summ "ddp, torch's comm hook for every adapter" "$L/l.json"
}
for p in $(grep -o . <<< "$PARTS"); do
  declare -F "part_$p" > /dev/null || { echo "ddp_diag: no part '$p' (parts: abcdefghijkl)" >&2; exit 2; }
done
for p in $(grep -o . <<< "$PARTS"); do "part_$p"; done

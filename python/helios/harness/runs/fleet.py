"""Every GPU of a host (`helios bench --devices=all`) and fleets of results.

One independent `helios bench` per Vulkan device, as child processes: all at
once by default (each GPU measured under the load of its neighbours, as a
training job runs), one after another with --devices-serial. Each child is
pinned: `--device=i`, and for NVIDIA GPUs CUDA_VISIBLE_DEVICES=GPU-<uuid>, so
its CUDA reference and GPU-state reads can only be that GPU. Each writes its own
result (<stem>-dev<i>.json); the fleet summary (<stem>.json, helios-fleet/1)
gives per shape each GPU's Helios median and ratio, the spread across GPUs and
an outlier verdict: a GPU whose runs are SLOWER than its peers' pooled runs by
the compare noise model (`helios compare`), with its clocks, power and
throttle reasons. `helios report` merges such results (several hosts too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from ..results.compare import CompareError, compare
from ..results.rows import FLEET_SCHEMA, BenchRow, bench_rows, read_result, reference_ms

SCHEMA = FLEET_SCHEMA
NVIDIA = 0x10DE


def device_indices(spec: str, infos: Sequence[dict]) -> list[int]:
    """'all' (every hardware GPU; the CPU device only where it is the only one) or '0,2'."""
    n = len(infos)
    if spec == "all":
        gpus = [i for i, d in enumerate(infos) if d["device_type"] != "cpu"]
        return gpus or list(range(n))
    try:
        idx = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--devices {spec!r}: 'all' or comma-separated device indices") from None
    if not idx or len(set(idx)) != len(idx) or any(not 0 <= i < n for i in idx):
        raise ValueError(
            f"--devices {spec!r}: distinct indices in 0..{n - 1} ({n} Vulkan device{'s' if n != 1 else ''})"
        )
    return idx


def strip_args(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """argv without these options (--name, --name=value and --name value forms)."""
    out, skip = [], False
    flags_with_value = {"--out", "--devices", "--device"}
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in names:
            if "=" not in a and name in flags_with_value:
                skip = True
            continue
        out.append(a)
    return out


def run_devices(
    bench_argv: Sequence[str],
    indices: Sequence[int],
    infos: Sequence[dict],
    stem: Path,
    serial: bool,
    log=print,
    command: str = "bench",
) -> list[dict]:
    """Runs the children (`helios --device=i COMMAND ARGS`; bench also gets its
    --out); returns one entry per device: index, uuid, file, rc, log."""
    entries = []
    procs = []
    for i in indices:
        path = stem.with_name(f"{stem.name}-dev{i}.json")
        logf = stem.with_name(f"{stem.name}-dev{i}.log")
        env = dict(os.environ)
        env.pop("HELIOS_DEVICE", None)
        if infos[i].get("vendor_id") == NVIDIA:
            env["CUDA_VISIBLE_DEVICES"] = "GPU-" + infos[i]["uuid"]
        cmd = [sys.executable, "-m", "helios", f"--device={i}", command, *bench_argv]
        if command == "bench":
            cmd += [f"--out={path}", "--force"]
        entry = {
            "index": i,
            "uuid": infos[i]["uuid"],
            "name": infos[i]["name"],
            "file": str(path),
            "log": str(logf),
            "command": cmd[2:],
        }
        log(
            f"fleet: device {i} ({infos[i]['name']}, {infos[i]['uuid']})"
            + (f" -> {path}" if command == "bench" else "")
        )
        fh = open(logf, "w", encoding="utf-8")  # files: a child's log, written as it runs
        p = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        if serial:
            entry["rc"] = p.wait()
            fh.close()
        else:
            procs.append((entry, p, fh))
        entries.append(entry)
    for entry, p, fh in procs:
        entry["rc"] = p.wait()
        fh.close()
    return entries


def _state(row: BenchRow) -> dict:
    """The GPU state around a row's last round: clocks, power, throttle reasons."""
    states = row.gpu_state or []
    last = states[-1] if isinstance(states, list) and states else {}
    after = (last or {}).get("after") or {}
    return {
        k: after.get(k)
        for k in ("sm_clock_mhz", "max_sm_clock_mhz", "power_w", "temperature_c", "throttle_reasons", "gpu_uuid")
    }


def summarize(results: Sequence[dict], labels: Sequence[str]) -> dict:
    """Per shape: each GPU's median and ratio, the spread, and outliers (a GPU
    SLOWER than the others pooled, by the compare noise model)."""
    shapes: dict[str, dict] = {}
    repeats = {lab: labels.count(lab) for lab in labels}
    nth: dict[str, int] = {}
    for res, label in zip(results, labels):
        nth[label] = nth.get(label, 0) + 1
        for row in bench_rows(res):
            if not row.valid:
                continue
            ref_ms = reference_ms(row)
            s = shapes.setdefault(row.shape, {"shape": row.shape, "gpus": []})
            s["gpus"].append(
                {
                    "gpu": label,
                    "run": nth[label] if repeats[label] > 1 else None,  # several runs of one GPU: which
                    "uuid": res.get("helios", {}).get("uuid"),
                    "helios_ms": row.heliosMs,
                    # the reference's time, and which reference it is (a NumPy time is never
                    # shown as CUDA's); cuda_ms only where it ran on CUDA
                    "reference": res.get("reference"),
                    "reference_ms": ref_ms,
                    "cuda_ms": row.cudaMs,
                    "ratio": row.heliosMs / ref_ms if row.heliosMs and ref_ms else None,
                    "throttled": row.throttled,
                    "low_clock": row.low_clock,
                    "state": _state(row),
                }
            )
    for shape, s in shapes.items():
        ms = [g["helios_ms"] for g in s["gpus"]]
        s["spread_pct"] = (max(ms) / min(ms) - 1.0) * 100.0 if ms else None
        s["outliers"] = []
        for g in s["gpus"]:
            g["verdict_vs_peers"] = None
            if len(s["gpus"]) < 2:
                continue
            mine = [r for r, lab in zip(results, labels) if lab == g["gpu"]]
            peers = [r for r, lab in zip(results, labels) if lab != g["gpu"]]
            try:
                v = [x for x in compare(peers, mine, ignore_device=True) if x.shape == shape]
            except CompareError:
                continue
            if v:
                g["verdict_vs_peers"] = v[0].verdict
                g["change_vs_peers_pct"] = v[0].pct
                if v[0].verdict == "SLOWER":
                    s["outliers"].append(g["gpu"])
    return {"schema": SCHEMA, "gpus": list(dict.fromkeys(labels)), "shapes": list(shapes.values())}


def fleet_markdown(summary: dict) -> str:
    lines = [
        "| shape | GPU | helios median ms | reference median ms | ratio | vs peers (centres) | SM MHz | power W | throttle |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary["shapes"]:
        for g in s["gpus"]:
            st = g["state"]
            vs = g.get("verdict_vs_peers") or "-"
            if g.get("change_vs_peers_pct") is not None:
                vs = f"{vs} ({g['change_vs_peers_pct']:+.1f}%)"
            ratio = f"{g['ratio']:.2f}" if g["ratio"] else "-"
            ref_ms = g.get("reference_ms", g.get("cuda_ms"))
            cuda = f"{ref_ms:.4f} ({g.get('reference') or 'cuda'})" if ref_ms else "-"
            gpu = g["gpu"] if not g.get("run") else f"{g['gpu']} run {g['run']}"
            lines.append(
                f"| {s['shape']} | {gpu} | {g['helios_ms']:.4f} | {cuda} | {ratio} | {vs} | "
                f"{st.get('sm_clock_mhz') or '-'} | {st.get('power_w') or '-'} | "
                f"{','.join(st.get('throttle_reasons') or []) or '-'} |"
            )
        out = ", ".join(s["outliers"]) or "none"
        lines.append(f"| {s['shape']} | spread {s['spread_pct']:.1f}% | | | | outliers: {out} | | | |")
    return "\n".join(lines) + "\n"


def gpu_label(res: dict, fallback: str) -> str:
    h = res.get("helios", {})
    host = res.get("host", {}).get("hostname")
    rank = res.get("launcher", {}).get("rank") if isinstance(res.get("launcher"), dict) else None
    parts = [
        p
        for p in (host, h.get("pci_bus_id") or (h.get("uuid") or "")[:8], None if rank is None else f"rank{rank}")
        if p
    ]
    return "/".join(parts) or fallback


def load_results(paths: Sequence[str]) -> list[tuple[str, dict]]:
    return [(p, read_result(p, "a helios-bench result")) for p in paths]


def fleet_from_files(paths: Sequence[str]) -> Optional[dict]:
    results = [r for _, r in load_results(paths) if r.get("schema") == "helios-bench/1"]
    if not results:
        return None
    # one label per GPU: several runs of one GPU (the same host, PCI address or UUID and
    # rank) are that GPU's runs, compared with the other GPUs' together
    labels = [gpu_label(r, f"result{i}") for i, r in enumerate(results)]
    return summarize(results, labels)

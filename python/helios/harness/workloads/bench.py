"""`helios bench`'s one driver: a workload (matmul.py, attention.py) plugs in its
shapes, its reference, its variants, its gate, its two sides and its rows; the driver
runs the protocol the same way for each.

1. The header: the protocol's settings and the workload's own fields.
2. The device, the reference (following the Vulkan device's UUID, never an index:
   CUDA's, NVML's and Vulkan's orders differ), the variant per shape.
3. The gate: nothing is timed unless every variant that will be timed passes against
   float64 (unless --check=false, which marks the file ungated).
4. The rounds (protocol/rounds.py): clocks up, then per round and shape the two sides,
   alternating which goes first; --runs repeats the whole protocol.
5. The rows (BenchRow, in the results folder's rows module), each with its roof fraction; then the extras a
   signal may stop (kernel identity, energy windows); then the file's status."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import numpy as np

from ...check import tolerances
from ...device import Device
from ..protocol.energy import energy_of_rows
from ..protocol.gpustate import select_gpu, selected_gpu
from ..protocol.rounds import (
    ProtocolConfig,
    Workload,
    check_counts,
    device_fields,
    finish,
    flush_bytes,
    mark_ungated,
    record_gate,
    result_header,
    row_extras,
    run_rounds,
)
from ..results.compare import aa_mde, side_noise
from ..results.rows import BENCH_SCHEMA, kernel_identity


class BenchWorkload(Protocol):
    """A workload of `helios bench`: the driver calls these in the order above."""

    cfg: ProtocolConfig

    def check_config(self) -> None: ...
    def header(self) -> dict: ...
    def reference(self, uuid: str) -> Any: ...
    def choose(self, dev: Any) -> dict: ...
    def variant_fields(self, dev: Any, chosen: dict, ref: Any) -> tuple[dict, dict]: ...
    # {case: CheckResult}, the label of what it checked, the result's key for the cases
    # ("variants", "cases") and the failure's template
    def gate(
        self, dev: Any, chosen: dict, atol: float, rtol: float, log: Callable[[str], None]
    ) -> tuple[dict, str, str, str]: ...  # fmt: skip
    def rounds(
        self, dev: Any, ref: Any, chosen: dict, flush: int, tol: tuple[float, float], log: Callable[[str], None]
    ) -> Workload: ...  # fmt: skip
    def row(self, shape: Any, slot: dict, variant: str, ref: Any) -> dict: ...
    def roof_fraction(self, info: dict, row: dict) -> Optional[float]: ...
    def kernel_stats(self, dev: Any, row: dict) -> dict: ...
    def energy(self, dev: Any, counter: Any, shape: Any, row: dict, ref: Any) -> dict: ...


def helios_side(stats: dict, slot: dict, round_medians: list, **extra: Any) -> dict:
    """A row's Helios block, the same for every workload: its statistics (and the
    workload's extra metrics), samples and batch times per round, warm-up launches,
    round medians and runs, checks and telemetry."""
    return {
        "stats": stats,
        **extra,
        "samples_ms": slot["h"],
        "batch_ms": slot["hb"],
        "warmup_launches": slot["hw"],
        "round_medians_ms": round_medians,
        "round_runs": slot["run"],
        "check": slot["hchk"],
        "telemetry": slot["tel"],
    }


MAX_ADDED_RUNS = 64  # a target no number of runs reaches stops here, whatever the budget


class MdeTarget:
    """The stopping rule of --target-mde: after the runs asked for, one more run while
    some shape's MDE (aa_mde of its Helios round medians, grouped by run) is above the
    target, until --max-time (seconds from the first round) or MAX_ADDED_RUNS."""

    def __init__(self, target_pct: float, max_time_s: Optional[float], log: Callable[[str], None]) -> None:
        self.target, self.max_time_s, self.log = target_pct / 100.0, max_time_s, log
        self.mde: dict = {}
        self.stopped_by = ""

    def mdes(self, acc: dict) -> dict:
        out = {}
        for shape, slot in acc.items():
            by_run: dict[int, list[float]] = {}
            for run, samples in zip(slot["run"], slot["h"]):
                by_run.setdefault(run, []).append(float(np.median(samples)))
            if by_run:
                meds = [m for r in by_run.values() for m in r]
                out[shape] = aa_mde(side_noise(list(by_run.values()), meds, len(meds)))
        return out

    def __call__(self, acc: dict, runs_done: int, elapsed: float) -> bool:
        self.mde = self.mdes(acc)
        above = [s for s, m in self.mde.items() if m > self.target]
        if not above:
            self.stopped_by = "target"
        elif self.max_time_s is not None and elapsed >= self.max_time_s:
            self.stopped_by = f"--max-time {self.max_time_s:g} s"
        elif runs_done >= MAX_ADDED_RUNS:
            self.stopped_by = f"{MAX_ADDED_RUNS} runs"
        else:
            worst = max(self.mde[s] for s in above)
            self.log(f"{len(above)} shape(s) above the target MDE (worst {worst:.1%}): run {runs_done + 1}")
            return True
        return False

    def mark(self, result: dict, rows: list[dict], done: list) -> None:
        """Each row's MDE against the target, and what stopped the runs."""
        for r, shape in zip(rows, done):
            m = self.mde.get(shape)
            r["mde_target"] = {"target_pct": self.target * 100, "mde_pct": None if m is None else m * 100,
                               "reached": m is not None and m <= self.target}  # fmt: skip
        result["stopping"] = {"target_mde_pct": self.target * 100, "max_time_s": self.max_time_s,
                              "stopped_by": self.stopped_by or "interrupted",
                              "not_reached": [r["shape"] for r in rows if not r["mde_target"]["reached"]]}  # fmt: skip


def run_workload(w: BenchWorkload, *, progress: Optional[bool], log: Callable[[str], None]) -> dict:
    """Run the protocol over one workload; returns the helios-bench/1 dict
    (result["status"] "ok", "failed" or "interrupted")."""
    cfg = w.cfg
    check_counts(cfg.iters, cfg.warmup, cfg.repeats, cfg.runs)
    w.check_config()
    atol, rtol = tolerances(cfg.dtype, cfg.atol, cfg.rtol)
    result = result_header(cfg, BENCH_SCHEMA, atol, rtol)
    result.update(w.header())
    with Device(cfg.device) as dev:
        info = dict(dev.info)
        ref = w.reference(info["uuid"])
        select_gpu(info["uuid"])
        flush = flush_bytes(cfg, info)
        result["flush_bytes"] = flush
        chosen = w.choose(dev)
        helios_fields, extra = w.variant_fields(dev, chosen, ref)
        result["helios"] = {**device_fields(info), **helios_fields}
        result["cuda"] = ref.metadata()
        result["reference"] = ref.name
        result.update(extra)
        if cfg.check:
            gate, shape, cases_key, failure = w.gate(dev, chosen, atol, rtol, log)
            if not record_gate(result, gate, shape, cases_key, failure):
                return result
        else:
            mark_ungated(result)
        rounds = w.rounds(dev, ref, chosen, flush, (atol, rtol), log)
        target = MdeTarget(cfg.target_mde, cfg.max_time_s, log) if cfg.target_mde is not None else None
        acc, done = run_rounds(
            result, rounds, repeats=cfg.repeats, runs=cfg.runs, more=target, progress=progress, log=log
        )
        rows = [w.row(shape, acc[shape], chosen[shape], ref) for shape in done]
        if target is not None:
            target.mark(result, rows, done)
        for r in rows:  # the roof is measured on float16 fragments: bfloat16 rows get none
            r["roofFraction"] = w.roof_fraction(info, r) if cfg.dtype == "float16" else None

        def extras() -> None:
            for r in rows:
                r["kernel"] = kernel_identity(lambda r=r: w.kernel_stats(dev, r))
            energy_of_rows(
                cfg.energy, selected_gpu(), rows, lambda counter, r, i: w.energy(dev, counter, done[i], r, ref)
            )

        row_extras(result, rows, extras)
        return finish(result, rows)

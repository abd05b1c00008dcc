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
5. The rows (harness/results/rows.py BenchRow), each with its roof fraction; then the extras a
   signal may stop (kernel identity, energy windows); then the file's status."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

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
        acc, done = run_rounds(result, rounds, repeats=cfg.repeats, runs=cfg.runs, progress=progress, log=log)
        rows = [w.row(shape, acc[shape], chosen[shape], ref) for shape in done]
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

"""`helios bench`: the seeds' CUDA-parity protocol.

Correctness first (the check shape must pass the gate before anything is
timed, and every timed shape's output is checked too); then, per shape and
round, Helios and the reference are timed the same way on the same inputs,
alternating which goes first. A failing check marks the run failed and its
rows carry no speed numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ... import _helios
from ...check import check_close, reference_matmul
from ...flops import matmul_flops, tflops
from ...matmul_timing import random_inputs, warmup_launches
from ...roof import roof_fraction
from ..protocol.energy import row_energy
from ..protocol.gpustate import low_clock, throttled
from ..protocol.rounds import (
    ProtocolConfig,
    Workload,
)
from ..protocol.shapes import shape_str
from ..protocol.stats import bootstrap_ratio_ci, summarize
from ..results.energy import energy_lines
from ..results.format import fmt_ms, fmt_ratio, fmt_tflops, status_word, stopping_line
from ..results.rows import BenchRow, bench_rows, reference_fields, reference_ms, reference_tflops
from ..results.schema import to_row
from .bench import helios_side, run_workload
from .references import Reference, make_reference

ROW_CHECK_ROWS = 64  # timed shapes: this many random rows vs float64, + all finite
# A run's inputs are kept between its rounds (each shape's are the same every round, and
# drawing them is seconds of host time per round for large shapes) up to this many bytes.
INPUT_CACHE_BYTES = 2 << 30


@dataclass
class BenchConfig(ProtocolConfig):
    """helios bench (matmul): the protocol's settings and the shapes; ``variant``
    None is the device default ("matmul" in the seeds)."""

    shapes: list[tuple[int, int, int]]
    check_shape: tuple[int, int, int] = (384, 384, 384)


class RowCheck:
    """Sampled check for timed shapes: ROW_CHECK_ROWS rows against float64 (every
    column), plus every element finite (an unwritten, poisoned element is NaN). The
    rows are drawn from seed; their float64 reference is computed once, at the first
    check, and serves both sides of every round that draws the same rows (converting
    B to float64 is most of a check's host time)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, atol: float, rtol: float, seed: int) -> None:
        self.a, self.b, self.atol, self.rtol = a, b, atol, rtol
        rng = np.random.default_rng(seed)
        self.rows = np.sort(rng.choice(a.shape[0], size=min(ROW_CHECK_ROWS, a.shape[0]), replace=False))
        self.reference: Optional[np.ndarray] = None

    def __call__(self, out: np.ndarray) -> dict:
        if self.reference is None:
            self.reference = reference_matmul(self.a[self.rows], self.b)
        r = check_close(out[self.rows], self.reference, atol=self.atol, rtol=self.rtol)
        nonfinite = int((~np.isfinite(out)).sum())
        d = r.as_dict()
        d.update(rows_checked=int(self.rows.size), nonfinite_total=nonfinite, passed=bool(r.passed and nonfinite == 0))
        return d


def run_bench(
    cfg: BenchConfig, *, progress: Optional[bool] = None, log: Callable[[str], None] = lambda s: None
) -> dict:
    """Run the protocol; returns the helios-bench/1 dict (result["status"] is
    "ok" or "failed")."""
    return run_workload(MatmulWorkload(cfg), progress=progress, log=log)


class MatmulWorkload:
    """The matmul workload of the bench's driver (bench.py): products MxNxK, the
    variant per shape (given, tuned or the default), cuBLAS/torch or NumPy opposite."""

    def __init__(self, cfg: BenchConfig) -> None:
        self.cfg = cfg
        self.variant = ""  # the device default at the check shape, once chosen
        self.sides: Optional[MatmulSides] = None  # the rounds' sides, once the rounds are set up

    def check_config(self) -> None:
        if self.cfg.dtype not in ("float16", "bfloat16"):
            from ..._helios import UnsupportedError

            raise UnsupportedError(f"dtype {self.cfg.dtype!r}: helios bench times float16 or bfloat16 inputs")

    def header(self) -> dict:
        return {"out_dtype": self.cfg.dtype}

    def reference(self, uuid: str) -> Reference:
        return make_reference(self.cfg.ref, uuid)

    def choose(self, dev: Any) -> dict:
        cfg, dt = self.cfg, self.cfg.dtype
        self.variant = (
            dev.resolve_variant(*cfg.check_shape, variant=cfg.variant, dtype=dt)
            if cfg.variant not in (None, "auto")
            else dev.default_variant(*cfg.check_shape, dtype=dt)
        )
        # Per shape: the given variant, else the tuned pick or the default for the shape.
        return {shape: dev.resolve_variant(*shape, variant=cfg.variant, dtype=dt) for shape in cfg.shapes}

    def variant_fields(self, dev: Any, chosen: dict, ref: Reference) -> tuple[dict, dict]:
        # variant: the device default; rows[].variant is per shape
        return {"variant": self.variant, "variants": sorted(set(chosen.values()))}, {}

    def gate(self, dev: Any, chosen: dict, atol: float, rtol: float,
             log: Callable[[str], None]) -> tuple[dict, str, str, str]:  # fmt: skip
        timed = sorted(set(chosen.values()))
        gate = _gate(self.cfg, dev, [self.variant] + [x for x in timed if x != self.variant], atol, rtol, log)
        label = shape_str(self.cfg.check_shape)
        return gate, label, "variants", f"correctness check {label} failed for {{cases}}: {{worst}}"

    def rounds(self, dev: Any, ref: Reference, chosen: dict, flush: int, tol: tuple[float, float],
               log: Callable[[str], None]) -> Workload:  # fmt: skip
        self.sides = sides = MatmulSides(self.cfg, dev, ref, chosen, self.variant, flush, tol)
        return Workload(self.cfg.shapes, sides.new_slot, sides.sides, shape_str, sides.clock_work)

    def row(self, shape: tuple[int, int, int], slot: dict, variant: str, ref: Reference) -> dict:
        return _row(shape, slot, variant, ref)

    def roof_fraction(self, info: dict, row: dict) -> Optional[float]:
        """Against `helios roof`'s cached ceiling for the variant's fragments, where measured."""
        return roof_fraction(info, row["variant"], row["heliosTflops"])

    def kernel_stats(self, dev: Any, row: dict) -> dict:
        return dev.kernel_stats(row["variant"], self.cfg.dtype, self.cfg.dtype, machine_code=True)

    def energy(self, dev: Any, counter: Any, shape: tuple[int, int, int], row: dict, ref: Reference) -> dict:
        assert self.sides is not None, "energy windows come after the rounds"
        a, b = self.sides.shape_inputs(shape, list(self.cfg.shapes).index(shape))  # the timed inputs
        return _energy(dev, counter, shape, (a, b), row, ref, self.cfg.dtype)


def _gate(cfg: BenchConfig, dev: Any, variants: list[str], atol: float, rtol: float,
          log: Callable[[str], None]) -> dict:  # fmt: skip
    """Each variant that will be timed against float64 on the check shape: {variant: CheckResult}."""
    m, n, k = cfg.check_shape
    a, b = random_inputs(m, n, k, seed=cfg.seed + 7919, dtype=cfg.dtype)
    ref_c = reference_matmul(a, b)
    gate = {}
    for v in variants:
        c = dev.matmul(a, b, out_dtype=cfg.dtype, variant=v)
        gate[v] = check_close(c, ref_c, atol=atol, rtol=rtol)
        log(f"check {shape_str(cfg.check_shape)} {v}: {gate[v].line()} -> {'PASS' if gate[v].passed else 'FAIL'}")
    return gate


class MatmulSides:
    """One bench run's rounds: the clock ramp, the slot a shape's samples collect in,
    and per round the Helios and reference sides on the shape's seeded inputs (every
    timed output checked: sampled rows against float64, all finite)."""

    def __init__(self, cfg: BenchConfig, dev: Any, ref: Reference, chosen: dict, variant: str, flush: int,
                 tolerances: tuple[float, float]) -> None:  # fmt: skip
        self.cfg, self.dev, self.ref, self.chosen, self.variant = cfg, dev, ref, chosen, variant
        self.flush, (self.atol, self.rtol) = flush, tolerances
        self.warm_inputs: list = []
        self.inputs: dict = {}  # shape -> (a, b), up to INPUT_CACHE_BYTES
        self.checks: dict = {}  # shape -> (run, RowCheck): one draw of rows per run

    def shape_inputs(self, shape: tuple[int, int, int], si: int) -> tuple[np.ndarray, np.ndarray]:
        """The shape's seeded inputs (the same every round), kept while they fit."""
        if shape in self.inputs:
            return self.inputs[shape]
        a, b = random_inputs(*shape, seed=self.cfg.seed + si, dtype=self.cfg.dtype)
        if sum(x.nbytes + y.nbytes for x, y in self.inputs.values()) + a.nbytes + b.nbytes <= INPUT_CACHE_BYTES:
            self.inputs[shape] = (a, b)
        return a, b

    def clock_work(self) -> None:
        cfg = self.cfg
        if not self.warm_inputs:
            self.warm_inputs.extend(random_inputs(2048, 2048, 2048, seed=cfg.seed + 1, dtype=cfg.dtype))
        self.dev.time_matmul(2048, 2048, 2048, iters=100, warmup=0,
                             variant=self.chosen.get((2048, 2048, 2048), self.variant),
                             inputs=tuple(self.warm_inputs), dtype=cfg.dtype)  # fmt: skip

    def new_slot(self, shape: tuple[int, int, int]) -> dict:
        keys = ("h", "r", "hb", "rb", "hmed", "rmed", "hw", "rw", "hchk", "rchk")
        return {**{key: [] for key in keys}, "tel": None, "batch_mode": None}

    def sides(self, shape: tuple[int, int, int], si: int, rnd: int, slot: dict) -> tuple:
        a, b = self.shape_inputs(shape, si)
        run = rnd // self.cfg.repeats
        if self.checks.get(shape, (None,))[0] != run:
            self.checks[shape] = (run, RowCheck(a, b, self.atol, self.rtol, self.cfg.seed + run))
        check = self.checks[shape][1]
        return (lambda: self.helios_side(shape, a, b, slot, check)), (lambda: self.ref_side(a, b, slot, check))

    def helios_side(self, shape: tuple[int, int, int], a: Any, b: Any, slot: dict, check: Callable) -> None:
        cfg, dev = self.cfg, self.dev
        kw = dict(variant=self.chosen[shape], inputs=(a, b), dtype=cfg.dtype)
        est = dev.time_matmul(*shape, iters=2, warmup=1, **kw)
        w = warmup_launches(est.median_ms, cfg.warmup, cfg.warmup_ms)
        dev.reset_telemetry()
        t = dev.time_matmul(*shape, iters=cfg.iters, warmup=w, flush_bytes=self.flush, **kw)
        slot["hw"].append(w)
        slot["h"].append(t.samples_ms)
        slot["hb"].append(t.batch_ms)
        slot["hmed"].append(float(np.median(t.samples_ms)))
        slot["tel"] = t.telemetry
        slot["hchk"].append(check(t.output))

    def ref_side(self, a: Any, b: Any, slot: dict, check: Callable) -> None:
        cfg = self.cfg
        est = self.ref.time(a, b, 2, 1, batch=False)
        w = warmup_launches(float(np.median(est.samples_ms)), cfg.warmup, cfg.warmup_ms)
        t = self.ref.time(a, b, cfg.iters, w, self.flush)
        slot["rw"].append(w)
        slot["r"].append(list(t.samples_ms))
        slot["rb"].append(t.batch_ms)
        slot["rmed"].append(float(np.median(t.samples_ms)))
        slot["batch_mode"] = t.batch_mode
        slot["rchk"].append(check(t.output))


def _energy(dev: Any, counter: Any, shape: tuple[int, int, int], inputs: tuple[np.ndarray, np.ndarray], row: dict,
            ref: Reference, dt: str) -> dict:  # fmt: skip
    """The row's energy windows (protocol/energy.py): the timed shape's inputs, its variant."""
    m, n, k = shape
    a, b = inputs

    def helios(count: int) -> None:
        dev.time_matmul(m, n, k, iters=count, warmup=0, variant=row["variant"], inputs=(a, b), dtype=dt)

    return row_energy(
        counter,
        (helios, row["heliosMs"]),
        (lambda count: ref.time(a, b, count, 0, batch=False), reference_ms(row)),
        ref.is_cuda,
        matmul_flops(m, n, k),
        _helios.MAX_LAUNCHES,
    )


def _row(shape: tuple[int, int, int], s: dict, variant: str, ref: Reference) -> dict:
    flops = matmul_flops(*shape)
    h = [x for r in s["h"] for x in r]
    c = [x for r in s["r"] for x in r]
    hs, cs = summarize(h), summarize(c)
    valid = all(x["passed"] for x in s["hchk"])
    states = [st[w] for st in s["state"] for w in ("before", "after")]
    thr = throttled(*states)
    lo, hi = bootstrap_ratio_ci(c, h)  # speedup = cuda time / helios time
    return to_row(
        BenchRow(
            shape=shape_str(shape),
            heliosMs=hs["median"] if valid else None,
            heliosTflops=tflops(flops, hs["median"]) if valid else None,
            **reference_fields(ref.is_cuda, cs["median"], flops),
            speedup=cs["median"] / hs["median"] if valid else None,
            speedup_ci95=[lo, hi] if valid else None,
            valid=valid,
            throttled=thr,
            low_clock=low_clock(*states),
            variant=variant,
            reference=ref.name,
            helios=helios_side(hs, s, s["hmed"]),
            cuda={
                "stats": cs,
                "samples_ms": s["r"],
                "batch_ms": s["rb"],
                "batch_mode": s["batch_mode"],
                "warmup_launches": s["rw"],
                "round_medians_ms": s["rmed"],
                "round_runs": s["run"],
                "check": s["rchk"],
            },
            gpu_state=s["state"],
        )
    )


def markdown(result: dict) -> str:
    """The results table, as printed and written beside the JSON."""
    ref = result.get("reference", "?")
    lines = [
        f"Helios vs {ref} on {result.get('helios', {}).get('name', '?')} "
        f"({result['dtype']}, iters={result['iters']}, warmup={result['warmup']}, "
        f"repeats={result['repeats']}{', cold L2' if result.get('flush_l2') else ''})",
        "",
    ]
    if result.get("check"):
        lines.append(f"check {result['check']['shape']}: {result['check']['line']}")
        lines.append("")
    if result["status"] != "ok":
        lines.append(f"**{status_word(result['status'])}**: {result.get('failure')}")
        lines.append("")
    lines.append(
        f"| shape | helios median ms | TFLOP/s | {ref} median ms | TFLOP/s | helios/{ref} time | its 95% CI "
        f"| helios batch ms | {ref} batch ms | CV h / r | flags |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = bench_rows(result)
    for r in rows:
        side = r.cuda  # the reference side's raw block (named before other references existed)
        hb = np.median(r.helios["batch_ms"]) if r.helios["batch_ms"] else None
        cb = [x for x in side["batch_ms"] if x is not None]
        flags = ",".join(
            x for x, on in (("INVALID", not r.valid), ("throttled", r.throttled), ("low_clock", r.low_clock)) if on
        )
        ref_ms = reference_ms(r)
        ratio = r.heliosMs / ref_ms if r.heliosMs and ref_ms else None
        # speedup_ci95 is of reference/helios; the table shows helios/reference throughout
        ci = f"{1 / r.speedup_ci95[1]:.3f}-{1 / r.speedup_ci95[0]:.3f}" if r.speedup_ci95 else "-"
        lines.append(
            f"| {r.shape} | {fmt_ms(r.heliosMs)} | {fmt_tflops(r.heliosTflops)} | "
            f"{fmt_ms(ref_ms)} | {fmt_tflops(reference_tflops(r))} | {fmt_ratio(ratio)} | {ci} | "
            f"{fmt_ms(hb)} | {fmt_ms(float(np.median(cb)) if cb else None)} | "
            f"{r.helios['stats']['cv']:.3f} / {side['stats']['cv']:.3f} | {flags} |"
        )
    if rows:
        lines.append("")
        fractions = [f"{r.shape} {100 * r.roofFraction:.0f}%" for r in rows if r.roofFraction]
        if fractions:
            lines.append("of the MMA roof (helios roof): " + ", ".join(fractions))
        lines.extend(energy_lines(result["rows"], result.get("reference")))
        stop = stopping_line(result)
        if stop:
            lines.append(stop)
        per_shape = {r.variant for r in rows}
        if len(per_shape) == 1:
            lines.append(f"variant: {rows[0].variant}")
        else:
            lines.append("variants:")
            lines.extend(f"- {r.shape}: {r.variant}" for r in rows)
    return "\n".join(lines) + "\n"

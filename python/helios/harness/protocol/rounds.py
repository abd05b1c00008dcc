"""The benchmark protocol every workload shares.

A workload (matmul, attention, ...) supplies its shapes, the per-shape result
slot, the two sides of one round (Helios and the reference, each a closure that
times and checks one shape) and the clock-ramp work; this module runs the
rounds the one way every result file documents:

1. the correctness gate (``record_gate``): nothing is timed unless it passed;
2. per run, the clocks ramped first (``ramp_clocks``), then ``repeats`` rounds;
   in each round every shape runs both sides, alternating which goes first, with
   the GPU state recorded around them;
3. Ctrl-C or SIGTERM keeps the complete rounds and marks the result interrupted;
   after the rounds nothing a signal does loses them (helios.signals): the rows'
   extras (kernel identity, energy windows) stop, the rest is written;
4. the status: failed when any timed output failed its check (``finish``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional, Sequence

from ... import signals
from ...check import ATOL, RTOL
from ...launcher import launcher_info
from .gpustate import describe_ramp, gpu_state, ramp_clocks
from .progress import Progress
from .provenance import FLUSH_BYTES, provenance


def interrupted_message() -> str:
    return f"interrupted ({signals.stopped_by()}): the rows hold the rounds completed before it"


# The Vulkan device's fields every result file records under "helios".
DEVICE_FIELDS = (
    "name",
    "device_type",
    "vendor_id",
    "device_id",
    "driver_name",
    "driver_info",
    "driver_version",
    "api_version",
    "subgroup_size",
    "shared_memory_bytes",
    "timestamp_period_ns",
    "timestamp_valid_bits",
    "cooperative_matrix",
    "cooperative_matrix2",
    "bf16",
    "cooperative_matrix_properties",
    "uuid",
    "luid",
    "pci_bus_id",
    "wait_spin_us",  # how the host waited (HELIOS_WAIT_SPIN_US): a wall time depends on it
)


@dataclass(kw_only=True)
class ProtocolConfig:
    """What the protocol takes, whatever the workload (each workload's config adds
    its shapes and its own choices)."""

    iters: int = 100
    warmup: int = 10
    warmup_ms: float = 200.0  # and at least this much GPU work of warm-up
    dtype: str = "float16"  # the inputs' (and outputs') type: float16 or bfloat16
    variant: Optional[str] = None  # None: the device's pick per shape
    check: bool = True
    atol: float = ATOL
    rtol: float = RTOL
    repeats: int = 1
    runs: int = 1  # independent runs (own clock ramp), rounds grouped by run
    target_mde: Optional[float] = None  # percent: runs are added until every row's MDE is at or below it
    max_time_s: Optional[float] = None  # the budget for the added runs (seconds from the first round)
    flush_l2: bool = False
    energy: bool = True  # an energy window per row and side where NVML has the counter (energy.py)
    ref: str = "auto"
    seed: int = 0
    device: Optional[int] = None
    command: list[str] = field(default_factory=list)


def result_header(cfg: ProtocolConfig, schema: str, atol: float, rtol: float) -> dict:
    """The fields every result file opens with: schema, status, provenance and the
    protocol's settings (atol and rtol as resolved for the dtype)."""
    return {
        "schema": schema,
        "status": "ok",
        **provenance(),
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "warmup_ms": cfg.warmup_ms,
        "dtype": cfg.dtype,
        "atol": atol,
        "rtol": rtol,
        "repeats": cfg.repeats,
        "runs": cfg.runs,
        "flush_l2": cfg.flush_l2,
        "energy": cfg.energy,
        "seed": cfg.seed,
        "command": cfg.command,
        "launcher": launcher_info(),  # rank, local rank, world size under Slurm / torchrun / mpirun
    }


def flush_bytes(cfg: ProtocolConfig, info: dict) -> int:
    """Bytes overwritten before each sample with --flush-l2 (capped where a device
    cannot hold that much in one buffer); 0 without it."""
    return min(FLUSH_BYTES, info["max_storage_buffer_range"] // 4 * 4) if cfg.flush_l2 else 0


def device_fields(info: dict) -> dict:
    return {k: info[k] for k in DEVICE_FIELDS if k in info}


def check_counts(iters: int, warmup: int, repeats: int, runs: int = 1) -> None:
    if iters < 1 or warmup < 0 or repeats < 1 or runs < 1:
        raise ValueError(
            f"need iters >= 1, warmup >= 0, repeats >= 1, runs >= 1 (got {iters}, {warmup}, {repeats}, {runs})"
        )


def keep_complete_rounds(slot: dict) -> int:
    """Cut a shape's per-round lists to the rounds whose every side finished.

    A round is complete once its GPU state is recorded (``slot["state"]``,
    appended after both sides ran): after an interrupt, samples of a round
    that only one side finished are dropped, so the sides stay paired. Lists
    inside dict values (one per reference backend) are cut the same way.
    Returns the number of complete rounds."""
    n = len(slot["state"])
    for value in slot.values():
        lists = value.values() if isinstance(value, dict) else [value]
        for lst in lists:
            if isinstance(lst, list):
                del lst[n:]
    return n


def record_gate(result: dict, gate: dict, shape: str, cases_key: str, failure: str) -> bool:
    """Store the gate's worst case under result["check"] (every case's line under
    `cases_key`); on a failure mark the result failed (`failure` names what, the
    failing cases are appended) with no rows. Returns whether it passed."""
    worst = max(gate.values(), key=lambda r: (not r.passed, r.fails, r.max_abs_err))
    result["check"] = {
        "shape": shape,
        **worst.as_dict(),
        "line": worst.line(),
        cases_key: {k: r.line() for k, r in gate.items()},
    }
    if all(r.passed for r in gate.values()):
        return True
    bad = [k for k, r in gate.items() if not r.passed]
    result["status"] = "failed"
    result["failure"] = failure.format(cases=", ".join(bad), worst=worst.line())
    result["rows"] = []
    return False


def mark_ungated(result: dict) -> None:
    result["check"] = None
    result["untrusted"] = "run without --check: results are not correctness-gated"


Side = Callable[[], None]


@dataclass
class Workload:
    """What the rounds need from a workload. `sides(shape, index, round, slot)`
    returns the Helios and reference closures of one round (they append to the
    slot); `new_slot(shape)` the slot's empty lists; `label(shape)` its name in
    progress lines; `clock_work` one burst of GPU work for the clock ramp."""

    shapes: Sequence[Hashable]
    new_slot: Callable[[Any], dict]
    sides: Callable[[Any, int, int, dict], tuple[Side, Side]]
    label: Callable[[Any], str]
    clock_work: Callable[[], None]


# A stopping rule: (the slots so far, runs done, seconds since the first round) -> whether
# to run once more. The protocol asks it after the runs it was given.
MoreRuns = Callable[[dict, int, float], bool]


def run_rounds(
    result: dict,
    w: Workload,
    *,
    repeats: int,
    runs: int = 1,
    more: Optional[MoreRuns] = None,
    progress: Optional[bool] = None,
    log: Callable[[str], None] = lambda s: None,
) -> tuple[dict, list]:
    """Run the timed rounds, `runs` runs and then, one at a time, as many more as
    `more` asks for; returns (slot per shape, the shapes with complete rounds).
    Records result["clock_warmups"] (one ramp per run) and result["clock_warmup"]
    (the first), and on Ctrl-C the interrupted status."""
    acc = {s: {**w.new_slot(s), "state": [], "run": []} for s in w.shapes}
    bar = Progress(len(w.shapes) * repeats * runs, progress)
    result["clock_warmups"] = []
    started = time.monotonic()
    of = f"/{runs}" if more is None else ""  # "run 2/3", or "run 4" where runs are added
    try:
        run = 0
        while run < runs or (more is not None and more(acc, run, time.monotonic() - started)):
            for k in range(repeats):
                if k == 0:
                    result["clock_warmups"].append(ramp_clocks(w.clock_work))
                    log(f"run {run + 1}{of} clock warm-up: {describe_ramp(result['clock_warmups'][-1])}")
                rnd = run * repeats + k  # the round's index over all runs
                for si, shape in enumerate(w.shapes):
                    slot = acc[shape]
                    before = gpu_state()
                    helios_side, ref_side = w.sides(shape, si, rnd, slot)
                    for side in (helios_side, ref_side) if rnd % 2 == 0 else (ref_side, helios_side):
                        side()
                    slot["run"].append(run)
                    slot["state"].append({"round": rnd, "run": run, "before": before, "after": gpu_state()})
                    where = f"run {run + 1}{of} " if runs > 1 or more is not None else ""
                    bar.step(f"{w.label(shape)} {where}round {k + 1}/{repeats}")
            run += 1
    except KeyboardInterrupt:  # keep what was measured: whole rounds, marked interrupted
        result["status"], result["failure"] = "interrupted", interrupted_message()
    finally:
        bar.close()
        signals.measured()
    result["clock_warmup"] = result["clock_warmups"][0] if result["clock_warmups"] else None
    return acc, [s for s in w.shapes if keep_complete_rounds(acc[s])]


def row_extras(result: dict, rows: list[dict], extras: Callable[[], None]) -> None:
    """Run what completes the measured rows without measuring them (kernel identity,
    energy windows). A signal stops it, also one that came during the rounds: the
    rows stay, a row it did not reach says so, and the result is marked interrupted."""
    for r in rows:
        r.setdefault("kernel", None)
    try:
        with signals.extras():
            extras()
    except KeyboardInterrupt:
        for r in rows:
            r.setdefault("energy", {"status": "not measured: interrupted"})
        if result["status"] == "ok":
            result["status"] = "interrupted"
            result["failure"] = (
                f"interrupted ({signals.stopped_by()}) after the rounds: every row's samples are complete; "
                "kernel identity and energy windows are missing where a row has none"
            )


def finish(result: dict, rows: list) -> dict:
    """Store the rows; a run whose timed outputs failed their check is failed."""
    result["rows"] = rows
    bad = [r["shape"] for r in rows if not r["valid"]]
    if bad and result["status"] == "ok":
        result["status"] = "failed"
        result["failure"] = f"output check failed for {', '.join(bad)}"
    return result

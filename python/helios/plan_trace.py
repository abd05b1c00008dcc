"""A persistent run's timeline: with HELIOS_PLAN_TRACE=1 set when the Device opens,
every workgroup of a plan's persistent runs stamps each member with the device clock
(VK_KHR_shader_clock's shaderDeviceClock, ns) before its wait, after it and after its
work, and at two points inside the work (persist_runtime.glsl's `stamp`);
`Plan.trace()` reads the last replay's stamps and `summarize` turns them into what the
member cost on the step's critical path.

No profiler sees inside a persistent dispatch; this is how its waits and its members
are timed. The stamps cost a few device-memory stores a member: compare traced replays
with traced replays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _helios

# The words' layout (shaders/layouts.py's TRACE_* constants, as the kernel writes them).
HEADER_WORDS, STAMP_WORDS = _helios.TRACE_HEADER, _helios.TRACE_STAMP
N_WORD, K_WORD, ATTENTION_N = _helios.TRACE_N, _helios.TRACE_K, _helios.TRACE_ATTENTION


@dataclass(frozen=True)
class MemberTrace:
    """One member of one run: a product (n x k weights) or an attention (`heads`), and
    each workgroup's stamps in ns of the device clock: `before` its wait, `go` after it,
    `done` after its work; inside it (0 where the workgroup had none), `inputs` its
    inputs in (a product's A staged: its norm head or its copy; an attention's first
    task's scores: its K words read) and `first` its first unit done (a product's first
    column stored; an attention's first task's partials written and counted in)."""

    run: int
    member: int
    kind: str  # "product" or "attention"
    n: int  # a product's N (0: an attention)
    k: int  # a product's K; an attention's heads
    before: np.ndarray
    go: np.ndarray
    done: np.ndarray
    inputs: np.ndarray
    first: np.ndarray


def parse(words: bytes) -> list[MemberTrace]:
    """The members of every run in the stamped words (`_helios.Plan.trace_words()`);
    ValueError where a run's stamps are missing (no replay since the plan was made)."""
    w = np.frombuffer(words, dtype=np.uint32)
    out: list[MemberTrace] = []
    at, run = 0, 0
    while at + HEADER_WORDS <= w.size:
        members, grid = int(w[at + _helios.TRACE_MEMBERS]), int(w[at + _helios.TRACE_GRID])
        n_words = STAMP_WORDS * members * grid
        block = w[at + HEADER_WORDS : at + HEADER_WORDS + n_words]
        if members == 0 or grid == 0 or block.size != n_words:
            raise ValueError(f"plan trace: run {run}'s header reads {members} members x {grid} workgroups")
        rows = block.reshape(members, grid, STAMP_WORDS).astype(np.uint64)
        # stamp k: words 2k and 2k + 1, every stamp before N_WORD
        ns = rows[:, :, 0:N_WORD:2] | (rows[:, :, 1:N_WORD:2] << np.uint64(32))
        if not ns[:, :, 2].all():
            raise ValueError(f"plan trace: run {run} has members no workgroup stamped: replay the plan first")
        for m in range(members):
            attention = int(rows[m, 0, N_WORD]) == ATTENTION_N
            out.append(MemberTrace(run, m, "attention" if attention else "product",
                                   0 if attention else int(rows[m, 0, N_WORD]), int(rows[m, 0, K_WORD]),
                                   ns[m, :, 0], ns[m, :, 1], ns[m, :, 2], ns[m, :, 3], ns[m, :, 4]))  # fmt: skip
        at += HEADER_WORDS + n_words
        run += 1
    return out


def summarize(members: list[MemberTrace], element_bytes: int = 2) -> list[dict[str, float | int | str]]:
    """Per member, in us: `span` (from the last workgroup done with the member before it,
    in its run, or from the run's first go, to its own last done: what it added to the
    step), `release` (from that last done to the first workgroup past its wait: what the
    wait cost; negative only where a workgroup went before that, which a grid barrier
    forbids), `work_median` and `work_max` (a workgroup's go to done), `inputs_median`
    and `first_median` (a workgroup's go to its `inputs` and `first` stamps, over those
    that stamped them; 0.0 where none did), and `gbs`, a product's weights over its span."""
    rows: list[dict[str, float | int | str]] = []
    last_done = 0.0
    for t in members:
        go, done = t.go.astype(np.float64), t.done.astype(np.float64)
        first = t.member == 0
        start = go.min() if first else last_done
        span = (done.max() - start) / 1e3
        work = (done - go) / 1e3
        weights = element_bytes * t.n * t.k
        rows.append({"run": t.run, "member": t.member, "kind": t.kind if t.kind == "attention" else f"{t.n}x{t.k}",
                     "span_us": span, "release_us": 0.0 if first else (go.min() - last_done) / 1e3,
                     "work_median_us": float(np.median(work)), "work_max_us": float(work.max()),
                     "inputs_median_us": _after_go(t.inputs, go), "first_median_us": _after_go(t.first, go),
                     "gbs": weights / (span * 1e3) if weights and span > 0 else 0.0})  # fmt: skip
        last_done = done.max()
    return rows


def _after_go(stamps: np.ndarray, go: np.ndarray) -> float:
    """The median over the workgroups that stamped (non-zero) of stamp - go, in us."""
    seen = stamps != 0
    return float(np.median(stamps[seen].astype(np.float64) - go[seen]) / 1e3) if seen.any() else 0.0

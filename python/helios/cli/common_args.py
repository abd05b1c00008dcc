"""Flags several commands take, each declared once: its name, type, range and
default here, the command saying only what it applies to."""

from __future__ import annotations

import argparse
from typing import Iterable, Optional

from ..check import ATOL, RTOL
from ..harness.protocol.shapes import (
    ATTENTION_SET_NOTES,
    ATTENTION_SETS,
    NAMED_SETS,
    SET_NOTES,
    parse_attention_shapes,
    parse_shapes,
)
from .common import finite_float, flag_value, launches, nonneg_int, positive_int, warmup_count


def add_tolerances(p: argparse.ArgumentParser, what: str = "gate") -> None:
    """--atol / --rtol: the check's tolerances (the seeds' 0.02 and 0.01)."""
    prefix = f"{what} " if what else ""
    p.add_argument("--atol", type=finite_float(), default=ATOL, help=f"{prefix}absolute tolerance (default {ATOL})")
    p.add_argument("--rtol", type=finite_float(), default=RTOL, help=f"{prefix}relative tolerance (default {RTOL})")


def add_seed(p: argparse.ArgumentParser, of: str = "the random inputs", note: str = "") -> None:
    """--seed: an integer >= 0, default 0."""
    p.add_argument("--seed", type=nonneg_int, default=0, help=f"seed of {of} (default 0){note}")


def add_out(p: argparse.ArgumentParser, help: str, default: Optional[str] = None, force: Optional[str] = None) -> None:
    """--out (checked before any work by the command), and --force where replacing is
    the user's to allow (force: what it replaces)."""
    p.add_argument("--out", default=default, help=help)
    if force:
        p.add_argument("--force", action="store_true", help=f"replace {force}")


def add_shapes(
    p: argparse.ArgumentParser, defaults: str, *, attention: bool = False, default: Optional[str] = None
) -> None:
    """--shapes: products as MxNxK and/or the named sets, and for a command that also
    takes attention, BxHxSxd and/or the attention sets (both lists from the tables in
    helios/harness/protocol/shapes.py); defaults: what the command takes without the flag."""

    def sets(names: Iterable[str], notes: dict[str, str]) -> str:
        return ", ".join(f"{n} ({notes[n]})" if n in notes else n for n in names)

    text = f"comma list of MxNxK and/or named sets: {sets(NAMED_SETS, SET_NOTES)}"
    if attention:
        text = f"matmul: {text}. attention: BxHxSxd and/or named sets: {sets(ATTENTION_SETS, ATTENTION_SET_NOTES)}"
    p.add_argument("--shapes", default=default, help=f"{text}; default {defaults}")


def shapes_of(spec: str, workload: str = "matmul") -> list:
    """--shapes parsed in the workload's grammar; a bad one is a usage error naming the flag."""
    return flag_value("--shapes", parse_attention_shapes if workload == "attention" else parse_shapes, spec)


def add_launches(p: argparse.ArgumentParser, iters: Optional[int], warmup: Optional[int], *, iters_help: str,
                 warmup_help: str) -> None:  # fmt: skip
    """--iters (timed launches, 1..MAX_LAUNCHES) and --warmup (untimed launches before
    them, 0..MAX_LAUNCHES): the protocol's counts; the helps say what a launch is to the
    command and its defaults."""
    p.add_argument("--iters", type=launches, default=iters, help=iters_help)
    p.add_argument("--warmup", type=warmup_count, default=warmup, help=warmup_help)


def add_rounds(p: argparse.ArgumentParser, repeats: int, runs: int, *, repeats_help: str, runs_help: str) -> None:
    """--repeats (rounds per run) and --runs (runs, each with its own clock ramp): the
    protocol's repetition, integers >= 1."""
    p.add_argument("--repeats", type=positive_int, default=repeats, help=f"{repeats_help} (default {repeats})")
    p.add_argument("--runs", type=positive_int, default=runs, help=f"{runs_help} (default {runs})")


def add_reference(p: argparse.ArgumentParser, choices: Iterable[str], help: str) -> None:
    """--ref: what times the other side (default auto)."""
    p.add_argument("--ref", default="auto", choices=list(choices), help=help)


GATE_HELP = (
    "plain (Helios's time; default), or normalized (Helios's time over the reference's per round, "
    "where both sides timed the same reference build on the same device; the plain verdict elsewhere)"
)


def add_gate(p: argparse.ArgumentParser, reads: str) -> None:
    """--gate, the verdict `reads` (what the command decides with it)."""
    p.add_argument("--gate", choices=("plain", "normalized"), default="plain", help=f"the verdict {reads}: {GATE_HELP}")


MAX_TIME_S = 86400.0  # --max-time's ceiling: a day


def add_budget(p: argparse.ArgumentParser, default_s: Optional[float], what: str) -> None:
    """--max-time SECONDS: the budget for the measuring `what` adds until its question is
    answered (a finite number in (0, a day]); None: no budget unless given."""
    shown = "none" if default_s is None else f"{default_s:g}"
    p.add_argument("--max-time", type=finite_float(1.0, MAX_TIME_S), default=default_s, metavar="SECONDS",
                   help=f"{what} (default {shown})")  # fmt: skip


def add_target_mde(p: argparse.ArgumentParser) -> None:
    """--target-mde PCT: bench adds runs until every row's MDE is at or below it."""
    p.add_argument(
        "--target-mde",
        type=finite_float(0.0, 100.0, lo_open=True),
        default=None,
        metavar="PCT",
        help="add interleaved runs, a few at a time, until every row's MDE (the change an A/A comparison of "
        "this file's runs could detect, 95%% interval, 80%% power) is at or below PCT percent, or --max-time "
        "is spent (then the rows that did not reach it say so); in (0, 100]",
    )

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
from .common import finite_float, flag_value, nonneg_int


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

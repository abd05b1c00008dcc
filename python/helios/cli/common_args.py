"""Flags several commands take, each declared once: its name, type, range and
default here, the command saying only what it applies to."""

from __future__ import annotations

import argparse
from typing import Optional

from ..check import ATOL, RTOL
from .common import finite_float, nonneg_int


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

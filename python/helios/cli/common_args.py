"""Flags several commands take, each declared once: its name, type, range and
default here, the command saying only what it applies to."""

from __future__ import annotations

import argparse
from typing import Any, Iterable, Optional, Protocol

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


class Flags(Protocol):
    """What the helpers add flags to: a command's parser (Grouped) or a group of it."""

    def add_argument(self, *names: str, **kw: Any) -> argparse.Action: ...


def add_tolerances(p: Flags, what: str = "gate") -> None:
    """--atol / --rtol: the check's tolerances (the seeds' 0.02 and 0.01)."""
    prefix = f"{what} " if what else ""
    p.add_argument("--atol", type=finite_float(), default=ATOL, help=f"{prefix}absolute tolerance (default {ATOL})")
    p.add_argument("--rtol", type=finite_float(), default=RTOL, help=f"{prefix}relative tolerance (default {RTOL})")


def add_seed(p: Flags, of: str = "the random inputs", note: str = "") -> None:
    """--seed: an integer >= 0, default 0."""
    p.add_argument("--seed", type=nonneg_int, default=0, help=f"seed of {of} (default 0){note}")


def add_out(p: Flags, help: str, default: Optional[str] = None, force: Optional[str] = None) -> None:
    """--out (checked before any work by the command), and --force where replacing is
    the user's to allow (force: what it replaces)."""
    p.add_argument("--out", default=default, help=help)
    if force:
        p.add_argument("--force", action="store_true", help=f"replace {force}")


def add_shapes(p: Flags, defaults: str, *, attention: bool = False, default: Optional[str] = None) -> None:
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


def add_launches(p: Flags, iters: Optional[int], warmup: Optional[int], *, iters_help: str,
                 warmup_help: str) -> None:  # fmt: skip
    """--iters (timed launches, 1..MAX_LAUNCHES) and --warmup (untimed launches before
    them, 0..MAX_LAUNCHES): the protocol's counts; the helps say what a launch is to the
    command and its defaults."""
    p.add_argument("--iters", type=launches, default=iters, help=iters_help)
    p.add_argument("--warmup", type=warmup_count, default=warmup, help=warmup_help)


def add_rounds(p: Flags, repeats: int, runs: int, *, repeats_help: str, runs_help: str) -> None:
    """--repeats (rounds per run) and --runs (runs, each with its own clock ramp): the
    protocol's repetition, integers >= 1."""
    p.add_argument("--repeats", type=positive_int, default=repeats, help=f"{repeats_help} (default {repeats})")
    p.add_argument("--runs", type=positive_int, default=runs, help=f"{runs_help} (default {runs})")


def add_reference(p: Flags, choices: Iterable[str], help: str) -> None:
    """--ref: what times the other side (default auto)."""
    p.add_argument("--ref", default="auto", choices=list(choices), help=help)


GATE_HELP = (
    "plain (Helios's time; default), or normalized (Helios's time over the reference's per round, "
    "where both sides timed the same reference build on the same device; the plain verdict elsewhere)"
)


def add_gate(p: Flags, reads: str) -> None:
    """--gate, the verdict `reads` (what the command decides with it)."""
    p.add_argument("--gate", choices=("plain", "normalized"), default="plain", help=f"the verdict {reads}: {GATE_HELP}")


MAX_TIME_S = 86400.0  # --max-time's ceiling: a day


def add_budget(p: Flags, default_s: Optional[float], what: str) -> None:
    """--max-time SECONDS: the budget for the measuring `what` adds until its question is
    answered (a finite number in (0, a day]); None: no budget unless given."""
    shown = "none" if default_s is None else f"{default_s:g}"
    p.add_argument("--max-time", type=finite_float(1.0, MAX_TIME_S), default=default_s, metavar="SECONDS",
                   help=f"{what} (default {shown})")  # fmt: skip


def add_target_mde(p: Flags) -> None:
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


# Each flag's purpose, by its dest: the groups `--help` (and docs/reference/cli.md) shows
# a command's flags in. A flag missing here is a KeyError when its parser is built
# (tests/test_cli_reference.py builds them all).
PURPOSES = ("what to run", "protocol", "output", "device")
_RUN = """adapter_cmd adapters attention backward bad base candidates causal checkpoint context_steps contexts
    d_model decode dry_run dtype files forms good head head_dims heads hidden history layers lr main matrix max_dim
    max_seq micro_batch model new old oracle prefill preset prompt python repo sdpa_backends seq shapes step steps
    suite tiny tokens train train_steps variant vocab workload"""
_PROTOCOL = """adapter_timeout atol attention_fuzz bench_arg check check_shape ddp_bucket_mb ddp_comm_hook energy
    fail_on_regression flush_l2 fuzz gate grad_sync ignore_device iters level max_pairs max_steps max_time
    new_pipelines no_rerun ref repeats reps rtol run_noise runs seed strict target_mde train_warmup warmup
    warmup_ms"""
_OUTPUT = "cache force html json md no_save out png summary tag trace verbose work"
_DEVICE = "device devices devices_serial no_cuda suite_device"
PURPOSE = {d: t for t, names in zip(PURPOSES, (_RUN, _PROTOCOL, _OUTPUT, _DEVICE)) for d in names.split()}


class Grouped:
    """A command's parser whose add_argument puts each flag in its purpose's group
    (PURPOSE, by dest); everything else is the parser's."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.groups = {t: parser.add_argument_group(t) for t in PURPOSES}
        parser.purpose_groups = self.groups  # type: ignore[attr-defined]  # where build_parser adds --device

    def add_argument(self, *names: str, **kw: Any) -> argparse.Action:
        long = [n for n in names if n.startswith("--")]
        dest = str(kw.get("dest") or (long[0][2:] if long else names[0])).replace("-", "_")
        return self.groups[PURPOSE[dest]].add_argument(*names, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)

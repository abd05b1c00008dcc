#!/usr/bin/env python3
"""A decode step's time by position: a Llama shape's plan (random weights, as `helios
suite decode --model llama --preset P`) replayed at each position, GPU and wall ms the
median of --replays replays after --warmup, with the plan's ops, dispatches, barriers
and grid barriers. What an A/B of the step's kernels reads (the suite times a whole
generation).

--side LABEL:NAME=VALUE[,NAME=VALUE] (repeatable) times the same weights under each
side's switches in one process (each side's Device opened with them set, every side's
replays taken in turns at each position): an A/B of a switch without drawing the
weights twice. Without --side, one side of the switches as they are.

Each row also gives the last replay's logits as a digest of their bits and their top-1,
and the result says whether every side's logits have the same bits at every position:
a side whose kernels change what the step computes shows it (the runs' grid sizes the
attention's splits, so sides of different grids may differ).

Usage: python3 tools/probes/step.py [--preset llama-3.2-1b] [--positions 256,1024,4096]
       [--replays 200] [--warmup 300] [--dtype bfloat16] [--side L:NAME=V ...] [--json]"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
from typing import Any, Iterator

import helios
from helios.harness.workloads.decode.llama import PRESETS, preset_weights
from helios.models import LlamaConfig, LlamaDecoder

TURNS = 4  # each side's replays at a position in this many turns, the sides alternating


@contextlib.contextmanager
def switches(env: dict[str, str]) -> Iterator[None]:
    """The environment with env set, restored after (a Device reads it when it opens)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def draw(preset: str) -> tuple[LlamaConfig, Any]:
    """The preset's config and random weights (drawn with torch where it is installed: faster)."""
    cfg = LlamaConfig(**PRESETS[preset])
    torch: Any = None
    try:
        import torch
    except ImportError:
        pass
    return cfg, preset_weights(cfg, seed=0, torch=torch)


def measure(preset: str, positions: list[int], replays: int, warmup: int, dtype: str,
            sides: dict[str, dict[str, str]]) -> dict[str, Any]:  # fmt: skip
    cfg, weights = draw(preset)
    with contextlib.ExitStack() as stack:
        models = {}
        for label, env in sides.items():
            with switches(env):
                dev = stack.enter_context(helios.Device())
            models[label] = (dev, stack.enter_context(LlamaDecoder(dev, cfg, weights, max_len=max(positions) + 1,
                                                                   dtype=dtype)))  # fmt: skip
        del weights
        runs: dict[str, dict[int, list[Any]]] = {label: {pos: [] for pos in positions} for label in sides}
        logits: dict[str, dict[int, tuple[str, int]]] = {label: {} for label in sides}
        for pos in positions:
            for _, m in models.values():
                for _ in range(warmup):
                    m.plan.replay(params=[1, pos])
            for turn in range(TURNS):
                for label, (_, m) in models.items():
                    n = replays // TURNS + (1 if turn < replays % TURNS else 0)
                    runs[label][pos] += [m.plan.replay(params=[1, pos]) for _ in range(n)]
            for label, (_, m) in models.items():
                logits[label][pos] = digest(m.logits.numpy())
        out = {}
        for label, (dev, m) in models.items():
            ops, dispatches, barriers = m.plan.counts
            shape = m.plan.run_shape
            rows = [{"position": pos, "gpu_ms": statistics.median(r.gpu_ms for r in runs[label][pos]),
                     "wall_ms": statistics.median(r.wall_ms for r in runs[label][pos]),
                     "logits_sha256": logits[label][pos][0], "top1": logits[label][pos][1]} for pos in positions]  # fmt: skip
            out[label] = {"env": sides[label], "device": dev.info.get("name", ""), "ops": ops,
                          "dispatches": dispatches, "barriers": barriers, "grid_barriers": m.plan.grid_barriers,
                          "run_grid": shape.grid, "run_registers": shape.registers,
                          "rows": rows}  # fmt: skip
    return {"preset": preset, "dtype": dtype, "replays": replays, "warmup": warmup,
            "same_logits": same_bits(logits), "sides": out}  # fmt: skip


def same_bits(logits: dict[str, dict[int, tuple[str, int]]]) -> bool:
    """Whether every side's logits digest is the same at each position."""
    positions = {pos for by_pos in logits.values() for pos in by_pos}
    return all(len({by_pos.get(pos) for by_pos in logits.values()}) == 1 for pos in positions)


def digest(logits: Any) -> tuple[str, int]:
    """Logits' bits as the first 16 hex digits of their SHA-256, and their top-1."""
    return hashlib.sha256(logits.tobytes()).hexdigest()[:16], int(logits.argmax())


def parse_side(text: str) -> tuple[str, dict[str, str]]:
    """LABEL:NAME=VALUE[,NAME=VALUE] (LABEL: alone for the switches as they are)."""
    label, sep, rest = text.partition(":")
    if not sep or not label:
        raise ValueError(f"--side {text!r}: LABEL:NAME=VALUE[,NAME=VALUE]")
    env = {}
    for item in filter(None, rest.split(",")):
        name, eq, value = item.partition("=")
        if not eq or not name.startswith("HELIOS_"):
            raise ValueError(f"--side {text!r}: {item!r} is not HELIOS_NAME=VALUE")
        env[name] = value
    return label, env


def add_side_args(ap: argparse.ArgumentParser) -> None:
    """--side (repeatable) and --json, as every probe here takes them."""
    ap.add_argument("--side", action="append", default=[], metavar="LABEL:NAME=VALUE[,...]",
                    help="a side of an A/B: its Device opened with these HELIOS_ switches (repeatable)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the result as JSON, not a table")


def sides_of(ap: argparse.ArgumentParser, side: list[str]) -> dict[str, dict[str, str]]:
    """The --side arguments by label (one side of the switches as they are without any);
    a usage error where one is malformed or two share a label."""
    try:
        sides = dict(parse_side(s) for s in side) or {"default": {}}
    except ValueError as e:
        ap.error(str(e))
    if len(sides) != len(side or [None]):
        ap.error("--side labels must differ")
    return sides


def ints_of(ap: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    """A comma-separated flag's integers; a usage error naming the flag where one is not."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        ap.error(f"{flag} {text!r}: integers, comma-separated")


def add_step_args(ap: argparse.ArgumentParser, positions: str, replays: tuple[int, str], warmup: int) -> None:
    """--preset, --positions, --replays (its default and help), --warmup, --side and --json."""
    ap.add_argument("--preset", choices=sorted(PRESETS), default="llama-3.2-1b", help="the model's shape")
    ap.add_argument("--positions", default=positions, help="positions, comma-separated (each < 2^20)")
    ap.add_argument("--replays", type=int, default=replays[0], help=replays[1])
    ap.add_argument("--warmup", type=int, default=warmup,
                    help="untimed replays before them, a position and side (an idle card's clocks take a few "
                         "hundred 1B steps to rise: fewer read as outliers)")  # fmt: skip
    add_side_args(ap)


def step_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> tuple[dict[str, dict[str, str]], list[int]]:
    """The sides and positions of add_step_args' flags; a usage error where one is out of range."""
    sides = sides_of(ap, a.side)
    positions = ints_of(ap, "--positions", a.positions)
    if not positions or min(positions) < 0 or max(positions) >= 2**20 or a.replays < 1 or a.warmup < 0:
        ap.error("positions in [0, 2^20), --replays >= 1 and --warmup >= 0")
    return sides, positions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_args(ap, "256,1024,4096", (200, "timed replays a position and side (median)"), 300)
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16", help="the weights' type")
    a = ap.parse_args(argv)
    sides, positions = step_args(ap, a)
    r = measure(a.preset, positions, a.replays, a.warmup, a.dtype, sides)
    if a.json:
        print(json.dumps(r))
        return 0
    for label, s in r["sides"].items():
        print(f"{label} {s['env'] or ''}: {r['preset']} {r['dtype']} on {s['device']}: {s['ops']} ops, "
              f"{s['dispatches']} dispatches, {s['barriers']} barriers and {s['grid_barriers']} grid barriers a "
              f"step, runs of {s['run_grid']} workgroups at {s['run_registers'] or '?'} registers; median of "
              f"{r['replays']} replays")  # fmt: skip
    print("position  " + "  ".join(f"{label:>10} gpu / wall ms" for label in r["sides"]))
    for i, pos in enumerate(positions):
        cells = [f"{s['rows'][i]['gpu_ms']:6.3f} / {s['rows'][i]['wall_ms']:7.3f}" for s in r["sides"].values()]
        print(f"{pos:8d}  " + "  ".join(f"{c:>24}" for c in cells))
    if len(r["sides"]) > 1:
        print("logits: the same bits on every side" if r["same_logits"] else
              "logits: the sides differ (" + "; ".join(f"{label} {[row['logits_sha256'] for row in s['rows']]}"
                                                        for label, s in r["sides"].items()) + ")")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

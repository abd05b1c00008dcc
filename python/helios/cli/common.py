"""What every command shares: argument types, the exit-status policy, --out
handling (checked before work, written atomically) and opening the device."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence

from .. import _helios, signals
from ..device import Device
from ..files import Target, TargetError, dumps, write_anywhere
from ..harness.protocol.shapes import parse_shape


def parse_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {s!r}")


def _int_in(s: str, lo: int, hi: Optional[int], what: str) -> int:
    """An integer in [lo, hi] (hi None: no upper bound), else an argparse error saying `what`."""
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
    if v < lo or (hi is not None and v > hi):
        raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
    return v


def positive_int(s: str) -> int:
    return _int_in(s, 1, None, "a positive integer")


def nonneg_int(s: str) -> int:
    """An integer >= 0 (seeds, warm-up counts)."""
    return _int_in(s, 0, None, "an integer >= 0")


def launches(s: str) -> int:
    """A launch count: 1..MAX_LAUNCHES (the engine's limit per call)."""
    return _int_in(s, 1, _helios.MAX_LAUNCHES, f"an integer in 1..{_helios.MAX_LAUNCHES}")


def warmup_count(s: str) -> int:
    """A warm-up count: 0..MAX_LAUNCHES."""
    return _int_in(s, 0, _helios.MAX_LAUNCHES, f"an integer in 0..{_helios.MAX_LAUNCHES}")


def finite_float(
    lo: float = 0.0, hi: float = float("inf"), *, hi_open: bool = False, lo_open: bool = False
) -> Callable[[str], float]:
    """An argparse type: a finite number in [lo, hi] (an open end with hi_open, lo_open);
    NaN and infinities are refused (they would end up in the JSON)."""

    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {s!r}")
        if v < lo or v > hi or (hi_open and v >= hi) or (lo_open and v <= lo):
            bottom = f"> {lo:g}" if lo_open else f">= {lo:g}"
            top = "" if math.isinf(hi) else (f" and < {hi:g}" if hi_open else f" and <= {hi:g}")
            raise argparse.ArgumentTypeError(f"expected a number {bottom}{top}, got {s!r}")
        return v

    parse.__name__ = "number"
    return parse


def device_index(s: str) -> int:
    """An argparse type: a Vulkan device index (0 or more)."""
    return _int_in(s, 0, None, "a device index (0 or more)")


def git_ref(s: str) -> str:
    """An argparse type: a git ref or commit that git cannot read as an option (a ref
    starting with '-' would be passed to git as one), non-empty."""
    if not s or s.startswith("-") or any(c.isspace() or ord(c) < 32 for c in s):
        raise argparse.ArgumentTypeError(f"expected a git ref or commit (no leading '-', no spaces), got {s!r}")
    return s


def flag_value(flag: str, parse: Callable[[str], Any], text: str) -> Any:
    """parse(text), with a ValueError turned into a UsageError naming the flag."""
    try:
        return parse(text)
    except ValueError as e:
        raise UsageError(f"{flag}: {e}") from None


def shape_arg(s: str) -> tuple[int, int, int]:
    try:
        return parse_shape(s)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def version_line() -> str:
    from .. import __version__

    return f"helios {__version__} (engine built from {_helios.BUILD_COMMIT})"


EXIT_CODES = """exit status (every command):
  0  success (compare: no confident regression)
  1  a failed correctness check or gate (time, bench, check, tune), or a
     confident regression (compare; above --fail-on-regression when given)
  2  bad input or usage: unknown flags, invalid values or ranges, unreadable or
     malformed files, non-finite/negative/empty samples, --out problems, a
     variant or size this device cannot serve, no Vulkan device
  3  the device or driver failed at run time (the message names the Vulkan call)
  130  interrupted (Ctrl-C): what was measured is written, marked "interrupted",
     whatever phase the signal lands in (bench, suite; tune keeps every pick finished)
  143  stopped by SIGTERM (Slurm, CI runners, timeout): the same as Ctrl-C
  141  stdout closed by its reader (e.g. piped into head)
  an internal error is a one-line message and 2 (--debug shows the traceback)"""


class UsageError(ValueError):
    """Bad input or usage: exit status 2 with a one-line message."""


class OutFiles(NamedTuple):
    """--out's two files, probed before any work: the JSON and the markdown beside it."""

    json: Target
    md: Target


def out_paths(out: Optional[str], force: bool) -> Optional[OutFiles]:
    """--out, validated before any measurement: a .json name, not a directory, a
    parent that exists or can be made and is writable, and no existing file unless
    --force. Results are never lost at the end of a long run (files.Target)."""
    if not out:
        return None
    p = Path(out)
    if p.suffix.lower() != ".json":
        raise UsageError(
            f"--out {out!r}: give the JSON file's name (ending in .json); the "
            f"markdown table is written beside it as .md"
        )
    return OutFiles(target(p, "--out", force), target(p.with_suffix(".md"), "--out", force))


def target(path: Path, flag: str, force: bool = True) -> Target:
    """A files.Target for a flag's path, or UsageError (exit 2) before any work;
    force False: an existing file is refused (pass --force)."""
    check_shared(path, flag)
    try:
        return Target(path, flag, replace=force)
    except TargetError as e:
        raise UsageError(str(e)) from None


def check_shared(path: Path, flag: str) -> None:
    """Inside the development box (tools/dev sets HELIOS_DEV_SHARED to the host
    folders it shares: the checkout, /tmp, its caches and the caller's working
    directory), a file written anywhere else would stay inside the box, invisible
    from the host: refused, before any work."""
    shared = [os.path.realpath(s) for s in os.environ.get("HELIOS_DEV_SHARED", "").split(os.pathsep) if s]
    if not shared:
        return
    where = os.path.realpath(path)  # a symlinked parent is followed to where the file would land
    if any(where == s or where.startswith(s.rstrip("/") + "/") for s in shared):
        return
    raise UsageError(
        f"{flag} {str(path)!r}: this runs inside the development box (tools/dev), which shares only "
        f"{' and '.join(shared)} with the host; a file written at {where} would stay inside the box. "
        "Write under one of those"
    )


def write_results(out: OutFiles, doc: dict, table: str) -> tuple[Path, Optional[str]]:
    """Write the JSON and the markdown beside it: (the JSON's path, None) when the
    target was written, else (where the results went, why). Measured work is never
    lost: a file that appeared at the target during the run is not replaced (the
    results go beside it), and a target that fails at write time (a full disk, it
    was checked before the run) sends the JSON to a new file in the working
    directory or the temporary directory."""
    text = dumps(doc, indent=1)
    try:
        written = out.json.write(text)
    except OSError as e:
        where = write_anywhere(text, "helios-results-", ".json")
        return where, f"cannot write {out.json.path} ({e.strerror or e})"
    md = out.md
    if written != out.json.path:
        md = Target(written.with_suffix(".md"), "--out", must_be_new=False, keep_existing=True)
    try:
        md.write(table)
    except OSError as e:
        print(f"helios: cannot write {md.path} ({e.strerror or e}); the JSON holds the results", file=sys.stderr)
    if written != out.json.path:
        return (
            written,
            f"{out.json.path} appeared during the run (another run with the same --out?) and was not replaced",
        )
    return written, None


def open_device(args: argparse.Namespace) -> Device:
    return Device(args.device, disable_coop=args.disable_coop)


def child_argv(args: argparse.Namespace, command: str, drop: Sequence[str]) -> tuple[list[str], list[str]]:
    """(this command line, the subcommand's arguments without `drop`) for --devices children."""
    from ..harness.runs.fleet import strip_args

    argv = list(sys.argv[1:] if args.argv is None else args.argv)
    return argv, strip_args(argv[argv.index(command) + 1 :] if command in argv else argv, drop)


def run_and_emit(run, table, out: Optional[OutFiles]) -> int:
    """A bench run: exit 2 when a reference asked for is not here (a RuntimeError
    that is not the engine's), else the table and files of _emit."""
    try:
        result = run()
    except RuntimeError as e:
        if isinstance(e, _helios.HeliosError):
            raise
        print(f"helios: error: {e}", file=sys.stderr)
        return 2
    return emit(result, table(result), out, f"run rejected: {result.get('failure')}")


def emit(result: dict, table: str, out: Optional[OutFiles], rejected: str) -> int:
    """Print the table, write JSON + markdown where --out says. Exit 0 when the
    status is ok, 130 for an interrupted run (its complete rounds are written),
    2 when the results had to go elsewhere (named), else 1 (a failed gate)."""
    if result["status"] == "ok" and signals.received():  # a signal while the rows were assembled
        result["status"] = "interrupted"
        result["failure"] = f"interrupted ({signals.stopped_by()}) after the rounds: every row is complete"
    print(table, end="")
    fallback = None
    if out:
        written, fallback = write_results(out, result, table)
        if fallback:
            print(f"helios: {fallback}; the results are in {written}", file=sys.stderr)
        print(f"wrote {written}" if fallback else f"wrote {out.json.path} and {out.md.path}")
    if result["status"] == "interrupted":
        print(f"helios: {result['failure']}", file=sys.stderr)
        return 130
    if fallback:
        return 2
    if result["status"] != "ok":
        print(f"helios: {rejected}", file=sys.stderr)
        return 1
    return 0


def int_list(text: str) -> list[int]:
    try:
        vals = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def expand_dirs(paths: Sequence[str]) -> list[str]:
    """Directories stand for the .json files in them (sorted)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(q) for q in Path(p).glob("*.json"))
            if not found:
                raise UsageError(f"{p}: a directory with no .json result in it")
            out.extend(found)
        else:
            out.append(p)
    return out

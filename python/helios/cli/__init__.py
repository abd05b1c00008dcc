"""The `helios` command line: one module per command (helios/cli/<command>.py),
each registering its parser; this module holds the top parser, the device
flags every command shares and the exit-status policy."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, Optional, Sequence

from .. import _helios
from ..optional import MissingDependencyError
from ..signals import SignalPolicy
from . import bench, bisect, check, ci, compare, info, report, roof, suite, timing, tune
from .common import EXIT_CODES, UsageError, device_index, version_line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="helios",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Vulkan cooperative-matrix matmul, measured against CUDA.",
    )
    p.add_argument(
        "--device",
        type=device_index,
        default=None,
        help="Vulkan device index (default: HELIOS_DEVICE, else the best GPU)",
    )
    p.add_argument("--disable-coop", action="store_true", help="use the scalar path only (like HELIOS_DISABLE_COOP=1)")
    p.add_argument(
        "--debug", action="store_true", help="print the traceback of an internal error (also HELIOS_DEBUG=1)"
    )
    p.add_argument(
        "--version",
        action="version",
        version=version_line(),
        help="print Helios's version and the commit its engine was built from",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_CommandParser)

    for command in (info, timing, bench, compare, check, tune, suite, report, roof, ci, bisect):
        command.register(sub)
    for name, sp in sub.choices.items():
        if not any("--device" in a.option_strings for a in sp._actions):
            # The device flag also after the command (`helios bench --device 1`), as users
            # type it; SUPPRESS: given only before the command, the top-level value stands.
            getattr(sp, "purpose_groups", {}).get("device", sp).add_argument(
                "--device",
                type=device_index,
                default=argparse.SUPPRESS,
                help="Vulkan device index, as `helios --device=i "
                + name
                + "` (default: HELIOS_DEVICE, else the best GPU)",
            )
    return p


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: an unknown flag is named even where it made argparse take a
    positional for something else (`helios bisect --foo bad` said only that BAD was
    missing)."""

    _argv: list[str] = []

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace: Optional[argparse.Namespace] = None):  # type: ignore[override]
        self._argv = list(args or [])
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if "required" in message:
            unknown = [a for a in self._argv if _is_unknown_flag(self, a)]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        super().error(message)


def _is_unknown_flag(p: argparse.ArgumentParser, token: str) -> bool:
    if not token.startswith("-") or token == "-" or token == "--" or token[1:2].isdigit():
        return False
    name = token.split("=", 1)[0]
    return not any(o.startswith(name) for o in p._option_string_actions)


def _parse(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """parse_args, except that an unknown flag after a command is reported with that
    command's usage (argparse's own reports it with the top-level usage)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command; returns the exit status (EXIT_CODES). Every failure is one
    line on stderr naming the command; a traceback only with --debug or
    HELIOS_DEBUG=1."""
    parser = build_parser()
    args = _parse(parser, argv)
    args.argv = list(argv) if argv is not None else None
    where = f"helios {args.command}"
    stop = SignalPolicy()
    try:
        with stop:
            rc = int(args.func(args))
        # stopped by a signal: its status, also where the command finished its work meanwhile
        return stop.status if rc in (0, 130) and stop.first is not None else rc
    except KeyboardInterrupt as e:  # a command that got somewhere says how far (interrupted_after)
        print(f"{where}: {e or 'interrupted before any result was complete; nothing written'}", file=sys.stderr)
        return stop.status
    except BrokenPipeError:  # the reader went away (`helios info --json | head -1`): not an error of ours
        _quiet_stdout()
        return 141
    except _helios.NoDeviceError as e:
        print(f"{where}: no Vulkan device: {e}", file=sys.stderr)
        return 2
    except MissingDependencyError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 2
    except UsageError as e:
        print(f"{where}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, _helios.UnsupportedError, _helios.DeviceMemoryError) as e:
        print(f"{where}: error: {e}", file=sys.stderr)  # a request this input or device cannot serve
        return 2
    except _helios.HeliosError as e:
        print(f"{where}: device failure: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # a bug of ours: never exit 1, which means a failed gate or a regression
        if args.debug or os.environ.get("HELIOS_DEBUG", "").strip() not in ("", "0"):
            raise
        print(
            f"{where}: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=sys.stderr
        )
        return 2


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final
    flush does not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)  # files: stdout after its reader left
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass

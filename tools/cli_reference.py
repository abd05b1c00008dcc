#!/usr/bin/env python3
"""Write docs/reference/cli.md: every `helios` command's --help, generated from the
parsers themselves (tests/test_cli_reference.py fails when the page is stale).

Usage: python3 tools/cli_reference.py [PATH]   (default docs/reference/cli.md)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

WIDTH = "100"  # argparse wraps help at $COLUMNS: fixed, so the page does not depend on the terminal


def render() -> str:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return _render()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def _render() -> str:
    from helios.cli import build_parser

    top = build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    lines = [
        "# Command-line reference",
        "",
        "Every `helios` command and flag, as `helios COMMAND --help` prints it. Generated",
        "from the parsers by `tools/cli_reference.py`; a test fails when this page is stale.",
        "",
        "## helios",
        "",
        "```text",
        top.format_help().rstrip(),
        "```",
    ]
    for name, parser in sub.choices.items():
        lines += ["", f"## helios {name}", "", "```text", parser.format_help().rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs/reference/cli.md")
    path.write_text(render(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

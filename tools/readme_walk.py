#!/usr/bin/env python3
"""Walk the README as a new user would: run every ```python block as written,
each in a fresh interpreter, and print what it printed; check that every
`helios ...` command line in its shell blocks parses with today's CLI.
Exit 0 when all ran, 1 otherwise. tests/test_readme.py runs the same blocks."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(lang: tuple[str, ...], readme: Path = README) -> list[tuple[int, str]]:
    """(line number, text) of each fenced block in one of these languages, indent removed."""
    out, lines = [], readme.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w+)\s*$", lines[i])
        if m and m.group(2) in lang:
            indent, start, body = len(m.group(1)), i + 1, []
            i += 1
            while not lines[i].strip().startswith("```"):
                body.append(lines[i][indent:])
                i += 1
            out.append((start, "\n".join(body)))
        i += 1
    return out


def helios_commands(readme: Path = README) -> list[tuple[int, list[str]]]:
    """(line, argv) of every `helios ...` command line in the sh/bash blocks."""
    out = []
    for start, text in blocks(("sh", "bash"), readme):
        joined = re.sub(r"\\\n\s*", " ", text)
        for k, ln in enumerate(joined.splitlines()):
            ln = ln.split("#")[0].strip()
            m = re.search(r"(?:^|\s)helios\s+(.*)$", ln)
            if not m or ln.startswith(("pip", "python3 -m pytest")):
                continue
            out.append((start + k, shlex.split(m.group(1).replace("$(date -u +%Y%m%dT%H%M%SZ)", "X"))))
    return out


def run_block(code: str, cwd: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def main() -> int:
    from helios.cli import build_parser

    bad = 0
    for line, code in blocks(("python",)):
        r = run_block(code)
        print(f"--- README.md line {line}: exit {r.returncode}")
        print(r.stdout.rstrip() or "(printed nothing)")
        if r.returncode:
            bad += 1
            print(r.stderr[-2000:])
    for line, argv in helios_commands():
        try:
            build_parser().parse_args(argv)
        except SystemExit:
            bad += 1
            print(f"--- README.md line {line}: `helios {' '.join(argv)}` does not parse")
    print(f"{len(blocks(('python',))) + len(helios_commands()) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

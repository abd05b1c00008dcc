"""The README cannot drift: every ```python block runs as written (in a fresh
interpreter, on this machine's device), and every `helios ...` command line in
its shell blocks parses with today's CLI (its flags and values exist)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helios.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(lang: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line number, text) of each fenced block in one of these languages, indent removed."""
    out, lines = [], README.read_text(encoding="utf-8").splitlines()
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


PYTHON = blocks(("python",))
SHELL = blocks(("sh", "bash"))


def test_the_readme_has_python_and_shell_blocks():
    assert len(PYTHON) >= 3 and len(SHELL) >= 4


@pytest.mark.parametrize("line,code", PYTHON, ids=[f"line{n}" for n, _ in PYTHON])
def test_python_block_runs(device, tmp_path, line, code):
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    assert r.returncode == 0, f"README.md line {line}:\n{code}\n---\n{r.stderr[-3000:]}"


def helios_commands() -> list[tuple[int, list[str]]]:
    out = []
    for start, text in SHELL:
        joined = re.sub(r"\\\n\s*", " ", text)
        for k, ln in enumerate(joined.splitlines()):
            ln = ln.split("#")[0].strip()
            m = re.search(r"(?:^|\s)helios\s+(.*)$", ln)
            if not m or ln.startswith(("pip", "python3 -m pytest")):
                continue
            argv = shlex.split(m.group(1).replace("$(date -u +%Y%m%dT%H%M%SZ)", "X"))
            out.append((start + k, argv))
    return out


COMMANDS = helios_commands()


def test_shell_blocks_name_helios_commands():
    assert len(COMMANDS) >= 5


@pytest.mark.parametrize("line,argv", COMMANDS, ids=[f"line{n}" for n, _ in COMMANDS])
def test_shell_command_parses(line, argv):
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"README.md line {line}: `helios {' '.join(argv)}` does not parse (exit {e.code})")

"""The HELIOS_* registry (helios.switches) is complete and the manual's page is generated from it."""

from __future__ import annotations

import re
from pathlib import Path

from helios import switches

TOP = Path(__file__).resolve().parent.parent

# How each kind of source reads a switch: C and Python name it in a string literal
# (getenv("X"), hl_env_flag("X", ...), os.environ.get("X")); CMake as $ENV{X} or an
# option(X ...); shell scripts as ${X:-default} / ${X:+...}.
READS = {
    (".c", ".h", ".py"): re.compile(r"\"(HELIOS_[A-Z0-9_]*[A-Z0-9])[\" =]"),
    (".txt", ".cmake"): re.compile(r"(?:\$ENV\{|option\()(HELIOS_[A-Z0-9_]+)"),
    (".sh", ""): re.compile(r"\$\{(HELIOS_[A-Z0-9_]+):[-+=]"),
}
# The product, its build and tools, and the suite's own switches (the test files set made-up ones).
SOURCES = [
    "csrc",
    "python/helios",
    "cmake",
    "CMakeLists.txt",
    "Makefile",
    "tools",
    "tests/conftest.py",
    "tests/helpers.py",
    "tests/variant_classes.py",
]


def _switches_read() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for top in SOURCES:
        base = TOP / top
        files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
        for path in files:
            suffix = path.suffix if path.suffix in {".c", ".h", ".py", ".txt", ".cmake", ".sh"} else ""
            if path.name == "Makefile" or (not suffix and path.parent.name in {"tools"}):
                suffix = ".sh"
            pattern = next((p for kinds, p in READS.items() if suffix in kinds), None)
            if pattern is None or path.name == "switches.py":
                continue
            for name in pattern.findall(path.read_text(errors="replace")):
                found.setdefault(name, set()).add(str(path.relative_to(TOP)))
    return found


def test_every_switch_read_is_declared():
    read = _switches_read()
    assert len(read) > 30, f"the scan found too few switches ({sorted(read)}): its patterns are broken"
    missing = {name: sorted(where) for name, where in read.items() if name not in {s.name for s in switches.SWITCHES}}
    assert not missing, f"HELIOS_* switches read but not declared in helios/switches.py: {missing}"


def test_every_declared_switch_is_read():
    read = _switches_read()
    stale = [s.name for s in switches.SWITCHES if s.name not in read]
    assert not stale, f"declared in helios/switches.py but read nowhere: {stale}"


def test_names_unique_and_documented():
    names = [s.name for s in switches.SWITCHES]
    assert len(names) == len(set(names))
    for s in switches.SWITCHES:
        assert s.doc.strip() and s.values.strip() and s.group, s


def test_manual_page_is_generated_from_the_registry():
    page = (TOP / "docs" / "reference" / "switches.md").read_text()
    assert page == switches.markdown_table(), "docs/reference/switches.md is stale: python3 -m helios.switches > it"

"""The C sources call each other without circles: the core, the binding and the
cuBLAS reference, each file's functions calling only into files below it (read from
the source: which file defines each non-static function, which other files call
it), and the core never calls the binding. Pure source analysis: runs without a
device."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graphs import circles

CORE = Path(__file__).resolve().parents[1] / "csrc" / "core"

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# a function definition at the start of a line: return type, name, parameters, then its body
_DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b([a-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)
_STATIC = re.compile(r"^static\b[\w \*]*?\b([a-z_]\w*)\s*\(", re.M)  # a file's own: its calls stay inside


def call_graph(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """{file: {file it calls: [functions]}} over the given {file name: C source}."""
    text = {name: _COMMENT.sub("", src) for name, src in sources.items()}
    defined: dict[str, str] = {}
    for name, src in text.items():
        for m in _DEFINITION.finditer(src):
            defined.setdefault(m.group(1), name)
    graph: dict[str, dict[str, list[str]]] = {name: {} for name in text}
    for name, src in text.items():
        own = set(_STATIC.findall(src))
        for fn, home in defined.items():
            if home != name and fn not in own and re.search(rf"\b{re.escape(fn)}\s*\(", src):
                graph[name].setdefault(home, []).append(fn)
    return graph


def _explain(graph: dict[str, dict[str, list[str]]], comp: list[str]) -> str:
    return "; ".join(f"{a} calls {b} ({', '.join(graph[a][b][:4])})" for a in comp for b in comp if b in graph[a])


CSRC = CORE.parent


def _csrc_graph() -> dict[str, dict[str, list[str]]]:
    return call_graph({str(p.relative_to(CSRC)): p.read_text(encoding="utf-8") for p in sorted(CSRC.rglob("*.c"))})


def test_no_call_circles_anywhere_in_csrc():
    """csrc/core, csrc/python and csrc/cuda as one graph (the binding had module.c ->
    device_type.c -> tensor_type.c -> module.c through state_from_type and text_arg)."""
    graph = _csrc_graph()
    dirs = {name.split("/")[0] for name in graph}
    assert dirs == {"core", "python", "cuda"}, dirs
    assert len(graph) > 30 and sum(map(len, graph.values())) > 60  # the walk found the files and their calls
    found = circles(graph)
    assert not found, "C call circles: " + " | ".join(_explain(graph, c) for c in found)


def test_the_core_calls_nothing_above_it():
    graph = _csrc_graph()
    up = {f: sorted(t for t in to if not t.startswith("core/")) for f, to in graph.items() if f.startswith("core/")}
    assert not any(up.values()), {f: t for f, t in up.items() if t}


# csrc/core's folders by role, each calling only into those before it; device.c (the
# device's life: it opens and releases what every folder made) sits above them all.
CORE_FOLDERS = ("runtime", "kernels", "plan", "device.c")


def folder_calls_up(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Calls from a core folder into one after it in CORE_FOLDERS."""

    def rank(name: str) -> int:
        return CORE_FOLDERS.index(name.split("/")[1])

    core = {f: to for f, to in graph.items() if f.startswith("core/")}
    return [
        f"{f} calls {t} ({', '.join(fns[:3])})"
        for f, to in core.items()
        for t, fns in to.items()
        if t.startswith("core/") and rank(t) > rank(f)
    ]


def test_the_core_folders_call_down_only():
    graph = _csrc_graph()
    folders = {name.split("/")[1] for name in graph if name.startswith("core/")}
    assert folders == set(CORE_FOLDERS), folders
    up = folder_calls_up(graph)
    assert not up, "csrc/core's folders call up: " + "; ".join(up)


def test_the_folder_walk_sees_a_call_up():
    graph = call_graph(
        {
            "core/runtime/a.c": "int hl_a(void) { return hl_p(); }\n",
            "core/plan/p.c": "int hl_p(void) { return hl_a(); }\n",
        }
    )
    assert folder_calls_up(graph) == ["core/runtime/a.c calls core/plan/p.c (hl_p)"]


def test_the_walk_sees_a_planted_circle():
    """It must be able to fail: two files that call each other are reported; a static
    function of the same name, or a name in a comment, is no call."""
    sources = {
        "a.c": "int hl_a(void) { return hl_b(); }\n",
        "b.c": "int hl_b(void) { return hl_c(); }\n",
        "c.c": "int hl_c(void) { /* hl_a() */ return 0; }\nstatic int hl_a(void) { return 1; }\n",
    }
    graph = call_graph(sources)
    assert graph["a.c"] == {"b.c": ["hl_b"]} and graph["b.c"] == {"c.c": ["hl_c"]} and graph["c.c"] == {}
    assert circles(graph) == []
    sources["c.c"] = "int hl_c(void) { return hl_a(); }\n"
    assert circles(call_graph(sources)) == [["a.c", "b.c", "c.c"]]


@pytest.mark.parametrize("limit", [500])
def test_no_source_file_is_over_500_lines(limit):
    """Small modules with one job each: Python, C sources and shaders (generated files are
    not in the tree; a header is split by its owner, not trimmed to fit)."""
    root = CORE.parents[1]
    files = [
        *root.glob("python/helios/**/*.py"),
        *root.glob("csrc/**/*.c"),
        *root.glob("shaders/**/*"),
    ]
    long = {
        str(p.relative_to(root)): n for p in files if p.is_file() and (n := len(p.read_text().splitlines())) > limit
    }
    assert files and not long, f"files over {limit} lines: {long}"

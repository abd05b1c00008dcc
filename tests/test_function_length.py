"""Functions a reader can hold: none over 80 lines (a docstring not counted) in
python/helios or csrc unless the comment right above it says why, starting "Long:". The ones still over the bound
when the rule came are listed in PENDING with their length; the list only shrinks:
a new long function fails, and so does a listed one that changed length (split it
further or take it off the list)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80
MARK = "Long:"

# "path:function": its length when listed. To be split (#61, item 4).
PENDING: dict[str, int] = {}


def python_functions(path: Path) -> list[tuple[str, int, str]]:
    """(name, lines without its docstring, the comment lines right above it) of every
    function in a module."""
    lines = path.read_text().splitlines()
    out = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            above = []
            while first > 0 and lines[first - 1].strip().startswith("#"):
                first -= 1
                above.insert(0, lines[first].strip())
            doc = node.body[0] if node.body and isinstance(node.body[0], ast.Expr) else None
            doc_lines = doc.end_lineno - doc.lineno + 1 if doc and isinstance(doc.value, ast.Constant) else 0
            out.append((node.name, node.end_lineno - node.lineno + 1 - doc_lines, "\n".join(above)))
    return out


DEF = re.compile(r"^(?!typedef|static const|const|struct|enum|#|/|\s|})[A-Za-z_].*?\b(\w+)\s*\(")


def c_functions(text: str) -> list[tuple[str, int, str]]:
    """(name, lines, the comment right above it) of every function defined at the top
    level of a C file: a signature starting in column 0, its body up to the line "}"."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = DEF.match(lines[i])
        j = i
        while m and j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if not m or j == len(lines) or not lines[j].rstrip().endswith("{") or "=" in lines[i].split("(")[0]:
            i += 1
            continue
        end = next(k for k in range(j, len(lines)) if lines[k] == "}")
        above, k = [], i
        while k > 0 and lines[k - 1].lstrip().startswith(("/*", "*", "//")):
            k -= 1
            above.insert(0, lines[k].strip())
        out.append((m.group(1), end - i + 1, "\n".join(above)))
        i = end + 1
    return out


def long_functions() -> dict[str, int]:
    found = {}
    for p in sorted((ROOT / "python" / "helios").rglob("*.py")):
        for name, n, above in python_functions(p):
            if n > LIMIT and MARK not in above:
                found[f"{p.relative_to(ROOT)}:{name}"] = n
    for p in sorted((ROOT / "csrc").rglob("*.c")):
        for name, n, above in c_functions(p.read_text()):
            if n > LIMIT and MARK not in above:
                found[f"{p.relative_to(ROOT)}:{name}"] = n
    return found


def test_no_function_is_over_80_lines_without_a_reason():
    found = long_functions()
    new = {k: v for k, v in found.items() if k not in PENDING}
    assert not new, f"functions over {LIMIT} lines with no '{MARK}' reason above them: {new}"
    changed = {k: (v, found.get(k)) for k, v in PENDING.items() if found.get(k) != v}
    assert not changed, f"PENDING entries that changed (listed, now): {changed}; update or remove them"


def test_the_scanners_see_a_planted_long_function():
    body = "\n".join(f"    x += {i};" for i in range(LIMIT))
    c = f"/* Why. */\nstatic int hl_sum(int x,\n                  int y) {{\n{body}\n    return x;\n}}\n"
    assert c_functions(c) == [("hl_sum", LIMIT + 4, "/* Why. */")]
    assert c_functions("/* Long: a table. */\n" + c.split("\n", 1)[1])[0][2] == "/* Long: a table. */"
    py = ROOT / "build" / "planted_long.py"
    py.parent.mkdir(exist_ok=True)
    body = "\n".join(f"    x = {i}" for i in range(LIMIT))
    py.write_text(f'# Long: planted.\ndef f():\n    """Doc,\n    two lines."""\n{body}\n')
    try:
        assert python_functions(py) == [("f", LIMIT + 1, "# Long: planted.")]
    finally:
        py.unlink()

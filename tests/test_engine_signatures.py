"""An engine entry's arguments are declared once, in C, and every other place that
names them is checked against that: the type stub `_helios.pyi` (names, order,
which are required, which keyword-only; mypy.stubtest cannot see a C function's
parameters) and every call the Python layer makes into the engine (its keywords
and positional count). Pure source analysis: runs without a device."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
BINDING = ROOT / "csrc" / "python"
STUB = ROOT / "python" / "helios" / "_helios.pyi"
PACKAGE = ROOT / "python" / "helios"

_KWLIST = re.compile(
    r"kwlist\[\]\s*=\s*\{(?P<names>[^}]*)\};.*?PyArg_ParseTupleAndKeywords\([^\"]*\"(?P<fmt>[^\"]*)\"", re.S
)


class Params(NamedTuple):
    names: tuple[str, ...]
    required: int  # the first `required` names have no default
    keyword_only: int  # names from this index on are keyword-only (len(names): none)


def _format_units(fmt: str) -> list[str]:
    """One entry per argument of a PyArg format (before ':'), with '|' and '$' as their own entries."""
    body = fmt.split(":")[0].split(";")[0]
    out: list[str] = []
    depth = 0
    for ch in body:
        if ch in "|$":
            out.append(ch)
        elif ch == "(":
            if depth == 0:
                out.append("(")
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch.isalpha():
            out.append(ch)
        # modifiers ('#', '!', '&', '*') belong to the unit before
    return out


def c_signatures(sources: dict[str, str]) -> dict[str, Params]:
    """{method name: its parameters} from every PyArg_ParseTupleAndKeywords with a kwlist."""
    out = {}
    for src in sources.values():
        for m in _KWLIST.finditer(src):
            names = tuple(re.findall(r'"(\w+)"', m.group("names")))
            fmt = m.group("fmt")
            if ":" not in fmt:
                continue
            method = fmt.split(":")[1]
            units = _format_units(fmt)
            args = [u for u in units if u not in "|$"]
            assert len(args) == len(names), f"{method}: {len(names)} names for {len(args)} format units ({fmt})"
            required = units.index("|") if "|" in units else len(args)
            kw = units.index("$") - (1 if "|" in units[: units.index("$")] else 0) if "$" in units else len(args)
            out[method] = Params(names, required, kw)
    return out


def _gemm_keys(src: str) -> tuple[str, ...]:
    """_gemm's keywords: one operation's OP_KEYS, the timing keys and the ordering keys."""
    keys = []
    for array in ("OP_KEYS[]", "keys[2]", "keys[]"):
        body = src[src.index(array) :]
        keys += re.findall(r'"(\w+)"', body[: body.index("}")])
    return tuple(keys)


def stub_signatures(text: str, cls: str = "Device") -> dict[str, Params]:
    tree = ast.parse(text)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef):
                    a = fn.args
                    pos = [p.arg for p in a.posonlyargs + a.args][1:]  # without self
                    kwonly = [p.arg for p in a.kwonlyargs]
                    if a.kwarg is not None:
                        out[fn.name] = Params(("**" + a.kwarg.arg,), 0, 0)
                    else:
                        required = len(pos) - len(a.defaults) + sum(d is None for d in a.kw_defaults)
                        out[fn.name] = Params(tuple(pos + kwonly), required, len(pos))
    return out


def _sources() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(BINDING.glob("*.c"))}


def test_the_stub_names_what_the_extension_parses():
    """Every Device method the binding parses with a keyword list has, in the stub, the
    same parameter names in the same order, the same required ones and the same
    keyword-only ones; _gemm (an operation's keys) lists its keys keyword-only."""
    c = c_signatures(_sources())
    stub = stub_signatures(STUB.read_text(encoding="utf-8"))
    assert len(c) > 10, sorted(c)  # the walk found the binding's keyword lists
    bad = []
    for method, want in sorted(c.items()):
        if method in ("Device", "Tensor", "_chain") or method not in stub and not method.startswith("_"):
            continue
        got = stub.get(method)
        if got != want:
            bad.append(f"{method}: C {want}, stub {got}")
    gemm = _gemm_keys(_sources()["gemm.c"])
    want_gemm = Params(gemm, 5, 0)  # a, b, m, n, k required
    if stub.get("_gemm") != want_gemm:
        bad.append(f"_gemm: C {want_gemm}, stub {stub.get('_gemm')}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_renamed_or_reordered_argument():
    src = 'static char *kwlist[] = {"d", "variant", NULL};\nPyArg_ParseTupleAndKeywords(a, k, "I|O:_x", kwlist, &d, &v)'
    assert c_signatures({"x.c": src}) == {"_x": Params(("d", "variant"), 1, 2)}
    stub = "class Device:\n    def _x(self, head_dim: int, variant: str = None) -> None: ...\n"
    assert stub_signatures(stub)["_x"] != c_signatures({"x.c": src})["_x"]
    src_kw = src.replace('"I|O:_x"', '"I|$O:_x"')
    assert c_signatures({"x.c": src_kw})["_x"] == Params(("d", "variant"), 1, 1)
    ok = "class Device:\n    def _x(self, d: int, *, variant: str = None) -> None: ...\n"
    assert stub_signatures(ok)["_x"] == c_signatures({"x.c": src_kw})["_x"]


def _engine_calls() -> list[tuple[str, int, str, int, list[str]]]:
    """(file, line, method, positional count, keywords) of every `x._method(...)` call
    in the package whose method is one of the engine's private Device methods."""
    engine = {m for m in stub_signatures(STUB.read_text(encoding="utf-8")) if m.startswith("_") and m[1] != "_"}
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in engine:
                if any(isinstance(a, ast.Starred) for a in node.args):
                    npos = -1  # *args: not counted
                else:
                    npos = len(node.args)
                kws = [k.arg for k in node.keywords if k.arg is not None]
                out.append((str(path.relative_to(ROOT)), node.lineno, node.func.attr, npos, kws))
    return out


def test_every_engine_call_passes_arguments_the_engine_takes():
    stub = stub_signatures(STUB.read_text(encoding="utf-8"))
    calls = _engine_calls()
    assert len(calls) > 20  # the walk found the Python layer's calls
    bad = []
    for path, line, method, npos, kws in calls:
        p = stub[method]
        if p.names and p.names[0].startswith("**"):
            gemm = _gemm_keys(_sources()["gemm.c"])
            bad += [f"{path}:{line}: {method}({k}=): not an operation key" for k in kws if k not in gemm]
            continue
        if npos > p.keyword_only:
            bad.append(f"{path}:{line}: {method} takes {p.keyword_only} positional arguments, given {npos}")
        unknown = [k for k in kws if k not in p.names]
        bad += [f"{path}:{line}: {method} has no argument {k!r}" for k in unknown]
        if npos >= 0:
            twice = [k for k in kws if k in p.names[:npos]]
            bad += [f"{path}:{line}: {method}: {k!r} given twice" for k in twice]
    assert not bad, "\n".join(bad)

"""The package's layers, read from the source (ast): cli -> harness -> API ->
_helios, and inside the harness its folders by role (runs -> workloads, train ->
results -> protocol); imports only downward, no import circles, no module reaching into
another's private names, and `import helios` loading neither the harness nor
torch. Pure source analysis: runs without a device."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from graphs import circles

PKG = Path(__file__).resolve().parents[1] / "python" / "helios"
RANK = {"api": 0, "harness": 1, "cli": 2}
# The harness's floors: how a measurement is taken, what it leaves, what is measured,
# measurements made of measurements; the package and its pytest plugin on top.
HARNESS_RANK = {"protocol": 0, "results": 1, "workloads": 2, "runs": 3, "": 4}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
NATIVE = {"helios._helios", "helios._cublas"}  # extension modules: the bottom layer


def layer(mod: str) -> str:
    parts = mod.split(".")
    if mod == "helios.__main__":  # `python -m helios`: the command line's entry
        return "cli"
    return parts[1] if len(parts) > 1 and parts[1] in ("harness", "cli") else "api"


def _is_module(name: str) -> bool:
    return name in MODULES or name in NATIVE


def _resolve(src: str, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved)."""
    pkg = src.split(".") if MODULES[src].name == "__init__.py" else src.split(".")[:-1]
    if node.level:
        base = pkg[: len(pkg) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def imports(src: str) -> list[tuple[str, list[str], int]]:
    """(target module, names imported from it, line) for every import in src,
    at any depth (a lazy import inside a function is an edge too)."""
    tree = ast.parse(MODULES[src].read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "helios":
                    out.append((a.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(src, node)
            if target.split(".")[0] != "helios":
                continue
            plain = []
            for a in node.names:
                sub = f"{target}.{a.name}"
                if _is_module(sub):
                    out.append((sub, [], node.lineno))
                else:
                    plain.append(a.name)
            if plain:
                out.append((target, plain, node.lineno))
    return out


def floor(mod: str) -> str:
    """The harness folder a module lies in ("" for the package and its plugin)."""
    parts = mod.split(".")
    return parts[2] if len(parts) > 3 or mod.endswith(tuple(f".{f}" for f in HARNESS_RANK if f)) else ""


HARNESS = sorted(m for m in MODULES if layer(m) == "harness")


def test_every_harness_module_lies_in_a_role_folder():
    loose = [m for m in HARNESS if floor(m) not in HARNESS_RANK]
    top = [m for m in HARNESS if floor(m) == ""]
    assert not loose, f"harness modules outside the role folders: {loose}"
    assert top == ["helios.harness", "helios.harness.pytest_plugin"], top


@pytest.mark.parametrize("src", HARNESS)
def test_harness_floors_go_downward_only(src):
    bad = [
        f"line {ln}: {src} ({floor(src) or 'top'}) imports {t} ({floor(t) or 'top'})"
        for t, _, ln in imports(src)
        if layer(t) == "harness" and t in MODULES and HARNESS_RANK[floor(t)] > HARNESS_RANK[floor(src)]
    ]
    assert not bad, "\n".join(bad)


def test_the_package_has_three_layers():
    layers = {layer(m) for m in MODULES}
    assert layers == {"api", "harness", "cli"}, layers


@pytest.mark.parametrize("src", sorted(MODULES))
def test_imports_go_downward_only(src):
    bad = [
        f"line {ln}: {src} ({layer(src)}) imports {t} ({layer(t)})"
        for t, _, ln in imports(src)
        if t not in NATIVE and RANK[layer(t)] > RANK[layer(src)]
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("src", sorted(MODULES))
def test_no_private_names_across_modules(src):
    bad = []
    for t, names, ln in imports(src):
        if t == src:
            continue
        bad += [f"line {ln}: from {t} import {n}" for n in names if n.startswith("_") and not n.startswith("__")]
    # attribute access on an imported module: `mod._name`
    tree = ast.parse(MODULES[src].read_text(encoding="utf-8"))
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(src, node)
            for a in node.names:
                if f"{target}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{target}.{a.name}"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, f"{src} uses private names of other modules:\n" + "\n".join(bad)


def test_no_import_circles():
    graph = {m: {t for t, _, _ in imports(m) if t in MODULES and t != m} for m in MODULES}
    found = circles(graph)
    assert not found, f"import circles: {found}"


def test_the_checker_sees_a_planted_violation(tmp_path, monkeypatch):
    """The walk must be able to fail: an API module importing the harness, a
    private name and a circle are each reported."""
    fake = {
        "helios": PKG / "__init__.py",
        "helios.a": tmp_path / "a.py",
        "helios.b": tmp_path / "b.py",
        "helios.harness": PKG / "harness" / "__init__.py",
        "helios.harness.x": tmp_path / "x.py",
    }
    (tmp_path / "a.py").write_text("from .b import _secret\nfrom .harness import x\n")
    (tmp_path / "b.py").write_text("from . import a\n")
    (tmp_path / "x.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    assert ("helios.harness.x", [], 2) in imports("helios.a")
    with pytest.raises(AssertionError, match="imports helios.harness.x"):
        test_imports_go_downward_only("helios.a")
    with pytest.raises(AssertionError, match="_secret"):
        test_no_private_names_across_modules("helios.a")
    with pytest.raises(AssertionError, match="import circles"):
        test_no_import_circles()


def test_import_helios_stays_cheap():
    """`import helios` loads the API only: no harness, CLI, torch or SciPy."""
    code = (
        "import sys, helios; print(','.join(sorted(m for m in sys.modules if m.startswith("
        "('helios.harness', 'helios.cli', 'torch', 'scipy', 'matplotlib')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import helios also loaded: {out}"


def test_the_floor_check_sees_a_protocol_module_reading_results(tmp_path, monkeypatch):
    fake = {
        "helios.harness": PKG / "harness" / "__init__.py",
        "helios.harness.protocol": PKG / "harness" / "protocol" / "__init__.py",
        "helios.harness.protocol.x": tmp_path / "x.py",
        "helios.harness.results": PKG / "harness" / "results" / "__init__.py",
        "helios.harness.results.y": tmp_path / "y.py",
    }
    (tmp_path / "x.py").write_text("from ..results import y\n")
    (tmp_path / "y.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    with pytest.raises(
        AssertionError, match=r"protocol\.x \(protocol\) imports helios\.harness\.results\.y \(results\)"
    ):
        test_harness_floors_go_downward_only("helios.harness.protocol.x")

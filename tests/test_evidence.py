"""Evidence inside the tree: every result set the code, the tools or the manual cite
(a name such as h100-attn-fold-05f8336: GPU, topic, the commit measured) is a
directory of results/ that says how it was made."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# GPU, topic, then the commit measured (7 hex digits) or a session's name (session19)
SET = re.compile(r"\b((?:h100|h200|h100x2|h200x2)-[a-z0-9-]*?-(?:[0-9a-f]{7}|session\d+))\b")
SOURCES = ("README.md", "CHANGELOG.md", "docs", "csrc", "shaders", "python/helios", "tools")


def cited_sets() -> dict[str, set[str]]:
    """{set name: the files citing it}."""
    out: dict[str, set[str]] = {}
    for top in SOURCES:
        base = ROOT / top
        for p in [base] if base.is_file() else sorted(x for x in base.rglob("*") if x.is_file()):
            for m in SET.finditer(p.read_text(errors="ignore")):
                out.setdefault(m.group(1), set()).add(str(p.relative_to(ROOT)))
    return out


def test_every_cited_result_set_is_in_the_tree():
    cited = cited_sets()
    assert len(cited) > 40  # the scan finds the citations
    missing = {name: sorted(files) for name, files in cited.items() if not (ROOT / "results" / name).is_dir()}
    assert not missing, f"result sets cited but not in results/: {missing}"


# A set named without its commit (h100-report-html): the name alone. Preceded by a slash it
# is a path (the path test's), as in `git show COMMIT:benchmarks/results/NAME`, history.
NAMED = re.compile(r"(?<![\w./:-])((?:h100|h200|h100x2|h200x2)-[a-z][a-z0-9-]*[a-z0-9])(?![\w-])")


def named_sets(root: Path = ROOT) -> dict[str, set[str]]:
    """{a set named by GPU and topic alone that is not in results/: the files citing it}."""
    out: dict[str, set[str]] = {}
    for top in SOURCES:
        base = root / top
        if not base.exists():
            continue
        for p in [base] if base.is_file() else sorted(x for x in base.rglob("*") if x.is_file()):
            for m in NAMED.finditer(p.read_text(errors="ignore")):
                if not (root / "results" / m.group(1)).is_dir():
                    out.setdefault(m.group(1), set()).add(str(p.relative_to(root)))
    return out


def test_a_set_named_without_its_commit_is_in_the_tree_too():
    """The name alone (h100-report-html) is a citation as much as one with its commit:
    it is a folder of results/, or it is cited into history as a path."""
    missing = {k: sorted(v) for k, v in named_sets().items()}
    assert not missing, f"result sets named but not in results/ (cite `git show COMMIT:PATH`): {missing}"


def test_the_name_walk_sees_a_hashless_name_and_spares_kinds_and_history(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "results" / "h200-here").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text(
        "measured in (h100-gone) and `h200-here/`; on nvidia-h100-x1; `git show 89c21a3:benchmarks/runs/h100-old/`\n"
    )
    assert named_sets(tmp_path) == {"h100-gone": {"docs/a.md"}}


def test_every_result_set_says_how_it_was_made():
    sets = [p for p in (ROOT / "results").iterdir() if p.is_dir()]
    unsaid = [p.name for p in sets if not any((p / f).is_file() for f in ("COMMANDS.md", "RESTORED.md", "README.md"))]
    assert sets and not unsaid, f"result sets without COMMANDS.md (or RESTORED.md): {unsaid}"


# A path into the tree as the docs, comments and tools write it; one written as
# `git show COMMIT:PATH` points into history on purpose and is left alone.
PATH = re.compile(r"(?<![\w/.:-])((?:scripts|tools|results|docs|tests|benchmarks|csrc|shaders|notebooks)/[\w./-]*\w)")
PATH_SOURCES = (*SOURCES, "benchmarks", "tests")


def missing_paths(root: Path = ROOT) -> dict[str, set[str]]:
    """{cited path that is not in the tree: the files citing it}."""
    out: dict[str, set[str]] = {}
    for top in PATH_SOURCES:
        base = root / top
        if not base.exists():
            continue
        files = [base] if base.is_file() else sorted(x for x in base.rglob("*") if x.is_file())
        for p in (f for f in files if "__pycache__" not in f.parts and f.name != "test_evidence.py"):  # plants
            text = p.read_text(errors="ignore")
            for m in PATH.finditer(text):
                path = m.group(1)
                if re.search(r"git show [0-9a-f]{7,40}:$", text[max(0, m.start() - 60) : m.start()]):
                    continue
                if not (root / path).exists():
                    out.setdefault(path, set()).add(str(p.relative_to(root)))
    return out


def test_every_cited_path_is_in_the_tree():
    """A script, guide or result named in the manual or a comment exists; one that left
    the tree is cited as `git show COMMIT:PATH`."""
    missing = {k: sorted(v) for k, v in missing_paths().items()}
    assert not missing, f"paths cited but not in the tree (cite them as `git show COMMIT:PATH`): {missing}"


def test_the_path_walk_sees_a_missing_path_and_spares_history(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "here.py").write_text("")
    (tmp_path / "docs" / "a.md").write_text(
        "run `tools/here.py`, then `tools/gone.py`; the old one: `git show 89c21a3:scripts/old.py`\n"
    )
    assert missing_paths(tmp_path) == {"tools/gone.py": {"docs/a.md"}}


RESULTS_LIMIT = 10 * 2**20  # bytes: long raw series go into a set's raw.tar.xz (tools/pack_results.py)
DATA_ONLY = (".py", ".sh", ".c", ".h", ".glsl", ".comp", ".ipynb")


def test_results_is_data_and_small():
    """results/ holds data, COMMANDS.md and the patches measured: no scripts or probes
    (those live in tools/), and under RESULTS_LIMIT bytes."""
    files = [p for p in (ROOT / "results").rglob("*") if p.is_file()]
    code = sorted(str(p.relative_to(ROOT)) for p in files if p.suffix in DATA_ONLY)
    assert not code, f"code in results/ (move it to tools/, or its text into the set's COMMANDS.md): {code}"
    size = sum(p.stat().st_size for p in files)
    assert size < RESULTS_LIMIT, f"results/ holds {size / 2**20:.1f} MiB (limit 10): python3 tools/pack_results.py"


def test_the_packer_packs_what_nothing_names_and_lists_it(tmp_path):
    import subprocess
    import sys
    import tarfile

    res = tmp_path / "results" / "h100-x-0000000"
    res.mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (res / "COMMANDS.md").write_text("# set\n")
    (res / "big.json").write_text('{"a": [' + ",".join(["1.5"] * 20000) + "]}")
    (res / "cited.json").write_text('{"b": [' + ",".join(["2.5"] * 20000) + "]}")
    (res / "small.json").write_text("{}")
    (tmp_path / "docs" / "a.md").write_text("see results/h100-x-0000000/cited.json\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "pack_results.py"), str(tmp_path / "results")],
        check=True,
        capture_output=True,
    )
    assert sorted(p.name for p in res.iterdir()) == ["COMMANDS.md", "cited.json", "raw.tar.xz", "small.json"]
    with tarfile.open(res / "raw.tar.xz") as tar:
        assert tar.getnames() == ["big.json"] and tar.extractfile("big.json").read().startswith(b'{"a": [1.5')
    assert "- `big.json`" in (res / "COMMANDS.md").read_text()

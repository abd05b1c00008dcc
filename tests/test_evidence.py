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


def test_every_result_set_says_how_it_was_made():
    sets = [p for p in (ROOT / "results").iterdir() if p.is_dir()]
    unsaid = [p.name for p in sets if not any((p / f).is_file() for f in ("COMMANDS.md", "RESTORED.md", "README.md"))]
    assert sets and not unsaid, f"result sets without COMMANDS.md (or RESTORED.md): {unsaid}"

"""The manual in short blocks: no paragraph or list item of the guides, the reference
pages or the README runs past BLOCK_WORDS words (tables and code are not prose)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK_WORDS = 150  # a longer block wants a list, a table or a second paragraph
_FENCE = re.compile(r"```.*?```", re.S)
_ITEM = re.compile(r"\n(?=\s*(?:[-*]|\d+\.) )")


def long_blocks(text: str, limit: int = BLOCK_WORDS) -> list[tuple[int, str]]:
    """(words, opening) of each paragraph or list item over `limit` words."""
    text = _FENCE.sub("", text)
    out = []
    for block in re.split(r"\n\s*\n", text):
        if block.lstrip().startswith("|"):
            continue
        for item in _ITEM.split(block):
            n = len(item.split())
            if n > limit:
                out.append((n, " ".join(item.split()[:8])))
    return out


def test_no_block_of_the_manual_is_long():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    long = {str(p.relative_to(ROOT)): b for p in pages if (b := long_blocks(p.read_text()))}
    assert len(pages) > 10 and not long, f"blocks over {BLOCK_WORDS} words: {long}"


def test_the_count_sees_a_long_block_and_spares_tables_code_and_short_items():
    word = "word " * 30
    text = f"{word * 8}\n\n| {word * 9} |\n\n```\n{word * 9}\n```\n\n- {word * 3}\n- {word * 3}\n"
    assert long_blocks(text) == [(240, "word word word word word word word word")]

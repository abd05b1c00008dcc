#!/usr/bin/env python3
"""Pack each result set's long raw files into one archive beside its COMMANDS.md,
so that results/ stays data a reader can browse (and under its size limit).

A set's JSON file of at least --min-kb that nothing outside results/ names (docs,
tests, tools, the package: a test or the notebook reads those in place) goes into
`<set>/raw.tar.xz`; its COMMANDS.md then lists what the archive holds and how to read
it (`tar xJf raw.tar.xz`). An archive already there is extended, its members kept.
The archive is reproducible: members sorted, owner and times zeroed.

Usage: python3 tools/pack_results.py [--min-kb N] [--dry-run] [RESULTS]"""

from __future__ import annotations

import argparse
import fnmatch
import io
import subprocess
import sys
import tarfile
from pathlib import Path

ARCHIVE = "raw.tar.xz"
# Files the notebook (tools/make_notebook.py) globs for in place.
READ_IN_PLACE = (
    "*gemm*/gemm*.json",
    "*sweep*/sweep*.json",
    "h100-attn-*/attn*.json",
    "*train*/train.json",
    "*energy*/energy*.json",
)
TEXT = (".md", ".py", ".rst", ".txt", ".toml", ".cfg", ".sh", ".ipynb", ".yml", ".yaml")


def cited_texts(repo: Path) -> list[str]:
    """Every tracked text file outside results/: where a path would be named."""
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    return [
        (repo / f).read_text(errors="ignore")
        for f in files
        if not f.startswith("results/") and f.endswith(TEXT) and (repo / f).is_file()
    ]


def is_cited(rel: Path, texts: list[str]) -> bool:
    """Named by its path, or by its set and its quoted file name in one file (a test that
    joins `"results" / "h100-aa-236f2f6" / "aa-1.json"`)."""
    path, top, name = f"results/{rel.as_posix()}", rel.parts[0], f'"{rel.name}"'
    return any(path in t or (top in t and name in t) for t in texts)


def to_pack(results: Path, min_bytes: int, texts: list[str]) -> dict[Path, list[Path]]:
    sets: dict[Path, list[Path]] = {}
    for f in sorted(results.rglob("*.json")):
        rel = f.relative_to(results)
        if f.stat().st_size < min_bytes or len(rel.parts) < 2:
            continue
        if is_cited(rel, texts) or any(fnmatch.fnmatch(rel.as_posix(), g) for g in READ_IN_PLACE):
            continue
        top = results / rel.parts[0]
        sets.setdefault(top, []).append(f)
    return sets


def pack(top: Path, files: list[Path]) -> None:
    archive = top / ARCHIVE
    members: dict[str, bytes] = {}
    if archive.exists():
        with tarfile.open(archive, "r:xz") as old:
            for m in old.getmembers():
                data = old.extractfile(m)
                if data is not None:
                    members[m.name] = data.read()
    for f in files:
        members[f.relative_to(top).as_posix()] = f.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    archive.write_bytes(buf.getvalue())
    for f in files:
        f.unlink()
    commands = top / "COMMANDS.md"
    text = commands.read_text() if commands.exists() else f"# {top.name}\n"
    head = f"\n## Packed raw files ({ARCHIVE})\n"
    listing = "".join(f"- `{n}`\n" for n in sorted(members))
    section = (
        f"{head}\n`tar xJf {ARCHIVE}` restores these files where the commands above wrote them "
        f"(packed by tools/pack_results.py to keep results/ small):\n\n{listing}"
    )
    text = text.split(head)[0].rstrip("\n") + "\n" + section
    commands.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default="results", help="the results folder (default: results)")
    ap.add_argument("--min-kb", type=int, default=16, help="pack JSON files of at least this many KiB (default 16)")
    ap.add_argument("--dry-run", action="store_true", help="list what would be packed, change nothing")
    args = ap.parse_args(argv)
    results = Path(args.results).resolve()
    repo = results.parent
    sets = to_pack(results, args.min_kb * 1024, cited_texts(repo))
    before = sum(f.stat().st_size for fs in sets.values() for f in fs)
    for top, files in sets.items():
        print(f"{top.name}: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.2f} MB")
        if not args.dry_run:
            pack(top, files)
    after = sum((top / ARCHIVE).stat().st_size for top in sets) if not args.dry_run else 0
    print(
        f"{len(sets)} sets, {before / 1e6:.2f} MB of raw files" + ("" if args.dry_run else f" -> {after / 1e6:.2f} MB")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

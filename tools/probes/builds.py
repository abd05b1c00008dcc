#!/usr/bin/env python3
"""An A/B of builds, for kernel changes no switch turns off: each side a copy of the
tree with its patches applied, every side built at once (`pip install --target`), then
a probe's command run for each side in turns, each run a process of its own with
PYTHONPATH at its side's build, its output kept as OUT/LABEL-N.out (stderr beside it).
One device call holds the whole round; the sides alternate (A B, then B A) so that a
drift of the card's clocks falls on both.

--build LABEL[:PATCH,...] (repeatable): a side; a PATCH with a leading '-' is applied
in reverse (`git apply -R`, or `patch -R` where git is missing); no patch: the tree as
it is. The copies leave out build/, the top folders whose names start with '.' and
the ones --skip names. --build-only LABEL[:PATCH,...]: a side built beside them (at
WORK/LABEL/site) but not in the turns, for probes run on it afterwards (a trace).

Usage: python3 tools/probes/builds.py --build base:-old.patch --build new: --out DIR
       [--build-only LABEL:PATCH] [--repeats 2] [--skip DIR,...] [--dry-run]
       -- tools/probes/step.py --positions 1023 --json"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def parse_build(spec: str, ap: argparse.ArgumentParser) -> tuple[str, list[tuple[Path, bool]]]:
    """LABEL[:PATCH,...] as the label and its patches (path, reversed), each checked."""
    label, _, rest = spec.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
        ap.error(f"--build {spec!r}: a label of letters, digits, '_', '.' or '-' first")
    patches = []
    for p in filter(None, rest.split(",")):
        path = Path(p[1:] if p.startswith("-") else p).resolve()
        if not path.is_file():
            ap.error(f"--build {spec!r}: no patch file {path}")
        patches.append((path, p.startswith("-")))
    return label, patches


def order(labels: list[str], repeats: int) -> list[tuple[str, int]]:
    """The runs in turns: the sides in order, then reversed, and so on."""
    return [(s, i) for i in range(1, repeats + 1) for s in (labels if i % 2 else labels[::-1])]


def apply(src: Path, patch: Path, reverse: bool) -> None:
    """The patch applied to the copy at src (paths a/... b/...), or SystemExit naming it."""
    if shutil.which("git"):
        cmd = ["git", "apply", "-p1", *(["-R"] if reverse else []), str(patch)]
    else:
        cmd = ["patch", "-s", "-p1", *(["-R"] if reverse else []), "-i", str(patch)]
    r = subprocess.run(cmd, cwd=src, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"builds.py: {' '.join(cmd)} failed in {src}: {r.stderr.strip()[-400:]}")


def prepare(label: str, patches: list[tuple[Path, bool]], work: Path, skip: list[str]) -> Path:
    """LABEL's copy of the tree under work, its patches applied in order."""
    src = work / label / "src"
    shutil.rmtree(work / label, ignore_errors=True)
    top = {"build", *skip}

    def left_out(d: str, names: list[str]) -> list[str]:  # .git, caches, the device kit
        return [n for n in names if Path(d) == ROOT and (n in top or n.startswith(".") and (Path(d) / n).is_dir())]

    shutil.copytree(ROOT, src, ignore=left_out)
    for patch, reverse in patches:
        apply(src, patch, reverse)
    return src


def build_all(srcs: dict[str, Path], work: Path) -> dict[str, Path]:
    """Every side built at once into work/LABEL/site; SystemExit naming a failed one."""
    procs = {}
    for label, src in srcs.items():
        log = open(work / label / "build.log", "w")
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--target",
               str(work / label / "site"), str(src)]  # fmt: skip
        procs[label] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
    failed = []
    for label, (p, log) in procs.items():
        if p.wait() != 0:
            failed.append(label)
        log.close()
    if failed:
        raise SystemExit(f"builds.py: the build of {', '.join(failed)} failed (see {work}/LABEL/build.log)")
    sites = {label: work / label / "site" for label in srcs}
    for site in sites.values():  # an editable install's import hook would win over PYTHONPATH
        where = imported_from(site)
        if not where.startswith(str(site)):
            raise SystemExit(f"builds.py: with PYTHONPATH={site}, helios imports from {where}: uninstall that one")
    return sites


def imported_from(site: Path) -> str:
    """Where `import helios` finds the package with PYTHONPATH at site."""
    code = "import helios; print(helios.__file__)"
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(site)}, cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    return r.stdout.strip() or r.stderr.strip()[-300:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", default=[], metavar="LABEL[:PATCH,...]",
                    help="a side: a copy of the tree with these patches ('-PATCH': reversed); repeatable")  # fmt: skip
    ap.add_argument("--build-only", action="append", default=[], metavar="LABEL[:PATCH,...]",
                    help="a side built at WORK/LABEL/site but not run: for probes run on it afterwards; repeatable")  # fmt: skip
    ap.add_argument("--out", required=True, type=Path, help="where each run's output goes (LABEL-N.out, .err)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of the command a side, in turns (default 2)")
    ap.add_argument("--skip", default="", help="more top folders the copies leave out, comma-separated")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "helios-builds",
                    help="where the copies and builds go (outside any git work tree: git apply patches there)")  # fmt: skip
    ap.add_argument("--dry-run", action="store_true", help="print the sides and the runs' order as JSON, and stop")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="after --: the probe and its arguments")
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command: give the probe after --")
    if not a.build:
        ap.error("no --build: give at least one side")
    if a.repeats < 1:
        ap.error(f"--repeats {a.repeats}: at least 1")
    sides = dict(parse_build(s, ap) for s in a.build + a.build_only)
    if len(sides) != len(a.build) + len(a.build_only):
        ap.error("--build, --build-only: each label once")
    runs = order(list(sides)[: len(a.build)], a.repeats)
    if a.dry_run:
        plan: dict[str, Any] = {"sides": {k: [("-" if r else "") + str(p) for p, r in v] for k, v in sides.items()},
                                "runs": [f"{s}-{i}" for s, i in runs], "command": cmd}  # fmt: skip
        print(json.dumps(plan))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    skip = [s for s in a.skip.split(",") if s]
    sites = build_all({k: prepare(k, v, a.work, skip) for k, v in sides.items()}, a.work)
    print(f"builds.py: {len(sites)} sides built in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    rc = 0
    for label, i in runs:
        env = {**os.environ, "PYTHONPATH": str(sites[label])}
        with open(a.out / f"{label}-{i}.out", "w") as out, open(a.out / f"{label}-{i}.err", "w") as err:
            r = subprocess.run([sys.executable, *cmd], env=env, stdout=out, stderr=err, cwd=ROOT)
        print(
            f"builds.py: {label} {i}: exit {r.returncode} at {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True
        )
        rc = rc or r.returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())

"""`helios bisect GOOD BAD`: the first commit whose verdict against GOOD is SLOWER.

Each step measures a commit against GOOD as `helios ci` measures a head against
its base: both built (and reused when built before), interleaved ABBA bench
pairs on this GPU, then `helios compare`'s verdict per shape with ci's noise
floors (and the control-normalized verdict where `--gate normalized` asks for
it and it is valid). The regression being bisected is BAD's: the shapes on which
BAD is SLOWER than GOOD, measured first; a commit is

* SLOWER when any of those shapes is SLOWER against GOOD,
* not slower when on every one of them the interval rules the regression out: its
  upper bound lies below half of BAD's change there (BAD itself is not slower when
  no shape is SLOWER and every interval lies below the noise floor),
* INCONCLUSIVE otherwise: the search stops there and says so, with the MDE the
  noise allowed, rather than guess (rerun with more --runs to go on).

The search is binary over the commits from GOOD (exclusive) to BAD (inclusive)
along the first-parent ancestry path, assuming that once slower a commit stays
slower. Every measured commit, its verdicts, intervals and MDEs go to
OUT/bisect.json after each step; run the same command again to resume (measured
commits are not measured again). --max-steps bounds the steps of one run.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ...files import FileError, Target, check, dumps, read_object, short
from ..results.compare import ShapeVerdict, gated
from ..results.compare_table import verdict_dict
from .ci import CiConfig, CiError, bench_pairs, build, check_side, git, pairs_until_decided, shape_specs

SCHEMA = "helios-bisect/1"


@dataclass
class Judgment:
    """A commit against GOOD over the shapes under bisection."""

    verdict: str  # SLOWER, NOT SLOWER or INCONCLUSIVE
    shapes: list[dict]  # verdict_dict per shape measured
    mde_pct: float  # the largest MDE over the shapes (what the noise allowed)


def _upper(v: ShapeVerdict, gate: str) -> float:
    """The upper bound of the interval the gate reads (a ratio of times)."""
    if gate == "normalized" and v.control is not None:
        return v.control.ci95[1]
    return v.ci95[1]


def judge(verdicts: list[ShapeVerdict], shapes: Optional[dict[str, float]], gate: str) -> Judgment:
    """A commit's judgment from its per-shape verdicts against GOOD. shapes: the shapes
    under bisection with BAD's change on each (%), or None for BAD's own measurement
    (every shape; not slower only where every interval lies below the noise floor)."""
    vs = [v for v in verdicts if shapes is None or v.shape in shapes]
    if not vs:
        raise CiError("no shape under bisection was measured")
    kinds = [gated(v, gate)[0] for v in vs]
    if shapes is None:
        ruled_out = all(_upper(v, gate) <= 1 + v.floor for v in vs)
    else:  # the regression ruled out: below half of BAD's change on each shape
        ruled_out = all(_upper(v, gate) < 1 + shapes[v.shape] / 200 for v in vs)
    verdict = "SLOWER" if "SLOWER" in kinds else "NOT SLOWER" if ruled_out else "INCONCLUSIVE"
    return Judgment(verdict, [verdict_dict(v) for v in vs], max(v.mde for v in vs) * 100)


def open_shapes(verdicts: list[ShapeVerdict], shapes: Optional[dict[str, float]], gate: str) -> list[str]:
    """The shapes that keep a commit's judgment INCONCLUSIVE: neither SLOWER nor ruled
    out by judge's rule (more runs on them may decide it); [] once decided."""
    if judge(verdicts, shapes, gate).verdict != "INCONCLUSIVE":
        return []
    vs = [v for v in verdicts if shapes is None or v.shape in shapes]
    return [v.shape for v in vs if _upper(v, gate) >= (1 + v.floor if shapes is None else 1 + shapes[v.shape] / 200)]


def search(
    commits: list[str],
    measure: Callable[[str, Optional[dict[str, float]]], Judgment],
    max_steps: int,
    record: dict,
    on_step: Callable[[dict], None] = lambda record: None,
) -> dict:
    """Binary search over commits (GOOD's descendants, oldest first, BAD last).
    record["steps"] holds judgments already made (resumed: not measured again) and
    is appended to; measure(commit, shapes) judges one commit against GOOD;
    on_step(record) runs after each measurement (bisect.json). Returns record with
    "status" and, where found, "first_slower"."""
    done = {s["commit"]: s for s in record.setdefault("steps", [])}
    made = 0

    def judged(i: int, shapes: Optional[dict[str, float]]) -> Optional[dict]:
        nonlocal made
        c = commits[i]
        if c not in done:
            if made >= max_steps:
                return None
            j = measure(c, shapes)
            made += 1
            done[c] = {"commit": c, "index": i, "verdict": j.verdict, "mde_pct": j.mde_pct, "shapes": j.shapes}
            record["steps"].append(done[c])
            record["measured_at"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            on_step(record)
        return done[c]

    bad = judged(len(commits) - 1, None)
    if bad is None:
        return dict(record, status="max steps: BAD not measured yet")
    if bad["verdict"] != "SLOWER":
        if bad["verdict"] == "INCONCLUSIVE":
            return dict(
                record,
                status=f"INCONCLUSIVE: BAD against GOOD (MDE {bad['mde_pct']:.1f}%): rerun with more --runs",
            )
        return dict(record, status=f"BAD is not slower against GOOD (MDE {bad['mde_pct']:.1f}%): nothing to bisect")
    shapes = {  # BAD's regression: the shapes it is SLOWER on, with its change there (%)
        s["shape"]: max(s["change_pct"], (s.get("control") or {}).get("change_pct") or 0.0)
        for s in bad["shapes"]
        if s["verdict"] == "SLOWER" or (s.get("control") or {}).get("verdict") == "SLOWER"
    }
    record["shapes_bisected"] = sorted(shapes)
    lo, hi = -1, len(commits) - 1  # lo: last known not slower (-1: GOOD), hi: first known slower
    while hi - lo > 1:
        mid = (lo + hi) // 2
        step = judged(mid, shapes)
        if step is None:
            return dict(record, status="max steps", range=[commits[lo] if lo >= 0 else "GOOD", commits[hi]])
        if step["verdict"] == "SLOWER":
            hi = mid
        elif step["verdict"] == "NOT SLOWER":
            lo = mid
        else:
            return dict(
                record,
                status=f"INCONCLUSIVE at {commits[mid][:12]} (MDE {step['mde_pct']:.1f}%): rerun with more --runs",
                range=[commits[lo] if lo >= 0 else "GOOD", commits[hi]],
            )
    return dict(record, status="found", first_slower=commits[hi])


def ancestry(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after GOOD up to BAD along BAD's first parents, oldest first."""
    out = git(repo, "rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{good}..{bad}").split()
    if not out:
        raise CiError(f"{bad[:12]} is not a descendant of {good[:12]}: nothing between them to bisect")
    return out


def run_bisect(
    cfg: CiConfig,
    good_ref: str,
    bad_ref: str,
    max_steps: int,
    gate: str,
    say: Callable[[str], None],
    replace: bool = False,
) -> dict:
    """The whole bisection (resumed from cfg.out/bisect.json where it matches; a
    record of another bisection is replaced only with replace)."""
    good = git(cfg.repo, "rev-parse", "--verify", f"{good_ref}^{{commit}}")
    bad = git(cfg.repo, "rev-parse", "--verify", f"{bad_ref}^{{commit}}")
    if good == bad:
        raise CiError(f"GOOD and BAD are one commit ({good[:12]}): nothing to bisect")
    commits = ancestry(cfg.repo, good, bad)
    cfg.out.mkdir(parents=True, exist_ok=True)
    target = Target(cfg.out / "bisect.json", "--out", replace=True)
    record: dict = {"schema": SCHEMA, "good": good, "bad": bad, "commits": commits, "gate": gate}
    config = {k: getattr(cfg, k) for k in ("shapes", "workload", "runs", "iters", "warmup", "repeats", "ref")}
    config["bench_args"] = cfg.bench_args
    record["config"] = config
    old = _resume(target.path, good, bad, config, commits, replace)
    if old:
        record["steps"] = old
        say(f"resuming: {len(old)} commit(s) measured before")

    def save(rec: dict) -> None:
        target.write(to_json(rec) + "\n")

    sites: dict[str, Path] = {}

    def site(sha: str) -> Path:
        if sha not in sites:
            say(f"build {sha[:12]}")
            sites[sha] = build(cfg, sha, say)
            check_side(cfg, sites[sha], sha)
        return sites[sha]

    def measure(commit: str, shapes: Optional[dict[str, float]]) -> Judgment:
        say(f"measure {commit[:12]} against GOOD {good[:12]}")
        which = shape_specs(sorted(shapes)) if shapes else cfg.shapes
        shas = {"base": good, "head": commit}
        sides = {"base": site(good), "head": site(commit)}
        started = time.monotonic()
        files = bench_pairs(cfg, sides, shas, which, f"{commit[:8]}-", cfg.runs, say)
        files, verdicts, _ = pairs_until_decided(
            cfg, sides, shas, files, lambda vs: open_shapes(vs, shapes, gate), started, say, f"{commit[:8]}-"
        )
        j = judge(verdicts, shapes, gate)
        say(f"{commit[:12]}: {j.verdict} (MDE {j.mde_pct:.1f}%)")
        return j

    result = search(commits, measure, max_steps, record, save)
    save(result)
    return result


STEP_FIELDS = {"commit": "str", "index": "count", "verdict": "str", "mde_pct": "number", "shapes": "list"}
SHAPE_FIELDS = {"shape": "str", "verdict": "str", "change_pct": "number"}
VERDICTS = ("SLOWER", "NOT SLOWER", "INCONCLUSIVE")


def _resume(path: Path, good: str, bad: str, config: dict, commits: list[str], replace: bool) -> Optional[list]:
    """The steps of an earlier run of this bisection (same GOOD, BAD and settings),
    each checked; None where there is no record. A record of another bisection, or
    one that cannot be read, is never replaced silently: CiError (pass --force to
    replace it), before anything is built."""
    if not path.exists():
        return None
    try:
        old = read_object(path, "a helios bisect record")
        if old.get("schema") != SCHEMA:
            raise FileError(f"{path}: not a {SCHEMA} record (schema {short(old.get('schema'))})")
    except FileError as e:
        if replace:
            return None
        raise CiError(f"{e}; it is not replaced without --force (or give another --out)") from None
    if old.get("good") != good or old.get("bad") != bad or old.get("config") != config:
        if replace:
            return None
        what = f"{str(old.get('good'))[:12]}..{str(old.get('bad'))[:12]}"
        raise CiError(
            f"{path} holds another bisection ({what}, or other settings); it is not replaced without --force "
            "(or give another --out)"
        )
    steps = old.get("steps")
    if not isinstance(steps, list):
        raise CiError(f"{path}: 'steps' must be a list, got {short(steps)}")
    for i, step in enumerate(steps):
        where = f"{path}: steps[{i}]"
        if not isinstance(step, dict):
            raise CiError(f"{where} must be an object, got {short(step)}")
        try:
            check(step, STEP_FIELDS, where)
            if step["commit"] not in commits or commits.index(step["commit"]) != step["index"]:
                raise FileError(f"{where}: commit {short(step['commit'])} is not commit {step['index']} of the range")
            if step["verdict"] not in VERDICTS:
                raise FileError(
                    f"{where}: 'verdict' must be one of {', '.join(VERDICTS)}, got {short(step['verdict'])}"
                )
            for k, x in enumerate(step["shapes"]):
                if not isinstance(x, dict):
                    raise FileError(f"{where}.shapes[{k}] must be an object, got {short(x)}")
                check(x, SHAPE_FIELDS, f"{where}.shapes[{k}]")
        except FileError as e:
            raise CiError(f"{e} (fix or remove {path.name}, or pass --force to start again)") from None
    return steps


def summary(result: dict) -> str:
    lines = [f"helios bisect {result['good'][:12]}..{result['bad'][:12]}: {result['status']}"]
    if result.get("first_slower"):
        lines.append(f"first SLOWER commit: {result['first_slower']}")
    for s in sorted(result.get("steps", []), key=lambda s: s["index"]):
        parts = ", ".join(f"{x['shape']} {x['change_pct']:+.1f}% {x['verdict']}" for x in s["shapes"])
        lines.append(f"  {s['commit'][:12]}  {s['verdict']:<12} MDE {s['mde_pct']:.1f}%  {parts}")
    return "\n".join(lines)


def to_json(result: dict) -> str:
    return dumps(result, indent=1)

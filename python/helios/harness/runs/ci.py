"""`helios ci`: a base commit against a head commit on this machine's GPU, in one job.

1. Refs: head defaults to HEAD, base to the merge-base of head with main.
2. Builds: each commit's tree is exported (git archive) and installed into its own
   directory (pip --target). The engine (csrc, shaders, cmake, CMakeLists.txt,
   pyproject.toml) is built once per distinct engine tree and shared; each
   commit's Python package is laid over it, so two commits that differ only in
   Python build once. A commit that does not build: exit 2 with pip's reason.
3. Gate: on each side, `helios check --fuzz` (products) and `helios check
   --attention` (float64 oracle). A failing head stops the run before anything is
   timed (exit 1); a failing base means there is nothing sound to compare (exit 2).
4. Timing: `helios bench` with base and head alternating (ABBA...: --runs pairs,
   each run a separate process with its own clock ramp), so drift hits both sides.
5. Verdicts: `helios compare` on the pooled runs, with a noise floor per shape
   tier (launch-bound shapes are noisier: NOISE_TIERS), judged in ci_verdicts.py; pairs
   are added on the undecided shapes within the budget (pairs_until_decided), and a
   shape found SLOWER is measured again (RERUN_PAIRS pairs on those shapes) before it counts.
6. Output (--out): the runs' JSON, ci.json (helios-ci/1: refs, builds, gates,
   verdicts, exit status), comment.md (the sticky PR comment), and with --history
   one JSON line per head row appended to that file (the history store).

Exit: 0 no regression; 1 a regression beyond --fail-on-regression, or the head
fails its gate; 2 could not run (a ref, a build, the base's gate, the bench); 130 or
143 Ctrl-C or SIGTERM during the benches (ci.json and comment.md then hold the
verdicts of the runs that finished, marked interrupted).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ... import signals
from ...files import Target, dumps
from ..protocol.gpustate import side_states
from ..results.ci_comment import comment
from ..results.compare import CompareError, ShapeVerdict, gated
from ..results.compare_load import load
from ..results.history import append_history, device_fields
from ..results.rows import bench_rows
from .ci_verdicts import failed_checks, failing, head_verdict, latest_rows, mark_launches, verdicts_of
from .floors import CPU_NOISE, CPU_RUN_NOISE, NOISE_TIERS, RUN_NOISE_FLOOR
from .pace import PairPace

CI_SCHEMA = "helios-ci/1"
ENGINE_PATHS = ("csrc", "shaders", "cmake", "CMakeLists.txt", "pyproject.toml")


class CiError(RuntimeError):
    """Could not run (exit 2): the message says which step and why."""


# The benches' budget by default, the rerun of SLOWER shapes included. On an H200 a pair of the
# 12-shape set takes about 57 s, the first 76 s as it fills the input cache
# (results/h200-ci-series-d4b8122), so a job that spends it ends, builds and gates
# included, within 10 minutes; what is still undecided then reads INCONCLUSIVE with the
# runs it would take.
BENCH_BUDGET_S = 480.0
RERUN_PAIRS = 2  # the pairs that measure a SLOWER shape again before it counts


@dataclass
class CiConfig:
    repo: Path
    out: Path
    work: Path
    base: Optional[str] = None
    head: Optional[str] = None
    main: str = "main"
    shapes: str = "canonical"
    workload: str = "matmul"  # helios bench --workload: matmul or attention
    runs: int = 2  # base/head pairs
    iters: int = 50
    warmup: int = 10
    repeats: int = 2
    ref: str = "auto"
    fuzz: int = 30
    attention_fuzz: int = 10
    fail_on_regression: float = 0.0  # percent a SLOWER shape must exceed to fail the job
    gate: str = "plain"  # the verdict that fails the job: plain, or control-normalized where valid
    strict: bool = False  # fail on a regression even where the kernel's code is unchanged
    energy: bool = False  # the benches record energy windows (bench's default; off here: time is judged)
    rerun: bool = True
    max_pairs: int = 8  # pairs a shape may get in all, adding one at a time while it is INCONCLUSIVE
    max_time_s: float = BENCH_BUDGET_S  # the benches' budget: a pair starts only if it and the rerun fit
    history: Optional[Path] = None
    python: str = sys.executable
    bench_args: list[str] = field(default_factory=list)
    timeout_s: float = 3600.0


def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise CiError(f"git {' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout.strip()


def resolve_refs(cfg: CiConfig) -> tuple[str, str]:
    head = git(cfg.repo, "rev-parse", "--verify", f"{cfg.head or 'HEAD'}^{{commit}}")
    if cfg.base:
        base = git(cfg.repo, "rev-parse", "--verify", f"{cfg.base}^{{commit}}")
    else:
        try:
            base = git(cfg.repo, "merge-base", cfg.main, head)
        except CiError as e:
            raise CiError(f"no --base and no merge-base of {cfg.head or 'HEAD'} with {cfg.main!r}: {e}") from None
    if base == head:  # an A/A of a commit with itself would always read "no regression"
        raise CiError(
            f"base and head are one commit ({head[:12]}): nothing to compare; give a --base (or --main) "
            "that differs from --head"
        )
    return base, head


def engine_key(repo: Path, sha: str) -> str:
    """What the compiled engine depends on: the git objects of its inputs at sha."""
    parts = []
    for p in ENGINE_PATHS:
        r = subprocess.run(["git", "-C", str(repo), "rev-parse", f"{sha}:{p}"], capture_output=True, text=True)
        parts.append(f"{p}={r.stdout.strip() if r.returncode == 0 else '-'}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _run(cmd: list[str], log: Path, timeout: float, env: Optional[dict] = None, cwd: Optional[Path] = None) -> int:
    with log.open("w") as f:  # files: a build log, written as the build runs
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\nhelios ci: timed out after {timeout:.0f} s\n")
            return 124


def _tail(path: Path, n: int = 12) -> str:
    lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []  # files: our log
    return "\n".join(lines[-n:])


def build(cfg: CiConfig, sha: str, say: Callable[[str], None]) -> Path:
    """The directory to put on PYTHONPATH to run commit sha (built or reused)."""
    site = cfg.work / "site" / sha
    if (site / ".helios-ci-ok").exists():
        return site
    src = cfg.work / "src" / sha
    if not src.exists():
        src.mkdir(parents=True)
        tar = subprocess.run(["git", "-C", str(cfg.repo), "archive", "--format=tar", sha], capture_output=True)
        if tar.returncode != 0:
            raise CiError(f"git archive {sha[:12]}: {tar.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", str(src)], input=tar.stdout, check=True)
    key = engine_key(cfg.repo, sha)
    engine = cfg.work / "engine" / key
    if not (engine / ".helios-ci-ok").exists():
        say(f"build {sha[:12]} (engine {key})")
        shutil.rmtree(engine, ignore_errors=True)
        engine.mkdir(parents=True)
        log = cfg.work / f"build-{sha[:12]}.log"
        env = dict(os.environ, HELIOS_BUILD_COMMIT=sha)
        cmd = [cfg.python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(engine)]
        rc = _run(cmd + [str(src)], log, cfg.timeout_s, env=env)
        if rc != 0:
            raise CiError(f"commit {sha[:12]} does not build (pip exit {rc}; log {log}):\n{_tail(log)}")
        (engine / ".helios-ci-ok").write_text(sha)  # files: a build stamp
    else:
        say(f"build {sha[:12]}: engine {key} already built")
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(engine, site, symlinks=True)
    pkg_src, pkg_dst = src / "python" / "helios", site / "helios"
    for f in pkg_src.rglob("*"):  # this commit's Python over the shared engine
        if f.is_file():
            dst = pkg_dst / f.relative_to(pkg_src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst)
    (site / ".helios-ci-ok").write_text(sha)  # files: a build stamp
    return site


# How a side runs `helios ...`: its build directory first on sys.path, and no import
# hook that redirects `helios` elsewhere (an editable install of another checkout
# puts one on sys.meta_path, ahead of every path entry), then `python -m helios`.
_LAUNCH = (
    "import sys, runpy; site = sys.argv.pop(1); "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
    "sys.path.insert(0, site); sys.argv[0] = 'helios'; "
    "runpy.run_module('helios', run_name='__main__', alter_sys=True)"
)


def _helios_cmd(cfg: CiConfig, site: Path, *args: str) -> list[str]:
    return [cfg.python, "-c", _LAUNCH, str(site), *args]


def check_side(cfg: CiConfig, site: Path, sha: str) -> dict:
    """Which Helios a side actually imports: its own build, or CiError."""
    probe = (
        "import sys; site = sys.argv.pop(1); "
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
        "sys.path.insert(0, site); import helios, helios._helios as h; print(helios.__file__); print(h.__file__)"
    )
    r = subprocess.run([cfg.python, "-c", probe, str(site)], capture_output=True, text=True, env=_env(site, sha))
    files = r.stdout.split()
    if r.returncode != 0 or len(files) != 2 or not all(Path(f).resolve().is_relative_to(site.resolve()) for f in files):
        raise CiError(
            f"the build of {sha[:12]} does not import from {site}: {files or r.stderr.strip()[-300:]} "
            f"(something on sys.path or sys.meta_path shadows it)"
        )
    return {"package": files[0], "extension": files[1]}


def _env(site: Path, sha: str) -> dict:
    pp = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=f"{site}{os.pathsep + pp if pp else ''}", HELIOS_COMMIT=sha)


def gate(cfg: CiConfig, side: str, sha: str, site: Path) -> dict:
    """The correctness gate of one side: {passed, steps: [{name, rc, tail}]}."""
    steps = []
    checks = [
        ("fuzz", ["check", "--fuzz", str(cfg.fuzz), "--seed", "1", "--max-dim", "300"]),
        (
            "attention",
            ["check", "--attention", "--matrix", "none", "--fuzz", str(cfg.attention_fuzz), "--oracle", "float64"]
            + ["--max-seq", "200"],
        ),
    ]
    for name, args in checks:
        if name == "attention" and cfg.attention_fuzz == 0:
            continue
        log = cfg.out / f"gate-{side}-{name}.log"
        rc = _run(_helios_cmd(cfg, site, *args), log, cfg.timeout_s, env=_env(site, sha), cwd=cfg.work)
        steps.append({"name": name, "rc": rc, "tail": _tail(log, 4)})
    return {"passed": all(s["rc"] == 0 for s in steps), "steps": steps}


def shape_specs(labels: list[str]) -> str:
    """helios bench --shapes for rows' shape labels ('1x32x2048x128-causal-bwd' is
    measured as 1x32x2048x128: the mask and the direction are the bench's flags)."""
    return ",".join(dict.fromkeys(label.split("-")[0] for label in labels))


_bench_help: dict[Path, str] = {}


def bench_accepts(cfg: CiConfig, site: Path, sha: str, flag: str) -> bool:
    """Whether the side's own `helios bench` has flag (a commit older than the flag
    runs without it: an older bench never did what the flag turns off)."""
    if site not in _bench_help:
        r = subprocess.run(
            _helios_cmd(cfg, site, "bench", "--help"), capture_output=True, text=True, env=_env(site, sha)
        )
        _bench_help[site] = r.stdout if r.returncode == 0 else ""
    return flag in _bench_help[site]


def bench(cfg: CiConfig, side: str, sha: str, site: Path, tag: str, shapes: str) -> Path:
    out = cfg.out / f"{side}-{tag}.json"
    args = ["bench", f"--shapes={shapes}", f"--iters={cfg.iters}", f"--warmup={cfg.warmup}"]
    args += [f"--repeats={cfg.repeats}", "--runs=1", f"--ref={cfg.ref}", f"--out={out}", "--force"]
    if cfg.workload != "matmul":
        args.append(f"--workload={cfg.workload}")
    # Time is what ci and bisect judge; an energy window per row and side would add
    # ~4 s a row on an NVIDIA GPU to every bench of every pair (--energy keeps them).
    if not cfg.energy and bench_accepts(cfg, site, sha, "--no-energy"):
        args.append("--no-energy")
    args += cfg.bench_args
    log = cfg.out / f"{side}-{tag}.log"
    # Every run of every pair times the same seeded inputs: drawn once, read back after.
    env = {"HELIOS_INPUT_CACHE": str(cfg.work / "inputs"), **_env(site, sha)}
    rc = _run(_helios_cmd(cfg, site, *args), log, cfg.timeout_s, env=env, cwd=cfg.work)
    if rc != 0 or not out.exists():
        raise CiError(f"helios bench on {side} ({sha[:12]}) exited {rc}:\n{_tail(log)}")
    md = out.with_suffix(".md")
    if md.exists():
        md.unlink()  # the JSON holds every number the table showed
    return out


def bench_pairs(
    cfg: CiConfig, sites: dict, shas: dict, shapes: str, tag: str, n: int, say, start: int = 0,
    into: Optional[dict] = None,
) -> dict:  # fmt: skip
    """n base/head pairs, alternating which goes first (ABBA: drift hits both sides);
    start: the pairs already measured, so that added pairs keep alternating. Each file is
    added to `into` (or a new {"base": [], "head": []}) as its run ends, so an
    interrupted call leaves the complete runs there."""
    files: dict = into if into is not None else {"base": [], "head": []}
    for i in range(n):
        order = ("base", "head") if (start + i) % 2 == 0 else ("head", "base")
        for side in order:
            say(f"bench {side} {tag}{i + 1}/{n}")
            files[side].append(bench(cfg, side, shas[side], sites[side], f"{tag}{i + 1}", shapes))
    return files


def pairs_until_decided(
    cfg: CiConfig, sites: dict, shas: dict, files: dict, undecided: Callable[[list], list[str]], started: float, say,
    prefix: str = "", rerun: Callable[[list], list[str]] = lambda vs: [],
) -> tuple[dict, list[ShapeVerdict], dict]:  # fmt: skip
    """The stopping rule of ci and bisect: while `undecided(verdicts)` names shapes, one
    more pair on those shapes, until cfg.max_pairs pairs, or until the next pair and the
    rerun that `rerun(verdicts)` asks for (RERUN_PAIRS pairs on its shapes) would not fit
    in cfg.max_time_s seconds of benches from `started`, at the pace of the pairs so far
    (PairPace). Returns the files, the verdicts and what stopped it; prefix: the added
    files' names start with it."""
    pairs = len(files["head"])
    verdicts = verdicts_of(files)
    pace = PairPace()
    pace.add(len(verdicts), (time.monotonic() - started) / max(1, pairs))
    while True:
        open_shapes = undecided(verdicts)
        spent = time.monotonic() - started
        slower = rerun(verdicts)
        expected = pace.expect(len(open_shapes)) + (RERUN_PAIRS * pace.expect(len(slower)) if slower else 0.0)
        why = (
            "decided"
            if not open_shapes
            else f"{cfg.max_pairs} pairs"
            if pairs >= cfg.max_pairs
            else f"{cfg.max_time_s:g} s"
            if spent + expected > cfg.max_time_s
            else None
        )
        if why:
            return files, verdicts, {"pairs": pairs, "stopped_by": why, "undecided": open_shapes, "seconds": spent}
        say(f"INCONCLUSIVE {', '.join(open_shapes)}: pair {pairs + 1} on them")
        t = time.monotonic()
        bench_pairs(cfg, sites, shas, shape_specs(open_shapes), f"{prefix}pair{pairs + 1}-", 1, say, pairs, files)
        pace.add(len(open_shapes), time.monotonic() - t)
        pairs += 1
        verdicts = verdicts_of(files)


def run_ci(cfg: CiConfig, say: Callable[[str], None] = lambda s: None) -> dict:
    """The whole job; returns the helios-ci/1 record (its "exit" is the exit status)."""
    cfg.out, cfg.work = cfg.out.resolve(), cfg.work.resolve()  # the sides run in the work directory
    cfg.out.mkdir(parents=True, exist_ok=True)
    cfg.work.mkdir(parents=True, exist_ok=True)
    rec: dict = {"schema": CI_SCHEMA, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "exit": 2}
    rec["config"] = _config_record(cfg)
    try:
        base, head = resolve_refs(cfg)
        rec.update(base=base, head=head)
        say(f"base {base[:12]}  head {head[:12]}")
        shas = {"base": base, "head": head}
        sites = {side: build(cfg, sha, say) for side, sha in shas.items()}
        rec["engines"] = {side: engine_key(cfg.repo, sha) for side, sha in shas.items()}
        rec["imports"] = {side: check_side(cfg, sites[side], shas[side]) for side in shas}
        rec["gate"] = {}
        for side in ("head", "base"):  # the head first: a failing head stops everything
            say(f"gate {side}")
            rec["gate"][side] = gate(cfg, side, shas[side], sites[side])
            if not rec["gate"][side]["passed"]:
                if side == "head":
                    rec.update(exit=1, reason="the head fails its correctness gate: nothing was timed")
                    return _finish(cfg, rec)
                raise CiError("the base fails its correctness gate: there is nothing sound to compare against")
        files: dict = {"base": [], "head": []}
        try:
            verdicts = _measure(cfg, rec, sites, shas, files, say)
        except KeyboardInterrupt:  # judge the complete runs, marked interrupted
            signals.measured()
            return _interrupted(cfg, rec, files)
        signals.measured()  # from here a signal is recorded, never raised: the verdicts get written
        head_latest = _judge(cfg, rec, files, verdicts)
        if cfg.history is not None:  # probed before the builds; a late failure keeps the verdicts
            try:
                append_history(cfg.history, head_latest, head, rec["date"])
            except OSError as e:
                rec["history_error"] = f"could not append to {cfg.history}: {e.strerror or e}"
                say(f"warning: {rec['history_error']} (the verdicts stand)")
    except (CiError, CompareError, ValueError, OSError, subprocess.CalledProcessError) as e:
        rec.update(exit=2, reason=f"could not run: {e}")
    return _finish(cfg, rec)


def _measure(cfg: CiConfig, rec: dict, sites: dict, shas: dict, files: dict, say) -> list[ShapeVerdict]:
    """The benches into `files`: --runs pairs, pairs on the undecided shapes within the
    budget, and the rerun of the SLOWER ones; returns the verdicts."""
    started = time.monotonic()
    bench_pairs(cfg, sites, shas, cfg.shapes, "run", cfg.runs, say, into=files)
    undecided = lambda vs: [v.shape for v in vs if gated(v, cfg.gate)[0] == "INCONCLUSIVE"]  # noqa: E731
    rerun = lambda vs: [v.shape for v in vs if v.verdict == "SLOWER"] if cfg.rerun else []  # noqa: E731
    _, verdicts, rec["stopping"] = pairs_until_decided(cfg, sites, shas, files, undecided, started, say, rerun=rerun)
    slower = rerun(verdicts)
    rec["reruns"] = []
    if slower:  # measured again before they count
        say(f"rerun {', '.join(slower)}")
        bench_pairs(cfg, sites, shas, shape_specs(slower), "rerun", RERUN_PAIRS, say, into=files)
        rec["reruns"] = slower
        verdicts = verdicts_of(files)
    return verdicts


def _interrupted(cfg: CiConfig, rec: dict, files: dict) -> dict:
    """A signal during the benches: the verdicts of the complete runs, the job's exit
    the signal's status (a SLOWER row may not have been measured again)."""
    policy = signals.active()
    rec["interrupted"] = signals.stopped_by()
    runs = f"{len(files['base'])} base and {len(files['head'])} head runs"
    if files["base"] and files["head"]:
        try:
            _judge(cfg, rec, files, verdicts_of(files))
            rec["reason"] = f"stopped by {rec['interrupted']} after {runs}; verdicts so far: {rec['reason']}"
        except (CompareError, ValueError, OSError) as e:
            rec["reason"] = f"stopped by {rec['interrupted']} after {runs}; they could not be judged: {e}"
    else:
        rec["reason"] = f"stopped by {rec['interrupted']} after {runs}: nothing to judge"
    rec["exit"] = policy.status if policy is not None else 130
    return _finish(cfg, rec)


def _config_record(cfg: CiConfig) -> dict:
    """ci.json's config: the protocol and the rules the verdicts were judged by."""
    return {
        "shapes": cfg.shapes,
        "workload": cfg.workload,
        "runs": cfg.runs,
        "max_pairs": cfg.max_pairs,
        "max_time_s": cfg.max_time_s,
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "repeats": cfg.repeats,
        "ref": cfg.ref,
        "fuzz": cfg.fuzz,
        "attention_fuzz": cfg.attention_fuzz,
        "fail_on_regression_pct": cfg.fail_on_regression,
        "verdict_gate": cfg.gate,
        "strict": cfg.strict,
        "noise_tiers": [[lim if lim != float("inf") else None, f] for lim, f in NOISE_TIERS],
        "cpu_noise": CPU_NOISE,
        "cpu_run_noise": CPU_RUN_NOISE,
        "run_noise_floor": RUN_NOISE_FLOOR,
        "bench_args": cfg.bench_args,
    }


def _judge(cfg: CiConfig, rec: dict, files: dict, verdicts: list) -> dict:
    """The verdicts, the failed checks, the device, the GPU's state and the exit status
    into rec; returns the head's latest rows."""
    rec["files"] = {side: [p.name for p in fs] for side, fs in files.items()}
    rec["failed_checks"] = {side: failed_checks(fs) for side, fs in files.items()}
    heads = [load(str(p)) for p in files["head"]]
    bases = [load(str(p)) for p in files["base"]]
    head_latest = latest_rows(heads)
    rec["device"] = device_fields(heads[0])
    rec["gpu_state"] = {"base": side_states(bases), "head": side_states(heads)}
    mark_launches(verdicts, rec.get("engines", {}))
    rec["verdicts"] = [head_verdict(v) for v in verdicts]
    head_rows = {r.shape: r for r in bench_rows(head_latest)}
    for v in rec["verdicts"]:
        row = head_rows.get(v["shape"])
        v["head_speedup_vs_cuda"] = row.speedup if row is not None and row.cudaMs is not None else None
        v["roof_fraction"] = row.roofFraction if row is not None else None
    regressions, same_code = failing(verdicts, cfg.gate, cfg.fail_on_regression, cfg.strict)
    rec["same_code_slower"] = [v.shape for v in same_code]
    rec["exit"] = 1 if regressions else 0
    rec["reason"] = (
        f"{len(regressions)} regression(s): " + ", ".join(f"{v.shape} {v.pct:+.1f}%" for v in regressions)
        if regressions
        else "no regression"
    )
    # A timed row whose output failed its check is a wrong result, whatever the
    # timings of the other runs say: the head fails, a base cannot be compared against.
    for side, code in (("head", 1), ("base", 2)):  # a failing base wins: nothing sound to compare
        bad = rec["failed_checks"][side]
        if bad:
            why = "; ".join(f"{b['shape']} ({b['file']}: {b['why']})" for b in bad)
            rec.update(exit=code, reason=f"the {side}'s timed outputs failed their check: {why}")
    return head_latest


def _finish(cfg: CiConfig, rec: dict) -> dict:
    Target(cfg.out / "ci.json", "--out", replace=True).write(dumps(rec, indent=1, default=str) + "\n")
    Target(cfg.out / "comment.md", "--out", replace=True).write(comment(rec))
    return rec

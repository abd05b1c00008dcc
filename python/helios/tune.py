"""The tuner: time candidate variants per shape bucket, keep the fastest that
passed its check, and remember it on disk.

The cache is one JSON file (``HELIOS_TUNE_CACHE``, else
``$XDG_CACHE_HOME/helios/tune.json``, else ``~/.cache/helios/tune.json``)::

    {"schema": "helios-tune/1",
     "devices": {DEVICE_KEY: {"device": {...}, "buckets": {"2048x2048x2048": {
         "variant": ..., "median_ms": ..., "shape": ..., "candidates": {variant: ms | "REJECTED: ..."},
         "timestamp": ...}}}}}

DEVICE_KEY names the device, its driver version, a hash of its cooperative-
matrix table and the kernel revision (KERNEL_REVISION below), so a new driver
or new shaders never reuse old picks. A file that is not valid JSON, or not of
this schema, is ignored with a warning and rewritten by the next ``tune``.

Shape buckets: each dimension rounded up to a multiple of 128 (one block of
the default tiling), so shapes that differ by less than a block share a pick.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from .check import check_close, reference_matmul

SCHEMA = "helios-tune/1"
# Bump when the shaders or the variant semantics change: cached picks then no longer apply.
KERNEL_REVISION = 2
BUCKET = 128

# Switches that ask for a specific kernel: when any is set, the cache is not consulted.
_OVERRIDES = ("HELIOS_VARIANT", "HELIOS_COOP_TILE", "HELIOS_COOP_F16IN_SUBGROUP_TILES",
              "HELIOS_COOP_DIRECT_LOAD", "HELIOS_COOP_F16_ACCUM", "HELIOS_DISABLE_COOP")

# Candidate templates, in elements: block M, N, K; subgroup block M, N; stages; split-K.
# From the H100 rounds (docs/perf-notes.md): 128x128x64 led from 2048^3 up, 96x128
# at 3072^3, 64x64 at 1024^3, split-K where even 64x64 blocks leave SMs idle.
TEMPLATES: list[tuple[int, int, int, int, int, int, int]] = [
    (128, 128, 64, 64, 64, 2, 1),
    (128, 128, 32, 64, 64, 2, 1),
    (96, 128, 32, 48, 64, 2, 1),
    (96, 128, 64, 48, 64, 2, 1),
    (128, 96, 32, 64, 48, 2, 1),
    (64, 128, 32, 64, 64, 2, 1),
    (64, 64, 32, 32, 32, 2, 1),
    (64, 64, 32, 32, 32, 2, 2),
    (128, 128, 64, 64, 64, 2, 2),
]


def cache_path() -> Path:
    env = os.environ.get("HELIOS_TUNE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "helios" / "tune.json"


def bucket(shape: tuple[int, int, int]) -> str:
    return "x".join(str(-(-d // BUCKET) * BUCKET) for d in shape)


def device_key(info: Any) -> str:
    table = json.dumps(list(info["cooperative_matrix_properties"]), sort_keys=True, default=str)
    h = hashlib.sha256(table.encode()).hexdigest()[:12]
    return (f"{info['name']}|{info['vendor_id']:#06x}:{info['device_id']:#06x}|"
            f"driver {info['driver_version']}|coop {h}|kernels r{KERNEL_REVISION}")


def overridden() -> Optional[str]:
    """The environment switch that takes precedence over tuned picks, if any is set."""
    for name in _OVERRIDES:
        if os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off"):
            return name
    return None


def load(path: Optional[Path] = None) -> dict:
    """The cache, or an empty one (with a warning) when the file is unreadable or foreign."""
    path = path or cache_path()
    empty = {"schema": SCHEMA, "devices": {}}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return empty
    except OSError as e:
        warnings.warn(f"helios: tune cache {path} unreadable ({e}); ignoring it", stacklevel=2)
        return empty
    try:
        doc = json.loads(text)
    except ValueError as e:
        warnings.warn(f"helios: tune cache {path} is corrupt ({e}); ignoring it (the next "
                      f"`helios tune` rewrites it)", stacklevel=2)
        return empty
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("devices"), dict):
        warnings.warn(f"helios: tune cache {path} is not a {SCHEMA} file; ignoring it (the next "
                      f"`helios tune` rewrites it)", stacklevel=2)
        return empty
    return doc


def save(doc: dict, path: Optional[Path] = None) -> Path:
    """Write atomically (a temporary file renamed over the old one)."""
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tune-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(tmp, path)
    return path


def lookup(doc: dict, info: Any, shape: tuple[int, int, int], key: Optional[str] = None) -> Optional[str]:
    entry = doc.get("devices", {}).get(key or device_key(info), {})
    pick = entry.get("buckets", {}).get(bucket(shape)) if isinstance(entry, dict) else None
    if isinstance(pick, dict) and isinstance(pick.get("variant"), str):
        return pick["variant"]
    return None


def candidates(dev: Any) -> list[str]:
    """Variant strings from TEMPLATES for the device's f16 -> f32 subgroup coop
    shapes (16x16x16 and 16x8x16 first), those the device accepts, plus the default."""
    table = [r for r in dev.info["cooperative_matrix_properties"]
             if r["a"] == "f16" and r["b"] == "f16" and r["c"] == "f32" and r["scope"] == "subgroup"]
    shapes = sorted({(r["m"], r["n"], r["k"]) for r in table},
                    key=lambda s: (s != (16, 16, 16), s != (16, 8, 16), -s[0] * s[1] * s[2]))[:2]
    default = dev.default_variant()
    out = [default]
    if not shapes or shapes[0][0] < 16:
        # Small coop shapes (a CPU driver's 8x8x8): its JIT takes tens of seconds per
        # large unrolled tile, so only the default and its split-K / raster neighbours.
        if default.startswith("coop:"):
            out += [default.replace(":splitk=1:", ":splitk=2:"), default.replace(":raster=8", ":raster=1")]
        return [v for i, v in enumerate(out) if v not in out[:i]]
    for (tm, tn, tk) in shapes:
        for (bm, bn, bk, sm, sn, stages, splitk) in TEMPLATES:
            if sm % tm or sn % tn or bm % sm or bn % sn or bk % tk:
                continue
            v = (f"coop:{tm}x{tn}x{tk}:tile{bm}x{bn}x{bk}:sg{sm // tm}x{sn // tn}:acc=f32:"
                 f"load=shared:stages={stages}:splitk={splitk}:raster=8")
            try:
                v = dev.check_variant(v)
            except Exception:   # not valid on this device (limits, table): not a candidate
                continue
            if v not in out:
                out.append(v)
    return out


# Shapes with tails in every dimension, K shorter than a slab, K split unevenly.
CHECK_SHAPES = [(1, 1, 1), (65, 127, 129), (383, 384, 385), (257, 136, 1000)]


def read_variant_list(spec: str) -> list[str]:
    """Comma-separated variant strings, or @FILE with one per line ('#' comments)."""
    if spec.startswith("@"):
        with open(spec[1:], encoding="utf-8") as f:
            items = [ln.split("#")[0].strip() for ln in f]
    else:
        items = [v.strip() for v in spec.split(",")]
    return [v for v in items if v]


def check_candidate(dev: Any, variant: str, seed: int = 0,
                    shapes: Iterable[tuple[int, int, int]] = CHECK_SHAPES) -> Optional[str]:
    """None if the variant passes the seeds' gate on `shapes` (fp32 and fp16 output),
    else a reason. fp16 accumulators cannot meet the gate on long random sums:
    they get inputs in {-1, 0, 1} (partial sums exact in fp16), as in `helios check`."""
    import numpy as np
    from .device import random_inputs
    for (m, n, k) in shapes:
        if "acc=f16" in variant:
            rng = np.random.default_rng(seed + m + n + k)
            a = rng.integers(-1, 2, size=(m, k)).astype(np.float16)
            b = rng.integers(-1, 2, size=(k, n)).astype(np.float16)
        else:
            a, b = random_inputs(m, n, k, seed=seed + m + n + k)
        ref = reference_matmul(a, b)
        for od in ("float32", "float16"):
            r = check_close(dev.matmul(a, b, out_dtype=od, variant=variant), ref)
            if not r.passed:
                return f"{m}x{n}x{k} out={od}: {r.line()}"
    return None


@dataclass
class TuneResult:
    shape: tuple[int, int, int]
    bucket: str
    variant: str
    median_ms: float
    candidates: dict = field(default_factory=dict)   # variant -> median ms, or "REJECTED: why"


def tune(dev: Any, shapes: Iterable[tuple[int, int, int]], *, variants: Optional[list[str]] = None,
         iters: int = 20, warmup: int = 5, warmup_ms: float = 200.0, seed: int = 0,
         log: Callable[[str], None] = lambda s: None) -> list[TuneResult]:
    """Check every candidate once, then time the passing ones on each shape with
    GPU timestamps (warm-up by count and time, median of `iters`)."""
    from .device import random_inputs, warmup_launches
    cands = variants if variants is not None else candidates(dev)
    rejected: dict[str, str] = {}
    for v in cands:
        why = check_candidate(dev, v, seed)
        if why:
            rejected[v] = why
            log(f"REJECTED {v}: {why}")
    passing = [v for v in cands if v not in rejected]
    if not passing:
        raise RuntimeError("helios tune: every candidate failed its check; nothing to choose")
    results = []
    for shape in shapes:
        a, b = random_inputs(*shape, seed=seed + 1)
        times: dict = {v: f"REJECTED: {why}" for v, why in rejected.items()}
        for v in passing:
            est = dev.time_matmul(*shape, iters=2, warmup=1, variant=v, inputs=(a, b))
            w = warmup_launches(est.median_ms, warmup, warmup_ms)
            t = dev.time_matmul(*shape, iters=iters, warmup=w, variant=v, inputs=(a, b))
            times[v] = t.median_ms
        best = min(passing, key=lambda v: times[v])
        results.append(TuneResult(shape=tuple(shape), bucket=bucket(shape), variant=best,
                                  median_ms=times[best], candidates=times))
        log(f"{'x'.join(map(str, shape)):>16} {times[best]:9.4f} ms  {best}")
    return results


def store(results: list[TuneResult], info: Any, path: Optional[Path] = None) -> Path:
    """Merge results into the cache file for this device and write it."""
    doc = load(path)
    key = device_key(info)
    entry = doc["devices"].setdefault(key, {"buckets": {}})
    entry["device"] = {k: info[k] for k in ("name", "driver_name", "driver_info", "driver_version")}
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for r in results:
        entry["buckets"][r.bucket] = {"variant": r.variant, "median_ms": r.median_ms,
                                      "shape": "x".join(map(str, r.shape)),
                                      "candidates": r.candidates, "timestamp": now}
    return save(doc, path)


class TunedChoice:
    """Per-device resolution of variant=None / "auto": the tuned pick for the shape's
    bucket, else the built-in default for the shape. The cache is read once."""

    def __init__(self) -> None:
        self._doc: Optional[dict] = None
        self._key: Optional[str] = None   # device_key hashes the coop table: once per device

    def resolve(self, dev: Any, shape: tuple[int, int, int]) -> Optional[str]:
        if overridden():
            return None   # the C default applies the switches
        if self._doc is None:
            self._doc = load()
            self._key = device_key(dev.info)
        return lookup(self._doc, dev.info, shape, self._key)

    def reload(self) -> None:
        self._doc = self._key = None

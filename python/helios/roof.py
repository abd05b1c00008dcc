"""The cooperative-matrix MMA roof: the TF/s a device's matrix units give a
register-only loop (no memory traffic), per fragment shape and accumulator type.
It is the ceiling a kernel of this instruction class can approach, measured on
the device at hand, so any GPU's numbers can be read as a fraction of it."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np

from . import _helios
from .files import FileError, check, read_object
from .tune_cache import cache_path as tune_cache_path
from .tune_cache import device_key

CACHE_SCHEMA = "helios-roof-cache/1"
# A roof row as the cache holds it. The bounds keep a hand-edited or corrupt value
# from reaching a result: no GPU's MMA roof is below a GFLOP/s or above 1e5 TF/s,
# and a row's TF/s over a roof outside them would be noise or infinity.
ROW_FIELDS = {"shape": "str", "acc": "str", "tflops": "positive", "tflops_max": "positive?"}
ROOF_TFLOPS_RANGE = (1e-3, 1e5)


def mma_roof(
    dev: Any,
    shapes: Optional[list[tuple[int, int, int]]] = None,
    accs: tuple[str, ...] = ("f32", "f16"),
    iters: int = 4096,
    reps: int = 10,
    warmup: int = 3,
) -> list[dict]:
    """One row per (subgroup f16 coop shape the device lists, accumulator type):
    TF/s of the median and best of `reps` timed dispatches (GPU timestamps).
    shapes: default every f16-input shape of the device's table. Each dispatch runs
    enough workgroups to fill the device several times over (8 per SM where the
    SM count is known)."""
    info = dev.info
    table = [
        r
        for r in info["cooperative_matrix_properties"]
        if r["a"] == "f16" and r["b"] == "f16" and r["scope"] == "subgroup" and r["c"] == r["result"]
    ]
    if shapes is None:
        shapes = sorted({(r["m"], r["n"], r["k"]) for r in table}, key=lambda s: -s[0] * s[1] * s[2])
    groups = 8 * info["sm_count"] if info.get("sm_count") else 1024
    rows = []
    for m, n, k in shapes:
        for acc in accs:
            if not any((r["m"], r["n"], r["k"], r["c"]) == (m, n, k, acc) for r in table):
                continue
            samples, flops = dev._mma_roof(m, n, k, acc, iters, groups, warmup, reps)
            tf = [flops / (ms * 1e-3) / 1e12 for ms in samples]
            rows.append(
                {
                    "shape": f"{m}x{n}x{k}",
                    "acc": acc,
                    "tflops": float(np.median(tf)),
                    "tflops_max": float(max(tf)),
                    "samples_ms": [float(x) for x in samples],
                    "flops_per_dispatch": flops,
                    "iters": iters,
                    "workgroups": groups,
                }
            )
    if not rows:
        raise _helios.UnsupportedError(f"{info['name']} lists no f16 subgroup cooperative-matrix shape to measure")
    return rows


# ---- the cache: rows per device and driver (tune_cache.device_key), written by
# `helios roof`, read by every bench row's roofFraction ----------------------------


def cache_path() -> Path:
    """HELIOS_ROOF_CACHE, else roof.json beside the tuning cache."""
    env = os.environ.get("HELIOS_ROOF_CACHE")
    return Path(env) if env else tune_cache_path().with_name("roof.json")


def _load(path: Path) -> dict:
    if not path.exists():
        return {"schema": CACHE_SCHEMA, "devices": {}}
    try:
        doc = read_object(path, "a roof cache", 1 << 20)
        if doc.get("schema") != CACHE_SCHEMA or not isinstance(doc.get("devices"), dict):
            raise FileError(f"not a {CACHE_SCHEMA} file")
        for key, entry in doc["devices"].items():
            where = f"device {key!r}"
            if not isinstance(entry, dict) or not isinstance(entry.get("rows"), list):
                raise FileError(f"{where}: expected an object with a list of rows")
            for i, row in enumerate(entry["rows"]):
                if not isinstance(row, dict):
                    raise FileError(f"{where}, row {i}: expected an object, got {type(row).__name__}")
                check(row, ROW_FIELDS, f"{where}, row {i}")
                lo, hi = ROOF_TFLOPS_RANGE
                if not lo <= row["tflops"] <= hi:
                    raise FileError(f"{where}, row {i}: tflops {row['tflops']!r} is outside {lo:g}..{hi:g}")
        return doc
    except ValueError as e:
        warnings.warn(f"helios: roof cache {path} ignored: {e} (the next `helios roof` rewrites it)", stacklevel=3)
        return {"schema": CACHE_SCHEMA, "devices": {}}


def save_rows(info: Any, rows: list[dict], path: Optional[Path] = None) -> Path:
    """Store this device's roof rows (replacing earlier ones), atomically."""
    from .tune_cache import save

    path = path or cache_path()
    doc = _load(path)
    doc["devices"][device_key(info)] = {
        "device": info["name"],
        "rows": [{k: r[k] for k in ("shape", "acc", "tflops", "tflops_max")} for r in rows],
    }
    return save(doc, path)


def cached_rows(info: Any, path: Optional[Path] = None) -> Optional[list]:
    """This device and driver's rows from the roof cache, or None."""
    entry = _load(path or cache_path())["devices"].get(device_key(info))
    return entry["rows"] if entry else None  # _load checked every entry's rows


def roof_tflops(info: Any, shape: str, acc: str, path: Optional[Path] = None) -> Optional[float]:
    """The cached roof (median TF/s) of this fragment shape and accumulator on this
    device and driver, or None where `helios roof` has not measured it."""
    for r in cached_rows(info, path) or []:
        if r["shape"] == shape and r["acc"] == acc:
            return float(r["tflops"])
    return None


def roof_fraction(
    info: Any, variant: str, tflops: Optional[float], shape_fields: Optional[dict] = None
) -> Optional[float]:
    """A row's TF/s over the roof of the fragment shape its variant runs (None where
    either is unknown: no cached roof, or a variant without cooperative matrices)."""
    if tflops is None:
        return None
    f = shape_fields
    if f is None:
        try:
            f = _helios.variant_fields(variant)
        except ValueError:
            return None
    if not f.get("tm"):
        return None
    roof = roof_tflops(info, f"{f['tm']}x{f['tn']}x{f['tk']}", f.get("acc", "f32"))
    return tflops / roof if roof else None

"""The tuning cache: which variant `helios tune` picked per device and shape
bucket, stored on disk and read by every op that runs with variant=None/"auto".

The cache is one JSON file (``HELIOS_TUNE_CACHE``, else
``$XDG_CACHE_HOME/helios/tune.json``, else ``~/.cache/helios/tune.json``)::

    {"schema": "helios-tune/1",
     "devices": {DEVICE_KEY: {"device": {...}, "buckets": {"2048x2048x2048": {
         "variant": ..., "median_ms": ..., "shape": ..., "candidates": {variant: ms | "REJECTED: ..."},
         "timestamp": ...}}}}}

DEVICE_KEY names the device, its driver version, a hash of its cooperative-
matrix table and the digest of the kernels (``_helios.KERNELS_DIGEST``, computed
at build time over every permutation's SPIR-V and the generated table), so a new
driver or changed kernels never reuse old picks, and an edit that leaves the SPIR-V
as it was (a comment) keeps them. A file that cannot serve (unreadable, too
large, not UTF-8, not JSON, not this schema, or with entries of the wrong type)
is ignored with one warning naming it, and the next ``helios tune`` rewrites it;
an op never fails because of the cache.

Shape buckets: each dimension rounded up to a multiple of 128 (one block of
the default tiling), so shapes that differ by less than a block share a pick.
Attention picks live beside them under ``attention:d<D>:kv<S>[:causal][:bwd]:<dtype>``
(S_kv rounded up to a power of two, at least 128; `helios tune --workload=attention`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, Optional

from ._helios import KERNELS_DIGEST
from .files import Target, dumps, read_object

SCHEMA = "helios-tune/1"
BUCKET = 128
MAX_CACHE_BYTES = 16 << 20


def cache_path() -> Path:
    env = os.environ.get("HELIOS_TUNE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "helios" / "tune.json"


def bucket(shape: tuple[int, int, int]) -> str:
    return "x".join(str(-(-d // BUCKET) * BUCKET) for d in shape)


def attention_bucket(d: int, skv: int, causal: bool, backward: bool, dtype: str) -> str:
    """The bucket of an attention pick: head dim, S_kv rounded up to a power of two
    (at least 128), the mask, the direction and the dtype."""
    s = 128
    while s < skv:
        s *= 2
    return f"attention:d{d}:kv{s}{':causal' if causal else ''}{':bwd' if backward else ''}:{dtype}"


def device_key(info: Any) -> str:
    table = json.dumps(list(info["cooperative_matrix_properties"]), sort_keys=True, default=str)
    h = hashlib.sha256(table.encode()).hexdigest()[:12]
    return (
        f"{info['name']}|{info['vendor_id']:#06x}:{info['device_id']:#06x}|"
        f"driver {info['driver_version']}|coop {h}|kernels {KERNELS_DIGEST}"
    )


def empty() -> dict:
    return {"schema": SCHEMA, "devices": {}}


def _valid(doc: Any) -> Optional[str]:
    """None when doc is a usable cache, else what is wrong with it."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return f"not a {SCHEMA} file"
    devices = doc.get("devices")
    if not isinstance(devices, dict):
        return "'devices' is not an object"
    for key, entry in devices.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("buckets", {}), dict):
            return f"device entry {key[:60]!r} is not an object with 'buckets'"
        for b, pick in entry.get("buckets", {}).items():
            if not isinstance(pick, dict) or not isinstance(pick.get("variant"), str):
                return f"bucket {b[:40]!r} has no variant string"
    return None


def load(path: Optional[Path] = None) -> dict:
    """The cache, or an empty one (with one warning naming the file and the
    reason) when the file cannot serve; a missing file is simply empty."""
    path = path or cache_path()
    if not path.exists():
        return empty()
    try:
        doc = read_object(path, "a tuning cache", MAX_CACHE_BYTES)
        why = _valid(doc)
    except ValueError as e:
        doc, why = None, str(e).removeprefix(f"{path}: ")
    if why is not None or not isinstance(doc, dict):
        warnings.warn(f"helios: tune cache {path} ignored: {why} (the next `helios tune` rewrites it)", stacklevel=2)
        return empty()
    return doc


def save(doc: dict, path: Optional[Path] = None) -> Path:
    """Write atomically (a temporary file renamed over the old one)."""
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return Target(path, "cache", replace=True).write(dumps(doc, indent=1, sort_keys=True))


def lookup(doc: dict, info: Any, shape: Any, key: Optional[str] = None) -> Optional[str]:
    """The pick for a product's shape (M, N, K) or an attention bucket string."""
    entry = doc.get("devices", {}).get(key or device_key(info), {})
    name = shape if isinstance(shape, str) else bucket(shape)
    pick = entry.get("buckets", {}).get(name) if isinstance(entry, dict) else None
    if isinstance(pick, dict) and isinstance(pick.get("variant"), str):
        return pick["variant"]
    return None


class TunedChoice:
    """Per-device resolution of variant=None / "auto": the tuned pick for the shape's
    bucket, else None (the engine's default for the shape). The cache is read once.
    Whether an environment switch overrides tuned picks is the engine's decision
    (Device.active_override), asked here, never kept in a second list."""

    def __init__(self) -> None:
        self._doc: Optional[dict] = None
        self._key: Optional[str] = None  # device_key hashes the coop table: once per device

    def resolve(self, dev: Any, shape: Any) -> Optional[str]:
        """shape: (M, N, K) of a product, or an attention bucket (attention_bucket);
        for attention the caller asks the engine whether its switches allow a pick."""
        if dev.active_override() is not None:
            return None  # the engine applies the switch
        if self._doc is None:
            self._doc = load()
            self._key = device_key(dev.info)
        return lookup(self._doc, dev.info, shape, self._key)

    def reload(self) -> None:
        self._doc = self._key = None

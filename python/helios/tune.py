"""The tuner: time candidate variants per shape bucket, keep the fastest that
passed its check, and store it in the tuning cache (helios/tune_cache.py) that
every op with variant=None/"auto" reads. Products (tune) and attention, either
direction (tune_attention), per head dimension, S_kv bucket, mask and dtype."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ._helios import format_variant, variant_fields
from .check import check_close, reference_matmul
from .files import FileError, read_text
from .matmul_timing import random_inputs, warmup_launches
from .tune_cache import attention_bucket, bucket, device_key, load, save

# Candidate templates, in elements: block M, N, K; subgroup block M, N; stages; split-K.
# From the H100 rounds: 128x128x64 led from 2048^3 up, 96x128
# at 3072^3, 64x64 at 1024^3, split-K where even 64x64 blocks leave SMs idle.
TEMPLATES: list[tuple[int, int, int, int, int, int, int]] = [
    (128, 128, 64, 64, 64, 2, 1),
    (128, 128, 32, 64, 64, 2, 1),
    (96, 128, 32, 48, 64, 2, 1),
    (96, 128, 64, 48, 64, 2, 1),
    (128, 96, 32, 64, 48, 2, 1),
    (64, 128, 32, 64, 64, 2, 1),
    (128, 64, 64, 64, 32, 2, 1),
    (64, 64, 32, 32, 32, 2, 1),
    (64, 64, 32, 32, 32, 2, 2),
    (128, 128, 64, 64, 64, 2, 2),
]


def candidates(dev: Any) -> list[str]:
    """Variant strings from TEMPLATES for the device's f16 -> f32 subgroup coop
    shapes (16x16x16 and 16x8x16 first), those the device accepts, plus the default."""
    table = [
        r
        for r in dev.info["cooperative_matrix_properties"]
        if r["a"] == "f16" and r["b"] == "f16" and r["c"] == "f32" and r["scope"] == "subgroup"
    ]
    shapes = sorted(
        {(r["m"], r["n"], r["k"]) for r in table},
        key=lambda s: (s != (16, 16, 16), s != (16, 8, 16), -s[0] * s[1] * s[2]),
    )[:2]
    default = dev.default_variant()
    out = [default]
    if not shapes or shapes[0][0] < 16:
        # Small coop shapes (a CPU driver's 8x8x8): its JIT takes tens of seconds per
        # large unrolled tile, so only the default and its split-K / raster neighbours.
        fields = variant_fields(default)
        if fields["path"] == "coop":
            out += [format_variant({**fields, "splitk": 2}), format_variant({**fields, "raster": 1})]
        return [v for i, v in enumerate(out) if v not in out[:i]]
    for tm, tn, tk in shapes:
        for bm, bn, bk, sm, sn, stages, splitk in TEMPLATES:
            if sm % tm or sn % tn or bm % sm or bn % sn or bk % tk:
                continue
            # Fields left out (acc, load, raster, ...) take the variant table's defaults.
            v = format_variant(
                dict(path="coop", tm=tm, tn=tn, tk=tk, bm=bm, bn=bn, bk=bk, sg_m=sm // tm, sg_n=sn // tn, stages=stages)
                | {"splitk": splitk}
            )
            try:
                v = dev.check_variant(v)
            except Exception:  # not valid on this device (limits, table): not a candidate
                continue
            if v not in out:
                out.append(v)
    return out


# Tails in every dimension, K shorter than a slab, K split unevenly (the bounds-
# checked loop and the staged per-element store); and whole blocks of every tile
# (768 rows: 256-, 96- and 48-row blocks too) with whole slabs of every BK (the
# unchecked loop and the interior stores, which no tail shape reaches).
CHECK_SHAPES = [(1, 1, 1), (65, 127, 129), (383, 384, 385), (257, 136, 1000), (768, 512, 512)]


def read_variant_list(spec: str) -> list[str]:
    """Comma-separated variant strings, or @FILE with one per line ('#' comments);
    ValueError naming the file when it cannot be read."""
    if spec.startswith("@"):
        path = spec[1:]
        try:
            text = read_text(path, 1 << 20, "a list of variants")
        except FileError as e:
            raise ValueError(f"--candidates @{e}") from None
        items = [ln.split("#")[0].strip() for ln in text.splitlines()]
    else:
        items = [v.strip() for v in spec.split(",")]
    out = [v for v in items if v]
    if not out:
        raise ValueError(f"--candidates {spec!r}: no variant given")
    return out


def _accumulates_in_f16(variant: str) -> bool:
    """fp16 accumulators get exact small-integer inputs; a string the engine does not
    parse (a caller's own candidate names) is checked as any other."""
    try:
        return variant_fields(variant)["acc"] == "f16"
    except ValueError:
        return False


def check_candidate(
    dev: Any, variant: str, seed: int = 0, shapes: Iterable[tuple[int, int, int]] = CHECK_SHAPES
) -> Optional[str]:
    """None if the variant passes the seeds' gate on `shapes` (fp32 and fp16 output),
    else a reason. fp16 accumulators cannot meet the gate on long random sums:
    they get inputs in {-1, 0, 1} (partial sums exact in fp16), as in `helios check`."""
    for m, n, k in shapes:
        if _accumulates_in_f16(variant):
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
    shape: tuple[int, ...]
    bucket: str
    variant: str
    median_ms: float
    candidates: dict = field(default_factory=dict)  # variant -> median ms, or "REJECTED: why"


def tune(
    dev: Any,
    shapes: Iterable[tuple[int, int, int]],
    *,
    variants: Optional[list[str]] = None,
    iters: int = 20,
    warmup: int = 5,
    warmup_ms: float = 200.0,
    seed: int = 0,
    log: Callable[[str], None] = lambda s: None,
    on_pick: Callable[["TuneResult"], None] = lambda r: None,
) -> list[TuneResult]:
    """Check every candidate once, then time the passing ones on each shape with
    GPU timestamps (warm-up by count and time, median of `iters`). on_pick(result)
    as each shape's pick is made (`helios tune` stores it then: an interrupted tune
    keeps what it finished)."""
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
    shapes = list(shapes)
    clock = Eta([float(m) * n * k for m, n, k in shapes])
    for i, shape in enumerate(shapes):
        a, b = random_inputs(*shape, seed=seed + 1)
        times: dict = {v: f"REJECTED: {why}" for v, why in rejected.items()}
        for v in passing:
            est = dev.time_matmul(*shape, iters=2, warmup=1, variant=v, inputs=(a, b))
            w = warmup_launches(est.median_ms, warmup, warmup_ms)
            t = dev.time_matmul(*shape, iters=iters, warmup=w, variant=v, inputs=(a, b))
            times[v] = t.median_ms
        best = min(passing, key=lambda v: times[v])
        results.append(
            TuneResult(
                shape=(shape[0], shape[1], shape[2]),
                bucket=bucket(shape),
                variant=best,
                median_ms=times[best],
                candidates=times,
            )
        )
        on_pick(results[-1])
        log(f"{'x'.join(map(str, shape)):>16} {times[best]:9.4f} ms  {best}  {clock.done(i)}")
    return results


class Eta:
    """How far a tune is and about how long is left: the time so far scaled by the work
    (FLOPs) of the shapes left over those done (each shape times every candidate alike)."""

    def __init__(self, work: list[float]) -> None:
        self.work = work
        self.start = time.monotonic()

    def done(self, i: int) -> str:
        """After shape i (0-based): '[i+1/N, 12 s, ~30 s left]'."""
        spent = time.monotonic() - self.start
        finished, left = sum(self.work[: i + 1]), sum(self.work[i + 1 :])
        eta = f", ~{spent * left / finished:.0f} s left" if left and finished > 0 else ""
        return f"[{i + 1}/{len(self.work)}, {spent:.0f} s{eta}]"


ATTN_CHECK = (2, 2, 97)  # B, H, S of the attention gate: tails on every side


def check_attention_candidate(
    dev: Any, variant: str, d: int, causal: bool, backward: bool, dtype: str, seed: int = 0
) -> Optional[str]:
    """None if the attention variant (backward: a backward variant) matches float64
    on an odd case at head dimension d within the dtype's tolerances, else why."""
    from .attention import random_qkv, reference_attention, reference_attention_backward
    from .check import tolerances

    b, h, s = ATTN_CHECK
    q, k, v = random_qkv(b, h, s, s, d, seed, dtype)
    atol, rtol = tolerances(dtype)
    if backward:
        do = random_qkv(b, h, s, s, d, seed + 1, dtype)[0]
        o, lse = dev.attention(q, k, v, causal=causal, return_lse=True)
        got = dev.attention_backward(q, k, v, o, do, lse, causal=causal, variant=variant)
        want = reference_attention_backward(q, k, v, do, causal=causal)[:3]
        r = check_close(
            np.concatenate([g.ravel() for g in got]), np.concatenate([w.ravel() for w in want]), atol=atol, rtol=rtol
        )
    else:
        r = check_close(
            dev.attention(q, k, v, causal=causal, variant=variant),
            reference_attention(q, k, v, causal=causal),
            atol=atol,
            rtol=rtol,
        )
    return None if r.passed else f"{b}x{h}x{s}x{d}: {r.line()}"


def tune_attention(
    dev: Any,
    shapes: Iterable[tuple[int, int, int, int]],
    *,
    causal: bool = False,
    backward: bool = False,
    dtype: str = "float16",
    variants: Optional[list[str]] = None,
    iters: int = 20,
    warmup: int = 5,
    warmup_ms: float = 200.0,
    seed: int = 0,
    log: Callable[[str], None] = lambda s: None,
    on_pick: Callable[["TuneResult"], None] = lambda r: None,
) -> list[TuneResult]:
    """Per (B, H, S, d) shape: every coop variant the device offers for d (and the
    direction), each checked once per head dimension, the passing ones timed with
    GPU timestamps; the fastest becomes its bucket's pick (attention_bucket)."""
    results = []
    checked: dict[tuple[int, str], Optional[str]] = {}
    shapes = list(shapes)
    clock = Eta([float(b) * h * s * s * d for b, h, s, d in shapes])
    for i, (b, h, s, d) in enumerate(shapes):
        cands = variants or [x for x in dev.attention_variants(d, dtype, backward) if x != "fa-scalar"]
        if not cands:
            raise RuntimeError(f"helios tune: no cooperative-matrix attention variant for head dimension {d} here")
        times: dict = {}
        for v in cands:
            if (d, v) not in checked:
                checked[(d, v)] = check_attention_candidate(dev, v, d, causal, backward, dtype, seed)
                if checked[(d, v)]:
                    log(f"REJECTED {v} (d={d}): {checked[(d, v)]}")
            if checked[(d, v)]:
                times[v] = f"REJECTED: {checked[(d, v)]}"
                continue
            kw = {"causal": causal, "variant": v, "dtype": dtype, "backward": backward, "seed": seed}
            est = dev.time_attention(b, h, s, d, iters=2, warmup=1, **kw)
            t = dev.time_attention(
                b, h, s, d, iters=iters, warmup=warmup_launches(est.median_ms, warmup, warmup_ms), **kw
            )
            times[v] = t.median_ms
        passing = [v for v in cands if not isinstance(times[v], str)]
        if not passing:
            raise RuntimeError(f"helios tune: every attention candidate for d={d} failed its check")
        best = min(passing, key=lambda v: times[v])
        results.append(
            TuneResult((b, h, s, d), attention_bucket(d, s, causal, backward, dtype), best, times[best], times)
        )
        on_pick(results[-1])
        label = f"{b}x{h}x{s}x{d}{'-causal' if causal else ''}{'-bwd' if backward else ''}"
        log(f"{label} {times[best]:9.4f} ms  {best}  {clock.done(i)}")
    return results


def store(results: list[TuneResult], info: Any, path: Optional[Path] = None) -> Path:
    """Merge results into the cache file for this device and write it."""
    doc = load(path)
    key = device_key(info)
    entry = doc["devices"].setdefault(key, {"buckets": {}})
    entry["device"] = {k: info[k] for k in ("name", "driver_name", "driver_info", "driver_version")}
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for r in results:
        entry["buckets"][r.bucket] = {
            "variant": r.variant,
            "median_ms": r.median_ms,
            "shape": "x".join(map(str, r.shape)),
            "candidates": r.candidates,
            "timestamp": now,
        }
    return save(doc, path)

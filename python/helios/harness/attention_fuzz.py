"""`helios check --attention`: seed 003's correctness fuzz for attention.

Seed 003's matrix (S in {448, 512, 640} x B in {16, 32, 48} x H in {4, 8, 16},
d = 64), causal and not, then N random cases with odd shapes (tails on every
side, S_q != S_kv where allowed, head dims the coop kernel takes and ones it
hands to the fallback, non-default scales) over every variant the device offers
for the head dimension. Each output is checked against float64 (sampled query
rows of every head, the seeds' atol/rtol) and, where CUDA is here, against torch
SDPA on the full output; all elements must be finite. The environment is locked
(fp16, TF32 off, deterministic algorithms) and reported."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np

from ..attention import random_qkv, reference_attention
from ..check import check_close
from .fuzz import random_dim

SEED003_MATRIX = [(b, h, s, 64) for s in (448, 512, 640) for b in (16, 32, 48) for h in (4, 8, 16)]
HEAD_DIMS = (16, 32, 40, 64, 80, 96, 128)
CHECK_ROWS = 24


@dataclass
class AttnCase:
    index: int
    shape: tuple[int, int, int, int]  # B, H, S_q, d
    seq_kv: int
    causal: bool
    scale: Optional[float]
    variant: str
    float64: str
    sdpa: Optional[str]  # None: no CUDA oracle
    passed: bool

    def label(self) -> str:
        b, h, s, d = self.shape
        kv = f" S_kv={self.seq_kv}" if self.seq_kv != s else ""
        sc = f" scale={self.scale:.3g}" if self.scale is not None else ""
        return f"{b}x{h}x{s}x{d}{kv}{' causal' if self.causal else ''}{sc} {self.variant}"


class SdpaOracle:
    """torch SDPA (its default backend choice) on the Vulkan device's CUDA twin,
    with the environment locked."""

    def __init__(self, uuid: str) -> None:
        from .sdpa import SdpaReference

        self.ref = SdpaReference(uuid)  # RuntimeError / ImportError where there is no CUDA; locks the environment

    def environment(self) -> str:
        t = self.ref.torch
        return (
            f"torch {t.__version__} SDPA on {t.cuda.get_device_name(self.ref.index)}: the inputs' dtype, TF32 off, "
            f"deterministic algorithms on"
        )

    def __call__(self, q, k, v, causal: bool, scale: float) -> np.ndarray:
        t = self.ref.torch
        import torch.nn.functional as F

        from .references import from_torch, to_torch

        tq, tk, tv = (to_torch(t, x).cuda() for x in (q, k, v))
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
        return from_torch(t, out)


def _random_case(
    rng: np.random.Generator, max_seq: int, dims: tuple[int, ...]
) -> tuple[tuple[int, int, int, int], int, bool, Optional[float]]:
    b, h = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    s = random_dim(rng, max_seq)
    d = int(rng.choice(dims))
    causal = bool(rng.integers(0, 2))
    skv = s if causal or rng.integers(0, 2) else random_dim(rng, max_seq)
    scale = None if rng.integers(0, 3) else float(rng.uniform(0.02, 0.3))
    return (b, h, s, d), skv, causal, scale


def attention_fuzz(
    dev,
    n: int,
    seed: int,
    *,
    matrix: bool = True,
    variant: Optional[str] = None,
    oracle: Optional[SdpaOracle] = None,
    max_seq: int = 300,
    atol: float = 0.02,
    rtol: float = 0.01,
    head_dims: Optional[tuple[int, ...]] = None,
    dtype: str = "float16",
) -> Iterator[AttnCase]:
    from .. import _helios

    rng = np.random.default_rng(seed)
    dims = tuple(head_dims) if head_dims else HEAD_DIMS
    if variant:  # one variant: the head dims it takes (UnsupportedError if none of the fuzz's)

        def takes(d: int) -> bool:
            try:
                dev._attention_variants(d, variant, dtype=dtype)
                return True
            except _helios.UnsupportedError:
                return False

        dims = tuple(d for d in dims if takes(d))
        if not dims or (matrix and 64 not in dims):
            raise _helios.UnsupportedError(
                f"attention variant {variant} takes none of the fuzz's head "
                f"dimensions {HEAD_DIMS} (the seed 003 matrix needs d=64)"
            )
    cases = [
        (shape, shape[2], causal, None) for shape in (SEED003_MATRIX if matrix else []) for causal in (False, True)
    ]
    cases += [_random_case(rng, max_seq, dims) for _ in range(n)]
    per_d: dict[int, list[str]] = {}
    for i, (shape, skv, causal, scale) in enumerate(cases):
        b, h, s, d = shape
        if variant:
            var = variant
        else:
            vs = per_d.setdefault(d, dev.attention_variants(d, dtype=dtype))
            var = vs[i % len(vs)]
        q, k, v = random_qkv(b, h, s, skv, d, seed=seed * 1000 + i, dtype=dtype)
        out = dev.attention(q, k, v, causal=causal, scale=scale, variant=var)
        rows = np.sort(rng.choice(s, size=min(CHECK_ROWS, s), replace=False))
        r64 = check_close(
            out[:, :, rows], reference_attention(q, k, v, causal=causal, scale=scale, rows=rows), atol=atol, rtol=rtol
        )
        finite = bool(np.isfinite(out.astype(np.float32)).all())
        ok = r64.passed and finite
        sdpa_line = None
        if oracle is not None:
            sc = scale if scale is not None else 1.0 / np.sqrt(d)
            rs = check_close(out, oracle(q, k, v, causal, sc), atol=atol, rtol=rtol)
            sdpa_line = rs.line()
            ok = ok and rs.passed
        yield AttnCase(
            i, shape, skv, causal, scale, var, r64.line() + ("" if finite else " NON-FINITE OUTPUT"), sdpa_line, ok
        )

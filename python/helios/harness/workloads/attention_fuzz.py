"""`helios check --attention`: the attention correctness fuzz, after the grid of 27 cases
the attention protocol was validated with.

Seed 003's matrix (S in {448, 512, 640} x B in {16, 32, 48} x H in {4, 8, 16},
d = 64), causal and not, then N random cases with odd shapes (tails on every
side, S_q != S_kv where allowed, head dims the coop kernel takes and ones it
hands to the fallback, non-default scales) over every variant the device offers
for the head dimension. Each output is checked against float64 (sampled query
rows of every head, the seeds' atol/rtol) and, where CUDA is here, against torch
SDPA on the full output; all elements must be finite. The environment is locked
(fp16, TF32 off, deterministic algorithms) and reported.

--backward fuzzes the backward instead: per case the forward (default variant)
gives O and the log-sum-exp, the backward variant under test gives dQ, dK and dV,
checked whole for a few sampled heads against float64 and, with CUDA, whole
against torch SDPA's backward (autograd through its default backend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np

from ...attention import random_qkv, reference_attention, reference_attention_backward
from ...check import check_close
from .fuzz import random_dim

GRID_MATRIX = [(b, h, s, 64) for s in (448, 512, 640) for b in (16, 32, 48) for h in (4, 8, 16)]
HEAD_DIMS = (16, 32, 40, 64, 80, 96, 128)
# On a CPU device (lavapipe) each head dimension's kernels are their own JIT compile,
# growing with d (the forward ~15 s at d=64 and ~35 s at d=128, the backward ~55 and
# ~180 s, on two cores); d is a specialization constant of the same code, so the
# default there stops at 64 (--head-dims takes the others).
CPU_HEAD_DIMS = (16, 32, 40, 64)


def default_head_dims(dev) -> tuple[int, ...]:
    return CPU_HEAD_DIMS if dev.info["device_type"] == "cpu" else HEAD_DIMS


CHECK_ROWS = 24
CHECK_HEADS = 3  # backward: (batch, head) pairs checked whole against float64


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

    def backward(self, q, k, v, do, causal: bool, scale: float) -> tuple:
        """(dQ, dK, dV) through autograd and SDPA's default backend."""
        t = self.ref.torch
        import torch.nn.functional as F

        from .references import from_torch, to_torch

        tq, tk, tv = (to_torch(t, x).cuda().requires_grad_(True) for x in (q, k, v))
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
        grads = t.autograd.grad(out, (tq, tk, tv), to_torch(t, do).cuda())
        return tuple(from_torch(t, g) for g in grads)


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
    backward: bool = False,
    announce: Optional[Callable[[str], None]] = None,
) -> Iterator[AttnCase]:
    """The fuzz's cases, each run and checked as it is yielded. announce: told before a
    case that is the first with its variant, head dim and mask (its kernels compile
    then unless cached: minutes on a CPU device)."""
    from ... import _helios

    rng = np.random.default_rng(seed)
    dims = asked = tuple(head_dims) if head_dims else default_head_dims(dev)
    if variant:  # one variant: the head dims it takes (UnsupportedError if none of the fuzz's)

        def takes(d: int) -> bool:
            try:
                dev._attention_variants(d, variant, dtype=dtype, backward=backward)
                return True
            except _helios.UnsupportedError:
                return False

        dims = tuple(d for d in dims if takes(d))
        if not dims or (matrix and 64 not in dims):
            raise _helios.UnsupportedError(
                f"attention variant {variant} takes none of the fuzz's head "
                f"dimensions {asked} (the 27-case grid needs d=64)"
            )
    cases: list[tuple[tuple[int, int, int, int], int, bool, Optional[float]]] = [
        (shape, shape[2], causal, None) for shape in (GRID_MATRIX if matrix else []) for causal in (False, True)
    ]
    cases += [_random_case(rng, max_seq, dims) for _ in range(n)]
    per_d: dict[int, list[str]] = {}
    first_of: set[tuple[str, int, bool]] = set()
    for i, (shape, skv, causal, scale) in enumerate(cases):
        b, h, s, d = shape
        if variant:
            var = variant
        else:
            vs = per_d.setdefault(d, dev.attention_variants(d, dtype=dtype, backward=backward))
            var = vs[i % len(vs)]
        if announce is not None and (var, d, causal) not in first_of:
            first_of.add((var, d, causal))
            what = "backward" if backward else "forward"
            announce(
                f"case #{i}: the first {what} with {var} at d={d}{' causal' if causal else ''}: compiling unless cached"
            )
        q, k, v = random_qkv(b, h, s, skv, d, seed=seed * 1000 + i, dtype=dtype)
        if backward:
            yield _backward_case(dev, rng, i, q, k, v, causal, scale, var, oracle, atol, rtol, seed)
            continue
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


def _backward_case(dev, rng, i, q, k, v, causal, scale, var, oracle, atol, rtol, seed) -> AttnCase:
    b, h, s, d = q.shape
    skv = k.shape[2]
    do = random_qkv(b, h, s, s, d, seed=seed * 1000 + i + 500_000, dtype=q.dtype)[0]
    o, lse = dev.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    grads = dev.attention_backward(q, k, v, o, do, lse, causal=causal, scale=scale, variant=var)
    picks = rng.choice(b * h, size=min(CHECK_HEADS, b * h), replace=False)
    got, want = [], []
    for x in sorted(int(p) for p in picks):
        bi, hi = divmod(x, h)
        one = (slice(bi, bi + 1), slice(hi, hi + 1))
        ref = reference_attention_backward(*(t[one] for t in (q, k, v, do)), causal=causal, scale=scale)
        got += [g[one].ravel() for g in grads]
        want += [r.ravel() for r in ref[:3]]
    r64 = check_close(np.concatenate(got), np.concatenate(want), atol=atol, rtol=rtol)
    finite = all(bool(np.isfinite(np.asarray(g, np.float32)).all()) for g in grads)
    ok = r64.passed and finite
    sdpa_line = None
    if oracle is not None:
        sc = scale if scale is not None else 1.0 / np.sqrt(d)
        theirs = oracle.backward(q, k, v, do, causal, sc)
        rs = check_close(
            np.concatenate([g.ravel() for g in grads]),
            np.concatenate([x.ravel() for x in theirs]),
            atol=atol,
            rtol=rtol,
        )
        sdpa_line = rs.line()
        ok = ok and rs.passed
    return AttnCase(
        i, (b, h, s, d), skv, causal, scale, var, r64.line() + ("" if finite else " NON-FINITE OUTPUT"), sdpa_line, ok
    )

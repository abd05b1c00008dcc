"""`helios check --fuzz N`: random products vs float64. Case i runs variant
i (cycling through every variant the device lists, then random ones), with a
random odd shape and output dtype, and an op form cycling through plain,
either operand transposed (a transposed view, read as a layout), batched with
broadcasting, and the fused epilogue (alpha, beta with C, bias, an activation).
The opt-in coop2 family runs plain products only (it refuses the rest); the
matrix-vector kernel (gemv) gets M <= 8 in three cases of four."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..._helios import variant_fields
from ...check import check_close, reference_matmul
from ...device import Device
from ...dtypes import as_dtype
from ...gemm import ACTIVATIONS, activation_code, host_epilogue

PRIMES = [1, 2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 131, 251, 257, 383, 509, 521, 631, 701]
# fp16 accumulators cannot meet the gate on random normals. They
# get inputs in {-1, 0, 1} instead: every partial sum is an integer below 2048, exact
# in fp16, so any indexing or tail error still fails.


@dataclass
class FuzzCase:
    index: int
    shape: tuple[int, int, int]
    variant: str
    form: str
    out_dtype: str
    fails: int
    total: int
    line: str

    @property
    def passed(self) -> bool:
        return self.fails == 0


def random_dim(rng: np.random.Generator, hi: int) -> int:
    kind = rng.integers(0, 3)
    if kind == 0:
        return int(rng.integers(1, hi + 1))
    if kind == 1:
        return int(rng.choice([p for p in PRIMES if p <= hi]))
    base = int(rng.choice([8, 16, 32, 64, 128]))  # tile multiples and their tails
    return int(np.clip(base * int(rng.integers(1, max(2, hi // base + 1))) + int(rng.integers(-1, 2)), 1, hi))


FORMS = ("plain", "trans_a", "trans_b", "batched", "epilogue")


def fuzz(
    dev: Device,
    n: int,
    seed: int,
    *,
    variants: Optional[list[str]] = None,
    max_dim: int = 700,
    atol: float = 0.02,
    rtol: float = 0.01,
    forms: tuple[str, ...] = FORMS,
    dtype: str = "float16",
    announce: Optional[Callable[[str], None]] = None,
    reuse_pipelines: bool = False,
):
    """Yields one FuzzCase per case; variants default to every one the device lists
    (for bfloat16: every one valid for bfloat16 inputs). dtype: the inputs' type;
    outputs are that type or float32. announce: told before a case that is the first of
    its variant, op form and output type (its pipeline compiles first: seconds to
    minutes on a CPU device). reuse_pipelines: once every variant and op form has run,
    each case draws its variant, op form and output type from those already run, so
    only its shape is new (on a CPU device every new combination is a compile of up to
    minutes)."""
    rng = np.random.default_rng(seed)
    vs = variants or bf16_aware_variants(dev, dtype)
    first_of: dict[tuple[str, str, str], None] = {}  # in first-use order
    seen_variants: set[str] = set()
    seen_forms: set[str] = set()
    # coop2 runs the plain form only: where every variant is coop2, that is every form
    every_form = {"plain"} if all(variant_fields(v)["path"] == "coop2" for v in vs) else set(forms)
    for i in range(n):
        v = vs[i % len(vs)] if i < len(vs) else vs[int(rng.integers(0, len(vs)))]
        m, nn, k = (random_dim(rng, max_dim) for _ in range(3))
        od = "float32" if rng.integers(0, 2) else dtype
        fields = variant_fields(v)
        # forms cycle too, shifted each pass over the variants, so both cover everything
        form = "plain" if fields["path"] == "coop2" else forms[(i // len(vs) + i % len(vs)) % len(forms)]
        if reuse_pipelines and seen_variants >= set(vs) and seen_forms >= every_form:
            v, form, od = list(first_of)[int(rng.integers(0, len(first_of)))]
            fields = variant_fields(v)
        batch = int(rng.integers(2, 4)) if form == "batched" else 1
        if (v, form, od) not in first_of:
            first_of[(v, form, od)] = None
            seen_variants.add(v)
            seen_forms.add(form)
            if announce is not None:
                announce(
                    f"case #{i}: the first {form} product with {v}, out={od}: its pipeline compiles now unless cached"
                )
        if form == "batched":  # keep the work of a case near a 2-D one
            m = max(1, m // batch)
        if fields["path"] == "gemv" and rng.integers(0, 4):  # mostly the few rows it is for
            m = int(rng.integers(1, 9))

        def operand(shape):
            if fields["acc"] == "f16":  # exact in fp16 partial sums, so the gate still applies
                return rng.integers(-1, 2, size=shape).astype(in_dtype)
            return rng.standard_normal(shape, dtype=np.float32).astype(in_dtype)

        in_dtype = as_dtype(dtype)
        a = operand((batch, m, k) if form == "batched" else (m, k))
        b = operand((k, nn))  # broadcast across the batch
        kw: dict = {}
        ref = reference_matmul(a, b)
        if form == "trans_a":
            a = np.ascontiguousarray(a.T).T  # an F-ordered view: the kernel reads it transposed
        elif form == "trans_b":
            b = np.ascontiguousarray(b.T).T
        elif form == "epilogue":
            act = [x for x in ACTIVATIONS if x not in (None, "none", "gelu_tanh")][int(rng.integers(0, 3))]
            c = rng.standard_normal((m, nn)).astype(np.float32 if od == "float32" else in_dtype)
            bias = rng.standard_normal(nn).astype(np.float32)
            kw = dict(alpha=0.5, beta=-1.25, c=c, bias=bias, activation=act)
            ref = host_epilogue(ref, bias=bias, act=activation_code(act), alpha=0.5, beta=-1.25, c=c)
            form = f"epilogue({act})"
        r = check_close(dev.matmul(a, b, out_dtype=od, variant=v, **kw), ref, atol=atol, rtol=rtol)
        yield FuzzCase(
            i, (m, nn, k), v, form if form != "batched" else f"batched({batch})", od, r.fails, r.total, r.line()
        )


def bf16_aware_variants(dev: Device, dtype: str) -> list[str]:
    """The device's variants that take inputs of dtype (all of them for float16)."""
    if dtype == "float16":
        return dev.variants()
    from ..._helios import UnsupportedError

    out = []
    for v in dev.variants():
        try:
            out.append(dev.check_variant(v, dtype))
        except UnsupportedError:
            pass
    return out

"""The correctness gate of the seeds: |h - ref| <= atol + rtol * |ref| elementwise.

NaN or Inf in the result never passes (a poisoned, unwritten element is NaN).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

ATOL = 0.02
RTOL = 0.01
# The gate per input/output type (|h - ref| <= atol + rtol |ref| against float64 of
# the rounded inputs): float16 as the seeds state; bfloat16 keeps 8 significant
# bits, so its rtol is two bfloat16 ulps at 1.0 (2 * 2^-7) instead of 0.01.
TOLERANCES = {"float16": (ATOL, RTOL), "bfloat16": (0.02, 0.016)}


def tolerances(dtype: str, atol: float = ATOL, rtol: float = RTOL) -> tuple[float, float]:
    """The gate for dtype: the given atol/rtol for float16 (the seeds' defaults unless
    a flag changed them), at least bfloat16's for bfloat16."""
    if dtype == "bfloat16":
        return max(atol, TOLERANCES["bfloat16"][0]), max(rtol, TOLERANCES["bfloat16"][1])
    return atol, rtol


@dataclass(frozen=True)
class CheckResult:
    fails: int
    total: int
    max_abs_err: float
    max_rel_err: float
    nonfinite: int
    atol: float
    rtol: float

    @property
    def passed(self) -> bool:
        return self.fails == 0

    def __bool__(self) -> bool:
        """The verdict: ``assert check_close(h, ref)`` fails when any element fails."""
        return self.passed

    def line(self) -> str:
        """The seeds' canonical check line, e.g. ``fails=0/147456``."""
        return (
            f"fails={self.fails}/{self.total} max_abs_err={self.max_abs_err:.3g} "
            f"max_rel_err={self.max_rel_err:.3g} (atol={self.atol}, rtol={self.rtol})"
        )

    def as_dict(self) -> dict:
        d = asdict(self)
        d["passed"] = self.passed
        return d


def reference_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 product of the given (already fp16-rounded) inputs."""
    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)


def check_close(result: np.ndarray, ref: np.ndarray, *, atol: float = ATOL, rtol: float = RTOL) -> CheckResult:
    """Elementwise ``|result - ref| <= atol + rtol * |ref|``; NaN or Inf in result never
    passes. The CheckResult's truth is its verdict. ValueError when the shapes differ."""
    result, ref = np.asarray(result), np.asarray(ref)
    if result.shape != ref.shape:
        raise ValueError(f"check: result shape {result.shape} != reference shape {ref.shape}")
    if not (atol >= 0 and rtol >= 0) or not np.isfinite(atol) or not np.isfinite(rtol):
        raise ValueError(f"check: atol and rtol must be finite and >= 0, got atol={atol}, rtol={rtol}")
    h = np.asarray(result, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(h)
    err = np.abs(h - r)
    bad = ~finite | ~(err <= atol + rtol * np.abs(r))
    err_f = np.where(finite, err, 0.0)
    rel = err_f / np.maximum(np.abs(r), 1e-30)
    return CheckResult(
        fails=int(bad.sum()),
        total=int(h.size),
        max_abs_err=float(err_f.max()) if h.size else 0.0,
        max_rel_err=float(rel.max()) if h.size else 0.0,
        nonfinite=int((~finite).sum()),
        atol=float(atol),
        rtol=float(rtol),
    )


def assert_close(result: np.ndarray, ref: np.ndarray, *, atol: float = ATOL, rtol: float = RTOL) -> CheckResult:
    """check_close that raises AssertionError (with the check line) on failure, like
    numpy.testing.assert_allclose; returns the CheckResult when it passes."""
    r = check_close(result, ref, atol=atol, rtol=rtol)
    if not r.passed:
        raise AssertionError(f"not close: {r.line()}" + (f", {r.nonfinite} non-finite" if r.nonfinite else ""))
    return r

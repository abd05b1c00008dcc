"""The work each op does, counted one way everywhere (timings, bench rows,
reports, suites): floating-point operations and the least bytes moved."""

from __future__ import annotations


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """2*M*N*K per product (a multiply and an add per term)."""
    return 2.0 * batch * m * n * k


def attention_flops(b: int, h: int, sq: int, skv: int, d: int, causal: bool = False) -> float:
    """4*B*H*S_q*S_kv*d (Q K^T and P V, a multiply and an add each); causal counts
    the half of the score matrix that is computed."""
    f = 4.0 * b * h * sq * skv * d
    return f / 2 if causal else f


def attention_backward_flops(b: int, h: int, sq: int, skv: int, d: int, causal: bool = False) -> float:
    """2.5x the forward's (FlashAttention-2's count: dV, dP, dQ, dK and the
    recomputed scores, five products of the forward's two-product size each)."""
    return 2.5 * attention_flops(b, h, sq, skv, d, causal)


def attention_backward_bytes(b: int, h: int, sq: int, skv: int, d: int) -> int:
    """Bytes a backward must move at least: Q, K, V, O, dO read, dQ, dK, dV written
    (fp16), the log-sum-exp read (fp32)."""
    return 2 * b * h * d * (4 * sq + 4 * skv) + 4 * b * h * sq


def attention_bytes(b: int, h: int, sq: int, skv: int, d: int) -> int:
    """Bytes a forward must move at least: Q, K, V read and O written, fp16."""
    return 2 * b * h * d * (2 * sq + 2 * skv)


def tflops(flops: float, ms: float) -> float:
    """TFLOP/s of `flops` done in `ms` milliseconds."""
    return flops / (ms * 1e-3) / 1e12

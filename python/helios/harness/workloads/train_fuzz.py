"""`helios check --train`: a training step's own ops (helios.train_ops) against float64
on random cases, one op a case in turn: the embedding (exact: one fp32 add), its
token and position gradients, cross-entropy (the per-row losses and the logits'
gradient, within one rounding of the 16-bit type), column sums, sums of squares, and
AdamW with torch's gradient clipping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ... import train_ops as T
from ...check import check_close
from ...dtypes import as_dtype, bfloat16, float16

OPS = ("embed", "embed_backward", "cross_entropy", "column_sum", "sum_squares", "adamw")


@dataclass
class TrainCase:
    index: int
    op: str
    shape: str
    passed: bool
    line: str

    def label(self) -> str:
        return f"{self.op} {self.shape}"


def _f32(dev: Any, a: np.ndarray) -> Any:
    return dev.upload(np.ascontiguousarray(a, np.float32), dtype="float32")


def _ids(dev: Any, a: np.ndarray) -> Any:
    return dev.upload(np.ascontiguousarray(a), dtype="int32")


def _close(got: np.ndarray, want: np.ndarray, atol: float = 1e-5, rtol: float = 1e-5) -> tuple[bool, str]:
    r = check_close(np.asarray(got, np.float64).reshape(1, -1), np.asarray(want, np.float64).reshape(1, -1),
                    atol=atol, rtol=rtol)  # fmt: skip
    return r.passed, r.line()


def _embed(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    vocab, batch, seq, d = (int(rng.integers(1, hi)) for hi in (300, 5, 65, 300))
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    tok, pos = rng.standard_normal((vocab, d)).astype(np.float32), rng.standard_normal((seq, d)).astype(np.float32)
    out = dev.empty((batch * seq, d), "float32")
    T.embed(_ids(dev, ids), _f32(dev, tok), _f32(dev, pos), out)
    want = tok[ids.reshape(-1)] + np.tile(pos, (batch, 1))
    same = np.array_equal(out.numpy(), want)
    return f"vocab={vocab} batch={batch} seq={seq} d={d}", same, "" if same else "differs from tok[ids] + pos (exact)"


def _embed_backward(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    vocab, batch, seq, d = (int(rng.integers(1, hi)) for hi in (300, 5, 65, 300))
    ids = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    g = rng.standard_normal((batch * seq, d)).astype(np.float32)
    tg, pg = dev.empty((vocab, d), "float32"), dev.empty((seq, d), "float32")
    T.embed_backward(_ids(dev, ids), _f32(dev, g), tg, pg, seq)
    want_t = np.zeros((vocab, d))
    np.add.at(want_t, ids.reshape(-1), g.astype(np.float64))
    ok_t, line_t = _close(tg.numpy(), want_t)
    ok_p, line_p = _close(pg.numpy(), g.astype(np.float64).reshape(batch, seq, d).sum(0))
    return f"vocab={vocab} batch={batch} seq={seq} d={d}", ok_t and ok_p, f"token {line_t}; position {line_p}"


def cross_entropy_reference(x: np.ndarray, targets: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses logsumexp(x[r]) - x[r, targets[r]] and the gradient (softmax(x) -
    onehot) * scale, in float64."""
    x64, rows = x.astype(np.float64), x.shape[0]
    m = x64.max(1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x64 - m).sum(1))
    grad = np.exp(x64 - lse[:, None])
    grad[np.arange(rows), targets] -= 1.0
    return lse - x64[np.arange(rows), targets], grad * scale


def _cross_entropy(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    rows, classes = int(rng.integers(1, 41)), int(rng.integers(2, 3001))
    x = (rng.standard_normal((rows, classes)) * 4).astype(dt)
    tgt = rng.integers(0, classes, rows).astype(np.int32)
    losses, grad = dev.empty((rows,), "float32"), dev.empty((rows, classes), dt.name)
    T.cross_entropy(dev.upload(x, dtype=dt.name), _ids(dev, tgt), losses, grad, 1.0 / rows)
    want_l, want_g = cross_entropy_reference(x, tgt, 1.0 / rows)
    ok_l, line_l = _close(losses.numpy(), want_l, atol=1e-4, rtol=1e-5)
    ulp = 2.0**-8 if dt == bfloat16 else 2.0**-11  # one rounding of the gradient
    err = float(np.abs(grad.numpy().astype(np.float64) - want_g).max())
    ok_g = err <= ulp * float(np.abs(want_g).max()) + 1e-7
    return f"rows={rows} classes={classes}", ok_l and ok_g, f"losses {line_l}; gradient max error {err:.3g}"


def _column_sum(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    rows, cols = int(rng.integers(1, 501)), int(rng.integers(1, 301))
    start = int(rng.integers(0, cols))
    n = int(rng.integers(1, cols - start + 1))
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = dev.empty((n,), "float32")
    T.column_sum(_f32(dev, x), out, scale=0.5, start=start)
    ok, line = _close(out.numpy(), 0.5 * x[:, start : start + n].astype(np.float64).sum(0), atol=1e-4)
    return f"rows={rows} cols={cols} columns {start}..{start + n}", ok, line


def _sum_squares(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    n = int(rng.integers(1, 20001))
    x = rng.standard_normal(n).astype(np.float32)
    chunks = -(-n // T.SQ_CHUNK)
    out = dev.empty((chunks,), "float32")
    T.sum_squares(_f32(dev, x), out)
    pad = np.zeros(chunks * T.SQ_CHUNK)
    pad[:n] = x.astype(np.float64) ** 2
    ok, line = _close(out.numpy(), pad.reshape(chunks, -1).sum(1), atol=1e-3)
    return f"n={n}", ok, line


def _adamw(dev: Any, rng: Any, dt: Any) -> tuple[str, bool, str]:
    n, t = int(rng.integers(1, 5001)), int(rng.integers(1, 11))
    lr, wd, b1, b2, eps = 10.0 ** rng.uniform(-4, -2), float(rng.choice([0.0, 0.1])), 0.9, 0.95, 1e-8
    p, m = rng.standard_normal(n), rng.standard_normal(n) * 0.01
    v, g = np.abs(rng.standard_normal(n)) * 1e-4, rng.standard_normal(n) * 0.1
    norm2 = float(np.sum(g.astype(np.float32).astype(np.float64) ** 2))
    words = np.array([t, np.float32(lr).view(np.int32), np.float32(norm2).view(np.int32)], np.int32)
    tp, tm, tv = _f32(dev, p), _f32(dev, m), _f32(dev, v)
    T.adamw(tp, tm, tv, _f32(dev, g), _ids(dev, words), betas=(b1, b2), eps=eps, weight_decay=wd, max_norm=1.0,
            norm_word=2)  # fmt: skip
    p, m, v, g = (a.astype(np.float32).astype(np.float64) for a in (p, m, v, g))
    g = g * min(1.0, 1.0 / (np.sqrt(norm2) + 1e-6))
    p = p * (1 - np.float32(lr) * wd)
    m = m + (1 - b1) * (g - m)
    v = b2 * v + (1 - b2) * g * g
    p = p - np.float32(lr) / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    ok, line = _close(tp.numpy(), p, atol=1e-6, rtol=1e-5)
    return f"n={n} step={t} lr={lr:.2g} weight_decay={wd}", ok, line


CASES: dict[str, Callable[[Any, Any, Any], tuple[str, bool, str]]] = {
    "embed": _embed,
    "embed_backward": _embed_backward,
    "cross_entropy": _cross_entropy,
    "column_sum": _column_sum,
    "sum_squares": _sum_squares,
    "adamw": _adamw,
}


def train_fuzz(dev: Any, n: int, seed: int, dtype: str = "bfloat16") -> Iterator[TrainCase]:
    """n random cases, the ops in turn (OPS), seeded."""
    dt = as_dtype(dtype, "train fuzz: dtype", (float16, bfloat16))
    rng = np.random.default_rng(seed)
    for i in range(n):
        op = OPS[i % len(OPS)]
        shape, passed, line = CASES[op](dev, rng, dt)
        yield TrainCase(i, op, shape, passed, line)

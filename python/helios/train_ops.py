"""A training step's ops besides products, attention and LayerNorm, on Tensors
(train.comp and optim.comp through Device._train and Device._adamw): each checks its
Tensors' shapes and dtypes here, with messages that name them, and runs like any
other operation (synchronously, inside a group, or recorded into a capture).

- ``embed(ids, tokens, positions, out)``: out[r] = tokens[ids[r]] + positions[r % seq]
- ``embed_backward(ids, grad, token_grad, position_grad, seq)``: the tables' gradients
  (the token rows' sums in increasing row order: deterministic)
- ``cross_entropy(logits, targets, losses, grad, scale)``: per-row losses and the
  logits' gradient (softmax - onehot) * scale
- ``column_sum(x, out, scale)``: out = scale * x.sum(0) (bias and LayerNorm gradients,
  the mean loss)
- ``sum_squares(x, out, at)``: out[at + w] = the sum of squares of x's w-th chunk of
  SQ_CHUNK elements (a gradient norm's partial sums)
- ``rope_rows(x, table, heads, head_dim, start)`` and ``swiglu_rows(x, out)``: a
  prompt's rotary positions and SwiGLU, row by row (a Llama prefill's)
- ``adamw(p, m, v, g, words, ...)``: torch.optim.AdamW's update, its step count and
  learning rate read from ``words`` (int32: [step, float32 bits of lr])
"""

from __future__ import annotations

from typing import Any, Optional

from .dtypes import bfloat16, float16, float32, int32
from .tensor import Tensor
from .validate import count, real

EMBED, TOKEN_GRAD, POSITION_GRAD, CROSS_ENTROPY, COLUMN_SUM, SUM_SQUARES, ROPE_ROWS, SWIGLU_ROWS = range(8)
TABLE16, NO_POSITIONS = 1, 2  # the embedding's flags (train.comp)
SQ_CHUNK = 4096  # elements a sum of squares' partial covers (train.comp)


def _tensor(op: str, name: str, t: Any, dtypes: tuple, ndim: Optional[int] = None) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a helios.Tensor, not {type(t).__name__}")
    if t.dtype not in dtypes:
        raise TypeError(f"{op}: {name} has dtype {t.dtype}; it must be {' or '.join(d.name for d in dtypes)}")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{op}: {name} must be {ndim}-D, got shape {t.shape}")
    return t


def _rows(op: str, name: str, t: Tensor, want: tuple) -> None:
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{op}: {name} has shape {t.shape}; expected {tuple(want)}")


def embed(ids: Tensor, tokens: Tensor, positions: Optional[Tensor], out: Tensor) -> Tensor:
    """out (rows, d) fp32 = tokens[ids] + positions[r % seq]: ids int32 (rows,) or (batch,
    seq) (a 2-D batch's seq must be positions' rows, else rows % positions' rows), the
    token table (vocab, d) fp32, or float16 / bfloat16 (widened exactly), positions
    (seq, d) fp32 or None (none added). An id outside the table makes its row NaN."""
    op = "embed"
    _tensor(op, "ids", ids, (int32,))
    tok = _tensor(op, "tokens", tokens, (float32, float16, bfloat16), 2)
    rows, d = ids.size, tok.shape[1]
    flags = TABLE16 if tok.dtype != float32 else 0
    seq = 0
    if positions is None:
        flags |= NO_POSITIONS
    else:
        pos = _tensor(op, "positions", positions, (float32,), 2)
        if pos.shape[1] != d:
            raise ValueError(f"embed: tokens {tok.shape} and positions {pos.shape} differ in width")
        if ids.ndim == 2 and ids.shape[1] != pos.shape[0]:
            raise ValueError(
                f"embed: ids {ids.shape} is a batch of {ids.shape[1]} positions; the table has {pos.shape[0]}"
            )
        seq = pos.shape[0]
    _rows(op, "out", _tensor(op, "out", out, (float32,)), (rows, d))
    ids.device._train(
        EMBED, out, ids=ids, src=tok, src2=positions, rows=rows, n=d, seq=seq, table_rows=tok.shape[0],
        flags=flags, dtype=tok.dtype.name if flags & TABLE16 else "float16",
    )  # fmt: skip
    return out


def rope_rows(x: Tensor, table: Tensor, heads: int, head_dim: int, start: int = 0) -> None:
    """Rotary positions, in place, on the first `heads` heads of `head_dim` elements of
    each row of x (rows, cols) in float16 or bfloat16, row r at position start + r: each
    pair (i, i + head_dim/2) turned by the angle whose cos and sin are table[pos, i] and
    table[pos, head_dim/2 + i] (fp32 (positions, head_dim): Llama's rotate_half)."""
    op = "rope_rows"
    t = _tensor(op, "x", x, (float16, bfloat16), 2)
    tab = _tensor(op, "table", table, (float32,), 2)
    heads = count(f"{op}: heads", heads, 1, 2**16)
    head_dim = count(f"{op}: head_dim", head_dim, 2, 2**16)
    start = count(f"{op}: start", start, 0, 2**31)
    rows, cols = t.shape
    if head_dim % 2 or heads * head_dim > cols or tab.shape[1] != head_dim:
        raise ValueError(f"{op}: {heads} heads of {head_dim} (even) in rows of {cols}; table {tab.shape}")
    if start + rows > tab.shape[0]:
        raise ValueError(f"{op}: positions {start}..{start + rows - 1} past the table's {tab.shape[0]} rows")
    t.device._train(ROPE_ROWS, t, src2=tab, aux=t, rows=rows, n=heads, seq=head_dim, ld=t.pitch, off=start,
                    dtype=t.dtype.name)  # fmt: skip


def swiglu_rows(x: Tensor, out: Tensor) -> Tensor:
    """out[r, i] = silu(x[r, i]) x[r, n + i]: x (rows, 2n) of [gate | up] rows, out (rows,
    n), float16 or bfloat16."""
    op = "swiglu_rows"
    t = _tensor(op, "x", x, (float16, bfloat16), 2)
    rows, cols = t.shape
    if cols % 2:
        raise ValueError(f"{op}: x {t.shape} is not rows of [gate | up] (an even width)")
    o = _tensor(op, "out", out, (t.dtype,))
    _rows(op, "out", o, (rows, cols // 2))
    t.device._train(SWIGLU_ROWS, o, src=t, aux=o, rows=rows, n=cols // 2, ld=t.pitch, dtype=t.dtype.name)
    return out


def embed_backward(
    ids: Tensor,
    grad: Tensor,
    token_grad: Optional[Tensor],
    position_grad: Optional[Tensor],
    seq: int,
    accumulate: bool = False,
) -> None:
    """The embedding's backward at grad (rows, d) fp32: token_grad (vocab, d) fp32 (+)=
    each table row's rows summed (in increasing row order), position_grad (seq, d) fp32
    (+)= each position's rows summed; either may be None. accumulate: add to what they
    hold (a tied table whose head gradient is there already)."""
    op = "embed_backward"
    _tensor(op, "ids", ids, (int32,))
    g = _tensor(op, "grad", grad, (float32,), 2)
    rows, d = g.shape
    if ids.size != rows:
        raise ValueError(f"{op}: ids has {ids.size} elements; grad has {rows} rows")
    seq = count(f"{op}: seq", seq, 1, rows)
    dev = g.device
    if token_grad is not None:
        tg = _tensor(op, "token_grad", token_grad, (float32,), 2)
        if tg.shape[1] != d:
            raise ValueError(f"{op}: token_grad {tg.shape} and grad {g.shape} differ in width")
        dev._train(TOKEN_GRAD, tg, ids=ids, src=g, rows=rows, n=d, table_rows=tg.shape[0], accumulate=accumulate)
    if position_grad is not None:
        pg = _tensor(op, "position_grad", position_grad, (float32,), 2)
        _rows(op, "position_grad", pg, (seq, d))
        dev._train(POSITION_GRAD, pg, src=g, rows=rows, n=d, seq=seq, accumulate=accumulate)


def cross_entropy(logits: Tensor, targets: Tensor, losses: Tensor, grad: Tensor, scale: float) -> None:
    """Per row r of logits (rows, classes) in float16 or bfloat16: losses[r] (fp32) =
    logsumexp(logits[r]) - logits[r, targets[r]], and grad (logits' shape and dtype; may
    be logits itself) = (softmax(logits[r]) - onehot(targets[r])) * scale (1 / rows: the
    mean's gradient). A target outside the classes makes its row NaN."""
    op = "cross_entropy"
    x = _tensor(op, "logits", logits, (float16, bfloat16), 2)
    rows, classes = x.shape
    _tensor(op, "targets", targets, (int32,))
    if targets.size != rows:
        raise ValueError(f"{op}: targets has {targets.size} elements; logits has {rows} rows")
    _rows(op, "losses", _tensor(op, "losses", losses, (float32,)), (rows,))
    g = _tensor(op, "grad", grad, (x.dtype,))
    _rows(op, "grad", g, x.shape)
    scale = real(f"{op}: scale", scale)
    x.device._train(
        CROSS_ENTROPY, losses, ids=targets, src=x, aux=g, rows=rows, n=classes, scale=scale, dtype=x.dtype.name
    )


def column_sum(
    x: Tensor, out: Tensor, scale: float = 1.0, accumulate: bool = False, start: int = 0, n: Optional[int] = None,
    at: int = 0,
) -> Tensor:  # fmt: skip
    """out[at:at + n] (fp32, or an int32 tensor of words taking float32 bits) (+)= scale *
    x[:, start:start + n].sum(0) for x (rows, cols) fp32; n: out's size less at by default."""
    op = "column_sum"
    src = _tensor(op, "x", x, (float32,), 2)
    rows, cols = src.shape
    o = _tensor(op, "out", out, (float32, int32), 1)
    at = count(f"{op}: at", at, 0, o.shape[0] - 1)
    n = o.shape[0] - at if n is None else count(f"{op}: n", n, 1, o.shape[0] - at)
    start = count(f"{op}: start", start, 0, cols - 1)
    if start + n > cols:
        raise ValueError(f"{op}: columns {start}..{start + n} of x {src.shape}")
    src.device._train(
        COLUMN_SUM,
        o,
        src=src,
        rows=rows,
        n=n,
        ld=src.pitch,
        off=start,
        scale=real(f"{op}: scale", scale),
        accumulate=accumulate,
        dst_off=at,
    )
    return out


def sum_squares(x: Tensor, out: Tensor, at: int = 0) -> int:
    """out[at + w] = the sum of squares of x's w-th chunk of SQ_CHUNK elements (x fp32);
    returns the number of chunks written."""
    op = "sum_squares"
    src = _tensor(op, "x", x, (float32,))
    o = _tensor(op, "out", out, (float32,), 1)
    chunks = -(-src.size // SQ_CHUNK)
    if at + chunks > o.shape[0]:
        raise ValueError(f"{op}: {chunks} partial sums from {at} do not fit out {o.shape}")
    src.device._train(SUM_SQUARES, o, src=src, rows=src.size, n=1, dst_off=count(f"{op}: at", at, 0, 2**31))
    return chunks


def adamw(
    p: Tensor,
    m: Tensor,
    v: Tensor,
    g: Tensor,
    words: Tensor,
    *,
    betas: tuple = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    copy: Optional[Tensor] = None,
    step_word: int = 0,
    lr_word: int = 1,
    max_norm: float = 0.0,
    norm_word: int = 2,
    skip_nonfinite: bool = False,
) -> None:
    """torch.optim.AdamW's update of the fp32 parameters p with their moments m, v from
    the gradient g (all fp32, one size), at the step count words[step_word] (1 on the
    first step) and the learning rate whose float32 bits are words[lr_word] (words:
    int32, written before each replay); copy (float16 or bfloat16): p rounded to it.
    max_norm > 0: g first scaled by min(1, max_norm / (norm + 1e-6)) where norm**2 is the
    float32 in words[norm_word] (torch's ``clip_grad_norm_`` over every gradient).
    skip_nonfinite: where that squared norm is NaN or infinite, nothing is updated (p, m,
    v and the copy stay as they were: a step with a non-finite gradient changes nothing)."""
    op = "adamw"
    for name, t in (("p", p), ("m", m), ("v", v), ("g", g)):
        _tensor(op, name, t, (float32,))
        if t.size != p.size:
            raise ValueError(f"{op}: {name} has {t.size} elements; p has {p.size}")
    _tensor(op, "words", words, (int32,))
    dt = "bfloat16"
    if copy is not None:
        dt = _tensor(op, "copy", copy, (float16, bfloat16)).dtype.name
        if copy.size != p.size:
            raise ValueError(f"{op}: copy has {copy.size} elements; p has {p.size}")
    b1, b2 = (real(f"{op}: betas[{i}]", b) for i, b in enumerate(betas))
    p.device._adamw(
        p,
        m,
        v,
        g,
        words,
        p.size,
        count(f"{op}: step_word", step_word, 0, words.size - 1),
        count(f"{op}: lr_word", lr_word, 0, words.size - 1),
        b1,
        b2,
        real(f"{op}: eps", eps),
        real(f"{op}: weight_decay", weight_decay),
        copy,
        dt,
        clip_slot=count(f"{op}: norm_word", norm_word, 0, words.size - 1) if max_norm or skip_nonfinite else 0,
        max_norm=real(f"{op}: max_norm", max_norm),
        guard=bool(skip_nonfinite),
    )

"""The GEMM library layer: operand layouts (transposes, pitches, batches) read
from NumPy strides or Tensor metadata without copies, the epilogue's names,
device-resident Tensors and Chains of products submitted as one command buffer.

Device.matmul, Device.upload/empty/prepack and Device.chain are the entry points
(helios/device.py); this module does the bookkeeping they share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from . import _helios
from .dtypes import HOST_FLOATS, INPUT_DTYPES, as_dtype, bfloat16, float16, wire
from .tensor import Tensor, float_array, host_array, new_tensor, to_compute_type
from .validate import count

ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 2, "silu": 3}
ACTIVATION_DOC = (
    "None, 'relu', 'gelu' (the tanh approximation: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))), "
    "as torch's approximate='tanh'; 'gelu_tanh' is the same) or 'silu' (x*sigmoid(x))"
)
_ITEM = 2  # 16-bit operands (float16 or bfloat16)


def activation_code(activation: Optional[str]) -> int:
    if activation is not None and not isinstance(activation, str):
        raise TypeError(f"activation must be a str or None, not {type(activation).__name__}")
    key = activation.lower() if isinstance(activation, str) else None
    if key not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected {ACTIVATION_DOC}")
    return ACTIVATIONS[key]


@dataclass
class Operand:
    """One side of a product as the kernel sees it."""

    data: Any  # flat ndarray view (bfloat16 as uint16 bits), or a Tensor
    rows: int  # logical op(X) rows and columns
    cols: int
    batch: int  # 1 for 2-D
    trans: bool  # stored transposed relative to op(X)
    ld: int  # row pitch of the stored matrix (elements)
    bstride: int  # elements between batches (0: broadcast)


def _matrix_layout(x: np.ndarray) -> Optional[tuple[bool, int]]:
    """(stored transposed?, pitch) of a 2-D float16 view with unit inner stride
    on one axis, or None where it needs a copy."""
    r, c = x.shape
    sr, sc = x.strides
    if (sc == _ITEM or c == 1) and sr % _ITEM == 0 and (sr // _ITEM >= c or r == 1) and sr >= 0:
        return False, (sr // _ITEM if r > 1 else c)
    if (sr == _ITEM or r == 1) and sc % _ITEM == 0 and (sc // _ITEM >= r or c == 1) and sc >= 0:
        return True, (sc // _ITEM if c > 1 else r)
    return None


def host_operand(x: np.ndarray, name: str, trans: bool, dt: Any = float16) -> Operand:
    """op(x) for a floating-point array of 2 or 3 dimensions in the product's 16-bit
    type dt (float16 or bfloat16; other types rounded once to it): C- or F-ordered,
    transposed views and row pitches pass without a copy."""
    if x.ndim not in (2, 3):
        raise ValueError(f"{name} must be 2-D or 3-D (batched), got shape {x.shape}")
    if x.dtype not in HOST_FLOATS:
        raise TypeError(
            f"{name} has dtype {x.dtype}; helios.matmul takes floating-point data (float16, bfloat16 "
            f"or float32; float64 is rounded to {np.dtype(dt).name})"
        )
    if x.dtype != dt:
        x = to_compute_type(x, dt, name, "helios.matmul")
    elif not x.flags.aligned:
        x = x.astype(dt)
    view = np.swapaxes(x, -1, -2) if trans else x
    lay = _matrix_layout(view[0] if view.ndim == 3 else view) if view.size else None
    bstride = 0
    if view.ndim == 3 and lay is not None:
        sb = view.strides[0]
        if view.shape[0] > 1 and (sb < 0 or sb % _ITEM):
            lay = None
        bstride = sb // _ITEM if view.shape[0] > 1 else 0
    if lay is None:  # general strides: one packed copy
        view = np.ascontiguousarray(view)
        lay = (False, view.shape[-1])
        bstride = view.shape[-2] * view.shape[-1] if view.ndim == 3 else 0
    stored_trans, ld = lay
    rows, cols = view.shape[-2:]
    batch = view.shape[0] if view.ndim == 3 else 1
    s_rows, s_cols = (cols, rows) if stored_trans else (rows, cols)
    span = bstride * (batch - 1) + (s_rows - 1) * ld + s_cols if view.size else 0
    flat = np.lib.stride_tricks.as_strided(wire(view), shape=(span,), strides=(_ITEM,)) if span else wire(view)
    return Operand(flat, rows, cols, batch, stored_trans, ld, bstride)


def tensor_operand(t: Tensor, name: str, trans: bool, dt: Any = None) -> Operand:
    """op(t) for a float16 or bfloat16 Tensor of 2 or 3 dimensions (of the product's
    type dt when given); a transposed view (t.T) is read as the transposed layout
    of its memory, no copy."""
    if t.dtype not in INPUT_DTYPES or (dt is not None and t.dtype != dt):
        want = np.dtype(dt).name if dt is not None else "float16 or bfloat16"
        raise TypeError(
            f"{name}: product operands are {want} Tensors, got {t.dtype} (the other operand "
            f"decides when it is bfloat16; a Tensor is never converted in place)"
        )
    if t.ndim not in (2, 3):
        raise ValueError(f"{name} must be a 2-D or 3-D Tensor, got shape {t.shape}")
    sr, sc = t.stored_shape[-2:]  # as the memory holds it
    stored_trans = bool(trans) != t.transposed
    batch = t.shape[0] if t.ndim == 3 else 1
    rows, cols = (sc, sr) if stored_trans else (sr, sc)
    return Operand(t, rows, cols, batch, stored_trans, t.pitch, sr * t.pitch if batch > 1 else 0)


def operand(x: Any, name: str, trans: bool, dt: Any = float16) -> Operand:
    if isinstance(x, Tensor):
        return tensor_operand(x, name, trans, dt)
    return host_operand(host_array(x, name), name, trans, dt)


def numpy_layout(a: Any, b: Any, trans_a: bool, trans_b: bool) -> tuple[Any, Any, Optional[tuple]]:
    """numpy.matmul's shapes for host operands: a 1-D a is a row and a 1-D b a column
    (their axis dropped from the result), leading axes beyond one batch axis broadcast
    and are flattened into it (a copy where the operands' leading shapes differ).
    Returns (a, b, the result's shape) with a and b as the kernels take them (2-D or
    3-D), or the inputs unchanged and None where they are that already. Tensors pass
    as they are (2-D or 3-D, as the device holds them)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return a, b, None
    A, B = host_array(a, "a"), host_array(b, "b")
    if A.ndim == 0 or B.ndim == 0:
        raise ValueError(f"matmul: a scalar is no matrix operand (shapes {A.shape} and {B.shape}); as numpy.matmul")
    if (A.ndim == 1 and trans_a) or (B.ndim == 1 and trans_b):
        raise ValueError("matmul: trans_a / trans_b transpose matrices; a 1-D operand has nothing to transpose")
    if A.ndim <= 3 and B.ndim <= 3 and A.ndim > 1 and B.ndim > 1:
        return a, b, None
    drop_m, drop_n = A.ndim == 1, B.ndim == 1
    ka = A.shape[-2] if trans_a and A.ndim > 1 else A.shape[-1]
    kb = B.shape[-1] if trans_b and B.ndim > 1 else B.shape[-2 if B.ndim > 1 else -1]
    if ka != kb:
        raise ValueError(
            f"matmul: inner dimensions differ: a has shape {A.shape} (K {ka}), b has shape {B.shape} (K {kb}); "
            "a 1-D a is a row, a 1-D b a column, as numpy.matmul"
        )
    A = A[None, :] if drop_m else A
    B = B[:, None] if drop_n else B
    try:
        lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch shapes {A.shape[:-2]} and {B.shape[:-2]} do not broadcast (shapes {A.shape} and "
            f"{B.shape}), as numpy.matmul"
        ) from None
    m = A.shape[-1] if trans_a else A.shape[-2]
    n = B.shape[-2] if trans_b else B.shape[-1]
    out = tuple(lead) + ((m,) if not drop_m else ()) + ((n,) if not drop_n else ())
    if len(lead) > 1:
        total = math.prod(lead)

        def flat(x: np.ndarray) -> np.ndarray:
            if math.prod(x.shape[:-2]) == 1:
                return x.reshape(x.shape[-2:])  # repeated by the batch-of-one rule, no copy
            if x.shape[:-2] != tuple(lead):
                x = np.broadcast_to(x, tuple(lead) + x.shape[-2:])
            return x.reshape((total,) + x.shape[-2:])

        A, B = flat(A), flat(B)
    return A, B, out


def input_dtype(x: Any, name: str) -> np.dtype:
    """The dtype of an operand (a Tensor's, or a host array's as read)."""
    return x.dtype if isinstance(x, Tensor) else host_array(x, name).dtype


@dataclass
class ProductSpec:
    """A product's shape after broadcasting: C is (batch, m, n)."""

    m: int
    n: int
    k: int
    batch: int
    batched: bool  # a 3-D result

    def fields(self, a: Operand, b: Operand) -> dict:
        return {
            "a": a.data,
            "b": b.data,
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "batch": self.batch,
            "trans_a": a.trans,
            "trans_b": b.trans,
            "lda": a.ld,
            "ldb": b.ld,
            "stride_a": a.bstride if a.batch > 1 else 0,
            "stride_b": b.bstride if b.batch > 1 else 0,
        }


def product_spec(a: Operand, b: Operand, a_nd: int, b_nd: int) -> ProductSpec:
    if a.cols != b.rows:
        raise ValueError(
            f"matmul: inner dimensions differ: op(a) is ({a.rows}, {a.cols}), op(b) is ({b.rows}, {b.cols})"
        )
    if a.batch != b.batch and 1 not in (a.batch, b.batch):
        raise ValueError(
            f"matmul: batch sizes differ: a has {a.batch}, b has {b.batch} "
            f"(equal, or one of them 1 or 2-D, as numpy.matmul broadcasts)"
        )
    batch = a.batch if b.batch == 1 else b.batch  # numpy.matmul broadcasting: a batch of 1 (or 2-D) repeats
    return ProductSpec(a.rows, b.cols, a.cols, batch, max(a_nd, b_nd) == 3)


def bias_array(bias: Any, n: int) -> Any:
    """A float32 length-n vector (host) or a float32 Tensor of n elements."""
    if isinstance(bias, Tensor):
        if bias.dtype != np.float32 or bias.shape != (n,) or not bias.packed:
            raise ValueError(f"bias Tensor must be float32 of shape ({n},), got {bias.dtype} {bias.shape}")
        return bias
    arr = float_array(bias, "bias", "matmul")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"bias must be a vector of length N={n}, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, the tanh form the kernels compute: 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def host_epilogue(
    acc: np.ndarray, *, bias: Any, act: int, alpha: float, beta: float, c: Optional[np.ndarray]
) -> np.ndarray:
    """The epilogue in float64 on the host: used where K == 0 (nothing to run)."""
    x = alpha * acc.astype(np.float64)
    if beta != 0.0 and c is not None:
        x = x + beta * np.asarray(c, dtype=np.float64)
    if bias is not None:
        x = x + np.asarray(bias.numpy() if isinstance(bias, Tensor) else bias, dtype=np.float64)
    if act == 1:
        x = np.maximum(x, 0.0)
    elif act == 2:
        x = gelu_tanh(x)
    elif act == 3:
        x = x / (1.0 + np.exp(-x))
    return x


@dataclass
class ChainTiming:
    """GPU time of whole chains: each sample is one run of every operation."""

    ops: int
    samples_ms: list[float]
    warmup: int
    variants: list[str] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))


class Chain:
    """Products on Tensors recorded in order and submitted as one command buffer
    (a barrier between consecutive operations), like a small CUDA graph::

        with dev.chain() as ch:
            h = ch.matmul(x, w1, bias=b1, activation="gelu")
            y = ch.matmul(h, w2, bias=b2)
        # ran once on exit; ch.time(iters=50) times the whole chain again

    Operands must be Tensors (``Device.upload``); a host bias vector is uploaded
    when recorded. Outputs are allocated when ``out`` is not given. The chain
    holds references to every Tensor it uses.
    """

    def __init__(self, device: Any) -> None:
        self._dev = device
        self._ops: list[dict] = []
        self._variants: list[str] = []  # what each operation runs, for reports
        self._outputs: list[Tensor] = []  # Tensors this chain allocated: unreadable until it runs
        self.ran = False

    def __len__(self) -> int:
        return len(self._ops)

    @property
    def variants(self) -> list[str]:
        """The variant each recorded operation runs, in order."""
        return list(self._variants)

    def matmul(
        self,
        a: Tensor,
        b: Tensor,
        *,
        out: Optional[Tensor] = None,
        trans_a: bool = False,
        trans_b: bool = False,
        bias: Any = None,
        activation: Optional[str] = None,
        alpha: float = 1.0,
        beta: float = 0.0,
        out_dtype: Any = None,
        variant: Optional[str] = None,
    ) -> Tensor:
        """Record out = act(alpha*op(a)@op(b) + beta*out + bias); returns out."""
        for x, nm in ((a, "a"), (b, "b")):
            if not isinstance(x, Tensor):
                raise TypeError(
                    f"chain operand {nm} must be a helios.Tensor, not {type(x).__name__} "
                    f"(upload host arrays with Device.upload first)"
                )
        from .dtypes import compute_dtype

        cdt = compute_dtype(a.dtype, b.dtype)
        A, B = tensor_operand(a, "a", trans_a, cdt), tensor_operand(b, "b", trans_b, cdt)
        spec = product_spec(A, B, a.ndim, b.ndim)
        act = activation_code(activation)
        shape = (spec.batch, spec.m, spec.n) if spec.batched else (spec.m, spec.n)
        if out is None:
            if float(beta) != 0.0:
                raise ValueError("chain matmul: beta != 0 reads C from out=; give an out Tensor")
            dt = as_dtype(out_dtype, "out_dtype") if out_dtype is not None else cdt
            out = self._dev.empty(shape, dt)
            out.computed = False
            self._outputs.append(out)
        check_out(out, shape, out_dtype, cdt)
        op = spec.fields(A, B)
        op.update(
            out=out,
            in_dtype=cdt.name,
            out_dtype=out.dtype.name,
            act=act,
            alpha=float(alpha),
            beta=float(beta),
            variant=self._dev._pick(variant, spec.m * spec.batch, spec.n, spec.k, cdt),
        )
        if bias is not None:
            bias = bias_array(bias, spec.n)
            op["bias"] = bias if isinstance(bias, Tensor) else self._dev.upload(bias, dtype=np.float32)
        self._ops.append(op)
        self._variants.append(
            op["variant"]
            or self._dev.default_variant(spec.m, spec.n, spec.k, batch=spec.batch, dtype=cdt.name, trans_b=B.trans)
        )
        return out

    def run(self) -> float:
        """Submit every operation once; returns the chain's GPU time in ms."""
        _, ms = self._dev._chain(self._ops)
        self._mark_ran()
        return ms

    def _mark_ran(self) -> None:
        self.ran = True
        for t in self._outputs:
            t.computed = True

    def time(self, iters: int = 20, warmup: int = 5) -> ChainTiming:
        """GPU-time the whole chain: `warmup` untimed runs, then `iters` runs each
        between two timestamps, all in one submission."""
        iters = count("Chain.time: iters", iters, 1, _helios.MAX_LAUNCHES)
        warmup = count("Chain.time: warmup", warmup, 0, _helios.MAX_LAUNCHES)
        if not self._ops:
            raise ValueError("Chain.time: the chain has no operations")
        samples, _ = self._dev._chain(self._ops, warmup, iters)
        self._mark_ran()
        return ChainTiming(ops=len(self._ops), samples_ms=samples, warmup=warmup, variants=list(self._variants))

    def __enter__(self) -> "Chain":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and self._ops and not self.ran:
            self.run()


def check_out(out: Any, shape: tuple, out_dtype: Any, compute: Any = float16) -> None:
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a helios.Tensor or a NumPy array, not {type(out).__name__}")
    if out.is_slice:
        raise ValueError("out is a slice of another Tensor; products write whole Tensors")
    if out.shape != shape or not out.packed:
        raise ValueError(
            f"out Tensor has shape {out.shape} (pitch {out.pitch}"
            f"{', a transposed view' if out.transposed else ''}); this product writes a packed {shape}"
        )
    allowed = (np.dtype(compute), np.dtype(np.float32))
    if out.dtype not in allowed:
        raise TypeError(
            f"out Tensor dtype must be {allowed[0].name} or float32 for {allowed[0].name} inputs, got {out.dtype}"
        )
    if out_dtype is not None and as_dtype(out_dtype, "out_dtype") != out.dtype:
        raise ValueError(f"out_dtype {out_dtype} differs from the out Tensor's {out.dtype}")


def prepack(dev: Any, weight: Any, *, trans: bool, variant: Optional[str], dtype: Any) -> Tensor:
    """Device.prepack: the weight as the K x N operand B, rows padded to 16 bytes
    (none for a coop2 variant, which reads packed rows only)."""
    w = host_array(weight, "weight")
    if w.ndim != 2:
        raise ValueError(f"prepack: a 2-D weight, got shape {w.shape}")
    dt = (
        as_dtype(dtype, "prepack: dtype", (float16, bfloat16))
        if dtype is not None
        else (bfloat16 if w.dtype == bfloat16 else float16)
    )
    w = w.T if trans else w
    k, n = w.shape
    name = dev.check_variant(variant, dt.name) if variant is not None and variant != "auto" else None
    pitch = n if name and _helios.variant_fields(name)["path"] == "coop2" else -(-n // 8) * 8
    buf = np.zeros((k, pitch), dtype=dt)
    buf[:, :n] = w
    t = new_tensor(dev, (k, n), dt, pitch, prepacked_for=name or "auto")
    t._write(0, wire(buf))
    return t


def product_into(dev: Any, a: Any, b: Any, out: Any, *, trans_a: bool = False, trans_b: bool = False,
                 bias: Any = None, activation: Optional[str] = None) -> None:  # fmt: skip
    """op(a) @ op(b) (+ bias, activation) of 2-D Tensors into the Tensor out, through the
    engine's own entry with the device's pick of variant: what a recorded step (a capture's
    training step or prefill) issues, its shapes checked by the core against the Tensors."""
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    k = a.shape[0] if trans_a else a.shape[1]
    dt = a.dtype.name
    dev._gemm(
        a=a, b=b, m=m, n=n, k=k, trans_a=trans_a, trans_b=trans_b, lda=a.pitch, ldb=b.pitch, in_dtype=dt,
        out_dtype=out.dtype.name, out=out, act=activation_code(activation), bias=bias,
        variant=dev._pick(None, m, n, k, dt),
    )  # fmt: skip

"""Attention: ``helios.attention`` / ``Device.attention`` (a flash-attention
forward on cooperative matrices, optionally with each row's log-sum-exp),
``Device.attention_backward`` (dQ, dK, dV from the forward's output and
log-sum-exp), ``Device.time_attention`` (GPU-timed like time_matmul, either
direction), and the float64 references the checks use."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from . import _helios
from .dtypes import INPUT_DTYPES, as_dtype, compute_dtype, float16, unwire, wire
from .flops import attention_backward_flops, attention_bytes, attention_flops, tflops
from .tensor import Tensor, host_array, input_array
from .validate import count, flag


@dataclass
class AttentionTiming:
    """GPU-timed attention: per-iteration device times after warm-up."""

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    causal: bool
    variant: str
    samples_ms: list[float]
    batch_ms: float
    warmup: int
    flush_bytes: int = 0
    telemetry: dict = field(default_factory=dict)
    output: Optional[np.ndarray] = field(default=None, repr=False)
    dtype: str = "float16"
    # backward=True: the samples time the backward; grads holds (dQ, dK, dV).
    backward: bool = False
    grads: Optional[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default=None, repr=False)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def flops(self) -> float:
        count = attention_backward_flops if self.backward else attention_flops
        return count(self.batch, self.heads, self.seq_q, self.seq_kv, self.head_dim, self.causal)

    @property
    def tflops(self) -> float:
        return tflops(self.flops, self.median_ms)


def _operand(x: Any, name: str, dt: Any = float16) -> Any:
    """A 4-D C-contiguous array of the op's 16-bit type dt (wider types are rounded),
    or a packed 4-D Tensor of dt."""
    if isinstance(x, Tensor):
        if x.ndim != 4 or x.dtype != dt or not x.packed:
            raise ValueError(
                f"attention: {name} Tensor must be a packed 4-D {np.dtype(dt).name} (B, H, S, d), got "
                f"shape {x.shape} {x.dtype}{'' if x.packed else ' (not packed)'}"
            )
        return x
    arr = host_array(x, f"attention: {name}")
    if arr.ndim != 4:
        raise ValueError(f"attention: {name} must be 4-D (B, H, S, d) or, as torch SDPA's unbatched form, 3-D "
                         f"(N, S, d), got shape {arr.shape}")  # fmt: skip
    return input_array(arr, f"attention: {name}", "attention", dt)


def _dtype_of(x: Any, name: str) -> np.dtype:
    return x.dtype if isinstance(x, Tensor) else host_array(x, f"attention: {name}").dtype


def check_shapes(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int]) -> None:
    """(B, H, S_q, d), (B, H, S_kv, d), (B, H, S_kv, d): a ValueError naming the shapes otherwise."""
    if tuple(k_shape) != tuple(v_shape):
        raise ValueError(f"attention: k {tuple(k_shape)} and v {tuple(v_shape)} must have the same shape")
    if tuple(q_shape[:2]) != tuple(k_shape[:2]) or q_shape[3] != k_shape[3]:
        raise ValueError(
            f"attention: q {tuple(q_shape)} and k/v {tuple(k_shape)} must agree on B, H "
            f"and d: (B, H, S_q, d) and (B, H, S_kv, d)"
        )
    if any(int(s) < 1 for s in (*q_shape, *k_shape)):
        raise ValueError(f"attention: every dimension must be >= 1, got q {tuple(q_shape)}, k {tuple(k_shape)}")


# How far the forward's log-sum-exp may sit from float64's, by input dtype. Where the
# coop forward folds the running max (head dims <= 64: shaders/attention/attention_coop.comp),
# a row's sum over a fast tile is of P as stored in the input type, the weights V is
# multiplied by: lse then carries that rounding, at most half an ulp of each term
# (2^-12 of the sum in fp16, 2^-9 in bf16), and in practice far less.
LSE_ATOL = {"float16": 5e-4, "bfloat16": 4e-3}


def resolve_scale(scale: Optional[float], d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"attention: scale must be a real number or None, not {type(scale).__name__}")
    if not math.isfinite(float(scale)):
        raise ValueError(f"attention: scale must be finite, got {scale}")
    return float(scale)


def _call(
    dev: Any, q: Any, k: Any, v: Any, bh: int, d: int, causal: bool, scale: float, variant: Any, dt: Any, **kw: Any
) -> Any:
    """The engine's attention on checked operands (host arrays as the C layer reads them)."""
    sq, skv = int(q.shape[2]), int(k.shape[2])
    variant = dev._pick_attention(variant, d, skv, causal, False, dt)
    ops = (x if isinstance(x, Tensor) else wire(x) for x in (q, k, v))
    return dev._attention(
        *ops, bh, sq, skv, d, causal=bool(causal), scale=scale, variant=variant, dtype=np.dtype(dt).name, **kw
    )


def run_attention(
    dev: Any,
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    variant: Optional[str] = None,
    out: Optional[Tensor] = None,
    order: Optional[tuple[int, int]] = None,
    lse: Optional[Tensor] = None,
) -> Any:
    """The forward on checked inputs; lse: a float32 Tensor of B*H*S_q elements that
    receives each row's log-sum-exp (host inputs: then returned beside O)."""
    if dev.closed:
        raise _helios.DeviceClosedError("the Device is closed")
    dt = compute_dtype(_dtype_of(q, "q"), _dtype_of(k, "k"), _dtype_of(v, "v"))
    # torch SDPA's unbatched form: (N, S, d) host arrays, one batch of N heads
    unbatched = lse is None and all(not isinstance(x, Tensor) and len(np.shape(x)) == 3 for x in (q, k, v))
    if unbatched:
        q, k, v = (host_array(x, f"attention: {n}")[None] for x, n in ((q, "q"), (k, "k"), (v, "v")))
    q, k, v = _operand(q, "q", dt), _operand(k, "k", dt), _operand(v, "v", dt)
    check_shapes(q.shape, k.shape, v.shape)
    b, h, sq, d = (int(s) for s in q.shape)
    causal = flag("causal", causal)
    if out is not None and (
        not isinstance(out, Tensor) or out.shape != (b, h, sq, d) or out.dtype != dt or not out.packed
    ):
        raise ValueError(f"attention: out must be a {dt.name} Tensor of shape {(b, h, sq, d)}")
    ordered: dict[str, Any] = {} if order is None else {"wait_value": int(order[0]), "signal_value": int(order[1])}
    if lse is not None:
        _check_lse(lse, b, h, sq)
        ordered["lse"] = lse
    o, _, _, _ = _call(dev, q, k, v, b * h, d, causal, resolve_scale(scale, d), variant, dt, out=out, **ordered)
    if out is not None:
        return out
    return unwire(o, dt).reshape((h, sq, d) if unbatched else (b, h, sq, d))


def _check_lse(lse: Any, b: int, h: int, sq: int) -> None:
    if not isinstance(lse, Tensor) or lse.dtype != np.float32 or lse.size != b * h * sq or not lse.packed:
        raise ValueError(
            f"attention: lse must be a packed float32 Tensor of {b}*{h}*{sq} elements (B, H, S_q), got "
            f"{getattr(lse, 'shape', type(lse).__name__)} {getattr(lse, 'dtype', '')}"
        )


BACKWARD_NAMES = ("q", "k", "v", "o", "do")


def run_attention_backward(
    dev: Any,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    do: Any,
    lse: Any,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    variant: Optional[str] = None,
    order: Optional[tuple[int, int]] = None,
    grads: Optional[Sequence[Tensor]] = None,
    timing: Optional[dict] = None,
) -> tuple[Tensor, Tensor, Tensor, Any]:
    """dQ, dK, dV as Tensors (grads: Tensors to write them into) and the call's
    (samples_ms, gpu_ms, variant). Host operands are uploaded first; every 16-bit
    operand must share one dtype (float32 host arrays are rounded to it)."""
    if dev.closed:
        raise _helios.DeviceClosedError("the Device is closed")
    ops = (q, k, v, o, do)
    dt = compute_dtype(*(_dtype_of(x, nm) for x, nm in zip(ops, BACKWARD_NAMES)))
    ts = []
    for x, nm in zip(ops, BACKWARD_NAMES):
        x = _operand(x, nm, dt)
        ts.append(x if isinstance(x, Tensor) else dev.upload(x, dtype=dt))
    q, k, v, o, do = ts
    check_shapes(q.shape, k.shape, v.shape)
    for x, nm in ((o, "o"), (do, "do")):
        if x.shape != q.shape:
            raise ValueError(f"attention backward: {nm} {x.shape} must have q's shape {q.shape}")
    b, h, sq, d = (int(s) for s in q.shape)
    skv = int(k.shape[2])
    causal = flag("causal", causal)
    if not isinstance(lse, Tensor):
        arr = np.ascontiguousarray(host_array(lse, "attention backward: lse"), dtype=np.float32)
        if arr.size != b * h * sq:
            raise ValueError(
                f"attention backward: lse holds {arr.size} values; (B, H, S_q) = {(b, h, sq)} needs {b * h * sq}"
            )
        lse = dev.upload(arr.reshape(b, h, sq), dtype="float32")
    _check_lse(lse, b, h, sq)
    if grads is None:
        grads = (dev.empty(q.shape, dt), dev.empty(k.shape, dt), dev.empty(k.shape, dt))
    for g, like, nm in zip(grads, (q, k, v), ("dq", "dk", "dv")):
        if not isinstance(g, Tensor) or g.shape != like.shape or g.dtype != dt or not g.packed:
            raise ValueError(f"attention backward: {nm} must be a packed {dt.name} Tensor of shape {like.shape}")
    variant = dev._pick_attention(variant, d, skv, causal, True, dt)
    kw = dict(timing or {})
    if order is not None:
        kw.update(wait_value=int(order[0]), signal_value=int(order[1]))
    _, samples, gpu_ms, used = dev._attention_backward(
        q,
        k,
        v,
        o,
        do,
        lse,
        *grads,
        b * h,
        sq,
        skv,
        d,
        causal=causal,
        scale=resolve_scale(scale, d),
        variant=variant,
        dtype=dt.name,
        **kw,
    )
    return grads[0], grads[1], grads[2], (samples, gpu_ms, used)


def time_attention(
    dev: Any,
    batch: int,
    heads: int,
    seq: int,
    head_dim: int,
    *,
    seq_kv: Optional[int] = None,
    causal: bool = False,
    scale: Optional[float] = None,
    iters: int = 20,
    warmup: int = 5,
    variant: Optional[str] = None,
    seed: int = 0,
    inputs: Optional[Sequence[np.ndarray]] = None,
    flush_bytes: int = 0,
    dtype: Any = "float16",
    backward: bool = False,
    grad_output: Optional[np.ndarray] = None,
) -> AttentionTiming:
    """GPU-timed attention (see Device.time_attention). backward: time the backward
    instead (the forward runs once, untimed, for O and the log-sum-exp), against
    grad_output (dO; default seeded standard-normal); the result's grads are (dQ,
    dK, dV) and output is O."""
    b = count("time_attention: batch", batch, 1, 2**31)
    h = count("time_attention: heads", heads, 1, 2**31)
    sq = count("time_attention: seq", seq, 1, 2**31)
    skv = sq if seq_kv is None else count("time_attention: seq_kv", seq_kv, 1, 2**31)
    d = count("time_attention: head_dim", head_dim, 1, 2**31)
    iters = count("time_attention: iters", iters, 1, _helios.MAX_LAUNCHES)
    warmup = count("time_attention: warmup", warmup, 0, _helios.MAX_LAUNCHES)
    flush_bytes = count("time_attention: flush_bytes", flush_bytes, 0, int(dev.info["max_storage_buffer_range"]))
    need = attention_bytes(b, h, sq, skv, d)
    if need > int(dev.info["device_local_bytes"]):
        raise _helios.DeviceMemoryError(
            f"attention {b}x{h}x{sq}x{d} (S_kv {skv}): operands need {need} "
            f"bytes; the device has {dev.info['device_local_bytes']}"
        )
    dt = as_dtype(dtype, "time_attention: dtype", INPUT_DTYPES)
    q, k, v = _timing_inputs(inputs, (b, h, sq, skv, d), seed, dt)
    grads = None
    timing = {"warmup": warmup, "iters": iters, "flush_bytes": flush_bytes}
    if flag("backward", backward):
        o, grads, (samples, batch_ms, used) = _timed_backward(
            dev, (q, k, v), grad_output, causal, scale, variant, seed, dt, timing
        )
    else:
        o, samples, batch_ms, used = _call(
            dev, q, k, v, b * h, d, causal, resolve_scale(scale, d), variant, dt, **timing
        )  # fmt: skip
        o = unwire(o, dt).reshape(b, h, sq, d)
    return AttentionTiming(
        batch=b,
        heads=h,
        seq_q=sq,
        seq_kv=skv,
        head_dim=d,
        causal=bool(causal),
        variant=used,
        samples_ms=samples,
        batch_ms=batch_ms,
        warmup=warmup,
        flush_bytes=flush_bytes,
        telemetry=dev.telemetry(),
        output=o,
        dtype=dt.name,
        backward=bool(backward),
        grads=grads,
    )


def _timing_inputs(inputs: Optional[Sequence[np.ndarray]], dims: tuple, seed: int, dt: Any) -> tuple:
    """time_attention's Q, K, V: seeded standard normals, or the given arrays checked
    against B, H, S, S_kv, d."""
    b, h, sq, skv, d = dims
    if inputs is None:
        return random_qkv(b, h, sq, skv, d, seed, dt)
    q, k, v = (_operand(x, nm, dt) for x, nm in zip(inputs, ("q", "k", "v")))
    if q.shape != (b, h, sq, d) or k.shape != (b, h, skv, d) or v.shape != k.shape:
        raise ValueError(
            f"time_attention: inputs {q.shape}, {k.shape}, {v.shape} do not match "
            f"B, H, S, S_kv, d = {b}, {h}, {sq}, {skv}, {d}"
        )
    return q, k, v


def _timed_backward(dev: Any, qkv: tuple, grad_output: Optional[np.ndarray], causal: bool, scale: Optional[float],
                    variant: Optional[str], seed: int, dt: Any, timing: dict) -> tuple:  # fmt: skip
    """The backward timed (the forward once, untimed, for O and the log-sum-exp):
    (O, (dQ, dK, dV), (samples, batch_ms, variant))."""
    b, h, sq, d = qkv[0].shape
    ts = [dev.upload(x, dtype=dt) for x in qkv]
    o_t, lse_t = dev.attention(*ts, causal=causal, scale=scale, return_lse=True)
    if grad_output is None:
        grad_output = np.random.default_rng(seed + 1).standard_normal((b, h, sq, d), dtype=np.float32)
    do_t = dev.upload(_operand(grad_output, "grad_output", dt), dtype=dt)
    if do_t.shape != (b, h, sq, d):
        raise ValueError(f"time_attention: grad_output {do_t.shape} must have q's shape {(b, h, sq, d)}")
    dq, dk, dv, timed = run_attention_backward(
        dev, ts[0], ts[1], ts[2], o_t, do_t, lse_t, causal=causal, scale=scale, variant=variant, timing=timing
    )
    return o_t.numpy(), (dq.numpy(), dk.numpy(), dv.numpy()), timed


def reference_attention_backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    do: np.ndarray,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(dQ, dK, dV, lse) of softmax(scale * Q K^T [masked]) V against dO in float64,
    one head at a time; lse in natural-log units (what the forward writes)."""
    b, h, sq, d = q.shape
    skv = k.shape[2]
    sc = resolve_scale(scale, d)
    dq = np.empty((b, h, sq, d))
    dk = np.empty((b, h, skv, d))
    dv = np.empty((b, h, skv, d))
    lse = np.empty((b, h, sq))
    for i in range(b):
        for j in range(h):
            qh, kh, vh, gh = (x[i, j].astype(np.float64) for x in (q, k, v, do))
            s = (qh @ kh.T) * sc
            if causal:
                s = np.where(np.arange(skv)[None, :] > np.arange(sq)[:, None], -np.inf, s)
            mx = s.max(axis=1, keepdims=True)
            e = np.exp(s - mx)
            tot = e.sum(axis=1, keepdims=True)
            p = e / tot
            lse[i, j] = (mx + np.log(tot))[:, 0]
            dv[i, j] = p.T @ gh
            dp = gh @ vh.T
            ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))
            dq[i, j] = (ds @ kh) * sc
            dk[i, j] = (ds.T @ qh) * sc
    return dq, dk, dv, lse


def random_qkv(
    b: int, h: int, sq: int, skv: int, d: int, seed: int = 0, dtype: Any = float16
) -> tuple[np.ndarray, ...]:
    """Seeded standard-normal Q, K, V (B, H, S, d) of dtype (float16 or bfloat16)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, h, sq, d), dtype=np.float32).astype(dtype)
    k = rng.standard_normal((b, h, skv, d), dtype=np.float32).astype(dtype)
    v = rng.standard_normal((b, h, skv, d), dtype=np.float32).astype(dtype)
    return q, k, v


def reference_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    rows: Optional[np.ndarray] = None,
) -> np.ndarray:
    """softmax(scale * Q K^T [masked]) V in float64, one head at a time. rows: only
    these query rows (every head), to check large shapes by sampling; the result
    then has shape (B, H, len(rows), d). A row whose every score is -inf gives 0."""
    b, h, sq, d = q.shape
    sc = resolve_scale(scale, d)
    sel = np.arange(sq) if rows is None else np.asarray(rows)
    out = np.empty((b, h, len(sel), d), dtype=np.float64)
    for i in range(b):
        for j in range(h):
            qh = q[i, j, sel].astype(np.float64)
            s = (qh @ k[i, j].astype(np.float64).T) * sc
            if causal:
                s = np.where(np.arange(k.shape[2])[None, :] > sel[:, None], -np.inf, s)
            mx = s.max(axis=1, keepdims=True)
            mx[~np.isfinite(mx)] = 0.0  # a row of -inf scores: every weight 0 below
            p = np.exp(s - mx)
            tot = p.sum(axis=1, keepdims=True)
            # a row whose every key scores -inf outputs 0 (the kernels' and torch math's answer), not NaN
            p = np.divide(p, tot, out=np.zeros_like(p), where=tot > 0)
            out[i, j] = p @ v[i, j].astype(np.float64)
    return out


def unsupported_sdpa_arguments(attn_mask: Any, dropout_p: Any) -> None:
    """torch's scaled_dot_product_attention arguments Helios has no kernel for: taken
    at their neutral values (no mask, no dropout), refused otherwise, naming them."""
    if attn_mask is not None:
        raise ValueError(
            f"attention: attn_mask is not supported (got {type(attn_mask).__name__}); Helios masks causally "
            "only (causal=True or is_causal=True)"
        )
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or dropout_p != 0:
        raise ValueError(
            f"attention: dropout_p={dropout_p!r} is not supported; Helios runs attention without dropout (0.0)"
        )

"""A group: Helios ops on one CUDA device recorded and submitted as one ordered
unit (one CUDA <-> Vulkan hop pair for all of them)."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Optional

import torch

from .. import _helios, engine
from ..attention import resolve_scale
from ..device import Device
from ..elementwise import LAYERNORM_ROWS
from ..gemm import activation_code
from ..tensor import Tensor
from ._staging import handed_back, imported, pooled_result, stage_target, stage_tensor, to_torch
from ._state import DTYPES, HELIOS_TO_TORCH, MAX_HANDED, RUNTIME, TORCH_TO_HELIOS, cuda_ordinal, device_for, ordered


class Group:
    """Helios ops on one CUDA device submitted as one ordered group (ordered(): one
    CUDA <-> Vulkan hop pair for all of them). Operands are torch tensors (staged,
    _stage: each distinct tensor once per group) or Helios tensors an earlier op of the
    group wrote; every result is exported to torch as soon as it is taken (an export
    keeps it out of the result pool, so no later op of the group is handed the same
    memory) and its torch view is kept until the group is submitted."""

    def __init__(self, anchor: torch.Tensor) -> None:
        self.anchor = anchor
        self.dev = device_for(anchor)
        self.ordinal = cuda_ordinal(anchor)
        self.ops: list[Callable[[], Any]] = []
        self.count = 0  # ops in the group
        self._staged: dict = {}
        self._held: list[torch.Tensor] = []
        self._live = False  # recording each op as it is built (live())
        self._internal: list = []  # results used inside the group only (RUNTIME.busy until it is submitted)

    def _op(self, fn: Callable[[], Any], label: str) -> None:
        """An op of the group: recorded now when live, else when the group runs (label:
        what it is, collected in RUNTIME.profile_labels while a profile is on)."""
        self.count += 1
        if RUNTIME.profile_labels is not None:
            RUNTIME.profile_labels.append(label)
        if self._live:
            fn()
        else:
            self.ops.append(fn)

    @contextlib.contextmanager
    def live(self) -> Any:
        """The group open while it is built: each op is recorded as it comes, and the
        engine sends the recorded ops to the GPU in chunks (the GPU starts on the first
        while the host builds the rest). Every torch operand that needs a copy must be
        staged before (stage() refuses one after): the stream signals the group once,
        here, after those copies (ordered())."""
        try:
            with ordered(self.dev, self.anchor):
                self._live = True
                try:
                    yield self
                finally:
                    self._live = False
        finally:
            self._release()
            RUNTIME.groups.append(self.count)

    def stage(self, t: Any, dtype: Optional[str] = None) -> Any:
        """A torch tensor as a Helios operand (a Helios Tensor passes through)."""
        if isinstance(t, Tensor):
            return t
        t = t.contiguous()
        self._held.append(t)  # a contiguous copy's address stays its own until the group is submitted
        key = (t.data_ptr(), tuple(t.shape), t.dtype, dtype)
        if key not in self._staged:
            if self._live and TORCH_TO_HELIOS.get(t.dtype) == (dtype or DTYPES.get(t.dtype, "float32")):
                view = handed_back(self.dev, t) or imported(self.dev, t, cached=True)
                if view is not None:  # read in place: no copy to order
                    self._staged[key] = view
                    return view
            if self._live:
                raise RuntimeError(
                    f"helios.torch: a {tuple(t.shape)} {t.dtype} operand would be copied after its group started "
                    "recording (Helios could read it before the copy): stage it before live()"
                )
            self._staged[key] = stage_tensor(self.dev, self.ordinal, f"s{len(self._staged)}", t, dtype)
        return self._staged[key]

    def stage_all(self, items: list) -> None:
        """Stages (tensor, dtype or None) pairs before live(), as stage() each: the
        tensors read in place looked up, the copies the others need issued in one
        torch._foreach_copy_ call (host time before the group's first op can start:
        the decoder's forward staging 0.86-1.22 ms with it, 1.00-1.80 with a copy_
        each, in two H100 calls)."""
        if self._live:
            raise RuntimeError("helios.torch: stage_all() comes before the group goes live()")
        dsts: list[torch.Tensor] = []
        srcs: list[torch.Tensor] = []
        memo = not _helios.env_flag("HELIOS_DISABLE_STAGE_MEMO")
        for t, dtype in items:
            t = t.contiguous()
            self._held.append(t)
            ptr, shape = t.data_ptr(), tuple(t.shape)
            key = (ptr, shape, t.dtype, dtype)
            if key in self._staged:
                continue
            slot = f"s{len(self._staged)}"
            mkey = (id(self.dev), id(t), dtype, slot)
            m = RUNTIME.stage_memo.get(mkey) if memo else None
            h = copy_to = None
            if m is not None and m[0]() is t and m[3] == ptr and m[4] == shape:
                h, copy_to = m[1](), (m[2]() if m[2] is not None else None)
                if h is None or (m[2] is not None and copy_to is None):
                    h = None  # what it named is gone: look it up again
            if h is None:
                h, copy_to = stage_target(self.dev, self.ordinal, slot, t, dtype)
                if memo:
                    if len(RUNTIME.stage_memo) >= MAX_HANDED:
                        for k in [k for k, e in RUNTIME.stage_memo.items() if e[0]() is None]:
                            del RUNTIME.stage_memo[k]
                    cw = weakref.ref(copy_to) if copy_to is not None else None
                    RUNTIME.stage_memo[mkey] = (weakref.ref(t), weakref.ref(h), cw, ptr, shape)
            self._staged[key] = h
            if copy_to is not None:
                dsts.append(copy_to)
                srcs.append(t)
        if dsts:
            torch._foreach_copy_(dsts, srcs)

    def result(self, shape: tuple, dtype: torch.dtype, export: bool = True) -> tuple[Any, Any]:
        """A result tensor: (Helios, torch's view of it), or with export=False one the
        group's own later ops read and torch never sees (Helios, None: no DLPack export,
        which costs host time; kept out of the pool until the group is submitted)."""
        h = pooled_result(self.dev, self.ordinal, tuple(shape), dtype)
        if not export:
            RUNTIME.busy.add(id(h))
            self._internal.append(h)
            return h, None
        t = to_torch(h)
        self._held.append(t)
        return h, t

    def _release(self) -> None:
        """After submission: the group's torch views and internal results go (later
        groups are ordered after this one's work)."""
        self._held.clear()
        for h in self._internal:
            RUNTIME.busy.discard(id(h))
        self._internal.clear()

    def product(
        self,
        a: Any,
        b: Any,
        *,
        trans_a: bool = False,
        trans_b: bool = False,
        bias: Optional[torch.Tensor] = None,
        activation: Optional[str] = None,
        export: bool = True,
    ) -> tuple[Any, Any]:
        """op(a) @ op(b) (+ bias, activation) of 2-D operands of one 16-bit dtype (export: as result's)."""
        ha, hb = self.stage(a), self.stage(b)
        m = ha.shape[1] if trans_a else ha.shape[0]
        n = hb.shape[0] if trans_b else hb.shape[1]
        k = ha.shape[0] if trans_a else ha.shape[1]
        dt = ha.dtype.name
        out, result = self.result((m, n), HELIOS_TO_TORCH[dt], export)
        # The engine's own entry, not Device.matmul: shapes, dtypes and layouts were
        # checked by the callers (the core checks every size against the tensors again),
        # and the generic layer's conversions cost more host time than the product.
        fields = {
            "a": ha,
            "b": hb,
            "m": m,
            "n": n,
            "k": k,
            "trans_a": trans_a,
            "trans_b": trans_b,
            "lda": ha.shape[-1],
            "ldb": hb.shape[-1],
            "in_dtype": dt,
            "out_dtype": dt,
            "out": out,
            "act": activation_code(activation),
            # the epilogue reads fp32: converted by the staging copy itself
            "bias": None if bias is None else self.stage(bias, "float32"),
            "variant": engine.pick_matmul(self.dev, m, n, k, dt),
        }
        dev = self.dev

        def run() -> None:
            engine.matmul(dev, **fields)

        tail = ("" if bias is None else " +bias") + (f" {activation}" if activation else "")
        self._op(run, f"product {m}x{n}x{k} {'T' if trans_a else 'N'}{'T' if trans_b else 'N'}{tail}")
        return out, result

    def activation(self, z: Any, name: str, out: Any, grad: Any = None) -> None:
        """y = act(z), or with grad the activation's backward at z, into a result of the group."""
        dev, hz, hg = self.dev, self.stage(z), None if grad is None else self.stage(grad)
        n, code, dt = hz.size, activation_code(name), hz.dtype.name
        self._op(
            lambda: engine.activation(dev, hz, out, n, code, dt, hg), f"{name}{'' if hg is None else ' backward'} {n}"
        )

    def layernorm(self, x: Any, gamma: Any, beta: Any, branch: Any, eps: float, dtype: torch.dtype) -> tuple:
        """LayerNorm of the fp32 stream x (rows, d) (+ a 16-bit branch first): (h, its
        torch view, the stream normalised and its torch view, stats and its torch view)."""
        hx, hg, hb = self.stage(x), self.stage(gamma, "float32"), self.stage(beta, "float32")
        rows, d = hx.size // hx.shape[-1], hx.shape[-1]
        h, h_t = self.result((rows, d), dtype)
        stats, stats_t = self.result((rows, 2), torch.float32)
        if branch is None:
            stream, stream_t = hx, x
        else:
            stream, stream_t = self.result((rows, d), torch.float32)
        hr = None if branch is None else self.stage(branch)
        dev, dt, x_out = self.dev, TORCH_TO_HELIOS[dtype], None if hr is None else stream
        label = f"layernorm {rows}x{d}" + ("" if hr is None else " +branch")
        self._op(lambda: engine.layernorm(dev, hx, hg, hb, h, stats, rows, d, eps, dt, hr, x_out), label)
        return h, h_t, stream, stream_t, stats, stats_t

    def layernorm_backward(
        self, grad_h: Any, x: Any, stats: Any, gamma: Any, grad_res: Any, export_gx: bool = True
    ) -> tuple:
        """(gx fp32, gx16 (grad_h's dtype), their torch views (gx's None without
        export_gx), the partial gamma/beta sums' torch view)."""
        hgh, hx, hst = self.stage(grad_h), self.stage(x), self.stage(stats)
        hg = self.stage(gamma, "float32")
        hres = None if grad_res is None else self.stage(grad_res)
        rows, d = hx.size // hx.shape[-1], hx.shape[-1]
        gx, gx_t = self.result((rows, d), torch.float32, export_gx)
        gx16, gx16_t = self.result((rows, d), HELIOS_TO_TORCH[hgh.dtype.name])
        partial, partial_t = self.result((-(-rows // LAYERNORM_ROWS), 2, d), torch.float32)
        dev, dt = self.dev, hgh.dtype.name
        label = f"layernorm backward {rows}x{d}" + ("" if hres is None else " +stream")
        self._op(lambda: engine.layernorm_backward(dev, hgh, hx, hst, hg, gx, gx16, partial, rows, d, dt, hres), label)
        return gx, gx_t, gx16, gx16_t, partial_t

    def attention(self, q: Any, k: Any, v: Any, out: Any, lse: Any, causal: bool, scale: Optional[float]) -> None:
        """The attention forward on (B, H, S, d) operands, writing out and the log-sum-exp."""
        dev = self.dev
        hq, hk, hv = (self.stage(x) for x in (q, k, v))
        args = _attention_args(dev, hq, hk, causal, scale, False)
        label = f"attention {'x'.join(map(str, hq.shape))}" + (" causal" if causal else "")
        self._op(lambda: engine.attention(dev, hq, hk, hv, args[0], **args[1], out=out, lse=lse), label)

    def attention_backward(
        self, q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, grads: list, causal: bool, scale: Optional[float]
    ) -> None:
        """dQ, dK, dV (written into grads) from the forward's operands, output and log-sum-exp."""
        dev = self.dev
        hq, hk, hv, ho, hdo, hl = (self.stage(x) for x in (q, k, v, o, do, lse))
        args = _attention_args(dev, hq, hk, causal, scale, True)
        label = f"attention backward {'x'.join(map(str, hq.shape))}" + (" causal" if causal else "")
        self._op(
            lambda: engine.attention_backward(dev, hq, hk, hv, ho, hdo, hl, tuple(grads), args[0], **args[1]), label
        )

    def attention_rows(
        self, qkv: Any, out: Any, lse: Any, heads: int, bsd: tuple, causal: bool, scale: Optional[float]
    ) -> None:
        """The attention forward straight on a QKV product's rows (B*S, 3*D: each row
        Q, K, V of every head), O written as (B*S, D) rows (the heads merged, what the
        output projection reads) and the log-sum-exp (B, H, S): no layout copies."""
        dev, h = self.dev, self.stage(qkv)
        sizes, kw, label = self._rows_args(h, heads, bsd, causal, scale, False)
        self._op(lambda: engine.attention(dev, h, h, h, sizes, **kw, out=out, lse=lse), label)

    def attention_rows_backward(
        self,
        qkv: Any,
        o: Any,
        do: Any,
        lse: Any,
        grad_qkv: Any,
        heads: int,
        bsd: tuple,
        causal: bool,
        scale: Optional[float],
    ) -> None:
        """attention_rows' backward: dO as (B*S, D) rows, dQ, dK and dV written into
        grad_qkv's (B*S, 3*D) rows where Q, K and V lie in qkv's."""
        dev, g = self.dev, grad_qkv
        hq, ho, hdo, hl = (self.stage(x) for x in (qkv, o, do, lse))
        sizes, kw, label = self._rows_args(hq, heads, bsd, causal, scale, True)
        self._op(lambda: engine.attention_backward(dev, hq, hq, hq, ho, hdo, hl, (g, g, g), sizes, **kw), label)

    def _rows_args(
        self, qkv: Any, heads: int, bsd: tuple, causal: bool, scale: Optional[float], backward: bool
    ) -> tuple:
        """What attention on a QKV product's rows hands the engine, either direction:
        (bh, sq, skv, d), its keywords (the device's variant, the scale resolved, the
        row layout: Q, K, V at offsets 0, D, 2D of 3D-element rows, O in D-element
        rows) and the op's label."""
        b, s, d = bsd
        hd, dt = d // heads, qkv.dtype
        kw = {
            "causal": bool(causal),
            "scale": resolve_scale(scale, hd),
            "variant": engine.pick_attention(self.dev, hd, s, causal, backward, dt),
            "dtype": dt.name,
            "layout": (heads, 3 * d, d, 0, d, 2 * d),
        }
        label = f"attention{' backward' if backward else ''} {b}x{heads}x{s}x{hd} rows" + (" causal" if causal else "")
        return (b * heads, s, s, hd), kw, label

    def run(self) -> None:
        """Records and submits the ops built so far (those not recorded live), in order."""
        with self.live():
            for op in self.ops:
                op()
        self.ops.clear()


def _attention_args(dev: Device, q: Any, k: Any, causal: bool, scale: Optional[float], backward: bool) -> tuple:
    """The engine call's sizes and keywords for attention (either direction) on (B, H,
    S, d) Tensors the group made: the device's pick of variant, the scale resolved."""
    b, h, sq, d = (int(x) for x in q.shape)
    skv = int(k.shape[2])
    dt = q.dtype
    variant = engine.pick_attention(dev, d, skv, causal, backward, dt)
    kw = {"causal": bool(causal), "scale": resolve_scale(scale, d), "variant": variant, "dtype": dt.name}
    return (b * h, sq, skv, d), kw


# What each op of every group is, in recording order, while a list (scripts that

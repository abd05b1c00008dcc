"""Python face of the engine: Device, matmul, time_matmul, variants."""

from __future__ import annotations

import os
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from . import _helios, elementwise, gemm
from .attention import run_attention, run_attention_backward, time_attention, unsupported_sdpa_arguments
from .capture import Capture
from .dtypes import FLOAT_DTYPES, as_dtype, bfloat16, compute_dtype, float16, int32, result_name, unwire, wire
from .gemm import Chain
from .launcher import identities, launcher_device, launcher_info
from .matmul_timing import out_dtype_name, time_matmul
from .plan import Plan
from .tensor import Tensor, float_array, index_array, like_inputs, ndim_of, new_tensor
from .tune_cache import TunedChoice, attention_bucket
from .validate import count, flag, real


class Device(_helios.Device):
    """A Vulkan device. ``Device(index=None, *, disable_coop=False, disable_coop2=False)``.

    index defaults to HELIOS_DEVICE, else the best GPU. Use as a context manager
    or call close(); afterwards every call raises DeviceClosedError.

    variant=None (or "auto") runs the tuned pick for the shape's bucket where
    `helios tune` stored one for this device, else the built-in default for the
    shape; HELIOS_VARIANT and the HELIOS_COOP_* switches take precedence.
    """

    _tuned: Optional[TunedChoice] = None

    def __new__(
        cls, index: Optional[int] = None, *, disable_coop: bool = False, disable_coop2: bool = False
    ) -> "Device":
        # Under a launcher (Slurm, torchrun, mpirun) and without HELIOS_DEVICE, the
        # rank's GPU (helios/launcher.py); otherwise the C default.
        if index is None and not os.environ.get("HELIOS_DEVICE", "").strip():
            if launcher_info() is not None:
                index = launcher_device(identities())
        dev = super().__new__(cls, index, disable_coop=disable_coop, disable_coop2=disable_coop2)
        note = dev.info["pipeline_cache"]["note"]
        if note:  # a corrupt or foreign cache file: ignored, rewritten at close
            warnings.warn(f"helios: pipeline cache {note}", stacklevel=2)
        return dev

    def resolve_variant(self, m: int, n: int, k: int, variant: Optional[str] = None, dtype: Any = "float16") -> str:
        """The canonical variant a product of this shape and input dtype runs with `variant`."""
        dt = as_dtype(dtype, "dtype", (float16, bfloat16))
        v = self._pick(variant, m, n, k, dt)
        return self.check_variant(v, dt.name) if v is not None else self.default_variant(m, n, k, dtype=dt.name)

    def _pick_attention(
        self, variant: Optional[str], d: int, skv: int, causal: bool, backward: bool, dt: Any
    ) -> Optional[str]:
        """variant=None/"auto" of an attention call: the tuned pick of its bucket where
        `helios tune --workload=attention` stored one and the engine's own default is
        a coop variant (its kill switches and the device decide that), else None."""
        if variant is not None and variant != "auto":
            return variant
        if self._tuned is None:
            self._tuned = TunedChoice()
        name = np.dtype(dt).name
        tuned = self._tuned.resolve(self, attention_bucket(d, skv, causal, backward, name))
        if tuned is None:
            return None
        dflt, _ = self._attention_variants(d, None, min(skv, 2**32 - 1), causal, name, backward)
        if not dflt.startswith("fa-coop"):
            return None  # a kill switch or a device without cooperative matrices: the engine's fallback
        try:
            return self._attention_variants(d, tuned, 0, causal, name, backward)[0]
        except (_helios.HeliosError, ValueError) as e:
            warnings.warn(
                f"helios: tuned attention variant {tuned!r} is not valid here ({e}); using the default", stacklevel=3
            )
            return None

    def _pick(self, variant: Optional[str], m: int, n: int, k: int, dt: Any = float16) -> Optional[str]:
        if variant is not None and variant != "auto":
            return variant
        if np.dtype(dt) != float16:  # tuned picks are float16 measurements; bfloat16 takes the C default
            return None
        if m <= _helios.GEMV_MAX_ROWS:  # the engine's matrix-vector kernel, not a tiled pick from M's bucket
            return None
        if self._tuned is None:
            self._tuned = TunedChoice()
        tuned = self._tuned.resolve(self, (int(m), int(n), int(k)))
        if tuned is not None:
            try:
                return self.check_variant(tuned)
            except (_helios.HeliosError, ValueError) as e:
                warnings.warn(
                    f"helios: tuned variant {tuned!r} is not valid here ({e}); using the default", stacklevel=3
                )
        return None

    # Long: its docstring is helios.matmul's reference (25 lines); the code is 72.
    def matmul(
        self,
        a: Any,
        b: Any,
        *,
        trans_a: bool = False,
        trans_b: bool = False,
        bias: Any = None,
        activation: Optional[str] = None,
        alpha: float = 1.0,
        beta: Optional[float] = None,
        c: Any = None,
        out: Optional[Tensor] = None,
        out_dtype: Any = None,
        variant: Optional[str] = None,
        order: Optional[tuple[int, int]] = None,
    ) -> Any:
        """C = act(alpha * op(a) @ op(b) + beta * c + bias) on the GPU, in fp32, rounded
        once to the output dtype.

        a, b: floating-point arrays (NumPy, nested lists, torch CPU tensors,
        anything with the array interface or DLPack) with numpy.matmul's shapes (1-D
        operands, batches of any rank, broadcast), or 2-D / 3-D Tensors. The tensor cores compute in float16, or bfloat16
        when an input is bfloat16 (``helios.bfloat16``, torch.bfloat16), with float32
        accumulation: float32/float64 inputs are rounded once to that type (float16
        and bfloat16 inputs together are a TypeError). op(x) is
        x, or x transposed with trans_*; transposed and F-ordered views, row
        pitches and batch strides are read in place, not copied. bias: length-N
        vector. activation: {ACTIVATION_DOC}. c: an existing C (beta defaults to
        1 when c is given, else 0); out: a Tensor (the result stays on the device)
        or, as NumPy's out=, a float16/float32 host array written in place; with
        out= and no c, beta reads out's contents.

        Result dtype (out_dtype=None): float16 (bfloat16) when every input is, else
        float32 (NumPy's result type, capped at float32). Result type: a Tensor
        when any input is a Tensor (it stays on the device), a torch tensor when
        an input is one, else a NumPy array (see docs/reference/api-rules.md).

        order: (wait, signal) values from the protocol that orders Helios with a
        CUDA stream without host waits (helios.torch uses it): the product, on
        Tensors with out=, starts once the shared semaphore reaches `wait`,
        signals `signal` when done, and the call returns without waiting."""
        if variant is not None and not isinstance(variant, str):
            raise TypeError(f"variant must be a str or None, not {type(variant).__name__}")
        alpha = real("alpha", alpha)
        beta = None if beta is None else real("beta", beta)
        if isinstance(out, np.ndarray):  # NumPy's out=: the result is written into it and returned
            kw = dict(trans_a=trans_a, trans_b=trans_b, bias=bias, activation=activation, alpha=alpha, beta=beta)
            return self._matmul_into(out, a, b, c, out_dtype, variant, kw)
        given = (a, b)  # the caller's objects: the result's array type follows them
        a, b, final = gemm.numpy_layout(a, b, flag("trans_a", trans_a), flag("trans_b", trans_b))
        dts = (gemm.input_dtype(a, "a"), gemm.input_dtype(b, "b"))
        cdt = compute_dtype(*dts)
        in_dtype = result_name(cdt, *dts)
        device_resident = out is None and (isinstance(a, Tensor) or isinstance(b, Tensor))
        A = gemm.operand(a, "a", flag("trans_a", trans_a), cdt)
        B = gemm.operand(b, "b", flag("trans_b", trans_b), cdt)
        spec = gemm.product_spec(A, B, ndim_of(a), ndim_of(b))
        act = gemm.activation_code(activation)
        shape = (spec.batch, spec.m, spec.n) if spec.batched else (spec.m, spec.n)
        if out is not None:
            gemm.check_out(out, shape, out_dtype, cdt)
            out_name = out.dtype.name
        else:
            out_name = out_dtype_name(out_dtype, in_dtype, cdt)
        beta_v = float(beta) if beta is not None else (1.0 if c is not None else 0.0)
        if c is not None and out is not None:
            raise ValueError("matmul: give c (a host C) or out (a Tensor, read when beta != 0), not both")
        c_in = _c_input(c, beta_v, out, final, shape, out_name)
        bias_v = gemm.bias_array(bias, spec.n) if bias is not None else None
        empty = 0 in (spec.m, spec.n, spec.k, spec.batch)
        if device_resident and not empty:  # Tensor in, Tensor out (C uploaded into it)
            out = self.upload(c_in, dtype=out_name) if c_in is not None else self.empty(shape, out_name)
            c_in = None
        if empty:  # as NumPy: an empty result, or (K == 0) the epilogue of zeros
            res = self._empty_product(shape, variant, bias_v, act, alpha, beta_v, c_in, out, out_name)
            return res if isinstance(res, Tensor) else like_inputs(res if final is None else res.reshape(final), *given)
        fields = spec.fields(A, B)
        fields.update(
            in_dtype=cdt.name,
            out_dtype=out_name,
            variant=self._pick(variant, spec.m * spec.batch, spec.n, spec.k, cdt),
            act=act,
            alpha=float(alpha),
            beta=beta_v,
            bias=bias_v,
            c_in=None if c_in is None else wire(c_in),
            out=out,
        )
        if order is not None:
            fields.update(wait_value=int(order[0]), signal_value=int(order[1]))
        res = self._gemm_named(fields, a, b, shape, spec.k, out_name)
        if out is not None:
            return out
        res = unwire(res, out_name)
        res = res if spec.batched else res[0]
        return like_inputs(res if final is None else res.reshape(final), *given)

    def _matmul_into(self, host_out: np.ndarray, a: Any, b: Any, c: Any, out_dtype: Any, variant: Optional[str],
                     kw: dict) -> np.ndarray:  # fmt: skip
        """matmul with NumPy's out=: the result written into host_out and returned."""
        if not host_out.flags.writeable or host_out.dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"out: a writeable float16, bfloat16 or float32 array, got {host_out.dtype}"
                f"{'' if host_out.flags.writeable else ' (read-only)'}"
            )
        if out_dtype is not None and as_dtype(out_dtype, "out_dtype") != host_out.dtype:
            raise ValueError(f"out_dtype {out_dtype} differs from out's {host_out.dtype}")
        if c is None and kw["beta"] is not None and float(kw["beta"]) != 0.0:
            c = host_out.copy()  # as with a Tensor out=, beta reads out's contents
        res = self.matmul(a, b, c=c, out_dtype=host_out.dtype, variant=variant, **kw)
        res = res.numpy() if isinstance(res, Tensor) else np.asarray(res)
        if res.shape != host_out.shape:
            raise ValueError(f"out has shape {host_out.shape}; the product is {res.shape}")
        host_out[...] = res
        return host_out

    def _empty_product(self, shape: tuple, variant: Optional[str], bias_v: Any, act: int, alpha: float, beta_v: float,
                       c_in: Any, out: Optional[Tensor], out_name: str) -> Any:  # fmt: skip
        """As NumPy: an empty result, or (K == 0) the epilogue of zeros; into out where given."""
        if self.closed:
            raise _helios.DeviceClosedError("the Device is closed")
        if variant is not None and variant != "auto":
            self.check_variant(variant)  # an invalid variant is an error whatever the shape
        c = c_in if out is None else out.numpy()
        res = gemm.host_epilogue(np.zeros(shape), bias=bias_v, act=act, alpha=float(alpha), beta=beta_v, c=c)
        res = res.astype(as_dtype(out_name))
        if out is not None:
            out._write(0, wire(np.ascontiguousarray(res)))
            return out
        return res

    def _gemm_named(self, fields: dict, a: Any, b: Any, shape: tuple, k: int, out_name: str) -> Any:
        """The engine's product; out of device memory, the message names the operands."""
        try:
            return self._gemm(**fields)[0]
        except _helios.DeviceMemoryError as e:  # name the operands the engine's message cannot
            sizes = ", ".join(
                f"{nm} {tuple(int(x) for x in np.shape(v))} {gemm.input_dtype(v, nm)} {int(np.size(v)) * 2} bytes"
                for nm, v in (("a", a), ("b", b))
            )
            raise _helios.DeviceMemoryError(
                f"matmul {'x'.join(map(str, shape))} (K={k}): operands {sizes}, result {out_name}: {e}"
            ) from None

    def upload(self, x: Any, *, dtype: Any = None, out: Optional[Tensor] = None, exportable: bool = False) -> Tensor:
        """A Tensor holding a copy of a host array (NumPy, array-interface or DLPack
        object such as a torch CPU tensor, read without a host copy where its
        layout allows). dtype: float16 (default; a bfloat16 array stays bfloat16),
        bfloat16, float32, or int32 for integer data (names, NumPy or torch dtypes). out: an existing
        Tensor of this Device to write into (out.copy_(x)), e.g. a Chain's input.
        exportable: allocate memory CUDA can map (``torch.from_dlpack(t)`` shares it)."""
        if out is not None:
            if not isinstance(out, Tensor) or out.device is not self:
                raise ValueError("upload: out must be a Tensor of this Device")
            return out.copy_(x)
        dt = None if dtype is None else as_dtype(dtype, "upload: dtype")
        arr = index_array(x, "upload") if dt == int32 else float_array(x, "upload", "upload")
        if dt is None:
            dt = bfloat16 if arr.dtype == bfloat16 else float16
        if arr.ndim < 1 or arr.ndim > 4:
            raise ValueError(f"upload: 1-D to 4-D arrays, got shape {arr.shape}")
        arr = np.ascontiguousarray(arr, dtype=dt)
        t = new_tensor(self, arr.shape, dt, exportable=flag("exportable", exportable))
        t._write(0, wire(arr))
        return t

    def empty(self, shape: Any, dtype: Any = "float16", *, exportable: bool = False) -> Tensor:
        """An uninitialised Tensor (1-D to 4-D, float16, bfloat16 or float32). exportable:
        memory CUDA can map, so that ``torch.from_dlpack(t)`` shares it with no copy
        (needs VK_KHR_external_memory_fd and, when exported, the NVIDIA driver's
        libcuda; UnsupportedError naming what is missing)."""
        dims: Sequence[Any] = (
            (shape,) if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool) else shape
        )
        return new_tensor(self, dims, dtype, exportable=flag("exportable", exportable))

    def prepack(self, weight: Any, *, trans: bool = False, variant: Optional[str] = None, dtype: Any = None) -> Tensor:
        """Upload a weight once in the layout the product kernels load fastest: the
        K x N operand B row-major (op(B) = weight, or weight.T with trans=True, as
        torch.nn.Linear stores (out, in)), rows padded to 16 bytes so that every N
        takes the vector-load path. dtype: float16 (default) or bfloat16 (the
        default for a bfloat16 weight). A coop2 variant reads packed rows only, so
        it gets no padding. Use the Tensor as b= without trans_b."""
        return gemm.prepack(self, weight, trans=trans, variant=variant, dtype=dtype)

    def chain(self) -> Chain:
        """A Chain recording products on Tensors for one submission (see helios.Chain)."""
        if self.closed:
            raise _helios.DeviceClosedError("the Device is closed")
        return Chain(self)

    def capture(self) -> Capture:
        """A Capture: every operation called inside its with-block recorded once (not
        run) into a submission of its own, replayed with capture.replay() (see
        helios.Capture): a whole training step."""
        if self.closed:
            raise _helios.DeviceClosedError("the Device is closed")
        return Capture(self)

    def plan(self, params: int = 0) -> Plan:
        """A Plan recording operations on Tensors once, for replays of one submission
        and one wait each (see helios.Plan): a decode step's per-token work. params:
        its uint32 parameter words (0..16), what changes per token (token, position)."""
        if self.closed:
            raise _helios.DeviceClosedError("the Device is closed")
        return Plan(self, params)

    def attention(
        self,
        q: Any,
        k: Any,
        v: Any,
        *,
        causal: bool = False,
        scale: Optional[float] = None,
        variant: Optional[str] = None,
        out: Optional[Tensor] = None,
        is_causal: Optional[bool] = None,
        order: Optional[tuple[int, int]] = None,
        return_lse: bool = False,
        attn_mask: Any = None,
        dropout_p: float = 0.0,
    ) -> Any:
        """O = softmax(scale * q @ k^T) @ v per (batch, head) on (B, H, S, d) arrays (host
        arrays also as SDPA's (N, S, d)): float16 or bfloat16 (float32 rounded to float16, or bf16 if an input
        is bfloat16), host arrays or 4-D Tensors (then O is a Tensor,
        or `out`). S_kv may differ from S_q unless causal; causal masks key j > query i
        (torch's is_causal). scale: default 1/sqrt(d). variant: an attention variant
        string ("fa-coop:16x16x16:sg4:wq1:bc32", "fa-scalar"), default the device's pick.
        Result: as matmul's (a Tensor for Tensor inputs, torch for torch, NumPy
        otherwise; float16 (bfloat16) when every input is, else float32, computed in the
        16-bit type).
        is_causal: torch's name for causal (give one of the two). attn_mask and
        dropout_p: torch's names, taken at their neutral values (None, 0.0); a mask or
        dropout is not supported yet (ValueError), nor grouped-query heads (k/v must
        have q's head count). order: as matmul's (Tensors
        and out= only). return_lse: return (O, lse), lse each query row's log-sum-exp
        of the scaled scores (float32 (B, H, S_q), natural log, torch's convention),
        what :meth:`attention_backward` takes."""
        unsupported_sdpa_arguments(attn_mask, dropout_p)
        if is_causal is not None:
            if causal is not False and bool(causal) != bool(is_causal):
                raise ValueError("attention: causal and is_causal disagree; give one of them")
            causal = flag("is_causal", is_causal)
        dts = [gemm.input_dtype(x, nm) for x, nm in ((q, "q"), (k, "k"), (v, "v"))]
        cdt = compute_dtype(*dts)
        lse = None
        if flag("return_lse", return_lse):
            shape = tuple(int(s) for s in getattr(q, "shape", np.shape(q)))
            if len(shape) != 4:
                raise ValueError(f"attention: q must be 4-D (B, H, S, d), got shape {shape}")
            lse = self.empty(shape[:3], "float32")
        if out is None and any(isinstance(x, Tensor) for x in (q, k, v)):
            out = self.empty(tuple(getattr(q, "shape", ())), cdt)
        res = run_attention(self, q, k, v, causal=causal, scale=scale, variant=variant, out=out, order=order, lse=lse)
        if out is None:
            # computed in the 16-bit type (the kernels'); returned in the inputs' result dtype
            res = like_inputs(res.astype(as_dtype(result_name(cdt, *dts)), copy=False), q, k, v)
        if lse is None:
            return res
        return res, (lse if isinstance(res, Tensor) else like_inputs(lse.numpy(), q, k, v))

    def attention_backward(
        self,
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
    ) -> tuple[Any, Any, Any]:
        """(dQ, dK, dV) of :meth:`attention` for the output gradient do, from the
        forward's inputs, its output o and its log-sum-exp (``attention(...,
        return_lse=True)``): flash-attention's recomputation on cooperative matrices
        (two kernels: delta = rowsum(dO * O) and dQ per query block, then dK and dV per
        key block), or the scalar fp32 fallback. q, k, v, o, do: (B, H, S, d) float16
        or bfloat16 host arrays or Tensors of one dtype; the results are Tensors when
        an input is one, else host arrays like the inputs. causal, scale and variant
        (the backward's own; ``attention_variants(d, backward=True)``) as attention's.
        HELIOS_DISABLE_COOP_ATTENTION_BACKWARD=1 selects the fallback by default.
        order: as matmul's (Tensors only)."""
        ins = (q, k, v, o, do)
        dq, dk, dv, _ = run_attention_backward(
            self, q, k, v, o, do, lse, causal=causal, scale=scale, variant=variant, order=order
        )
        if any(isinstance(x, Tensor) for x in ins):
            return dq, dk, dv
        return tuple(like_inputs(g.numpy(), *ins) for g in (dq, dk, dv))

    # The ops between products (helios.elementwise) as methods: dev.copy_strided(src,
    # out, ...), dev.activation(z, "gelu", grad=...), dev.layernorm(x, gamma, beta, ...),
    # dev.layernorm_backward(grad_h, x, stats, gamma, ...).
    copy_strided = elementwise.copy_strided
    activation = elementwise.activation
    layernorm = elementwise.layernorm
    layernorm_backward = elementwise.layernorm_backward

    def attention_variants(self, head_dim: int, dtype: Any = "float16", backward: bool = False) -> list[str]:
        """Every attention variant valid here for this head dimension and dtype
        (float16 or bfloat16; default first where it is a coop one); backward: the
        backward's (its shared-memory budget differs)."""
        dt = as_dtype(dtype, "dtype", (float16, bfloat16))
        return self._attention_variants(
            count("head_dim", head_dim, 1, 2**31), dtype=dt.name, backward=flag("backward", backward)
        )[1]

    def attention_kernel_stats(
        self,
        head_dim: int,
        variant: Optional[str] = None,
        causal: bool = False,
        dtype: Any = "float16",
        backward: bool = False,
        machine_code: bool = False,
    ) -> dict:
        """The driver's statistics (registers, shared memory, ...) of the attention
        kernel a variant compiles to at this head dimension (only ``code_digest``, the
        SPIR-V and constants the driver was given, where it offers no statistics).
        backward=True: a backward variant's two kernels, {"dq": {...}, "dkdv": {...}}
        (as the backward builds them now: HELIOS_DISABLE_ATTENTION_BWD_FOLD applies).
        machine_code=True: each also with ``pipeline_cache_data``, the kernel compiled
        again into a pipeline cache of its own and that cache's bytes
        (helios.machine_code reads the code out of them)."""
        dt = as_dtype(dtype, "dtype", (float16, bfloat16))
        return self._attention_kernel_stats(
            count("head_dim", head_dim, 1, 2**31),
            variant,
            bool(causal),
            dt.name,
            flag("backward", backward),
            flag("machine_code", machine_code),
        )

    def default_attention_variant(
        self,
        head_dim: int,
        seq_kv: Optional[int] = None,
        causal: bool = False,
        dtype: Any = "float16",
        backward: bool = False,
    ) -> str:
        """The attention variant used when none is given for this head dimension, key
        count (None: long), mask and dtype (HELIOS_DISABLE_COOP_ATTENTION applied;
        backward: the backward's, HELIOS_DISABLE_COOP_ATTENTION_BACKWARD applied)."""
        skv = 0 if seq_kv is None else min(count("seq_kv", seq_kv, 1, 2**63), 2**32 - 1)
        dt = as_dtype(dtype, "dtype", (float16, bfloat16))
        return self._attention_variants(
            count("head_dim", head_dim, 1, 2**31), None, skv, bool(causal), dt.name, flag("backward", backward)
        )[0]

    def time_attention(self, batch: int, heads: int, seq: int, head_dim: int, **kwargs: Any) -> Any:
        """Time attention with GPU timestamps like time_matmul. Keywords: seq_kv,
        causal, scale, iters (20), warmup (5), variant, seed, inputs=(q, k, v),
        flush_bytes, dtype, backward (time the backward: dQ, dK, dV from an untimed
        forward's O and log-sum-exp) and grad_output (its dO). Returns an
        AttentionTiming (median_ms, tflops, output, grads, ...)."""
        return time_attention(self, batch, heads, seq, head_dim, **kwargs)

    # time_matmul(m, n, k, *, iters, warmup, variant, dtype, out_dtype, seed, inputs,
    # flush_bytes): matmul_timing.time_matmul, the device its first argument.
    time_matmul = time_matmul


# The docstring names the activations from the one table that defines them.
Device.matmul.__doc__ = (Device.matmul.__doc__ or "").replace("{ACTIVATION_DOC}", gemm.ACTIVATION_DOC)


def _c_input(c: Any, beta_v: float, out: Any, final: Optional[tuple], shape: tuple, out_name: str) -> Any:
    """The host C a product with beta != 0 reads (None without one), in the result's shape and type."""
    if c is not None and beta_v != 0.0:
        c_arr = float_array(c, "c", "matmul")
        if final is not None and c_arr.shape == final:
            c_arr = c_arr.reshape(shape)  # C in the caller's (numpy.matmul) shape
        if c_arr.shape != shape:
            raise ValueError(f"c has shape {c_arr.shape}; the product is {shape}")
        return np.ascontiguousarray(c_arr, dtype=as_dtype(out_name))
    if beta_v != 0.0 and out is None:
        raise ValueError(f"matmul: beta={beta_v} needs c= (or out= holding C)")
    return None

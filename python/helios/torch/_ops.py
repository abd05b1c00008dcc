"""The public ops: operand checks, then the autograd function that runs them."""

from __future__ import annotations

from typing import Any, Optional

import torch

from . import _library
from ._decoder import Decoder
from ._functions import MLP, SelfAttention
from ._params import LAYER_PARAMS
from ._state import ACTIVATIONS, DTYPES, TORCH_TO_HELIOS, check, same_dtype


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D float16 or bfloat16 CUDA tensors (fp32 accumulation, rounded
    once to the inputs' type), differentiable: both gradients are Helios products."""
    check("a", a, (2,))
    check("b", b, (2,))
    same_dtype("matmul", ("a", a), ("b", b))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"helios.torch.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not chain")
    return _library.mm(a, b, False, False)


def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, activation: Optional[str] = None
) -> torch.Tensor:
    """activation(x @ weight.T + bias) as torch.nn.functional.linear (weight is
    out_features x in_features; x is (..., in_features)), with the bias and the
    activation fused into the product's epilogue. activation: None, "relu",
    "gelu_tanh" or "silu". Differentiable: x and weight gradients are Helios
    products, submitted together. Where a gradient is wanted and there is an
    activation, Helios gives the pre-activation (bias fused), torch applies the
    activation in fp32 and the pre-activation is kept for the backward (its
    derivative is taken there, with no product recomputed)."""
    check("x", x)
    check("weight", weight, (2,))
    same_dtype("linear", ("x", x), ("weight", weight))
    if activation not in ACTIVATIONS:
        raise ValueError(f"helios.torch.linear: activation must be one of {list(ACTIVATIONS)}, got {activation!r}")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.shape != (weight.shape[0],) or not bias.is_cuda:
            raise ValueError(f"helios.torch.linear: bias must be a CUDA tensor of shape ({weight.shape[0]},)")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"helios.torch.linear: x's last dimension {x.shape[-1]} is not weight's in_features {weight.shape[1]}"
        )
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    training = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, bias))
    if activation is None or not training:  # the activation fused in the product's epilogue
        y = _library.linear(x2, weight, bias, activation)
    else:
        # Training: the pre-activation from Helios, the activation in torch (fp32), so
        # autograd keeps the pre-activation for its derivative (recomputing it in the
        # backward would cost a product and another CUDA <-> Vulkan hop pair).
        z = _library.linear(x2, weight, bias, None)
        y = ACTIVATIONS[activation](z.float()).to(z.dtype)
    return y.reshape(*lead, weight.shape[0])


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: Optional[float] = None
) -> torch.Tensor:
    """softmax(scale * q k^T [+ causal mask]) v for (B, H, S, d) float16 or bfloat16
    CUDA tensors, as torch's scaled_dot_product_attention (is_causal=causal).
    Differentiable: the backward is Helios's (``Device.attention_backward``: dQ, dK
    and dV from the saved output and log-sum-exp, no recomputed forward)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check(name, t, (4,))
    same_dtype("attention", ("q", q), ("k", k), ("v", v))
    o, _ = _library.attention(q, k, v, bool(causal), None if scale is None else float(scale))
    return o


def linear_operands(op: str, x: torch.Tensor, pairs: tuple) -> None:
    """Weights (out, in) and optional biases (out,) of one 16-bit dtype with x, chaining."""
    for wname, w, bname, bias, width in pairs:
        check(wname, w, (2,))
        same_dtype(op, ("x", x), (wname, w))
        if w.shape[1] != width:
            raise ValueError(f"helios.torch.{op}: {wname} is {tuple(w.shape)}; its in_features must be {width}")
        if bias is not None:
            check(bname, bias, (1,), TORCH_TO_HELIOS)
            if bias.shape != (w.shape[0],):
                raise ValueError(f"helios.torch.{op}: {bname} must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


@torch.compiler.disable
def mlp(
    x: torch.Tensor,
    w_up: torch.Tensor,
    b_up: Optional[torch.Tensor],
    w_down: torch.Tensor,
    b_down: Optional[torch.Tensor],
    activation: str = "gelu_tanh",
) -> torch.Tensor:
    """A transformer MLP, act(x @ w_up.T + b_up) @ w_down.T + b_down (weights as
    torch.nn.Linear stores them, (out, in); x is (..., in)), with each direction one
    group of Helios submissions: one CUDA <-> Vulkan hop pair for the forward (two
    products and, when a gradient is wanted, the activation as its own op on the kept
    pre-activation; without one, the activation fused in the first product's
    epilogue) and one for the backward (four products and the activation's backward;
    the bias gradients are summed by torch after). activation: "relu", "gelu_tanh"
    or "silu". Calling ``linear`` twice costs two hop pairs each way and a torch
    activation between."""
    check("x", x)
    if activation not in ACTIVATIONS or activation is None:
        raise ValueError(
            f"helios.torch.mlp: activation must be one of {[a for a in ACTIVATIONS if a]}, got {activation!r}"
        )
    linear_operands("mlp", x, (("w_up", w_up, "b_up", b_up, x.shape[-1]),))
    linear_operands("mlp", x, (("w_down", w_down, "b_down", b_down, w_up.shape[0]),))
    lead = x.shape[:-1]
    y = MLP.apply(x.reshape(-1, x.shape[-1]), w_up, b_up, w_down, b_down, activation)
    return y.reshape(*lead, w_down.shape[0])


@torch.compiler.disable
def self_attention(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: Optional[torch.Tensor],
    w_out: torch.Tensor,
    b_out: Optional[torch.Tensor],
    heads: int,
    causal: bool = True,
    scale: Optional[float] = None,
) -> torch.Tensor:
    """Multi-head self-attention on x (B, S, D): qkv = x @ w_qkv.T + b_qkv (w_qkv
    (3D, D), q, k and v in that order, each split into `heads` heads of D/heads),
    softmax(scale q k^T [+ causal mask]) v per head, the heads merged back to
    (B, S, D) and projected by w_out (D, D) and b_out, as the usual
    ``qkv.reshape(B, S, 3, H, hd).permute(2, 0, 3, 1, 4)`` / ``transpose(1, 2).reshape``
    composition. Each direction is one group of Helios submissions (one CUDA <->
    Vulkan hop pair): the products and the attention kernels, which read the heads
    straight out of the QKV product's rows and write them merged (backward: Helios's
    attention backward, dQ, dK, dV into the QKV gradient's rows); bias gradients are
    summed by torch after. scale: default 1/sqrt(D/heads)."""
    check("x", x, (3,))
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or x.shape[-1] % heads:
        raise ValueError(
            f"helios.torch.self_attention: heads must be a positive int dividing D={x.shape[-1]}, got {heads!r}"
        )
    d = x.shape[-1]
    linear_operands("self_attention", x, (("w_qkv", w_qkv, "b_qkv", b_qkv, d), ("w_out", w_out, "b_out", b_out, d)))
    if w_qkv.shape[0] != 3 * d or w_out.shape[0] != d:
        raise ValueError(
            f"helios.torch.self_attention: w_qkv must be ({3 * d}, {d}) and w_out ({d}, {d}), got "
            f"{tuple(w_qkv.shape)} and {tuple(w_out.shape)}"
        )
    return SelfAttention.apply(x, w_qkv, b_qkv, w_out, b_out, heads, bool(causal), scale)


@torch.compiler.disable
def decoder(
    x: torch.Tensor,
    layers: Any,
    heads: int,
    final_norm: tuple,
    head_weight: Optional[torch.Tensor] = None,
    *,
    causal: bool = True,
    eps: float = 1e-5,
    activation: str = "gelu_tanh",
    compute_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """A pre-LayerNorm transformer decoder stack on the fp32 residual stream x (B, S,
    D), each direction one group of Helios submissions (one CUDA <-> Vulkan hop pair
    for the whole forward and one for the whole backward). Per layer:
    ``x = x + self_attention(LN1(x)); x = x + mlp(LN2(x))`` (as ``self_attention``
    and ``mlp``), then the final LayerNorm and, with head_weight (V, D), the logits
    ``LN_f(x) @ head_weight.T`` (B, S, V); without it LN_f(x) (B, S, D). layers: one
    sequence per layer of the 12 tensors named in ``LAYER_PARAMS`` (LayerNorm
    weights and biases fp32 (D,); product weights (out, in) in the 16-bit compute
    type; product biases (out,) or None); final_norm: (weight, bias), fp32. The
    residual stream and the LayerNorm statistics stay fp32 on the device (the
    residual adds are fused into the next LayerNorm); products, attention and the
    activation run in the weights' type (float16 or bfloat16) with fp32
    accumulation. Differentiable in every input: LayerNorm and bias gradients are
    summed by torch from the group's per-block partial sums after it.
    compute_dtype (torch.float16 or torch.bfloat16): the product weights, biases
    and head weight may then also be fp32 master weights; the decoder casts them
    to it each call (inside its autograd function, into memory_pool() where the GPU
    has it) and returns their gradients in fp32: what a mixed-precision training
    step needs, without a cast op per weight in the caller's autograd graph."""
    check("x", x, (3,), {torch.float32: "float32"})
    if compute_dtype is not None and compute_dtype not in DTYPES:
        raise TypeError(
            f"helios.torch.decoder: compute_dtype must be torch.float16 or torch.bfloat16, got {compute_dtype}"
        )
    layers = [tuple(layer) for layer in layers]
    if any(len(layer) != len(LAYER_PARAMS) for layer in layers):
        raise ValueError(f"helios.torch.decoder: each layer is {len(LAYER_PARAMS)} tensors, {LAYER_PARAMS}")
    d = x.shape[-1]
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or d % heads:
        raise ValueError(f"helios.torch.decoder: heads must be a positive int dividing D={d}, got {heads!r}")
    if activation not in ACTIVATIONS or activation is None:
        raise ValueError(f"helios.torch.decoder: activation must be one of {[a for a in ACTIVATIONS if a]}")
    dtype = compute_dtype or (
        layers[0][2].dtype if layers else (head_weight.dtype if head_weight is not None else torch.bfloat16)
    )
    if dtype not in DTYPES:
        raise TypeError(
            f"helios.torch.decoder: the product weights are {dtype}: pass float16 or bfloat16 weights "
            "(fp32 master weights need compute_dtype=torch.bfloat16 or torch.float16)"
        )
    # the types a product weight may have: the compute type, and fp32 masters with compute_dtype
    weight_types = {dtype: TORCH_TO_HELIOS[dtype], **({torch.float32: "float32"} if compute_dtype else {})}
    for i, layer in enumerate(layers):
        _check_layer(i, dict(zip(LAYER_PARAMS, layer)), d, dtype, weight_types, compute_dtype)
    _check_tail(final_norm, head_weight, d, dtype, weight_types)
    flat = (
        [t for layer in layers for t in layer] + list(final_norm) + ([head_weight] if head_weight is not None else [])
    )
    cfg = (len(layers), heads, bool(causal), float(eps), activation, head_weight is not None, dtype, compute_dtype)
    return Decoder.apply(x.contiguous(), cfg, *flat)


def _check_layer(i: int, named: dict, d: int, dtype: Any, weight_types: dict, compute_dtype: Any) -> None:
    """decoder's layer i: LayerNorm weights fp32 (D,), product weights (out, in) of the
    weights' type (or fp32 masters with compute_dtype), biases (out,) or None."""
    fp32 = {torch.float32: "float32"}
    for nm in ("ln1_w", "ln1_b", "ln2_w", "ln2_b"):
        check(f"layers[{i}].{nm}", named[nm], (1,), fp32)
        if named[nm].shape != (d,):
            raise ValueError(f"helios.torch.decoder: layers[{i}].{nm} must be ({d},), got {tuple(named[nm].shape)}")
    hidden = named["w_up"].shape[0] if isinstance(named["w_up"], torch.Tensor) else 0
    for wn, bn, rows, cols in (
        ("w_qkv", "b_qkv", 3 * d, d),
        ("w_out", "b_out", d, d),
        ("w_up", "b_up", hidden, d),
        ("w_down", "b_down", d, hidden),
    ):
        check(f"layers[{i}].{wn}", named[wn], (2,), {**DTYPES, **weight_types})
        if named[wn].dtype not in weight_types:
            raise TypeError(
                f"helios.torch.decoder: layers[{i}].{wn} is {named[wn].dtype}; the weights share {dtype}"
                + ("" if compute_dtype else " (fp32 master weights need compute_dtype)")
            )
        if tuple(named[wn].shape) != (rows, cols):
            raise ValueError(
                f"helios.torch.decoder: layers[{i}].{wn} must be ({rows}, {cols}), got {tuple(named[wn].shape)}"
            )
        bias = named[bn]
        if bias is not None:
            check(f"layers[{i}].{bn}", bias, (1,), TORCH_TO_HELIOS)
            if bias.shape != (rows,):
                raise ValueError(f"helios.torch.decoder: layers[{i}].{bn} must be ({rows},), got {tuple(bias.shape)}")


def _check_tail(final_norm: tuple, head_weight: Optional[torch.Tensor], d: int, dtype: Any, weight_types: dict) -> None:
    """decoder's final LayerNorm (weight, bias) fp32 (D,) and the head weight (V, D)."""
    fp32 = {torch.float32: "float32"}
    if len(final_norm) != 2:
        raise ValueError("helios.torch.decoder: final_norm is (weight, bias)")
    for nm, t in zip(("final_norm weight", "final_norm bias"), final_norm):
        check(nm, t, (1,), fp32)
        if t.shape != (d,):
            raise ValueError(f"helios.torch.decoder: {nm} must be ({d},), got {tuple(t.shape)}")
    if head_weight is not None:
        check("head_weight", head_weight, (2,), {**DTYPES, **weight_types})
        if head_weight.dtype not in weight_types or head_weight.shape[1] != d:
            raise ValueError(
                f"helios.torch.decoder: head_weight must be (V, {d}) {dtype}, got {tuple(head_weight.shape)} {head_weight.dtype}"
            )


# Unannotated on purpose: DistributedDataParallel.register_comm_hook compares the
# hook's annotations with its own classes, and this module's are strings (PEP 563).
def ddp_comm_hook(state, bucket):
    """A DistributedDataParallel communication hook for models with Helios ops:
    ``ddp.register_comm_hook(None, helios.torch.ddp_comm_hook)`` (state: the process
    group, None for the default one). Each bucket's gradients are averaged over the
    group, as DDP's default hook does, by an all-reduce that torch's current stream
    waits for (the host does not), so that no collective runs on the GPU beside
    Helios's work: Helios's next group waits on torch's stream, hence on the
    all-reduce. Overlap of communication with Helios's own compute is given up; the
    CUDA and Vulkan contexts would time-slice it away anyway."""
    import torch.distributed as dist

    group = state if state is not None else dist.group.WORLD
    buf = bucket.buffer()
    buf.div_(dist.get_world_size(group))
    dist.all_reduce(buf, group=group)  # not async_op: the current stream waits for NCCL's
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(buf)
    return done

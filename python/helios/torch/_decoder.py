"""The decoder stack as one autograd function: each direction one live group."""

from __future__ import annotations

import weakref
from typing import Any, Optional

import torch

from ._blocks import KEPT_ATTENTION, KEPT_MLP, attention_backward, attention_forward, mlp_backward, mlp_forward
from ._casts import cast_products, release_casts
from ._group import Group
from ._params import FINAL_B, FINAL_W, HEAD, index, layers_of, reads_fp32, tail
from ._state import RUNTIME


def prestage(group: Group, tensors: list, flat: Any, n_layers: int) -> None:
    """Stages a decoder's torch operands before its group goes live: the tensors as
    they are, and its parameters the way the ops read them (LayerNorm parameters and
    product biases fp32, product weights as they are)."""
    items: list[tuple[Any, Optional[str]]] = [(t, None) for t in tensors if t is not None]
    items += [(t, "float32" if reads_fp32(i, n_layers) else None) for i, t in enumerate(flat) if t is not None]
    group.stage_all(items)


class Decoder(torch.autograd.Function):
    """A pre-LayerNorm decoder stack (and its final LayerNorm and head), each
    direction one group: see ``decoder``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cfg: tuple, *flat: Any):
        n_layers, heads, causal, eps, act, has_head, dtype, compute_dtype = cfg
        b, s, d = x.shape
        bsd = (b, s, d)
        training = any(t is not None and t.requires_grad for t in (x, *flat))  # before the casts (which do not)
        ctx.flat_dtypes = [None if t is None else t.dtype for t in flat]
        ctx.cast_slots, ctx.cast_lend = [], next(RUNTIME.lendings) if training else 0
        if compute_dtype is not None:
            flat, ctx.cast_slots = cast_products(flat, n_layers, has_head, dtype, x, lend=ctx.cast_lend)
            if ctx.cast_lend and ctx.cast_slots:  # a graph freed without its backward gives them back too
                weakref.finalize(ctx, release_casts, ctx.cast_slots, ctx.cast_lend)
        layers = layers_of(flat, n_layers)
        lnf_w, lnf_b = flat[tail(n_layers, FINAL_W)], flat[tail(n_layers, FINAL_B)]
        w_head = flat[tail(n_layers, HEAD)] if has_head else None
        saved: list = []
        with RUNTIME.lock:
            group = Group(x)
            stream: Any = x.reshape(b * s, d)
            prestage(group, [stream], flat, n_layers)
            with group.live():  # built and recorded op by op: the GPU starts on the first layers at once
                branch = None
                for p in layers:
                    h1, h1_t, stream, stream_t, st1, st1_t = group.layernorm(
                        stream, p["ln1_w"], p["ln1_b"], branch, eps, dtype
                    )
                    a, _, kept_a = attention_forward(
                        group,
                        h1,
                        p["w_qkv"],
                        p["b_qkv"],
                        p["w_out"],
                        p["b_out"],
                        bsd,
                        heads,
                        causal,
                        None,
                        export=False,
                    )
                    h2, h2_t, mid, mid_t, st2, st2_t = group.layernorm(stream, p["ln2_w"], p["ln2_b"], a, eps, dtype)
                    branch, _, kept_m = mlp_forward(
                        group, h2, p["w_up"], p["b_up"], p["w_down"], p["b_down"], act, training, export=False
                    )
                    saved += [stream_t, st1_t, h1_t, *kept_a, mid_t, st2_t, h2_t, *kept_m]
                    stream = mid
                hf, hf_t, stream, stream_t, stf, stf_t = group.layernorm(stream, lnf_w, lnf_b, branch, eps, dtype)
                saved += [stream_t, stf_t, hf_t]
                out_t = group.product(hf, w_head, trans_b=True)[1] if w_head is not None else hf_t
        ctx.cfg, ctx.bsd = cfg, bsd
        ctx.save_for_backward(*flat, *saved)
        return out_t.reshape(b, s, -1)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        n_layers, heads, causal, eps, act, has_head, dtype, _ = ctx.cfg
        b, s, d = ctx.bsd
        n_flat = tail(n_layers, HEAD) + int(has_head)
        every = ctx.saved_tensors
        release_casts(
            ctx.cast_slots, ctx.cast_lend
        )  # read (the version check above) and held by `every` until this returns
        flat, saved = every[:n_flat], list(every[n_flat:])
        layers = layers_of(flat, n_layers)
        lnf_w = flat[tail(n_layers, FINAL_W)]
        w_head = flat[tail(n_layers, HEAD)] if has_head else None
        per_layer = (len(saved) - 3) // n_layers if n_layers else 0
        stream_f, stf, hf = saved[-3:]
        g_out = grads[0].reshape(b * s, -1)
        gflat: list = [None] * n_flat
        # (indices in flat, torch tensor): a bias's index and the rows that sum to its gradient,
        # or a LayerNorm's weight and bias indices and its partial sums
        sums: list = []
        with RUNTIME.lock:
            group = Group(g_out)
            prestage(group, [g_out, *saved], flat, n_layers)
            with group.live():
                if w_head is not None:
                    g_hf, _ = group.product(g_out, w_head, export=False)
                    gflat[tail(n_layers, HEAD)] = group.product(g_out, hf, trans_a=True)[1]
                else:
                    g_hf = g_out
                g_stream, g_stream_t, g_branch, g_branch_t, pf = group.layernorm_backward(
                    g_hf, stream_f, stf, lnf_w, None, export_gx=n_layers == 0
                )
                sums.append(((tail(n_layers, FINAL_W), tail(n_layers, FINAL_B)), pf))
                for li in reversed(range(n_layers)):
                    rec = saved[li * per_layer : (li + 1) * per_layer]
                    g_stream, g_stream_t, g_branch, g_branch_t = _layer_backward(
                        group, li, layers[li], rec, (g_stream, g_branch, g_branch_t), ctx.cfg, (b, s, d), gflat, sums
                    )
        g_x = g_stream_t
        needs = ctx.needs_input_grad
        gflat = _finish_grads(gflat, sums, flat, ctx.flat_dtypes, needs)
        return (g_x.reshape(b, s, d) if needs[0] else None, None, *gflat)


def _layer_backward(group: Any, li: int, p: dict, rec: Any, g_in: tuple, cfg: tuple, bsd: tuple,
                    gflat: list, sums: list) -> tuple:  # fmt: skip
    """Layer li's backward inside the group (the MLP, LayerNorm 2, attention, LayerNorm
    1) from g_in, the gradients of the stream and of the branch (and the branch's torch
    view); fills the layer's weight gradients into gflat and its bias and LayerNorm
    partial sums into sums; returns (stream, its torch view, branch, its torch view)
    for the layer below."""
    _, heads, causal, _, act, _, _, _ = cfg
    g_stream, g_branch, g_branch_t = g_in
    stream_in, st1, h1 = rec[0:3]
    ka = 3 + KEPT_ATTENTION
    kept_a = tuple(rec[3:ka])
    mid, st2, h2 = rec[ka : ka + 3]
    kept_m = tuple(rec[ka + 3 : ka + 3 + KEPT_MLP])
    gh2, _, gw_up, gw_down, gz = mlp_backward(
        group, g_branch, h2, p["w_up"], p["w_down"], kept_m, act, (True,) * 3, export=False
    )
    gflat[index(li, "w_up")], gflat[index(li, "w_down")] = gw_up, gw_down
    sums += [((index(li, "b_up"),), gz), ((index(li, "b_down"),), g_branch_t)]
    g_mid, _, g_a, g_a_t, p2 = group.layernorm_backward(gh2, mid, st2, p["ln2_w"], g_stream, export_gx=False)
    sums.append(((index(li, "ln2_w"), index(li, "ln2_b")), p2))
    gh1, _, gw_qkv, gw_out, g_qkv = attention_backward(
        group, g_a, h1, p["w_qkv"], p["w_out"], kept_a, bsd, heads, causal, None, (True,) * 3, export=False
    )
    gflat[index(li, "w_qkv")], gflat[index(li, "w_out")] = gw_qkv, gw_out
    sums += [((index(li, "b_qkv"),), g_qkv), ((index(li, "b_out"),), g_a_t)]
    g_stream, g_stream_t, g_branch, g_branch_t, p1 = group.layernorm_backward(
        gh1,
        stream_in,
        st1,
        p["ln1_w"],
        g_mid,
        export_gx=li == 0,  # layer 0's: the input's gradient
    )
    sums.append(((index(li, "ln1_w"), index(li, "ln1_b")), p1))
    return g_stream, g_stream_t, g_branch, g_branch_t


def _finish_grads(gflat: list, sums: list, flat: Any, flat_dtypes: Any, needs: Any) -> list:
    """After the group: the bias and LayerNorm gradients as row sums in torch (fp32
    sums, no fp32 copy), the gradients not asked for dropped, and those of fp32 master
    weights (cast in the forward) widened back to fp32 in one call."""
    for at, t in sums:
        if len(at) == 2:  # LayerNorm partials: (groups, 2, d) -> gamma's and beta's gradients
            both = t.sum(0)
            gflat[at[0]], gflat[at[1]] = both[0].to(flat[at[0]].dtype), both[1].to(flat[at[1]].dtype)
        elif flat[at[0]] is not None:
            gflat[at[0]] = t.sum(0, dtype=torch.float32).to(flat[at[0]].dtype)
    gflat = [gv if needs[2 + i] else None for i, gv in enumerate(gflat)]
    widen = [i for i, gv in enumerate(gflat) if gv is not None and gv.dtype != flat_dtypes[i]]
    if widen:
        wide = [torch.empty(gflat[i].shape, dtype=flat_dtypes[i], device=gflat[i].device) for i in widen]
        torch._foreach_copy_(wide, [gflat[i] for i in widen])
        for i, gv in zip(widen, wide):
            gflat[i] = gv
    return gflat

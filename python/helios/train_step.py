"""A decoder's whole training step recorded once into a Capture and replayed as one
submission: the embedding, the blocks, the final LayerNorm, the tied head and the
cross-entropy, their backward, the gradient norm and AdamW over every parameter,
with nothing recorded again and nothing computed on the host.

The model is the training suite's GPT (``helios.harness.workloads.train.model``; torch's
``nn.Module`` names): learned positions, pre-LayerNorm blocks of causal multi-head
self-attention (one QKV product) and a GELU (tanh) MLP, a final LayerNorm and a head
tied to the token table; bf16 products and attention with fp32 accumulation, an fp32
residual stream, fp32 master weights with the 16-bit copies the products read (written
by AdamW), torch.optim.AdamW's update after torch's ``clip_grad_norm_``.

A step whose gradients are not finite (a NaN loss: a token past the vocabulary, an
overflow) changes no parameter or moment: AdamW skips the update, the loss and the
gradient norm say what happened. What a replay reads is what the Tensors hold: ``step(ids, targets)`` writes the batch
and the step's words (the step count, the learning rate, read by AdamW) and replays;
the loss and the gradient norm stay on the device until read. Every state Tensor
(parameters, gradients, moments, copies) is the caller's (``TrainState``): a torch
user's are torch's own memory (helios.torch.training_plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import train_ops as T
from .attention import resolve_scale
from .elementwise import LAYERNORM_ROWS
from .gemm import activation_code, product_into
from .tensor import Tensor

OP_KINDS = ("products", "attention", "norms", "elementwise", "embedding", "loss", "optimizer")
WORDS = 3  # step count, learning rate's float32 bits, the gradients' squared norm's float32 bits
STEP_WORD, LR_WORD, NORM_WORD = range(WORDS)


@dataclass(frozen=True)
class GPTShape:
    """The suite's GPT: vocabulary, width, heads, layers, sequence, micro-batch."""

    vocab: int
    d: int
    heads: int
    layers: int
    seq: int
    batch: int
    eps: float = 1e-5
    dtype: str = "bfloat16"

    @property
    def rows(self) -> int:
        return self.batch * self.seq

    def parameters(self) -> list[tuple[str, tuple]]:
        """(name, shape) of every parameter, in torch's named_parameters() order."""
        d = self.d
        out: list[tuple[str, tuple]] = [("tok.weight", (self.vocab, d)), ("pos.weight", (self.seq, d))]
        for i in range(self.layers):
            b = f"blocks.{i}."
            out += [(b + n, (d,)) for n in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias")]
            out += [(b + "qkv.weight", (3 * d, d)), (b + "qkv.bias", (3 * d,)), (b + "proj.weight", (d, d))]
            out += [(b + "proj.bias", (d,)), (b + "up.weight", (4 * d, d)), (b + "up.bias", (4 * d,))]
            out += [(b + "down.weight", (d, 4 * d)), (b + "down.bias", (d,))]
        return out + [("lnf.weight", (d,)), ("lnf.bias", (d,))]


@dataclass
class ParamState:
    """One parameter's Tensors: the fp32 master p, its gradient g and AdamW's moments m
    and v (fp32, p's shape), and its 16-bit copy (what the products read, for the
    weights they read)."""

    p: Tensor
    g: Tensor
    m: Tensor
    v: Tensor
    copy: Tensor


ALIGN = 256  # elements between parameters' starts in the flat buffers: every view binds where it starts


def flat_layout(shape: GPTShape) -> tuple[dict[str, tuple[int, tuple]], int]:
    """Each parameter's (first element, shape) in the flat buffers, and their length."""
    at, out = 0, {}
    for name, dims in shape.parameters():
        out[name] = (at, dims)
        at += -(-math.prod(dims) // ALIGN) * ALIGN
    return out, at


class TrainState:
    """Every parameter's Tensors as views of five flat Tensors (``flat``: p, g, m, v
    fp32 and the 16-bit copy), so that the gradient norm and AdamW are one pass each
    over all of them; ``state[name]`` is a parameter's ParamState. The padding between
    parameters stays 0 (no gradient, so AdamW leaves it 0)."""

    def __init__(self, dev: Any, shape: GPTShape, flat: Optional[ParamState] = None, exportable: bool = False) -> None:
        self.layout, self.n = flat_layout(shape)
        if flat is None:
            zeros = np.zeros(self.n, np.float32)
            t = {k: dev.empty((self.n,), "float32", exportable=exportable) for k in ("p", "g", "m", "v")}
            for x in t.values():
                x.copy_(zeros)
            copy = dev.empty((self.n,), shape.dtype, exportable=exportable)
            copy.copy_(zeros)
            flat = ParamState(t["p"], t["g"], t["m"], t["v"], copy)
        self.flat = flat
        self.params: dict[str, ParamState] = {}
        for name, (at, dims) in self.layout.items():
            n = math.prod(dims)
            view = lambda t: t[at : at + n].reshape(dims)  # noqa: E731
            self.params[name] = ParamState(*(view(getattr(flat, k)) for k in ("p", "g", "m", "v", "copy")))

    def __getitem__(self, name: str) -> ParamState:
        return self.params[name]

    def __iter__(self) -> Any:
        return iter(self.params)


def upload_state(dev: Any, shape: GPTShape, params: dict[str, np.ndarray]) -> TrainState:
    """A TrainState on dev from host arrays (fresh moments, the copies rounded once)."""
    state = TrainState(dev, shape)
    host = np.zeros(state.n, np.float32)
    for name, (at, dims) in state.layout.items():
        host[at : at + math.prod(dims)] = np.asarray(params[name], np.float32).reshape(-1)
    state.flat.p.copy_(host)
    state.flat.copy.copy_(host)
    return state


@dataclass(frozen=True)
class AdamWSettings:
    """torch.optim.AdamW's settings and torch's ``clip_grad_norm_``'s max_norm (0: none)."""

    lr: float = 3e-4
    betas: tuple = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.1
    max_norm: float = 1.0


class TrainingStep:
    """The step of GPTShape `shape` over `state`, recorded into one Capture at
    construction (nothing runs then); ``step()`` replays it. exportable: the batch, the
    words and the loss in memory CUDA maps (helios.torch.training_plan's). halves: also
    record the step as two captures (``halves``: forward and backward, then the gradient
    norm and AdamW), for a gradient all-reduce between them."""

    def __init__(self, dev: Any, shape: GPTShape, state: TrainState, optim: AdamWSettings = AdamWSettings(),
                 exportable: bool = False, halves: bool = False) -> None:  # fmt: skip
        missing = sorted({n for n, _ in shape.parameters()} - set(state.params))
        if missing:
            raise ValueError(f"TrainingStep: the state has no {missing[:3]}{'...' if len(missing) > 3 else ''}")
        if shape.d % shape.heads:
            raise ValueError(f"TrainingStep: d {shape.d} is not a multiple of heads {shape.heads}")
        self.dev, self.shape, self.state, self.optim = dev, shape, state, optim
        r, d, dt = shape.rows, shape.d, shape.dtype
        # the batch, the words and the loss: exportable where torch reads and writes them (DLPack)
        self.ids = dev.empty((shape.batch, shape.seq), "int32", exportable=exportable)
        self.targets = dev.empty((r,), "int32", exportable=exportable)
        self.words = dev.empty((WORDS,), "int32", exportable=exportable)
        self.words.copy_(np.zeros(WORDS, np.int32))
        self.loss = dev.empty((1,), "float32", exportable=exportable)
        self.losses = dev.empty((r,), "float32")
        self._ones = dev.upload(np.ones((1, r), np.float32), dtype=dt)  # a bias gradient: ones @ G
        self._acts = [_LayerActs(dev, shape) for _ in range(shape.layers)]
        self._f = {
            "x0": dev.empty((r, d), "float32"),
            "stream": dev.empty((r, d), "float32"),
            "stats": dev.empty((r, 2), "float32"),
            "hf": dev.empty((r, d), dt),
            "logits": dev.empty((r, shape.vocab), dt),
        }
        self._g = _Grads(dev, shape)
        self._partials = dev.empty((-(-state.n // T.SQ_CHUNK),), "float32")
        self.steps = 0
        self._only: Optional[str] = None  # split(): record only the ops of this kind
        with dev.capture() as cap:
            self.record()
        self.capture = cap
        # halves: the step also as two captures, the forward and backward, then the
        # optimizer, so that the gradients can be averaged over GPUs between them
        self.halves: Optional[tuple[Any, Any]] = None
        if halves:
            with dev.capture() as first:
                self._forward()
                self._backward()
            with dev.capture() as second:
                self._optimizer()
            self.halves = (first, second)

    def step_words(self, lr: Optional[float] = None) -> np.ndarray:
        """The words the next replay reads: the step count (1 first), the learning rate's
        float32 bits (the settings' unless given) and the norm's word (written by it)."""
        lr_bits = np.float32(self.optim.lr if lr is None else lr).view(np.int32)
        return np.array([self.steps + 1, lr_bits, 0], np.int32)

    def step(self, ids: Any = None, targets: Any = None, lr: Optional[float] = None, eager: bool = False) -> Any:
        """One training step: the batch written where given (host arrays: ids and targets
        (batch, seq) token ids), the step's words, one replay waited for (its PlanRun).
        eager: the recorded operations run one by one instead (what a replay must equal;
        None returned)."""
        if ids is not None:
            self.ids.copy_(ids)
        if targets is not None:
            self.targets.copy_(np.reshape(np.asarray(targets), -1))
        self.words.copy_(self.step_words(lr))
        run = None
        if eager:
            self.record()
        else:
            run = self.capture.replay()
        self.steps += 1
        return run

    def read_loss(self) -> float:
        """The last step's mean loss (read from the device)."""
        return float(self.loss.numpy()[0])

    def read_norm(self) -> float:
        """The last step's gradient norm before clipping (read from the device)."""
        return float(np.sqrt(self.words.numpy()[NORM_WORD : NORM_WORD + 1].view(np.float32)[0]))

    def split(self, iters: int = 5, warmup: int = 2) -> dict[str, float]:
        """The step's GPU ms by kind of op (OP_KINDS): each kind's operations recorded
        alone into a capture of their own and timed (median of `iters` replays after
        `warmup`), and the whole step's ("step"). Kinds run alone lose the overlap the
        step has between them: their sum is at least the step's. The replays compute on
        whatever the tensors hold: call it between steps, not inside one."""
        out: dict[str, float] = {}
        try:
            for kind in OP_KINDS:
                self._only = kind
                with self.dev.capture() as cap:
                    self.record()
                out[kind] = cap.time(iters, warmup).median("gpu_ms")
                cap.close()
        finally:
            self._only = None
        out["step"] = self.capture.time(iters, warmup).median("gpu_ms")
        return out

    def _on(self, kind: str) -> bool:
        return self._only is None or self._only == kind

    # -- the recording -------------------------------------------------------------

    def record(self) -> None:
        """The step's operations in order (inside Device.capture(), or run one by one)."""
        self._forward()
        self._backward()
        self._optimizer()

    def _product(self, a: Tensor, b: Tensor, out: Tensor, *, ta: bool = False, tb: bool = False,
                 bias: Optional[Tensor] = None, act: Optional[str] = None) -> None:  # fmt: skip
        if self._on("products"):
            product_into(self.dev, a, b, out, trans_a=ta, trans_b=tb, bias=bias, activation=act)

    def _copy(self, name: str) -> Tensor:
        """The 16-bit copy of a product's weight."""
        return self.state[name].copy

    def _bias_grad(self, g16: Tensor, name: str) -> None:
        out = self.state[name].g
        self._product(self._ones, g16, out.reshape(1, out.size))

    def _attend(self, qkv: Tensor, merged: Tensor, lse: Tensor, backward: Optional[tuple] = None) -> None:
        if not self._on("attention"):
            return
        s = self.shape
        hd, dt = s.d // s.heads, qkv.dtype
        kw = {
            "causal": True,
            "scale": resolve_scale(None, hd),
            "variant": self.dev._pick_attention(None, hd, s.seq, True, backward is not None, dt),
            "dtype": dt.name,
            "layout": (s.heads, 3 * s.d, s.d, 0, s.d, 2 * s.d),
        }
        sizes = (s.batch * s.heads, s.seq, s.seq, hd)
        if backward is None:
            self.dev._attention(qkv, qkv, qkv, *sizes, **kw, out=merged, lse=lse)
        else:
            g_merged, g_qkv = backward
            self.dev._attention_backward(qkv, qkv, qkv, merged, g_merged, lse, g_qkv, g_qkv, g_qkv, *sizes, **kw)

    def _norm(self, x: Tensor, name: str, h: Tensor, stats: Tensor, branch: Optional[Tensor], x_out: Tensor) -> None:
        if not self._on("norms"):
            return
        s = self.shape
        w, b = self.state[name + ".weight"].p, self.state[name + ".bias"].p
        self.dev._layernorm(x, w, b, h, stats, s.rows, s.d, s.eps, s.dtype, branch, None if branch is None else x_out)

    def _norm_backward(self, gh: Tensor, x: Tensor, stats: Tensor, name: str, gx: Tensor, gx16: Tensor,
                       g_res: Optional[Tensor]) -> None:  # fmt: skip
        if not self._on("norms"):
            return
        s, g = self.shape, self._g
        self.dev._layernorm_backward(gh, x, stats, self.state[name + ".weight"].p, gx, gx16, g.partial, s.rows, s.d,
                                     s.dtype, g_res)  # fmt: skip
        both = g.partial.reshape(g.partial.shape[0], 2 * s.d)
        T.column_sum(both, self.state[name + ".weight"].g, start=0)
        T.column_sum(both, self.state[name + ".bias"].g, start=s.d)

    def _forward(self) -> None:
        s, st, f = self.shape, self.state, self._f
        if self._on("embedding"):
            T.embed(self.ids, st["tok.weight"].p, st["pos.weight"].p, f["x0"])
        stream, branch = f["x0"], None
        for i, a in enumerate(self._acts):
            p = f"blocks.{i}."
            self._norm(stream, p + "ln1", a.h1, a.st1, branch, a.stream)
            stream = stream if branch is None else a.stream
            a.stream_in = stream
            self._product(a.h1, self._copy(p + "qkv.weight"), a.qkv, tb=True, bias=st[p + "qkv.bias"].p)
            self._attend(a.qkv, a.merged, a.lse)
            self._product(a.merged, self._copy(p + "proj.weight"), a.attn, tb=True, bias=st[p + "proj.bias"].p)
            self._norm(stream, p + "ln2", a.h2, a.st2, a.attn, a.mid)
            self._product(a.h2, self._copy(p + "up.weight"), a.z, tb=True, bias=st[p + "up.bias"].p)
            if self._on("elementwise"):
                self.dev._activation(a.z, a.act, a.z.size, activation_code("gelu"), s.dtype, None)
            self._product(a.act, self._copy(p + "down.weight"), a.y, tb=True, bias=st[p + "down.bias"].p)
            stream, branch = a.mid, a.y
        self._norm(stream, "lnf", f["hf"], f["stats"], branch, f["stream"])
        self._final_in = stream if branch is None else f["stream"]
        self._product(f["hf"], self._copy("tok.weight"), f["logits"], tb=True)
        if self._on("loss"):
            T.cross_entropy(f["logits"], self.targets, self.losses, f["logits"], 1.0 / s.rows)
            T.column_sum(self.losses.reshape(s.rows, 1), self.loss, scale=1.0 / s.rows)

    def _backward(self) -> None:
        s, st, f, g = self.shape, self.state, self._f, self._g
        dlogits = f["logits"]  # the cross-entropy wrote the gradient over the logits
        self._product(dlogits, self._copy("tok.weight"), g.gh)  # d(hf)
        self._product(dlogits, f["hf"], st["tok.weight"].g, ta=True)  # the tied head's part of the table's gradient
        g_stream, g_branch = g.stream[0], g.branch[0]
        self._norm_backward(g.gh, self._final_in, f["stats"], "lnf", g_stream, g_branch, None)
        for i in reversed(range(s.layers)):
            a, p = self._acts[i], f"blocks.{i}."
            # the MLP: g_branch is the gradient of its output y
            self._product(g_branch, self._copy(p + "down.weight"), g.gh4)
            self._product(g_branch, a.act, st[p + "down.weight"].g, ta=True)
            self._bias_grad(g_branch, p + "down.bias")
            if self._on("elementwise"):
                self.dev._activation(a.z, g.gz, a.z.size, activation_code("gelu"), s.dtype, g.gh4)
            self._product(g.gz, self._copy(p + "up.weight"), g.gh)
            self._product(g.gz, a.h2, st[p + "up.weight"].g, ta=True)
            self._bias_grad(g.gz, p + "up.bias")
            self._norm_backward(g.gh, a.mid, a.st2, p + "ln2", g.mid, g.attn, g_stream)
            # the attention: g.attn is the gradient of its output projection's output
            self._product(g.attn, self._copy(p + "proj.weight"), g.merged)
            self._product(g.attn, a.merged, st[p + "proj.weight"].g, ta=True)
            self._bias_grad(g.attn, p + "proj.bias")
            self._attend(a.qkv, a.merged, a.lse, backward=(g.merged, g.qkv))
            self._product(g.qkv, self._copy(p + "qkv.weight"), g.gh)
            self._product(g.qkv, a.h1, st[p + "qkv.weight"].g, ta=True)
            self._bias_grad(g.qkv, p + "qkv.bias")
            nxt = 1 - g.stream.index(g_stream)
            g_stream, g_branch = g.stream[nxt], g.branch[nxt]
            self._norm_backward(g.gh, a.stream_in, a.st1, p + "ln1", g_stream, g_branch, g.mid)
        if self._on("embedding"):  # the table's gradient adds to the head's; the positions' is its own
            T.embed_backward(self.ids, g_stream, st["tok.weight"].g, None, s.seq, accumulate=True)
            T.embed_backward(self.ids, g_stream, None, st["pos.weight"].g, s.seq)

    def _optimizer(self) -> None:
        if not self._on("optimizer"):
            return
        o, flat = self.optim, self.state.flat
        chunks = T.sum_squares(flat.g, self._partials)
        T.column_sum(self._partials[:chunks].reshape(chunks, 1), self.words, at=NORM_WORD, n=1)
        T.adamw(
            flat.p, flat.m, flat.v, flat.g, self.words, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay,
            copy=flat.copy, step_word=STEP_WORD, lr_word=LR_WORD, max_norm=o.max_norm, norm_word=NORM_WORD,
            skip_nonfinite=True,
        )  # fmt: skip


class _LayerActs:
    """What a block's forward keeps for its backward (written every step, in place)."""

    def __init__(self, dev: Any, s: GPTShape) -> None:
        r, d, dt = s.rows, s.d, s.dtype
        self.stream = dev.empty((r, d), "float32")  # LayerNorm 1's input: the stream with the last branch added
        self.stream_in: Tensor = self.stream  # layer 0's is the embedding's output (set at recording)
        self.st1, self.st2 = dev.empty((r, 2), "float32"), dev.empty((r, 2), "float32")
        self.h1, self.h2 = dev.empty((r, d), dt), dev.empty((r, d), dt)
        self.qkv, self.merged = dev.empty((r, 3 * d), dt), dev.empty((r, d), dt)
        self.lse = dev.empty((s.batch, s.heads, s.seq), "float32")
        self.attn, self.mid = dev.empty((r, d), dt), dev.empty((r, d), "float32")
        self.z, self.act, self.y = dev.empty((r, 4 * d), dt), dev.empty((r, 4 * d), dt), dev.empty((r, d), dt)


class _Grads:
    """The backward's activations' gradients, one set reused by every layer (the
    capture orders each reuse after the reads before it)."""

    def __init__(self, dev: Any, s: GPTShape) -> None:
        r, d, dt = s.rows, s.d, s.dtype
        self.stream = [dev.empty((r, d), "float32") for _ in range(2)]  # the stream's, layer by layer in turn
        self.branch = [dev.empty((r, d), dt) for _ in range(2)]
        self.mid = dev.empty((r, d), "float32")
        self.gh, self.gh4, self.gz = dev.empty((r, d), dt), dev.empty((r, 4 * d), dt), dev.empty((r, 4 * d), dt)
        self.attn, self.merged, self.qkv = dev.empty((r, d), dt), dev.empty((r, d), dt), dev.empty((r, 3 * d), dt)
        self.partial = dev.empty((-(-r // LAYERNORM_ROWS), 2, d), "float32")

"""Replayable plans: operations on Tensors recorded once into a command buffer of
their own and replayed with one submission and one wait, what a decode step is
per token (a Vulkan counterpart of a CUDA graph)::

    with dev.plan() as p:                    # recorded when the block ends
        h = p.matmul(x, w1, bias=b1, activation="gelu")
        y = p.matmul(h, w2, bias=b2)
    run = p.replay()                         # run.host_ms, run.wall_ms, run.gpu_ms
    x.copy_(next_input); p.replay()          # new contents, the same recording

A replay reads whatever the Tensors hold then: what changes between replays is
their contents (``Tensor.copy_``) and the plan's parameter words, never the
recording. Besides products a plan records LayerNorm and a decode step's ops: the
embedding gather, attention of one position over a KV cache (appending its K and
V) and the top-1, which read the token and the position from parameter words
(``dev.plan(params=2)``; ``p.replay(params={1: pos})``, ``p.params()``). A barrier
stands only before an operation that reads or writes what an earlier one since the
last barrier wrote (or writes what it read). The plan holds every Tensor it binds;
closing the Device releases it (a replay then raises DeviceClosedError).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import _helios, plan_trace
from .dtypes import bfloat16, float16
from .elementwise import layernorm_operands
from .gemm import Chain
from .tensor import Tensor
from .validate import count, got_tensor, real


@dataclass(frozen=True)
class PlanRun:
    """One replay as the engine timed it: host_ms from the call to the submission's
    return (what launching costs the CPU), wall_ms to the end of the wait, gpu_ms
    between timestamps around the plan (0.0 where the device has none)."""

    host_ms: float
    wall_ms: float
    gpu_ms: float


@dataclass(frozen=True)
class PlanTiming:
    """Replays one after another (each waited for), as a decode loop runs them."""

    ops: int
    runs: list[PlanRun]

    def median(self, field: str) -> float:
        return float(np.median([getattr(r, field) for r in self.runs]))


@dataclass(frozen=True)
class RunShape:
    """A plan's persistent runs as recorded: how many, their grid in workgroups (the
    smallest run's; 0 without runs) and the most registers a thread of their kernels
    takes where the driver reports it (NVIDIA; else 0). Fewer than two workgroups an SM
    says a kernel went over 128 registers (docs/guide/decode.md, "The grid")."""

    runs: int
    grid: int
    registers: int


class Plan(Chain):
    """Operations recorded like a Chain's (``matmul``, and ``layernorm``, ``rmsnorm``,
    ``embed``, ``rope``, ``attention_decode``, ``swiglu``, ``top1``, ``adamw``; each one's
    arguments in ``_helios.PLAN_OPS``), compiled into a replayable plan when the
    with-block ends (or at ``record()``). Not run at recording. params: how many
    uint32 parameter words the plan has (0..16), all 0 at first."""

    def __init__(self, device: Any, params: int = 0) -> None:
        super().__init__(device)
        self._plan: Optional[Any] = None
        self._n_params = count("plan: params", params, 0, 16)

    def record(self) -> "Plan":
        """Compile the recorded operations into the plan (once)."""
        if self._plan is not None:
            raise ValueError("plan: already recorded; record a new plan for other operations")
        if not self._ops:
            raise ValueError("plan: no operations recorded")
        self._plan = self._dev._plan(self._ops, self._n_params)
        return self

    def _adding(self) -> None:
        if self._plan is not None:
            raise ValueError("plan: recorded already; operations are added before the with-block ends")

    def _add(self, kind: str, label: str, **fields: Any) -> None:
        """An op dict of `kind` with exactly the arguments the op table declares for it
        (shaders/ops.py, as _helios.PLAN_OPS): a key missing or unknown is this
        module's error, said as such."""
        self._adding()
        args = _helios.PLAN_OPS[kind]
        missing = [key for key, _, optional in args if not optional and key not in fields]
        unknown = sorted(set(fields) - {key for key, _, _ in args})
        if missing or unknown:
            raise TypeError(f"plan.{kind}: the op table (_helios.PLAN_OPS) has no {unknown} and needs {missing}")
        self._ops.append(dict(kind=kind, **fields))
        self._variants.append(label)

    def _word(self, what: str, slot: int) -> int:
        return count(f"plan: {what}", slot, 0, self._n_params - 1) if self._n_params else self._no_words(what)

    def _no_words(self, what: str) -> int:
        raise ValueError(f"plan: {what} names a parameter word; this plan has none (Device.plan(params=N))")

    def matmul(self, *args: Any, **kwargs: Any) -> Any:
        self._adding()
        return super().matmul(*args, **kwargs)

    def layernorm(
        self,
        x: Tensor,
        gamma: Any,
        beta: Any,
        *,
        residual: Optional[Tensor] = None,
        eps: float = 1e-5,
        dtype: Any = None,
        out: Optional[Tensor] = None,
        x_out: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor]:
        """As Device.layernorm (the forward): returns (h, stream): with residual, the
        stream x + residual is written to x_out (made when not given)."""
        return self._norm("layernorm", x, gamma, beta, residual, eps, dtype, out, x_out)

    def rmsnorm(
        self,
        x: Tensor,
        gamma: Tensor,
        *,
        residual: Optional[Tensor] = None,
        eps: float = 1e-5,
        dtype: Any = None,
        out: Optional[Tensor] = None,
        x_out: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor]:
        """RMSNorm (Llama's) over an fp32 stream: h = v / sqrt(mean(v^2) + eps) * gamma in
        dtype, v = x (+ residual, written to x_out); returns (h, stream) as layernorm."""
        return self._norm("rmsnorm", x, gamma, None, residual, eps, dtype, out, x_out)

    def _norm(self, kind: str, x: Tensor, gamma: Any, beta: Any, residual: Optional[Tensor], eps: float, dtype: Any,
              out: Optional[Tensor], x_out: Optional[Tensor]) -> tuple[Tensor, Tensor]:  # fmt: skip
        self._adding()
        op = layernorm_operands(self._dev, x, gamma, beta, residual, eps, dtype, out, x_out, None)
        if beta is None:
            del op["beta"]
        self._add(kind, kind, **op)
        return op["h"], (op["x_out"] if op["x_out"] is not None else x)

    def embed(
        self, tokens: Tensor, positions: Optional[Tensor] = None, *, token: int = 0, position: int = 1, out=None
    ) -> Tensor:
        """out (1, d) float32 = tokens[params[token]] + positions[params[position]]:
        tables (rows, d), the rows chosen by parameter words at each replay; tokens
        float32, float16 or bfloat16 (widened exactly), positions float32. positions
        None: the token's row alone (a model whose positions are rotary)."""
        who = "plan.embed"
        if not isinstance(tokens, Tensor) or tokens.ndim != 2 or not tokens.packed or tokens.dtype not in (
                np.dtype(np.float32), np.dtype(float16), np.dtype(bfloat16)):  # fmt: skip
            raise TypeError(f"{who}: tokens must be a packed 2-D float32, float16 or bfloat16 helios.Tensor (rows, d); "
                            f"{got_tensor(tokens)}")  # fmt: skip
        if positions is not None and (not isinstance(positions, Tensor) or positions.dtype != np.float32
                                      or positions.ndim != 2 or not positions.packed):  # fmt: skip
            raise TypeError(f"{who}: positions must be a packed 2-D float32 helios.Tensor (rows, d); "
                            f"{got_tensor(positions)}")  # fmt: skip
        d = int(tokens.shape[1])
        if positions is not None and positions.shape[1] != d:
            raise ValueError(f"{who}: tokens {tokens.shape} and positions {positions.shape} differ in d")
        out = out if out is not None else self._dev.empty((1, d), np.float32)
        token_slot = self._word("embed's token", token)
        pos_slot = self._word("embed's position", position) if positions is not None else token_slot
        rows = dict(token_rows=tokens.shape[0], pos_rows=positions.shape[0] if positions is not None else 0)
        self._add(
            "embed", "embed", tokens=tokens, positions=positions, out=out, d=d, **rows, token_slot=token_slot,
            pos_slot=pos_slot, dtype=tokens.dtype.name,
        )  # fmt: skip
        return out

    def attention_decode(
        self,
        qkv: Tensor,
        k_cache: Tensor,
        v_cache: Tensor,
        *,
        heads: int,
        kv_heads: Optional[int] = None,
        position: int = 1,
        scale: Optional[float] = None,
        out: Optional[Tensor] = None,
    ) -> Tensor:
        """One position's attention over a KV cache: qkv (1, (heads + 2 kv_heads) head_dim)
        is the row [q | k | v] (float16 or bfloat16; kv_heads: heads by default, fewer for
        grouped-query attention, a divisor of heads), k_cache and v_cache (max_len,
        kv_heads head_dim) of its dtype; at each replay p = params[position] (< max_len)
        gets qkv's K and V in row p of the caches and out (1, heads head_dim) =
        softmax(q K[:p+1]^T scale) V[:p+1] per head, query head h on KV head
        h // (heads // kv_heads) (scale: 1/sqrt(head_dim) by default)."""
        who = "plan.attention_decode"
        heads, kv, hd = self._heads(who, qkv, heads, kv_heads)
        if scale is not None:
            scale = real(f"{who}: scale", scale)
            if not 0 < scale <= float(np.finfo(np.float32).max):  # the kernel reads a float32
                raise ValueError(f"{who}: scale must be positive and finite as a float32, got {scale}")
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
            if (
                not isinstance(t, Tensor)
                or t.dtype != qkv.dtype
                or t.ndim != 2
                or t.shape[1] != kv * hd
                or not t.packed
            ):
                raise TypeError(f"{who}: {name} must be a packed (max_len, {kv * hd}) {qkv.dtype} helios.Tensor")
        out = out if out is not None else self._dev.empty((1, heads * hd), qkv.dtype)
        self._add(
            "attention_decode", "attention_decode", qkv=qkv, k_cache=k_cache, v_cache=v_cache, out=out, heads=heads,
            kv_heads=kv, head_dim=hd, max_len=int(k_cache.shape[0]),
            pos_slot=self._word("attention's position", position),
            scale=float(scale) if scale is not None else hd**-0.5, dtype=qkv.dtype.name,
        )  # fmt: skip
        return out

    @staticmethod
    def _heads(who: str, qkv: Any, heads: Any, kv_heads: Any) -> tuple[int, int, int]:
        """(heads, kv_heads, head_dim) of a QKV row [q | k | v] of (heads + 2 kv_heads) heads."""
        if not isinstance(qkv, Tensor) or qkv.dtype not in (np.dtype(float16), np.dtype(bfloat16)) or not qkv.packed:
            raise TypeError(f"{who}: qkv must be a packed float16 or bfloat16 helios.Tensor; {got_tensor(qkv)}")
        total = int(qkv.size)
        heads = count(f"{who}: heads", heads, 1, max(total // 3, 1))
        kv = heads if kv_heads is None else count(f"{who}: kv_heads", kv_heads, 1, heads)
        if heads % kv:
            raise ValueError(f"{who}: kv_heads {kv} does not divide heads {heads}")
        if total % (heads + 2 * kv):
            raise ValueError(f"{who}: qkv's {total} elements are not (heads {heads} + 2 x kv_heads {kv}) x head_dim")
        return heads, kv, total // (heads + 2 * kv)

    def rope(
        self, qkv: Tensor, table: Tensor, *, heads: int, kv_heads: Optional[int] = None, position: int = 1
    ) -> Tensor:
        """Rotary positions (Llama's rotate_half) on the q and k heads of the QKV row qkv,
        in place, at p = params[position]: table (rows, head_dim) float32 holds each
        position's cos (first half) and sin (second half) of its angles (``helios.models``
        makes it, with the model's frequency scaling). Returns qkv."""
        who = "plan.rope"
        heads, kv, hd = self._heads(who, qkv, heads, kv_heads)
        if not isinstance(table, Tensor) or table.dtype != np.float32 or table.ndim != 2 or table.shape[1] != hd:
            raise TypeError(f"{who}: table must be a (rows, {hd}) float32 helios.Tensor; {got_tensor(table)}")
        self._add(
            "rope", "rope", qkv=qkv, table=table, heads=heads, kv_heads=kv, head_dim=hd, rows=int(table.shape[0]),
            pos_slot=self._word("rope's position", position), dtype=qkv.dtype.name,
        )  # fmt: skip
        return qkv

    def swiglu(self, x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        """out (1, n) = silu(gate) * up of the row x = [gate | up] (1, 2n), float16 or
        bfloat16 (Llama's MLP between its two products)."""
        who = "plan.swiglu"
        if not isinstance(x, Tensor) or x.dtype not in (np.dtype(float16), np.dtype(bfloat16)) or not x.packed:
            raise TypeError(f"{who}: x must be a packed float16 or bfloat16 helios.Tensor; {got_tensor(x)}")
        if x.size % 2:
            raise ValueError(f"{who}: x's {x.size} elements are not [gate | up] of equal halves")
        n = int(x.size) // 2
        out = out if out is not None else self._dev.empty((1, n), x.dtype)
        self._add("swiglu", "swiglu", x=x, out=out, n=n, dtype=x.dtype.name)
        return out

    def adamw(
        self,
        p: Tensor,
        m: Tensor,
        v: Tensor,
        g: Tensor,
        *,
        step: int,
        lr: int,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        copy: Optional[Tensor] = None,
    ) -> None:
        """torch.optim.AdamW's update of the float32 parameters p in place, with their
        moments m and v (float32, zero at first) and the gradient g (float32), at the step
        count params[step] (1 on the first step) with the learning rate whose float32 bits
        are params[lr] (``Plan.lr_word(x)``): both written before each replay. copy: a
        float16 or bfloat16 Tensor that gets p rounded, what the products read."""
        who = "plan.adamw"
        for name, t in (("p", p), ("m", m), ("v", v), ("g", g)):
            if not isinstance(t, Tensor) or t.dtype != np.float32 or not t.packed or t.size != p.size:
                raise TypeError(f"{who}: {name} must be a packed float32 helios.Tensor of p's size; {got_tensor(t)}")
        if copy is not None and (not isinstance(copy, Tensor) or copy.size != p.size or not copy.packed
                                 or copy.dtype not in (np.dtype(float16), np.dtype(bfloat16))):  # fmt: skip
            raise TypeError(f"{who}: copy must be a packed float16 or bfloat16 Tensor of p's size; {got_tensor(copy)}")
        b1, b2 = (real(f"{who}: betas[{i}]", b) for i, b in enumerate(betas))
        if not (0 <= b1 < 1 and 0 <= b2 < 1 and real(f"{who}: eps", eps) > 0 and real(f"{who}: weight_decay",
                                                                                    weight_decay) >= 0):  # fmt: skip
            raise ValueError(
                f"{who}: betas in [0, 1), eps > 0 and weight_decay >= 0; got {betas}, {eps}, {weight_decay}"
            )
        self._add(
            "adamw", "adamw", p=p, m=m, v=v, g=g, copy=copy, n=int(p.size), step_slot=self._word("adamw's step", step),
            lr_slot=self._word("adamw's lr", lr), beta1=float(b1), beta2=float(b2), eps=float(eps),
            weight_decay=float(weight_decay), dtype=(copy.dtype if copy is not None else np.dtype(float16)).name,
        )  # fmt: skip

    @staticmethod
    def lr_word(lr: float) -> int:
        """A learning rate as the parameter word adamw reads: its float32 bits."""
        return int(np.array(lr, dtype=np.float32).view(np.uint32))

    def top1(self, x: Tensor, *, into: int = 0) -> None:
        """params[into] = the index of x's largest float32 value (the first; NaN
        largest, as torch.argmax), read after the replay with ``params()``."""
        if not isinstance(x, Tensor) or x.dtype != np.float32 or not x.packed:
            raise TypeError(f"plan.top1: x must be a packed float32 helios.Tensor; {got_tensor(x)}")
        self._add("top1", "top1", x=x, n=int(x.size), slot=self._word("top1's result", into))

    def params(self, first: int = 0, n: Optional[int] = None) -> list[int]:
        """Parameter words first..first+n (default: to the last), as the last replay left them."""
        n = self._n_params - first if n is None else n
        return list(self._recorded().read_params(first, n))

    def set_params(self, words: Any) -> None:
        """Write parameter words: a dict {word: value} or a sequence from word 0 (a list,
        tuple or 1-D integer array). Words and values are ints (NumPy integers too),
        values in 0..2^32-1; anything else is a TypeError or ValueError naming the word."""
        plan = self._recorded()
        if not self._n_params:
            self._no_words("params")
        last = self._n_params - 1
        if isinstance(words, dict):
            items = [(count("plan: parameter word index", k, 0, last), v) for k, v in words.items()]
        elif isinstance(words, (list, tuple)) or (isinstance(words, np.ndarray) and words.ndim == 1):
            if len(words) > self._n_params:
                raise ValueError(f"plan: {len(words)} parameter words given; this plan has {self._n_params}")
            items = list(enumerate(words.tolist() if isinstance(words, np.ndarray) else words))
        else:
            raise TypeError(
                f"plan: params must be a dict {{word: value}} or a sequence of ints from word 0, "
                f"not {type(words).__name__}"
            )
        for k, v in items:
            plan.write_params(k, [count(f"plan: parameter word {k}", v, 0, 2**32 - 1)])

    @property
    def counts(self) -> tuple[int, int, int]:
        """(operations, dispatches, barriers) as recorded."""
        ops, dispatches, barriers, _ = self._recorded().counts
        return int(ops), int(dispatches), int(barriers)

    @property
    def grid_barriers(self) -> int:
        """The grid barriers inside its persistent runs (a run's members less one), as recorded:
        the waits a replay has beside its `counts` barriers."""
        return int(self._recorded().counts[3])

    @property
    def run_shape(self) -> RunShape:
        """Its persistent runs' count, grid and registers, as recorded (RunShape)."""
        runs, grid, registers = self._recorded().run_shape
        return RunShape(int(runs), int(grid), int(registers))

    def trace(self) -> list[plan_trace.MemberTrace]:
        """The last replay's persistent runs, every member as each workgroup stamped it
        with the device clock (helios.plan_trace: `summarize` for the table). Needs
        HELIOS_PLAN_TRACE=1 when the Device opened and a plan with runs."""
        words = self._recorded().trace_words()
        if words is None:
            raise ValueError(
                "plan.trace: this plan has no trace: set HELIOS_PLAN_TRACE=1 before the Device opens "
                f"(it has {self.grid_barriers} grid barriers; a plan with no persistent run has nothing to stamp)"
            )
        return plan_trace.parse(words)

    def replay(self, params: Any = None) -> PlanRun:
        """Submit the plan once and wait for it; params (as set_params) written first."""
        if params is not None:
            self.set_params(params)
        run = PlanRun(*self._recorded().replay())
        self._mark_ran()
        return run

    def run(self) -> float:
        """As Chain.run: one replay; its GPU time in ms."""
        return self.replay().gpu_ms

    def time(self, iters: int = 20, warmup: int = 5) -> PlanTiming:  # type: ignore[override]
        """`warmup` replays, then `iters` replays each timed by the engine."""
        iters = count("Plan.time: iters", iters, 1, _helios.MAX_LAUNCHES)
        warmup = count("Plan.time: warmup", warmup, 0, _helios.MAX_LAUNCHES)
        plan = self._recorded()
        for _ in range(warmup):
            plan.replay()
        runs = [PlanRun(*plan.replay()) for _ in range(iters)]
        self._mark_ran()
        return PlanTiming(ops=len(self._ops), runs=runs)

    def close(self) -> None:
        """Release the plan's command buffer, sets and workspace (idempotent)."""
        if self._plan is not None:
            self._plan.close()

    def _recorded(self) -> Any:
        if self._plan is None:
            raise ValueError("plan: not recorded yet (leave the with-block, or call record())")
        return self._plan

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and self._plan is None:
            self.record()

"""``training_plan``: a torch model's whole training step (forward, backward, loss,
gradient clipping and AdamW) as one Helios capture, replayed per step with one
crossing from CUDA into Vulkan and one back (helios.train_step)."""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from .. import engine
from ..train_step import AdamWSettings, GPTShape, TrainingStep, TrainState
from ._state import cuda_ordinal, device_for, ordering


class TrainingPlan:
    """What ``training_plan`` returns: ``plan(batch, targets)`` runs one step and
    returns the loss (a CUDA tensor, read by the host only when asked). After a step the
    model's parameters, their ``.grad`` and the optimizer's moments hold what torch's
    own step would leave (gradients before clipping), in memory both APIs share."""

    def __init__(self, step: TrainingStep, model: Any, optimizer: Any, views: dict) -> None:
        self.step, self.model, self.optimizer = step, model, optimizer
        self._ids, self._targets, self._words, self._loss = (
            views["ids"],
            views["targets"],
            views["words"],
            views["loss"],
        )
        self._step_count = views["step_count"]
        self._flat: dict = views["flat"]  # torch's views of the flat p, g, m, v and 16-bit copy
        self._layout: dict = views["layout"]
        self._halved = False  # the last step ran as two halves around the all-reduce
        # where each parameter's data and gradient must stay: the recording reads them there
        self._bound = [(n, p, p.data_ptr(), p.grad.data_ptr()) for n, p in model.named_parameters()]

    def reset(self, state_dict: dict) -> None:
        """Parameters from `state_dict` (torch's names), gradients and moments zero, step
        count 0: the state a fresh model and optimizer start from (into the same memory)."""
        with torch.no_grad():
            for name, (at, dims) in self._layout.items():
                self._flat["p"][at : at + math.prod(dims)].copy_(state_dict[name].reshape(-1))
            for k in ("g", "m", "v"):
                self._flat[k].zero_()
            self._flat["copy"].copy_(self._flat["p"])
        self.step.steps = 0
        self._step_count.zero_()

    @property
    def capture(self) -> Any:
        return self.step.capture

    def _run(self, capture: Any, stream: Any) -> None:
        """One replay after the stream's work so far, the stream after it: one crossing each way."""
        dev = self.step.dev
        if ordering(self._ids) != "semaphore":
            stream.synchronize()
            capture.replay()
            return
        engine.replay_on_stream(dev, capture, stream.cuda_stream)

    def __call__(self, batch: torch.Tensor, targets: torch.Tensor, average: bool = True) -> torch.Tensor:
        """One step on (batch, seq) token ids: the loss. With ``average_gradients`` at
        recording, the gradients are averaged over torch.distributed's default group
        (one NCCL all-reduce between the backward and the optimizer) unless average is
        False (a replica alone: the suite's gate)."""
        s = self.step.shape
        want = (s.batch, s.seq)
        for name, t in (("batch", batch), ("targets", targets)):
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != want or t.dtype.is_floating_point:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"training_plan: {name} must be an integer {want} tensor as recorded, got {got}")
        for name, p, data, grad in self._bound:
            if p.data_ptr() != data or p.grad is None or p.grad.data_ptr() != grad:
                raise RuntimeError(
                    f"training_plan: parameter {name} (or its .grad) was replaced after recording; the plan "
                    "reads the memory it was recorded with: record a new plan (or copy into p.data in place)"
                )
        self._ids.copy_(batch)
        self._targets.copy_(targets.reshape(-1))
        lr = float(self.optimizer.param_groups[0]["lr"])  # a scheduler's, read every step
        self._words.copy_(torch.from_numpy(self.step.step_words(lr)))
        stream = torch.cuda.current_stream(batch.device)
        halves = self.step.halves if average else None
        self._halved = halves is not None
        if halves is None:
            self._run(self.step.capture, stream)
        else:  # the gradients averaged over the process group between the halves: one all-reduce
            first, second = halves
            self._run(first, stream)
            torch.distributed.all_reduce(self._flat["g"], op=torch.distributed.ReduceOp.AVG)
            self._run(second, stream)
        self.step.steps += 1
        self._step_count.fill_(float(self.step.steps))
        return self._loss.clone().reshape(())

    def grad_norm(self) -> torch.Tensor:
        """The last step's gradient norm before clipping (a CUDA tensor)."""
        return self._words[2:3].view(torch.float32).sqrt().reshape(())

    def gpu_ms(self) -> float:
        """The last step's GPU time between the capture's timestamps (waits for it; the two
        halves' summed where the gradients were averaged between them)."""
        if self._halved and self.step.halves is not None:
            return sum(c.gpu_ms() for c in self.step.halves)
        return self.step.capture.gpu_ms()


def _shape_of(model: Any, batch: torch.Tensor) -> GPTShape:
    """The suite's GPT (helios.harness.workloads.train.model) and nothing else: its parameter names
    and shapes, or a ValueError naming the first that differs."""
    try:
        vocab, d = model.tok.weight.shape
        heads, layers = int(model.blocks[0].heads), len(model.blocks)
        eps = float(model.lnf.eps)
    except (AttributeError, IndexError, TypeError) as e:
        raise ValueError(f"training_plan: the model is not the training suite's GPT ({e})") from None
    if batch.dim() != 2:
        raise ValueError(f"training_plan: batch must be (batch, seq) token ids, got shape {tuple(batch.shape)}")
    shape = GPTShape(int(vocab), int(d), heads, layers, int(batch.shape[1]), int(batch.shape[0]), eps)
    have = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    want = shape.parameters()
    for i in range(max(len(have), len(want))):
        got, expected = (have[i] if i < len(have) else ("(none)", ())), (want[i] if i < len(want) else ("(none)", ()))
        if got != expected:
            raise ValueError(
                f"training_plan: parameter {got[0]} {got[1]} where the GPT has {expected[0]} {expected[1]}"
            )
    if model.pos.weight.shape[0] != shape.seq:
        raise ValueError(f"training_plan: batch has {shape.seq} positions; the model's table has "
                         f"{model.pos.weight.shape[0]}")  # fmt: skip
    return shape


def _settings(optimizer: Any, max_norm: float) -> AdamWSettings:
    if type(optimizer) is not torch.optim.AdamW:
        raise ValueError(f"training_plan: the optimizer must be torch.optim.AdamW, got {type(optimizer).__name__}")
    if len(optimizer.param_groups) != 1:
        raise ValueError("training_plan: one parameter group (AdamW's settings for every parameter)")
    g = optimizer.param_groups[0]
    for key, ok in (("amsgrad", False), ("maximize", False)):
        if g.get(key, ok) != ok:
            raise ValueError(f"training_plan: AdamW with {key}={g[key]} is not supported")
    lr = g["lr"]
    if isinstance(lr, torch.Tensor):
        lr = float(lr)
    return AdamWSettings(float(lr), tuple(g["betas"]), float(g["eps"]), float(g["weight_decay"]), float(max_norm))


def training_plan(
    model: Any,
    optimizer: Any,
    batch: torch.Tensor,
    targets: torch.Tensor,
    max_norm: Optional[float] = 1.0,
    average_gradients: bool = False,
) -> TrainingPlan:
    """Records `model`'s training step (the suite's GPT on CUDA) with `optimizer`
    (torch.optim.AdamW, one group) for batches shaped like `batch` and `targets`
    ((batch, seq) token ids), clipping the gradients' norm to `max_norm` first as
    ``clip_grad_norm_`` does (None: no clipping). The model's parameters, gradients
    and the optimizer's moments move into memory Helios and torch share (their values
    kept): ``state_dict()``, evaluation and checkpoints between steps see the trained
    weights with no copies. average_gradients: under torch.distributed (torchrun, NCCL)
    the gradients are averaged over the default group each step, one all-reduce of the
    flat gradient buffer between the backward and the optimizer (two crossings each way
    a step). A module or setting it does not support is refused here, naming it."""
    if average_gradients and not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        raise ValueError("training_plan: average_gradients needs torch.distributed initialized (torchrun)")
    cuda_ordinal(batch)  # a TypeError for a CPU tensor
    shape = _shape_of(model, batch)
    if tuple(targets.shape) != tuple(batch.shape):
        raise ValueError(f"training_plan: targets {tuple(targets.shape)} differ from batch {tuple(batch.shape)}")
    params = dict(model.named_parameters())
    settings = _settings(optimizer, max_norm or 0.0)
    if {id(p) for p in optimizer.param_groups[0]["params"]} != {id(p) for p in params.values()}:
        raise ValueError("training_plan: the optimizer must hold exactly the model's parameters")
    dev = device_for(batch)
    state = TrainState(dev, shape, exportable=True)
    flat = {k: torch.from_dlpack(getattr(state.flat, k)) for k in ("p", "g", "m", "v", "copy")}
    step_count = torch.zeros((), device=batch.device)
    with torch.no_grad():
        for name, (at, dims) in state.layout.items():
            p, n = params[name], math.prod(dims)
            view = {k: t[at : at + n].view(dims) for k, t in flat.items()}
            view["p"].copy_(p.detach())
            old = optimizer.state.get(p, {})
            for k, key in (("m", "exp_avg"), ("v", "exp_avg_sq")):
                if key in old:
                    view[k].copy_(old[key])
            if "step" in old:
                step_count.fill_(float(old["step"]))
            p.data, p.grad = view["p"], view["g"]
            optimizer.state[p] = {"step": step_count, "exp_avg": view["m"], "exp_avg_sq": view["v"]}
        flat["copy"].copy_(flat["p"])  # the products' 16-bit copies, rounded once
    torch.cuda.current_stream(batch.device).synchronize()  # the copies above are in before Helios reads them
    step = TrainingStep(dev, shape, state, settings, exportable=True, halves=average_gradients)
    step.steps = int(step_count.item())
    views = {
        "ids": torch.from_dlpack(step.ids),
        "targets": torch.from_dlpack(step.targets),
        "words": torch.from_dlpack(step.words),
        "loss": torch.from_dlpack(step.loss),
        "step_count": step_count,
        "flat": flat,
        "layout": state.layout,
    }
    return TrainingPlan(step, model, optimizer, views)


__all__ = ["TrainingPlan", "training_plan"]

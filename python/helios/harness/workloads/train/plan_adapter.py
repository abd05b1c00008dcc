"""The helios_plan adapter: the whole training step (forward, backward, loss, gradient
clipping, AdamW) as one Helios capture replayed per step: helios.torch.training_plan
on CUDA (one crossing from CUDA into Vulkan and one back a step), helios.train_step on
host arrays without CUDA. Its row splits nothing: the step is one submission, so its
forward span is the whole step and its backward and optimizer spans are 0. Under
torchrun the gradients are averaged between the backward and the optimizer: one NCCL
all-reduce of the flat gradient buffer, and one more crossing each way."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from ....train_step import AdamWSettings, GPTShape, TrainingStep, upload_state

MAX_NORM = 1.0  # the suite's clip_grad_norm_ (loop._timed_steps)


class HostPlan:
    """training_plan's calls on a CPU torch model: the step on host arrays (Helios's
    device may be lavapipe); the model's parameters written back by ``sync_model``."""

    def __init__(self, model: Any, opt: Any, x0: torch.Tensor) -> None:
        from .... import Device

        g = opt.param_groups[0]
        self.settings = AdamWSettings(float(g["lr"]), tuple(g["betas"]), float(g["eps"]), float(g["weight_decay"]),
                                      MAX_NORM)  # fmt: skip
        vocab, d = model.tok.weight.shape
        self.shape = GPTShape(int(vocab), int(d), int(model.blocks[0].heads), len(model.blocks), int(x0.shape[1]),
                              int(x0.shape[0]), float(model.lnf.eps))  # fmt: skip
        self.model, self.dev = model, Device()
        self.reset({n: p.detach() for n, p in model.named_parameters()})

    def reset(self, state_dict: dict) -> None:
        host = {n: state_dict[n].detach().cpu().numpy() for n, _ in self.shape.parameters()}
        self.step = TrainingStep(self.dev, self.shape, upload_state(self.dev, self.shape, host), self.settings)

    def __call__(self, batch: torch.Tensor, targets: torch.Tensor, average: bool = True) -> torch.Tensor:
        self.last = self.step.step(batch.numpy(), targets.numpy())
        return torch.tensor(self.step.read_loss())

    def grad_norm(self) -> torch.Tensor:
        return torch.tensor(self.step.read_norm())

    def gpu_ms(self) -> float:
        return float(self.last.gpu_ms)

    def grads(self) -> dict:
        return {n: torch.from_numpy(self.step.state[n].g.numpy()) for n, _ in self.shape.parameters()}


def make_plan(model: Any, opt: Any, x0: torch.Tensor, y0: torch.Tensor, cuda: bool, average: bool = False) -> Any:
    """The adapter's plan; average: the gradients averaged over the ranks (torchrun)."""
    if not cuda:
        return HostPlan(model, opt, x0)
    from .... import torch as ht

    return ht.training_plan(model, opt, x0, y0, max_norm=MAX_NORM, average_gradients=average)


def first_step(plan: Any, model: Any, x0: torch.Tensor, y0: torch.Tensor) -> tuple[float, dict]:
    """The plan's first step, the replica alone: its loss and every gradient (before clipping)."""
    loss = float(plan(x0, y0, average=False))
    if isinstance(plan, HostPlan):
        return loss, plan.grads()
    return loss, {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}


def timed_plan_steps(cfg: Any, plan: Any, batch: Callable, cuda: bool, log: Callable[[str], None],
                     tracer: Any) -> dict[str, list]:  # fmt: skip
    """cfg.steps replays, each timed as loop._timed_steps times a step (CUDA events, or
    the host clock): the whole step in the forward's span, the capture's GPU time as
    Helios's, the host time of the call."""
    t: dict[str, list] = {
        k: [] for k in ("loss", "norm", "fwd", "bwd", "opt", "step", "helios", "host_fwd", "host_bwd")
    }
    for step in range(cfg.steps):
        tracer.before(step)
        xb, yb = batch(step)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        loss = plan(xb, yb)
        t1 = time.perf_counter()
        if cuda:
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            ms = (t1 - t0) * 1e3
        t["host_fwd"].append((t1 - t0) * 1e3)
        t["host_bwd"].append(0.0)
        t["loss"].append(loss)
        t["norm"].append(plan.grad_norm())
        t["fwd"].append(ms)
        t["bwd"].append(0.0)
        t["opt"].append(0.0)
        t["step"].append(ms)
        t["helios"].append(plan.gpu_ms())
        tracer.after(step)
        if step % 10 == 0 or step == cfg.steps - 1:
            log(f"helios_plan step {step}: loss {float(loss):.4f}")
    return t


__all__ = ["HostPlan", "first_step", "make_plan", "timed_plan_steps"]

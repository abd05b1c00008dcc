"""The training run: each adapter gated against torch_eager's first step, then
timed step by step (CUDA events, or the host clock without CUDA)."""

from __future__ import annotations

import math
import os
import re
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Optional

import numpy as np
import torch

from .... import _helios
from ...protocol.provenance import provenance
from ...results.rows import TRAIN_SCHEMA, TrainRow
from ...results.schema import written_row
from . import adapters, plan_adapter
from .config import (
    GATE_GRAD_RTOL,
    GATE_LOSS_RTOL,
    HELIOS_ADAPTERS,
    TRACE_STEPS,
    TrainConfig,
    check_config,
    markov_stream,
)
from .ddp import average_grads, comm_hook_for, distributed_rank, wrap_ddp
from .model import GPT, inference_smoke


def _grads(model: Any) -> dict:
    return {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}


def run_train(cfg: TrainConfig, log: Callable[[str], None] = lambda s: None) -> dict:
    check_config(cfg)
    ddp = distributed_rank()
    rank, world, local = ddp if ddp else (0, 1, 0)
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    _check_helios_limits(cfg, cuda, dev)
    result = _result_header(cfg, cuda, dev, bool(ddp), rank, world)
    trained: Optional[Any] = None
    rows_per_step = cfg.batch * world  # the global batch
    data = torch.from_numpy(markov_stream(cfg.vocab, rows_per_step * cfg.steps, cfg.seq + 1, cfg.seed)).to(dev)
    torch.manual_seed(cfg.seed)
    init = GPT(cfg).to(dev)  # the same initial weights for every adapter
    state0 = {k: v.clone() for k, v in init.state_dict().items()}

    def batch(step: int) -> tuple:
        first = step * rows_per_step + rank * cfg.batch
        rows = data[first : first + cfg.batch]
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()

    def fresh() -> Any:
        m = GPT(cfg).to(dev)
        m.load_state_dict(state0)
        return m

    x0, y0 = batch(0)
    ref_grads, ref_loss_v = _reference_step(fresh(), x0, y0)
    eager_curve: Optional[list] = None
    for adapter in cfg.adapters:
        row: dict = {"adapter": adapter}
        result["rows"].append(row)
        tracer: Optional[_Tracer] = None
        try:
            if adapter == "torch_compile" and _compile_skipped(row, dev):
                continue
            if adapter == "helios_plan":
                _plan_row(row, cfg, fresh(), state0, batch, (ref_grads, ref_loss_v), cuda, log, (bool(ddp), rank))
                _plan_verdict(row, result, cfg, eager_curve)
                continue
            ops = adapters.ops_for(adapter, cuda)
            row["ops"] = ops.name
            model = fresh()
            fwd = model
            if adapter == "torch_compile":
                fwd = torch.compile(model)
            row["gate"] = _gate(fwd, model, x0, y0, ops, ref_grads, ref_loss_v)
            if not row["gate"]["passed"]:
                row["status"] = "gate failed"
                result["status"] = "failed"
                continue
            model.zero_grad(set_to_none=True)
            model.load_state_dict(state0)
            if ddp and cfg.grad_sync == "ddp":  # the gate above ran the replica alone
                fwd = _ddp_forward(model, cfg, local, adapter, row)
            opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            # Helios's GPU time per step: the timestamps around each ordered submission
            # (the semaphore path helios.torch takes with CUDA; None elsewhere)
            hdev = _ordered_helios_device(x0) if adapter in HELIOS_ADAPTERS and cuda else None
            tracer = _Tracer(torch, cuda, cfg, adapter, rank)
            steps = _timed_steps(cfg, fwd, model, opt, ops, batch, hdev, tracer, log, adapter, bool(ddp), world)
            curve = _summarize(row, cfg, steps, world, bool(ddp), cuda)
            if row["status"] != "ok":
                result["status"] = "failed"
            if adapter == "torch_eager":
                eager_curve = curve
                trained = model
            elif eager_curve is not None:
                row["loss_max_rel_dev_vs_eager"] = _max_deviation(cfg, curve, eager_curve)
        except Exception as e:  # an adapter that cannot run here: said in its row, the others go on
            _failed(row, e, tracer, result)
    result["rows"] = [written_row(TrainRow, r) for r in result["rows"]]
    if trained is not None and HELIOS_ADAPTERS & set(cfg.adapters):
        result["inference"] = _inference(cfg, trained, data, cuda, log)
    if ddp:
        torch.distributed.destroy_process_group()
    return result


def _plan_row(row: dict, cfg: TrainConfig, model: Any, state0: dict, batch: Callable, ref: tuple, cuda: bool,
              log: Callable[[str], None], ddp_rank: tuple) -> None:  # fmt: skip
    """The helios_plan adapter's row (plan_adapter): recorded, gated on its first step (the
    replica alone), reset to the initial weights, timed."""
    ddp, rank = ddp_rank
    average = ddp and cfg.grad_sync != "none"
    row["ops"] = "helios capture (one submission a step" + (", two around the all-reduce)" if average else ")")
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    x0, y0 = batch(0)
    plan = plan_adapter.make_plan(model, opt, x0, y0, cuda, average)
    row["gate"] = gate_verdict(*plan_adapter.first_step(plan, model, x0, y0), *ref)
    if not row["gate"]["passed"]:
        row["status"] = "gate failed"
        return
    plan.reset(state0)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    tracer = _Tracer(torch, cuda, cfg, "helios_plan", rank)
    steps = plan_adapter.timed_plan_steps(cfg, plan, batch, cuda, log, tracer)
    world = torch.distributed.get_world_size() if ddp else 1
    _summarize(row, cfg, steps, world, ddp, cuda)
    row["op_split_ms"] = plan.step.split()  # after the timed steps: its replays train on


def _plan_verdict(row: dict, result: dict, cfg: TrainConfig, eager_curve: Optional[list]) -> None:
    if row["status"] != "ok" and not row["status"].startswith("skipped"):
        result["status"] = "failed"
    if eager_curve is not None and row.get("loss"):
        row["loss_max_rel_dev_vs_eager"] = _max_deviation(cfg, row["loss"], eager_curve)


def _failed(row: dict, e: Exception, tracer: Optional["_Tracer"], result: dict) -> None:
    """An adapter's error in its row: one line for the table (a compiler's error can run
    to pages), the whole text kept; torch_eager's fails the run."""
    if tracer is not None:
        tracer.abandon()
    row["status"] = f"error: {type(e).__name__}: {first_line(e)}"
    row["error_log"] = str(e)[:ERROR_LOG_CHARS]
    if row["adapter"] == "torch_eager":
        result["status"] = "failed"


def _compile_skipped(row: dict, dev: Any) -> bool:
    """torch.compile's toolchain missing here (inductor's headers, a compiler): the row
    says so, not run."""
    why = compile_unavailable(torch, dev)
    if why is None:
        return False
    row["status"] = f"skipped: torch.compile cannot compile here: {why[0]}"
    row["error_log"] = why[1]
    return True


def _ddp_forward(model: Any, cfg: TrainConfig, local: int, adapter: str, row: dict) -> Any:
    """The replica wrapped in DistributedDataParallel (compiled again for torch_compile)."""
    fwd = wrap_ddp(torch, model, cfg, [local], adapter)
    row["ddp_comm_hook"] = comm_hook_for(cfg, adapter)
    return torch.compile(fwd) if adapter == "torch_compile" else fwd


def _check_helios_limits(cfg: TrainConfig, cuda: bool, dev: Any) -> None:
    """check_config against the buffer limit of the Helios device this rank's ops run
    on: with CUDA the one with its CUDA device's UUID (helios.torch's), not a
    launcher's guess by index."""
    if not HELIOS_ADAPTERS & set(cfg.adapters):
        return
    from ....functions import default_device

    hdev = None
    if cuda:
        from ....torch import device_for

        try:
            hdev = device_for(torch.empty(0, device=dev))
        except _helios.UnsupportedError:
            pass  # no Vulkan twin: the helios rows will say so
    check_config(cfg, int((hdev or default_device()).info["max_storage_buffer_range"]))


def _result_header(cfg: TrainConfig, cuda: bool, dev: Any, ddp: bool, rank: int, world: int) -> dict:
    result: dict = {"schema": TRAIN_SCHEMA, "status": "ok", **provenance(), "config": asdict(cfg), "rows": []}
    # torch's products as Helios computes them: fp32 accumulation with no reduced-precision
    # (bf16/fp16) split-K reductions and no TF32 (the bench's rule), so that the loss
    # curves differ by the kernels' rounding only
    result["numerics"] = lock_numerics(torch)
    result["device"] = torch.cuda.get_device_name(dev) if cuda else "cpu (no CUDA: the --tiny CI run)"
    result["distributed"] = {
        "world_size": world,
        "rank": rank,
        "backend": "nccl" if ddp else None,
        "grad_sync": cfg.grad_sync if ddp else None,
        # the CPUs this process may run on (NCCL and launchers may narrow it)
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    return result


def _max_deviation(cfg: TrainConfig, curve: list[float], eager: list[float]) -> Optional[float]:
    """The largest relative deviation from eager's loss at equal steps (after step 20,
    or after the warm-up steps in shorter runs)."""
    start = 20 if cfg.steps > 40 else cfg.warmup_steps
    devs = [abs(a - b) / abs(b) for a, b in zip(curve[start:], eager[start:])]
    return max(devs) if devs else None


def _inference(cfg: TrainConfig, trained: Any, data: Any, cuda: bool, log: Callable[[str], None]) -> dict:
    """The inference smoke on the trained weights; an error is reported, not fatal."""
    try:
        from .... import Device
        from ....torch import device_for
        from ..decode.plan_decoder import PlanDecoder

        hdev = device_for(data) if cuda else Device()
        state = {k: v.detach().float().cpu().numpy() for k, v in trained.state_dict().items()}
        dec = PlanDecoder(hdev, state, cfg.layers, cfg.heads, cfg.seq)  # greedy decoding through the decode plan
        out = inference_smoke(cfg, trained, adapters.TorchOps(), dec.generate, data, cuda)
        log(f"inference: same tokens {out['same_tokens']}")
        return out
    except Exception as e:  # the training results stand
        return {"error": f"{type(e).__name__}: {first_line(e)}", "error_log": str(e)[:ERROR_LOG_CHARS]}


def _reference_step(model: Any, x0: Any, y0: Any) -> tuple[dict, float]:
    """torch_eager's first step, which every adapter is gated against: its gradients and loss."""
    loss = model(x0, y0, adapters.TorchOps())
    loss.backward()
    return _grads(model), float(loss.detach())


def _gate(fwd: Any, model: Any, x0: Any, y0: Any, ops: Any, ref_grads: dict, ref_loss_v: float) -> dict:
    """The adapter's first step (loss and every gradient) against torch_eager's."""
    loss = fwd(x0, y0, ops)
    loss.backward()
    return gate_verdict(float(loss.detach()), _grads(model), ref_grads, ref_loss_v)


def gate_verdict(loss: float, g: dict, ref_grads: dict, ref_loss_v: float) -> dict:
    """A first step's loss and gradients against torch_eager's: the gate's row entry."""
    worst = max(float((g[n].float() - ref_grads[n]).norm() / (ref_grads[n].norm() + 1e-12)) for n in ref_grads)
    loss_err = abs(loss - ref_loss_v) / abs(ref_loss_v)
    finite = all(bool(torch.isfinite(t).all()) for t in g.values()) and math.isfinite(loss)
    return {
        "loss": loss,
        "loss_rel_err": loss_err,
        "worst_grad_rel_err": worst,
        "finite": finite,
        "loss_rtol": GATE_LOSS_RTOL,
        "grad_rtol": GATE_GRAD_RTOL,
        "passed": finite and loss_err <= GATE_LOSS_RTOL and worst <= GATE_GRAD_RTOL,
    }


def _timed_steps(cfg: TrainConfig, fwd: Any, model: Any, opt: Any, ops: Any, batch: Callable, hdev: Any,
                 tracer: "_Tracer", log: Callable[[str], None], adapter: str, ddp: bool,
                 world: int) -> dict[str, list]:  # fmt: skip
    """cfg.steps training steps, each timed: its loss and gradient norm, forward,
    backward and optimizer spans (CUDA events, or the host clock), how long the forward
    and backward calls held the host, Helios's GPU time (hdev: its ordered submissions)."""
    cuda = torch.cuda.is_available()
    t: dict[str, list] = {
        k: [] for k in ("loss", "norm", "fwd", "bwd", "opt", "step", "helios", "host_fwd", "host_bwd")
    }
    for step in range(cfg.steps):
        tracer.before(step)
        h0 = hdev.telemetry()["async_gpu_ms"] if hdev else 0.0
        xb, yb = batch(step)
        marks = _marks(torch, cuda, 4)
        _mark(torch, cuda, marks, 0)
        t0 = time.perf_counter()
        loss = fwd(xb, yb, ops)
        t1 = time.perf_counter()
        _mark(torch, cuda, marks, 1)
        loss.backward()
        if ddp and cfg.grad_sync == "after-backward":
            average_grads(torch, model, world)
        t2 = time.perf_counter()
        _mark(torch, cuda, marks, 2)
        t["host_fwd"].append((t1 - t0) * 1e3)
        t["host_bwd"].append((t2 - t1) * 1e3)
        t["norm"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        opt.zero_grad(set_to_none=True)
        _mark(torch, cuda, marks, 3)
        t["loss"].append(loss.detach())
        f, b, o = _spans(torch, cuda, marks)
        t["fwd"].append(f)
        t["bwd"].append(b)
        t["opt"].append(o)
        t["step"].append(f + b + o)
        if hdev:
            t["helios"].append(hdev.telemetry()["async_gpu_ms"] - h0)
        tracer.after(step)
        if step % 10 == 0 or step == cfg.steps - 1:
            log(f"{adapter} step {step}: loss {float(loss.detach()):.4f}")
    return t


def _summarize(row: dict, cfg: TrainConfig, t: dict[str, list], world: int, ddp: bool, cuda: bool) -> list[float]:
    """The row's figures (medians after the warm-up steps) and curves; returns the loss curve."""
    stacked = torch.stack(t["loss"]).float()
    if ddp:  # the global batch's loss: the mean of the ranks' (equal micro-batches)
        torch.distributed.all_reduce(stacked)
        stacked /= world
    curve = [float(v) for v in stacked]
    gnorms = [float(v) for v in t["norm"]]

    def p50(xs: list) -> float:
        return float(np.median(xs[cfg.warmup_steps :] or xs))

    med = p50(t["step"])
    row.update(
        status="ok" if all(map(math.isfinite, curve + gnorms)) else "non-finite",
        tokens_per_s=world * cfg.batch * cfg.seq / (med / 1e3),
        tokens_per_s_per_gpu=cfg.batch * cfg.seq / (med / 1e3),
        step_ms_p50=med,
        forward_ms_p50=p50(t["fwd"]),
        backward_ms_p50=p50(t["bwd"]),
        optimizer_ms_p50=p50(t["opt"]),
        helios_kernel_ms_p50=p50(t["helios"]) if t["helios"] else None,
        host_forward_ms_p50=p50(t["host_fwd"]),
        host_backward_ms_p50=p50(t["host_bwd"]),
        peak_memory_bytes=int(torch.cuda.max_memory_allocated()) if cuda else None,
        loss=curve,
        grad_norm=gnorms,
    )
    return curve


ERROR_LOG_CHARS = 20000  # of an adapter's error text kept in its row (error_log)


def first_line(e: BaseException, limit: int = 200) -> str:
    """The line of an error a table cell shows (at most `limit` characters): a compiler's
    diagnostic where the text holds one ("fatal error: ATen/NumericUtils.h: No such file
    ..."), else its first line that is not a lead-in ending in ':', else its first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [type(e).__name__]
    found = [m.group(0) for ln in lines if (m := re.search(r"(fatal )?error: .*", ln))]
    line: str = found[0] if found else next((ln for ln in lines if not ln.endswith(":")), lines[0])
    return line if len(line) <= limit else line[: limit - 3] + "..."


def compile_unavailable(torch: Any, dev: Any) -> Optional[tuple[str, str]]:
    """None where torch.compile compiles a small function on dev; else (its error's first
    line, the whole text). Inductor needs a C++ toolchain and torch's headers on a CPU,
    Triton on a GPU: a machine without them cannot run the torch_compile adapter."""
    try:
        f = torch.compile(lambda x: x * 2.0 + 1.0)
        f(torch.ones(8, device=dev))
    except Exception as e:
        return first_line(e), str(e)[:ERROR_LOG_CHARS]
    return None


def lock_numerics(torch: Any) -> dict:
    """Sets and returns the torch matmul settings every adapter trains under."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    return {
        "allow_tf32": False,
        "allow_bf16_reduced_precision_reduction": False,
        "allow_fp16_reduced_precision_reduction": False,
    }


def _ordered_helios_device(t: Any) -> Optional[Any]:
    """The Helios device helios.torch runs t's ops on, where they are ordered with
    CUDA through the shared semaphore (each submission timed on the GPU); else None."""
    from .... import torch as ht

    return ht.device_for(t) if ht.ordering(t) == "semaphore" else None


class _Tracer:
    """--trace: torch.profiler (CPU and, with CUDA, every kernel with its stream and GPU
    time) over the last TRACE_STEPS warm-up steps, so that no timed step carries its
    overhead; written as Chrome trace JSON when they end (Perfetto, chrome://tracing)."""

    def __init__(self, torch: Any, cuda: bool, cfg: TrainConfig, adapter: str, rank: int) -> None:
        self.torch, self.cuda = torch, cuda
        self.prof: Any = None
        self.first = max(0, cfg.warmup_steps - TRACE_STEPS)
        self.last = cfg.warmup_steps - 1
        self.path = f"{cfg.trace}-{adapter}-rank{rank}.json" if cfg.trace is not None else None

    def before(self, step: int) -> None:
        if self.path is not None and step == self.first:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            self.prof = profile(activities=acts)
            self.prof.start()

    def after(self, step: int) -> None:
        if self.prof is not None and step == self.last:
            if self.cuda:
                self.torch.cuda.synchronize()
            self.prof.stop()
            try:
                self.prof.export_chrome_trace(self.path)
            except OSError as e:  # probed before training; say it, the measurement goes on
                print(f"helios: cannot write the trace {self.path} ({e.strerror or e})", file=sys.stderr)
            self.prof = None

    def abandon(self) -> None:
        """Stop a trace the adapter's failure cut short (nothing written)."""
        if self.prof is not None:
            self.prof.stop()
            self.prof = None


def _marks(torch: Any, cuda: bool, n: int) -> list:
    return [torch.cuda.Event(enable_timing=True) for _ in range(n)] if cuda else [0.0] * n


def _mark(torch: Any, cuda: bool, marks: list, i: int) -> None:
    if cuda:
        marks[i].record()
    else:
        marks[i] = time.perf_counter()


def _spans(torch: Any, cuda: bool, marks: list) -> tuple:
    if cuda:
        marks[-1].synchronize()
        return tuple(marks[i].elapsed_time(marks[i + 1]) for i in range(3))
    return tuple((marks[i + 1] - marks[i]) * 1e3 for i in range(3))

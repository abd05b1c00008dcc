"""The decode suite's run: train the model briefly, then per adapter the greedy run
(timed the second time, judged against torch_eager's tokens) and the context sweep.
Where torch is not installed only helios_plan runs, on the model's initial weights
drawn with NumPy (weights.py), with no reference to judge its tokens against."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable, Optional

import numpy as np

from .... import signals
from ...protocol.gpustate import ramp_clocks
from ...protocol.progress import Progress
from ...protocol.provenance import provenance
from ...protocol.rounds import interrupted_message
from ...results.rows import DECODE_SCHEMA, DecodeRow
from ...results.schema import written_row
from ..train.config import TrainConfig, markov_stream
from . import CONTEXT_WARMUP, CUDA_ADAPTERS, DecodeConfig, check_config, check_limits, host_memory_bytes
from .plan_decoder import PlanDecoder
from .runners import EagerRunner, GraphRunner, PlanRunner, median_or_none, timed_steps
from .weights import initial_state

TRAIN_BATCH = 8


def train_model(cfg: DecodeConfig, device: Any, log: Callable[[str], None]) -> tuple[Any, Any]:
    """The GPT after cfg.train_steps AdamW steps of torch on the Markov stream, and the stream."""
    import torch

    from ..train.adapters import TorchOps
    from ..train.model import GPT

    tcfg = TrainConfig(layers=cfg.layers, d_model=cfg.d_model, heads=cfg.heads, seq=cfg.max_len, vocab=cfg.vocab,
                       batch=TRAIN_BATCH, steps=max(cfg.train_steps, 1), seed=cfg.seed)  # fmt: skip
    rows = TRAIN_BATCH * max(cfg.train_steps, 1) + 4
    seq = min(cfg.max_len, 256)  # training sees short windows; positions past them keep their initial embedding
    data = torch.from_numpy(markov_stream(cfg.vocab, rows, max(seq, cfg.max_len) + 1, cfg.seed)).to(device)
    torch.manual_seed(cfg.seed)
    model = GPT(tcfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    t0 = time.perf_counter()
    for step in range(cfg.train_steps):
        b = data[step * TRAIN_BATCH : (step + 1) * TRAIN_BATCH, : seq + 1]
        loss = model(b[:, :-1], b[:, 1:], TorchOps())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == cfg.train_steps - 1:
            log(f"decode: training step {step}: loss {float(loss):.3f}")
    log(f"decode: {cfg.train_steps} training steps in {time.perf_counter() - t0:.1f} s")
    model.eval()
    return model, data


def read_roof(cuda: bool) -> tuple[Optional[float], Optional[dict]]:
    """GB/s of a 1 GiB read (torch's sum of float16 into float32), CUDA events, median of
    10, after the SM clock ramped as before every timed run of the harness (an idle H200
    starts at 345 MHz, and the 13 sums are about 4 ms of work); with the ramp's record."""
    if not cuda:
        return None, None
    import torch

    big = torch.ones(1 << 29, dtype=torch.float16, device="cuda")

    def burst() -> None:  # about 30 ms on an H200
        for _ in range(100):
            big.sum(dtype=torch.float32)
        torch.cuda.synchronize()

    ramp = ramp_clocks(burst)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(13):
        e0.record()
        big.sum(dtype=torch.float32)
        e1.record()
        torch.cuda.synchronize()
        if i >= 3:
            ms.append(e0.elapsed_time(e1))
    return big.numel() * 2 / float(np.median(ms)) / 1e6, ramp


class Adapters:
    """Makes each adapter's runner for a cache of max_len positions. model: the torch GPT,
    or None where torch is not installed (then state holds the weights, helios_plan only)."""

    def __init__(self, cfg: DecodeConfig, model: Any, hdev: Any, cuda: bool,
                 state: Optional[dict[str, np.ndarray]] = None) -> None:  # fmt: skip
        self.cfg, self.model, self.hdev, self.cuda = cfg, model, hdev, cuda
        if state is None:
            state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
        self.state, self.kv_width = state, cfg.d_model
        self.decoders: list = []

    def logits_at(self, seq: list[int]) -> Any:
        """torch_eager's logits after seq (the judge's reference)."""
        import torch

        from ..train.adapters import TorchOps

        m = self.model
        with torch.no_grad():
            idx = torch.tensor([seq], device=m.tok.weight.device)
            return m.last_logits(idx, 0, TorchOps(), [None] * len(m.blocks))[0].float()

    def make(self, adapter: str, max_len: int) -> Any:
        if adapter != "helios_plan":
            import torch

            from ..train.adapters import HeliosPerOpOps, TorchOps
        if adapter == "torch_eager":
            return EagerRunner(torch, self.model, TorchOps(), self.cuda)
        if adapter == "helios_torch":
            return EagerRunner(torch, self.model, HeliosPerOpOps(), self.cuda)
        if adapter == "torch_cuda_graphs":
            return GraphRunner(torch, self.model, self.cfg.heads, max_len)
        dec = PlanDecoder(self.hdev, self.state, self.cfg.layers, self.cfg.heads, max_len)
        self.decoders.append(dec)
        return PlanRunner(dec)

    def unavailable(self, adapter: str) -> Optional[str]:
        """Why an adapter cannot run here: the GPT's adapters all can where torch is."""
        return None

    def release(self) -> None:
        for d in self.decoders:
            d.close()
        self.decoders.clear()

    finish = release  # an adapter's row is done


def feed(runner: Any, tokens: list[int]) -> int:
    """The tokens at positions 0..: one forward where the runner has one, else a step each."""
    if hasattr(runner, "prefill"):
        return runner.prefill(tokens)
    nxt = 0
    for i, t in enumerate(tokens):
        nxt = runner.step(t, i)
    return nxt


def greedy_run(runner: Any, prompt: list[int], new: int) -> tuple[list[int], list[float], list, list]:
    """new tokens after the prompt, the steps after the first timed (a runner that
    generates whole runs itself, as transformers' generate does, times them its way)."""
    if hasattr(runner, "greedy"):
        return runner.greedy(prompt, new)
    first = feed(runner, prompt)
    toks, wall, host, gpu = timed_steps(runner, first, len(prompt), new - 1)
    return [first] + toks, wall, host, gpu


def context_steps(runner: Any, context: list[int], n: int) -> tuple[list[int], list[float], list, list]:
    """n steps timed after the cache is filled with `context`, as the greedy run times its
    steps: after an untimed pass over the same positions. A step at a key length the
    process has not run yet can cost far more than the next one (torch's cuDNN attention
    builds a plan per length: 45-70 ms a step against 3-6 on an H100,
    results/h100-eager-sweep-probe), so the pass runs the CONTEXT_WARMUP steps and the
    n timed ones once, then the cache is filled again and the timed steps repeat them."""
    if hasattr(runner, "context"):
        return runner.context(context, CONTEXT_WARMUP, n)
    first = feed(runner, context)
    timed_steps(runner, first, len(context), CONTEXT_WARMUP + n)
    first = feed(runner, context)
    warm, *_ = timed_steps(runner, first, len(context), CONTEXT_WARMUP)
    return timed_steps(runner, warm[-1], len(context) + CONTEXT_WARMUP, n)


def _f64(x: Any) -> np.ndarray:
    """Logits as float64 NumPy (torch tensors on any device, or arrays)."""
    return np.asarray(x.detach().double().cpu().numpy() if hasattr(x, "detach") else x, dtype=np.float64)


def judge(logits_at: Callable[[list[int]], Any], prompt: list[int], ref: list[int], got: list[int],
          float32_at: Optional[Callable[[list[int]], Any]] = None,
          adapter_at: Optional[Callable[[list[int]], Any]] = None) -> dict:  # fmt: skip
    """Where got leaves ref, and whether the reference logits there (torch eager's, or
    the runner's own where its numerics differ by design) call it a tie: their margin
    within one bfloat16 step of the largest logit; or, given the model in float32
    (float32_at), its margin between the two picks no more than eager's own error on
    those two logits (at that precision eager's pick is not determined); or, given the
    adapter's own logits there (adapter_at), those no farther from the float32 model's
    than eager's, as RMS over the vocabulary (eager's pick is no better founded)."""
    div = next((i for i, (a, b) in enumerate(zip(ref, got)) if a != b), None)
    out: dict = {"same_tokens": div is None, "first_divergence": div}
    if div is not None:
        seq = prompt + ref[:div]
        row = _f64(logits_at(seq))
        a, b = ref[div], got[div]
        gap = float(row[a] - row[b])
        out["margin_to_pick"] = gap
        out["tie"] = gap <= abs(float(row.max())) * 2.0**-7
        if not out["tie"] and float32_at is not None:
            exact = _f64(float32_at(seq))
            out["float32_margin"] = float(exact[a] - exact[b])
            out["eager_error"] = float(abs(row[a] - exact[a]) + abs(row[b] - exact[b]))
            out["tie"] = out["float32_margin"] <= out["eager_error"]
            if not out["tie"] and adapter_at is not None:
                out["eager_rms"] = float(np.sqrt(np.mean((row - exact) ** 2)))
                out["adapter_rms"] = float(np.sqrt(np.mean((_f64(adapter_at(seq)) - exact) ** 2)))
                out["tie"] = out["adapter_rms"] <= out["eager_rms"]
    return out


def step_bytes(weight_bytes: int, cfg: DecodeConfig, kv_width: int, context: int) -> int:
    """What a step must read: the 16-bit weights, and K and V (kv_width each) of every cached position."""
    return weight_bytes + 2 * cfg.layers * context * kv_width * 2


def peak_reset(cuda: bool, hdev: Any) -> int:
    if cuda:
        import torch

        torch.cuda.reset_peak_memory_stats()
    return int(hdev.telemetry()["device_bytes"])


def peak_bytes(cuda: bool, hdev: Any, adapter: str, base: int) -> Optional[int]:
    if adapter == "helios_plan":
        return int(hdev.telemetry()["peak_device_bytes"]) - base
    if not cuda:
        return None
    import torch

    return int(torch.cuda.max_memory_allocated())


def run_adapter(ad: Adapters, adapter: str, cfg: DecodeConfig, prompt: list[int], ref: Optional[list[int]],
                wbytes: int, roof: Optional[float], data: Any) -> dict:  # fmt: skip
    row: dict = {"adapter": adapter, "status": "ok"}
    with Progress(2 + len(cfg.contexts), unit="phase", log_every=1) as bar:
        measure_adapter(ad, adapter, cfg, prompt, ref, wbytes, roof, data, row, bar)
    return row


def measure_adapter(ad: Adapters, adapter: str, cfg: DecodeConfig, prompt: list[int], ref: Optional[list[int]],
                    wbytes: int, roof: Optional[float], data: Any, row: dict, bar: Progress) -> None:  # fmt: skip
    """run_adapter's work, each phase (the two greedy runs, each context) a step of bar."""
    base = peak_reset(ad.cuda, ad.hdev)
    runner = ad.make(adapter, cfg.prompt + cfg.new)
    greedy_run(runner, prompt, cfg.new)  # warm-up: pipelines, graphs, caches
    bar.step(f"{adapter}: greedy run, untimed")
    toks, wall, host, gpu = greedy_run(runner, prompt, cfg.new)
    bar.step(f"{adapter}: greedy run, timed")
    if isinstance(runner, PlanRunner):  # what the fusions left: one dispatch and barrier count a step
        _, row["dispatches"], row["barriers"] = runner.decoder.plan.counts
        row["grid_barriers"] = runner.decoder.plan.grid_barriers
        shape = runner.decoder.plan.run_shape
        row["run_grid"], row["run_registers"] = shape.grid, shape.registers
    row["tokens"] = toks
    row["tokens_per_s"] = (cfg.new - 1) / (sum(wall) / 1e3)
    row["ms_per_token_p50"] = float(np.median(wall))
    row["ms_per_token_p95"] = float(np.percentile(wall, 95))
    row["host_ms_p50"], row["gpu_ms_p50"] = median_or_none(host), median_or_none(gpu)
    ctx = cfg.prompt + cfg.new // 2
    t = row["gpu_ms_p50"] or row["ms_per_token_p50"]
    row["roof_pct"] = 100 * step_bytes(wbytes, cfg, ad.kv_width, ctx) / (t / 1e3) / (roof * 1e9) if roof else None
    if ref is not None:
        own = getattr(runner, "logits_at", None)  # hf_transformers: judged by its own logits
        f32 = None if own else getattr(ad, "float32_logits_at", None)
        row.update(judge(own or ad.logits_at, prompt, ref, toks, f32, getattr(runner, "logits_after", None)))
    if cfg.prefill:
        runner = ad.make(adapter, cfg.prefill + 1)
        if getattr(runner, "prefills", False):
            row.update(time_prefill(runner, [int(x) for x in data[1, : cfg.prefill].tolist()]))
        ad.release()
    row["contexts"] = []
    for L in cfg.contexts:
        runner = ad.make(adapter, L + CONTEXT_WARMUP + cfg.context_steps + 1)
        _, wall, host, gpu = context_steps(runner, [int(x) for x in data[1, :L].tolist()], cfg.context_steps)
        g = median_or_none(gpu)
        p50 = float(np.median(wall))
        row["contexts"].append({
            "context": L, "ms_per_token_p50": p50, "gpu_ms_p50": g, "host_ms_p50": median_or_none(host),
            "roof_pct": 100 * step_bytes(wbytes, cfg, ad.kv_width, L) / ((g or p50) / 1e3) / (roof * 1e9) if roof else None,
        })  # fmt: skip
        ad.release()
        bar.step(f"{adapter}: context {L}")
    row["peak_memory_bytes"] = peak_bytes(ad.cuda, ad.hdev, adapter, base)
    ad.finish()


def llama_cpp_row(ad: Any, cfg: DecodeConfig, prompt: list[int], ref: Optional[list[int]], wbytes: int,
                  roof: Optional[float], data: Any, log: Callable[[str], None]) -> dict:  # fmt: skip
    """llama_cpp's row: its command's run of the same greedy run, contexts and prefill
    (llama_cpp.py), judged and put in the table's columns as the other adapters' are."""
    from .llama_cpp import request, run_command

    contexts = [[int(x) for x in data[1, :L].tolist()] for L in cfg.contexts]
    pre = [int(x) for x in data[1, : cfg.prefill].tolist()] if cfg.prefill else None
    req = request("", prompt, cfg.new, contexts, CONTEXT_WARMUP, cfg.context_steps, pre)
    row, doc = run_command(ad.lcfg, ad.weights, cfg.checkpoint, req, str(ad.hdev.info.get("uuid") or ""), log)
    if doc is None:
        return row
    steps = [float(x) for x in doc["samples_ms"]] if doc.get("samples_ms") else []
    p50 = float(doc["latency_ms"]["p50"])
    row.update(tokens=[int(t) for t in doc["tokens"]], tokens_per_s=float(doc["throughput_tokens_per_sec"]),
               ms_per_token_p50=p50, ms_per_token_p95=float(doc["latency_ms"]["p95"]), host_ms_p50=None,
               gpu_ms_p50=None, peak_memory_bytes=doc.get("peak_memory_bytes"))  # fmt: skip
    ctx = cfg.prompt + cfg.new // 2
    row["roof_pct"] = 100 * step_bytes(wbytes, cfg, ad.kv_width, ctx) / (p50 / 1e3) / (roof * 1e9) if roof else None
    if ref is not None:
        row.update(judge(ad.logits_at, prompt, ref, row["tokens"], getattr(ad, "float32_logits_at", None)))
    row["contexts"] = []
    for c in doc.get("contexts") or []:
        m = float(np.median(c["step_ms"]))
        row["contexts"].append({
            "context": int(c["context"]), "ms_per_token_p50": m, "gpu_ms_p50": None, "host_ms_p50": None,
            "roof_pct": 100 * step_bytes(wbytes, cfg, ad.kv_width, int(c["context"])) / (m / 1e3) / (roof * 1e9)
            if roof else None,
        })  # fmt: skip
    if pre and doc.get("prefill"):
        w = float(np.median(doc["prefill"]["ms"]))
        row.update(prefill_tokens=len(pre), prefill_ms_p50=w, prefill_gpu_ms_p50=None,
                   prefill_tokens_per_s=len(pre) / (w / 1e3))  # fmt: skip
    row["llama_bench"] = doc.get("llama_bench")
    row["build"] = doc.get("build")
    if not steps:
        row["status"] = "malformed JSON: no samples_ms"
    return row


PREFILL_REPEATS = 5  # timed prefills after two untimed ones (the first records the capture)


def time_prefill(runner: Any, prompt: list[int]) -> dict:
    """The adapter's prefill of the prompt (its first token included: the time to first
    token), twice untimed then PREFILL_REPEATS times: median wall and GPU ms, prompt tokens/s."""
    for _ in range(2):
        runner.time_prefill(prompt)
    wall, gpu = zip(*(runner.time_prefill(prompt) for _ in range(PREFILL_REPEATS)))
    w = float(np.median(wall))
    return {"prefill_tokens": len(prompt), "prefill_ms_p50": w, "prefill_gpu_ms_p50": median_or_none(list(gpu)),
            "prefill_tokens_per_s": len(prompt) / (w / 1e3)}  # fmt: skip


def torch_or_none() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def run_decode(cfg: DecodeConfig, log: Callable[[str], None] = lambda s: None) -> dict:
    """The suite's result. Without torch, cfg.adapters must be helios_plan alone and
    cfg.train_steps 0 (ValueError otherwise; the CLI says what to install)."""
    check_config(cfg)
    torch = torch_or_none()
    if torch is None and (cfg.adapters != ["helios_plan"] or (cfg.train_steps and cfg.model == "gpt")):
        raise ValueError("decode: without torch only --adapters helios_plan with --train-steps 0 runs")
    cuda = torch is not None and torch.cuda.is_available()
    if cfg.model == "llama":
        from .llama import LlamaAdapters, llama_model, weight_bytes

        lcfg, weights = llama_model(cfg.preset, cfg.checkpoint, cfg.seed, log, torch)
        cfg.layers, cfg.d_model, cfg.heads, cfg.vocab, cfg.train_steps = (
            lcfg.layers, lcfg.d_model, lcfg.heads, lcfg.vocab, 0)  # fmt: skip
    result, hdev = header(cfg, torch, cuda)
    if cfg.model == "gpt":
        check_limits(cfg, hdev.info, host_memory_bytes())
    state = None
    model: Any = None
    data: Any = None  # the token stream: a torch tensor, or a NumPy array without torch
    if cfg.model == "llama":
        data = np.random.default_rng(cfg.seed).integers(0, lcfg.vocab, (2, cfg.max_len + 1))
    elif torch is None:
        data = markov_stream(cfg.vocab, TRAIN_BATCH + 4, cfg.max_len + 1, cfg.seed)
        state = initial_state(cfg.layers, cfg.d_model, cfg.vocab, cfg.max_len, cfg.seed)
        log("decode: torch is not installed: helios_plan decodes the model's initial (random) weights, unjudged")
    else:
        model, data = train_model(cfg, torch.device("cuda" if cuda else "cpu"), log)
    prompt = [int(x) for x in data[0, : cfg.prompt].tolist()]
    result["prompt"] = prompt
    roof, result["roof_clock_warmup"] = read_roof(cuda)
    result["roof_gb_s"] = roof
    d, v, L = cfg.d_model, cfg.vocab, cfg.layers
    if cfg.model == "llama":
        result["weight_bytes"] = wbytes = weight_bytes(lcfg)
        ad: Any = LlamaAdapters(lcfg, weights, hdev, cuda, torch, cfg.max_len)
    else:
        result["weight_bytes"] = wbytes = 2 * (L * 12 * d * d + v * d)
        ad = Adapters(cfg, model, hdev, cuda, state)
    try:
        measure(cfg, ad, result, prompt, wbytes, roof, data, log)
    except KeyboardInterrupt:  # keep the adapters measured so far, marked interrupted
        ad.finish()
        result["status"], result["failure"] = "interrupted", interrupted_message()
    finally:
        signals.measured()
    return result


def header(cfg: DecodeConfig, torch: Any, cuda: bool) -> tuple[dict, Any]:
    """The result's first fields, and the Helios device the plan runs on (CUDA's where
    torch has it, so that the two share the GPU's ordering)."""
    result: dict = {"schema": DECODE_SCHEMA, "status": "ok", **provenance(), "config": asdict(cfg), "rows": []}
    if torch is not None:
        from ..train.loop import lock_numerics

        result["numerics"] = lock_numerics(torch)
    result["device"] = torch.cuda.get_device_name(torch.device("cuda")) if cuda else "cpu (no CUDA)"
    if cuda:
        from ....torch import device_for

        hdev = device_for(torch.empty(0, device="cuda"))
    else:
        from ....functions import default_device

        hdev = default_device()
    result["helios_device"] = hdev.info["name"]
    result["helios_wait_spin_us"] = hdev.info["wait_spin_us"]  # how a step's wall time was waited for
    # why bfloat16 products (a prompt's tiles) ran on the scalar path, where they did
    result["helios_bf16_coop_unavailable"] = hdev.info.get("bf16_coop_unavailable")
    return result, hdev


def measure(cfg: DecodeConfig, ad: Adapters, result: dict, prompt: list[int], wbytes: int, roof: Optional[float],
            data: Any, log: Callable[[str], None]) -> None:  # fmt: skip
    """Each adapter's row into result["rows"], torch_eager's first (every row's reference)."""
    cuda = ad.cuda
    ref: Optional[list[int]] = None
    order = (["torch_eager"] if ad.model is not None else []) + [a for a in cfg.adapters if a != "torch_eager"]
    for adapter in order:
        if adapter not in cfg.adapters and adapter != "torch_eager":
            continue
        if adapter in CUDA_ADAPTERS and not cuda:
            if adapter in cfg.adapters:
                result["rows"].append(written_row(DecodeRow, {"adapter": adapter, "status": "skipped: needs CUDA"}))
            continue
        skip = ad.unavailable(adapter) if adapter in cfg.adapters else None
        if skip:
            result["rows"].append(written_row(DecodeRow, {"adapter": adapter, "status": skip}))
            continue
        log(f"decode: {adapter}")
        try:
            if adapter == "llama_cpp":
                row = llama_cpp_row(ad, cfg, prompt, ref, wbytes, roof, data, log)
            else:
                row = run_adapter(ad, adapter, cfg, prompt, ref, wbytes, roof, data)
        except Exception as e:  # a row that says why, the other adapters still run
            ad.finish()
            row = {
                "adapter": adapter,
                "status": f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            }
            result["status"] = "failed"
        if adapter == "torch_eager":
            ref = row.get("tokens")
            if adapter not in cfg.adapters:
                continue
        result["rows"].append(written_row(DecodeRow, row))
    for r in result["rows"]:
        if r.get("same_tokens") is False and not r.get("tie"):
            result["status"] = "failed"
            r["status"] = f"tokens differ from eager's at {r['first_divergence']} (not a tie)"

"""`helios suite mlp`: one standardized workload, every stack on the same table:
a transformer MLP block.

    y = gelu(x @ W1 + b1) @ W2 + b2      x: (tokens, d), W1: (d, hidden), W2: (hidden, d)

Adapters, on the same GPU and inputs:
  helios           weights prepacked once on the device, both products (bias and
                   GELU fused in the epilogue) recorded as one chain, GPU-timed
                   per forward with Vulkan timestamps
  helios_per_call  the same math through helios.matmul on host arrays: every
                   forward uploads x and the weights and reads the result back
                   (host wall clock per forward: the round trips the chain removes)
  helios_torch     the block as a torch program would call Helios: helios.torch.mlp
                   (both products, bias and GELU fused, one ordered group: one CUDA
                   <-> Vulkan hop pair) on torch CUDA tensors; CUDA events per
                   forward on torch's stream, forwards queued back to back as a
                   program issues them (the torch adapters' protocol), plus the
                   host wall clock of a forward waited for on its own (wall_ms)
                   (weights and input allocated in helios.torch.memory_pool()
                   and read in place where the GPU offers it, else copied device to
                   device on torch's stream; results handed to torch with no copy)
  torch_eager      torch.addmm + gelu(approximate='tanh') + addmm, CUDA events
  torch_compile    the same function through torch.compile, CUDA events
  any other        an external command (TVM_BENCH_CMD, ..., --adapter-cmd NAME=COMMAND):
                   its reported timings, gated when it saves its output
                   (helios/harness/workloads/external.py has the contract)
Each adapter's output passes the gate (sampled rows vs a float64 reference and
every element finite) before it is timed; a failing adapter gets no numbers.
GELU is the tanh form everywhere; the hidden activation is stored as float16 by
every adapter, so the reference rounds it to float16 too.
Per adapter and token count: latency_ms (mean, p50, p95, min, max),
throughput_tokens_per_sec (tokens / p50), peak_memory_bytes, TF/s.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ... import _helios, signals
from ...check import ATOL, RTOL, check_close
from ...device import Device
from ...gemm import gelu_tanh
from ...matmul_timing import warmup_launches
from ..protocol.gpustate import gpu_state, low_clock, ramp_clocks, select_gpu
from ..protocol.provenance import provenance
from ..protocol.rounds import interrupted_message
from ..results.rows import SUITE_SCHEMA, SuiteRow
from ..results.schema import written_row
from ..results.suite_tables import suite_markdown
from .external import external_adapters, run_external
from .references import queued_ms_per_call
from .suites import AdapterChoice, Suite, SuiteConfig

ADAPTERS = ("helios", "helios_per_call", "helios_torch", "torch_eager", "torch_compile")
CHECK_ROWS = 64
WARMUP_MS = 200.0  # at least this much GPU work before timing, as helios bench (clocks ramp)
RAMP_MS = 50.0  # GPU work per clock-ramp burst


@dataclass
class MlpConfig(SuiteConfig):
    """The MLP suite's run; its defaults are the GPU-sized block (SUITE.small: the
    block for a CPU device or --tiny)."""

    adapters: list[str] = field(default_factory=lambda: list(ADAPTERS))
    tokens: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096])
    d_model: int = 4096
    hidden: int = 14336
    iters: int = 50
    warmup: int = 10
    atol: float = ATOL
    rtol: float = RTOL
    device: Optional[int] = None
    tag: str = "mlp"
    external: dict[str, str] = field(default_factory=dict)  # adapter name -> command (harness/workloads/external.py)
    adapter_timeout_s: float = 600.0


@dataclass
class Workload:
    x: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    @property
    def tokens(self) -> int:
        return self.x.shape[0]

    @property
    def flops(self) -> float:
        d, h = self.w1.shape
        return 4.0 * self.tokens * d * h

    def reference_rows(self, rows: np.ndarray) -> np.ndarray:
        x = self.x[rows].astype(np.float64)
        h = gelu_tanh(x @ self.w1.astype(np.float64) + self.b1).astype(np.float16).astype(np.float64)
        return h @ self.w2.astype(np.float64) + self.b2


def make_workload(tokens: int, d: int, hidden: int, seed: int) -> Workload:
    """Seeded normals; weights scaled by 1/sqrt(fan-in) as a trained layer's are,
    so activations stay O(1) through both products."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, d), dtype=np.float32).astype(np.float16)
    w1 = (rng.standard_normal((d, hidden), dtype=np.float32) / math.sqrt(d)).astype(np.float16)
    w2 = (rng.standard_normal((hidden, d), dtype=np.float32) / math.sqrt(hidden)).astype(np.float16)
    b1 = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(d)).astype(np.float32)
    return Workload(x, w1, b1, w2, b2)


def gate(y: np.ndarray, wl: Workload, cfg: MlpConfig) -> dict:
    rng = np.random.default_rng(cfg.seed + 1)
    rows = np.sort(rng.choice(wl.tokens, size=min(CHECK_ROWS, wl.tokens), replace=False))
    r = check_close(np.asarray(y)[rows], wl.reference_rows(rows), atol=cfg.atol, rtol=cfg.rtol)
    d = r.as_dict()
    nonfinite = int((~np.isfinite(np.asarray(y, dtype=np.float32))).sum())
    d.update(
        kind="float64 rows + finite",
        rows_checked=int(rows.size),
        nonfinite_total=nonfinite,
        passed=bool(r.passed and nonfinite == 0),
    )
    return d


def latency(samples_ms: list[float]) -> dict:
    x = np.asarray(samples_ms, dtype=np.float64)
    return {
        "mean": float(x.mean()),
        "p50": float(np.median(x)),
        "p95": float(np.percentile(x, 95)),
        "min": float(x.min()),
        "max": float(x.max()),
        "n": int(x.size),
    }


def _finish(row: dict, wl: Workload, samples: list[float], peak: Optional[int]) -> dict:
    lat = latency(samples)
    st = row.get("gpu_state") or {}
    row["low_clock"] = bool(low_clock(st.get("before"), st.get("after")))
    row.update(
        status="ok",
        latency_ms=lat,
        samples_ms=[float(x) for x in samples],
        throughput_tokens_per_sec=wl.tokens / (lat["p50"] * 1e-3),
        tflops=wl.flops / (lat["p50"] * 1e-3) / 1e12,
        peak_memory_bytes=peak,
    )
    return row


def run_helios(dev: Device, wl: Workload, cfg: MlpConfig) -> dict:
    row: dict = {"adapter": "helios", "timer": "vulkan timestamps, one chain per sample"}
    dev.empty_cache()  # peak memory: this adapter's allocations only
    dev.reset_telemetry()
    x, w1, w2 = dev.upload(wl.x), dev.prepack(wl.w1), dev.prepack(wl.w2)
    b1, b2 = dev.upload(wl.b1, dtype=np.float32), dev.upload(wl.b2, dtype=np.float32)
    ch = dev.chain()
    h = ch.matmul(x, w1, bias=b1, activation="gelu")
    y = ch.matmul(h, w2, bias=b2)
    ch.run()
    row["check"] = gate(y.numpy(), wl, cfg)
    row["variants"] = ch.variants
    if not row["check"]["passed"]:
        row["status"] = "check failed"
        return row
    est = ch.time(iters=3, warmup=1).median_ms
    # Ramp bursts of >= RAMP_MS of GPU work: short ones with host gaps between
    # left an idle H100 at 600 MHz for 3 s (measured, 512 tokens).
    burst = warmup_launches(est, 10, RAMP_MS)
    row["clock_warmup"] = ramp_clocks(lambda: ch.time(iters=burst, warmup=0))
    row["warmup_launches"] = warmup_launches(est, cfg.warmup, WARMUP_MS)
    before = gpu_state()
    t = ch.time(iters=cfg.iters, warmup=row["warmup_launches"])
    row["gpu_state"] = {"before": before, "after": gpu_state()}
    # Host wall clock of one submitted forward (record + submit + wait), for the
    # comparison with helios_per_call.
    wall = []
    for _ in range(min(cfg.iters, 20)):
        t0 = time.perf_counter()
        ch.run()
        wall.append((time.perf_counter() - t0) * 1e3)
    row["wall_ms"] = latency(wall)
    return _finish(row, wl, t.samples_ms, int(dev.telemetry()["peak_device_bytes"]))


def run_helios_per_call(dev: Device, wl: Workload, cfg: MlpConfig) -> dict:
    row: dict = {
        "adapter": "helios_per_call",
        "timer": "host wall clock per forward (uploads, two submissions, downloads)",
    }
    dev.empty_cache()
    dev.reset_telemetry()

    def forward() -> np.ndarray:
        h = dev.matmul(wl.x, wl.w1, bias=wl.b1, activation="gelu")
        return dev.matmul(h, wl.w2, bias=wl.b2)

    row["check"] = gate(forward(), wl, cfg)
    if not row["check"]["passed"]:
        row["status"] = "check failed"
        return row
    for _ in range(min(cfg.warmup, 3)):
        forward()
    wall = []
    for _ in range(min(cfg.iters, 20)):
        t0 = time.perf_counter()
        forward()
        wall.append((time.perf_counter() - t0) * 1e3)
    row["wall_ms"] = latency(wall)
    return _finish(row, wl, wall, int(dev.telemetry()["peak_device_bytes"]))


def _torch_cuda(row: dict, uuid: Optional[str]) -> Optional[tuple]:
    """(torch, the CUDA device Helios's Vulkan device is), or None with row["status"] saying why."""
    try:
        import torch
    except ImportError:
        row["status"] = "skipped: torch is not installed"
        return None
    if not torch.cuda.is_available():
        row["status"] = "skipped: torch sees no CUDA device"
        return None
    index = torch.cuda.current_device()
    if uuid is not None:  # the GPU Helios runs on, never another one
        from .references import torch_index_for_uuid

        found = torch_index_for_uuid(torch, uuid)
        if found is None:
            row["status"] = f"skipped: no CUDA device matches the Vulkan device (UUID {uuid})"
            return None
        index = found
        torch.cuda.set_device(index)
    return torch, torch.device("cuda", index)


def run_helios_torch(wl: Workload, cfg: MlpConfig, uuid: Optional[str] = None) -> dict:
    row: dict = {
        "adapter": "helios_torch",
        "timer": "cuda events per forward on torch's stream (helios.torch.mlp on torch CUDA tensors: one ordered group)",
    }
    found = _torch_cuda(row, uuid)
    if found is None:
        return row
    torch, dev = found
    from ... import torch as ht  # helios.torch (needs torch: imported only here)

    # Weights and input in helios.torch.memory_pool() where the GPU offers it: Helios
    # reads them in place; elsewhere they are copied device to device every call.
    try:
        pool = ht.memory_pool(dev)
        row["operands"] = "in helios.torch.memory_pool(): read in place"
    except Exception as e:  # no VMM export / interop here: the copying path, said so
        pool = None
        row["operands"] = f"copied device to device per call (no memory pool: {type(e).__name__}: {str(e)[:120]})"
    with pool if pool is not None else contextlib.nullcontext():
        x = torch.from_numpy(wl.x).to(dev)
        w1t, w2t = (torch.from_numpy(np.ascontiguousarray(w.T)).to(dev) for w in (wl.w1, wl.w2))  # (out, in)
        b1, b2 = (torch.from_numpy(b).to(dev, torch.float16) for b in (wl.b1, wl.b2))

    def forward():
        return ht.mlp(x, w1t, b1, w2t, b2, activation="gelu_tanh")

    try:
        y = forward()
    except UNAVAILABLE as e:  # no CUDA interop here (driver, exportable memory): a result, not a crash
        row["status"] = f"skipped: helios.torch unavailable: {type(e).__name__}: {str(e)[:200]}"
        return row
    except Exception as e:  # noqa: BLE001 - the adapter failed: its row says how, the suite fails
        row["status"] = f"failed: {type(e).__name__}: {str(e)[:200]}"
        return row
    row["check"] = gate(y.float().cpu().numpy(), wl, cfg)
    if not row["check"]["passed"]:
        row["status"] = "check failed"
        return row
    samples = cuda_event_samples(torch, forward, cfg, row)
    # Also the host's view of one forward on its own (the stream drained before
    # and after): what a caller that waits for each result sees.
    wall = []
    for _ in range(min(cfg.iters, 20)):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        forward()
        torch.cuda.synchronize(dev)
        wall.append((time.perf_counter() - t0) * 1e3)
    row["wall_ms"] = latency(wall)
    hdev = ht.device_for(x)
    return _finish(row, wl, samples, int(hdev.telemetry()["peak_device_bytes"]))


# What makes the helios_torch adapter unavailable here (a skip, not a failure): no
# CUDA interop with this driver, no exportable memory, no device.
UNAVAILABLE = (_helios.UnsupportedError, _helios.NoDeviceError, ImportError, BufferError)


def cuda_event_samples(torch, call: Callable[[], object], cfg: MlpConfig, row: dict) -> list[float]:
    """ms per call between two CUDA events on torch's current stream, the calls
    queued back to back as a program issues them (no host sync between), after
    the clocks are ramped and >= WARMUP_MS of warm-up: the one protocol of every
    adapter that runs on torch's stream. A call that blocks the host (or leaves
    the stream waiting for work submitted later) shows in its samples."""

    def burst(n: int) -> float:
        return queued_ms_per_call(torch, call, n)

    est = burst(3)
    n_ramp = warmup_launches(est, 10, RAMP_MS)
    row["clock_warmup"] = ramp_clocks(lambda: burst(n_ramp))
    row["warmup_launches"] = warmup_launches(est, cfg.warmup, WARMUP_MS)
    burst(row["warmup_launches"])
    before = gpu_state()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(cfg.iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(cfg.iters)]
    for i in range(cfg.iters):
        starts[i].record()
        call()
        ends[i].record()
    torch.cuda.synchronize()
    row["gpu_state"] = {"before": before, "after": gpu_state()}
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def run_torch(wl: Workload, cfg: MlpConfig, compiled: bool, uuid: Optional[str] = None) -> dict:
    name = "torch_compile" if compiled else "torch_eager"
    row: dict = {"adapter": name, "timer": "cuda events per forward"}
    found = _torch_cuda(row, uuid)
    if found is None:
        return row
    torch, dev = found
    index = dev.index
    torch.backends.cuda.matmul.allow_tf32 = False
    x, w1, w2 = (torch.from_numpy(a).to(dev) for a in (wl.x, wl.w1, wl.w2))
    b1 = torch.from_numpy(wl.b1).to(dev, torch.float16)
    b2 = torch.from_numpy(wl.b2).to(dev, torch.float16)

    def mlp(x, w1, b1, w2, b2):
        h = torch.nn.functional.gelu(torch.addmm(b1, x, w1), approximate="tanh")
        return torch.addmm(b2, h, w2)

    fn = mlp
    row["torch"] = torch.__version__
    if compiled:
        try:
            fn = torch.compile(mlp)
            t0 = time.perf_counter()
            fn(x, w1, b1, w2, b2)
            torch.cuda.synchronize()
            row["compile_s"] = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - a broken toolchain is a result, not a crash
            row["status"] = f"failed: torch.compile raised {type(e).__name__}: {str(e)[:200]}"
            return row
    y = fn(x, w1, b1, w2, b2)
    torch.cuda.synchronize()
    row["check"] = gate(y.float().cpu().numpy(), wl, cfg)
    if not row["check"]["passed"]:
        row["status"] = "check failed"
        return row

    torch.cuda.reset_peak_memory_stats()
    samples = cuda_event_samples(torch, lambda: fn(x, w1, b1, w2, b2), cfg, row)
    row["gpu"] = torch.cuda.get_device_name(index)
    row["gpu_uuid"] = str(getattr(torch.cuda.get_device_properties(index), "uuid", "")) or None
    return _finish(row, wl, samples, int(torch.cuda.max_memory_allocated()))


def run_suite(cfg: MlpConfig, log: Callable[[str], None] = lambda s: None) -> dict:
    bad = [a for a in cfg.adapters if a not in ADAPTERS and a not in cfg.external]
    if bad:
        raise ValueError(f"unknown adapter(s) {bad}; expected some of {list(ADAPTERS)}")
    if cfg.iters < 1 or cfg.warmup < 0 or not cfg.tokens or min(cfg.tokens) < 1 or cfg.d_model < 1 or cfg.hidden < 1:
        raise ValueError("need iters >= 1, warmup >= 0, tokens >= 1, d_model >= 1, hidden >= 1")
    result: dict = {
        "schema": SUITE_SCHEMA,
        "suite": "mlp",
        "tag": cfg.tag,
        "status": "ok",
        **provenance(),
        "workload": {
            "formula": "y = gelu_tanh(x @ W1 + b1) @ W2 + b2",
            "d_model": cfg.d_model,
            "hidden": cfg.hidden,
            "dtype": "float16",
            "accumulate": "float32",
            "hidden_activation_dtype": "float16",
        },
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "seed": cfg.seed,
        "atol": cfg.atol,
        "rtol": cfg.rtol,
        "command": cfg.command,
        "external_adapters": dict(cfg.external),
        "rows": [],
    }
    with Device(cfg.device) as dev:
        result["helios"] = {
            k: dev.info[k] for k in ("name", "driver_name", "driver_info", "driver_version", "uuid", "pci_bus_id")
        }
        select_gpu(dev.info["uuid"])
        result["gpu_state_before"] = gpu_state()
        try:
            for tokens in cfg.tokens:
                wl = make_workload(tokens, cfg.d_model, cfg.hidden, cfg.seed)
                for adapter in list(cfg.adapters) + [a for a in cfg.external if a not in cfg.adapters]:
                    log(f"suite mlp: tokens={tokens} {adapter} ...")
                    if adapter in cfg.external:
                        row = run_external(
                            adapter, cfg.external[adapter], wl, cfg, dev.info["uuid"], gate, cfg.adapter_timeout_s
                        )
                    elif adapter == "helios":
                        row = run_helios(dev, wl, cfg)
                    elif adapter == "helios_per_call":
                        row = run_helios_per_call(dev, wl, cfg)
                    elif adapter == "helios_torch":
                        row = run_helios_torch(wl, cfg, dev.info["uuid"])
                    else:
                        row = run_torch(wl, cfg, adapter == "torch_compile", dev.info["uuid"])
                    row["tokens"] = tokens
                    if row.get("status") == "check failed" or str(row.get("status")).startswith("failed"):
                        result["status"] = "failed"
                    log(
                        f"suite mlp: tokens={tokens} {adapter}: {row.get('status')}"
                        + (f", p50 {row['latency_ms']['p50']:.4f} ms" if "latency_ms" in row else "")
                    )
                    result["rows"].append(written_row(SuiteRow, row))
        except KeyboardInterrupt:  # keep the adapters measured so far, marked interrupted
            result["status"], result["failure"] = "interrupted", interrupted_message()
        finally:
            signals.measured()
        result["gpu_state_after"] = gpu_state()
    return result


def configure(args: Any, fields: dict) -> MlpConfig:
    """The run from `helios suite mlp`'s flags; ValueError names a bad --adapter-cmd or
    an adapter that is neither built in nor external."""
    external = external_adapters(args.adapter_cmd, ADAPTERS)
    bad = [a for a in fields["adapters"] if a not in ADAPTERS and a not in external]
    if bad:
        raise ValueError(f"--adapters: unknown adapter {', '.join(bad)} for mlp; choose from {', '.join(ADAPTERS)} "
                         "or an external adapter (--adapter-cmd NAME=COMMAND)")  # fmt: skip
    return MlpConfig(**fields, atol=args.atol, rtol=args.rtol, device=args.device,
                     tag=args.tag if args.tag is not None else "mlp", external=external,
                     adapter_timeout_s=args.adapter_timeout)  # fmt: skip


SUITE = Suite(
    name="mlp",
    doc=__doc__ or "",
    fields={k: k for k in ("tokens", "d_model", "hidden", "iters", "warmup")},
    small={"tokens": [16, 64], "d_model": 256, "hidden": 896, "iters": 5, "warmup": 1},
    flags=("adapter_cmd", "adapter_timeout", "atol", "rtol", "tag"),
    adapters=lambda args: AdapterChoice(None, ADAPTERS, "mlp"),
    configure=configure,
    run=run_suite,
    markdown=suite_markdown,
    row=SuiteRow,
    rejected="suite rejected: an adapter failed (its correctness gate or its run)",
    takes_device=True,
)

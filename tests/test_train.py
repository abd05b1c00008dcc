"""helios suite train --tiny end to end (on lavapipe: Helios through host arrays;
on a CUDA machine: helios.torch), and the synthetic data's properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helios.cli import main

torch = pytest.importorskip("torch", reason="helios suite train needs torch")


def test_the_markov_stream_is_seeded_and_learnable():
    from helios.harness.workloads.train import markov_stream

    a, b = markov_stream(50, 8, 200, seed=3), markov_stream(50, 8, 200, seed=3)
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() < 50
    # each token has at most 4 successors: far below log(vocab) of entropy
    succ = {}
    for row in a:
        for x, y in zip(row[:-1], row[1:]):
            succ.setdefault(int(x), set()).add(int(y))
    assert max(len(s) for s in succ.values()) <= 4


def test_tiny_training_through_helios_matches_torch(device, tmp_path):
    out = tmp_path / "train.json"
    assert main(["suite", "train", "--tiny", "--adapters", "torch_eager,helios", f"--out={out}"]) == 0
    d = json.loads(out.read_text())
    assert d["schema"] == "helios-train/1" and d["status"] == "ok"
    rows = {r["adapter"]: r for r in d["rows"]}
    eager, hel = rows["torch_eager"], rows["helios"]
    assert hel["status"] == "ok" and hel["gate"]["passed"], hel
    assert len(hel["loss"]) == d["config"]["steps"] and all(math.isfinite(x) for x in hel["loss"] + hel["grad_norm"])
    assert eager["loss"][0] == pytest.approx(math.log(d["config"]["vocab"]), rel=0.05)  # starts near uniform
    for a, b in zip(hel["loss"], eager["loss"]):
        assert abs(a - b) <= 0.02 * abs(b)
    assert hel["tokens_per_s"] > 0 and hel["step_ms_p50"] > 0
    assert hel["host_forward_ms_p50"] > 0 and hel["host_backward_ms_p50"] > 0
    assert d["distributed"]["cpus"] >= 1 and d["distributed"]["grad_sync"] is None  # one process: no averaging
    assert (tmp_path / "train.md").read_text().count("| helios |") == 1


def test_unknown_train_adapters_are_refused(capsys):
    assert main(["suite", "train", "--tiny", "--adapters", "helios_per_call"]) == 2
    assert "unknown helios_per_call" in capsys.readouterr().err


def test_decoding_with_the_kv_cache_equals_the_full_forward():
    from helios.harness.workloads.train import TINY, TrainConfig
    from helios.harness.workloads.train.adapters import TorchOps
    from helios.harness.workloads.train.model import GPT, greedy

    torch.manual_seed(0)
    cfg = TrainConfig(**TINY)
    model = GPT(cfg)
    ops = TorchOps()
    prompt = torch.randint(0, cfg.vocab, (1, 8))
    toks, steps = greedy(model, ops, prompt, 6)
    full = torch.cat([prompt, torch.tensor([toks[:-1]])], dim=1)
    for i, logits in enumerate(steps):
        ref = model.last_logits(full[:, : 8 + i], 0, ops, [[] for _ in model.blocks])
        assert torch.allclose(logits, ref, atol=2e-2, rtol=2e-2)


def test_the_inference_smoke_is_in_the_result(device, tmp_path):
    out = tmp_path / "train.json"
    assert main(["suite", "train", "--tiny", "--adapters", "torch_eager,helios", f"--out={out}"]) == 0
    inf = json.loads(out.read_text())["inference"]
    assert len(inf["prompts"]) == 3 and all(len(e["helios"]) == inf["new_tokens"] for e in inf["prompts"])
    assert inf["decode_tokens_per_s"]["helios"] > 0
    for e in inf["prompts"]:
        d = e["first_divergence"]
        assert e["helios"][:d] == e["torch"][:d]  # equal up to the first divergence (all of it when None)


def test_the_gate_rejects_an_adapter_whose_products_are_wrong(device, monkeypatch):
    """A helios adapter whose logits are 1.5x off must fail its first-step gate and
    get no numbers (the gate can fail)."""
    from helios.harness.workloads.train import TINY, TrainConfig, adapters
    from helios.harness.workloads.train.loop import run_train

    real = adapters.ops_for

    def planted(adapter, cuda):
        ops = real(adapter, cuda)
        if adapter == "torch_eager":
            return ops

        # the class the helios adapter runs here (the decoder with CUDA, host arrays without)
        class Wrong(type(ops)):
            def stack(self, model, x):
                return super().stack(model, x) * 1.5  # logits 1.5x off

        return Wrong()

    monkeypatch.setattr(adapters, "ops_for", planted)
    cfg = TrainConfig(**TINY, adapters=["torch_eager", "helios"])
    res = run_train(cfg)
    row = {r["adapter"]: r for r in res["rows"]}["helios"]
    assert res["status"] == "failed" and row["status"] == "gate failed" and not row["gate"]["passed"]
    assert "loss" not in row


def test_a_launcher_run_is_distributed_and_needs_cuda(monkeypatch, capsys):
    """Under torchrun (WORLD_SIZE > 1) the suite trains DistributedDataParallel
    replicas over NCCL; without CUDA it says so before any work."""
    from helios.harness.workloads.train.ddp import distributed_rank

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert distributed_rank() is None  # no launcher: one process
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed_rank() is None  # a launcher with one process: no process group
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: the 2-GPU run is measured on the device, not in this test")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["suite", "train", "--tiny", "--adapters", "torch_eager"]) == 2
    assert "needs CUDA" in capsys.readouterr().err


def test_gradients_averaged_after_the_backward_land_on_their_parameters(monkeypatch):
    """--grad-sync after-backward: one all-reduce of every gradient, flattened, and each
    piece copied back to its own parameter. The all-reduce stands in for two ranks with
    the same gradients (the sum twice each), so the average is the gradient itself and a
    piece copied to the wrong parameter or shape, or a wrong divisor, shows. (No process
    group: gloo's teardown in torch 2.6 can hang joining its threads.)"""
    import torch.distributed as dist

    from helios.harness.workloads.train import TINY, TrainConfig
    from helios.harness.workloads.train.adapters import TorchOps
    from helios.harness.workloads.train.ddp import average_grads
    from helios.harness.workloads.train.model import GPT

    if not dist.is_available():
        pytest.skip("this torch has no torch.distributed")
    torch.manual_seed(1)
    cfg = TrainConfig(**TINY)
    model = GPT(cfg)
    x = torch.randint(0, cfg.vocab, (2, cfg.seq))
    model(x, x, TorchOps()).backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    assert len({g.shape for g in want.values()}) > 2  # pieces of several shapes
    reduced: list[int] = []

    def all_reduce(t):
        reduced.append(t.numel())
        t.mul_(2)

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    average_grads(torch, model, 2)
    assert reduced == [sum(g.numel() for g in want.values())]  # one all-reduce of them all
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, want[n]), n


_DDP_WORKER = """
import sys, torch, torch.distributed as dist
from helios.harness.workloads.train import TINY, TrainConfig
from helios.harness.workloads.train.adapters import TorchOps
from helios.harness.workloads.train.ddp import wrap_ddp
from helios.harness.workloads.train.model import GPT
rank, store, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
grads = {}
for hook in ("torch", "helios", "none"):
    torch.manual_seed(1)
    cfg = TrainConfig(**TINY, ddp_comm_hook=hook)
    model = GPT(cfg)
    wrapped = wrap_ddp(torch, model, cfg, None, "torch_eager")
    torch.manual_seed(10 + rank)
    x = torch.randint(0, cfg.vocab, (2, cfg.seq))
    wrapped(x, x, TorchOps()).backward()
    grads[hook] = {n: p.grad.clone() for n, p in model.named_parameters()}
torch.save(grads, out)
dist.destroy_process_group()
"""


def test_ddp_comm_hooks_average_or_keep_each_ranks_gradients(tmp_path):
    """--ddp-comm-hook: two gloo ranks on the CPU, each with its own batch. Under torch's
    hook and helios.torch.ddp_comm_hook each rank's gradients are the mean of both
    ranks' own; under the hook that sends nothing each rank keeps its own."""
    import os
    import subprocess
    import sys

    import torch.distributed as dist

    from helios.harness.workloads.train import TINY, TrainConfig
    from helios.harness.workloads.train.adapters import TorchOps
    from helios.harness.workloads.train.model import GPT

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no torch.distributed with gloo")
    outs = [tmp_path / f"rank{r}.pt" for r in (0, 1)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _DDP_WORKER, str(r), str(tmp_path / "store"), str(outs[r])],
            env=dict(os.environ, OMP_NUM_THREADS="1"),
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
    got = [torch.load(o) for o in outs]
    own = []
    for r in (0, 1):  # each rank's gradients alone, without DDP
        torch.manual_seed(1)
        model = GPT(TrainConfig(**TINY))
        torch.manual_seed(10 + r)
        x = torch.randint(0, TINY["vocab"], (2, TINY["seq"]))
        model(x, x, TorchOps()).backward()
        own.append({n: p.grad for n, p in model.named_parameters()})
    close = {"rtol": 1e-5, "atol": 1e-7}  # the workers sum in another order (one thread)
    assert any(not torch.allclose(own[0][n], own[1][n], **close) for n in own[0])  # the ranks' batches differ
    for r in (0, 1):
        for n, g in own[r].items():
            assert torch.allclose(got[r]["none"][n], g, **close), (r, n)
            mean = (own[0][n] + own[1][n]) / 2
            for hook in ("torch", "helios"):
                assert torch.allclose(got[r][hook][n], mean, **close), (hook, r, n)


def test_the_comm_hook_follows_the_adapter():
    from helios.harness.workloads.train import TrainConfig
    from helios.harness.workloads.train.ddp import comm_hook_for

    assert comm_hook_for(TrainConfig(), "helios") == "helios"
    assert comm_hook_for(TrainConfig(), "torch_eager") == "torch"
    assert comm_hook_for(TrainConfig(ddp_comm_hook="torch"), "helios") == "torch"
    assert comm_hook_for(TrainConfig(ddp_comm_hook="none"), "torch_eager") == "none"


def test_the_markdown_names_the_world_size():
    from helios.harness.workloads.train import train_markdown

    row = {
        "adapter": "helios",
        "status": "ok",
        "tokens_per_s": 2000.0,
        "tokens_per_s_per_gpu": 1000.0,
        "step_ms_p50": 1.0,
        "forward_ms_p50": 0.3,
        "backward_ms_p50": 0.5,
        "optimizer_ms_p50": 0.2,
        "loss": [4.0, 3.0],
        "peak_memory_bytes": None,
    }
    cfg = {"layers": 1, "d_model": 8, "heads": 1, "seq": 4, "batch": 2, "vocab": 10, "steps": 2}
    md = train_markdown({"config": cfg, "device": "x", "rows": [row], "distributed": {"world_size": 2}})
    assert "2 GPUs, DistributedDataParallel over NCCL, global batch 4" in md and "| 2000 | 1000 |" in md
    md = train_markdown(
        {"config": cfg, "device": "x", "rows": [row], "distributed": {"world_size": 2, "grad_sync": "after-backward"}}
    )
    assert "2 GPUs, one all-reduce of the gradients after the backward over NCCL" in md
    md = train_markdown(
        {"config": cfg, "device": "x", "rows": [dict(row, ddp_comm_hook="helios")], "distributed": {"world_size": 2}}
    )
    assert "global batch 4; comm hooks: helios helios" in md
    row["helios_kernel_ms_p50"] = 0.25
    md = train_markdown({"config": cfg, "device": "x", "rows": [row], "distributed": {"world_size": 1}})
    assert "| 0.250 ms (25%) |" in md


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--d-model", "100", "--heads", "3"], "not a multiple of heads 3"),
        (["--d-model", "1024", "--heads", "2"], "head_dim 512 .* exceeds"),
        (["--steps", "3", "--train-warmup", "3"], "leave none of the 3 steps"),
        (["--trace", "t", "--train-warmup", "0"], "--trace records warm-up steps"),
        (["--seq", "4096", "--micro-batch", "64", "--vocab", "200000"], "allows .* per buffer"),
    ],
)
def test_bad_configs_are_refused_before_any_work(device, argv, match, capsys):
    assert main(["suite", "train", "--tiny", "--adapters", "torch_eager,helios"] + argv) == 2
    err = capsys.readouterr().err
    assert "error" in err
    import re

    assert re.search(match, err), err


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--ddp-bucket-mb", "0"], "--ddp-bucket-mb: expected a number >= 0.001"),
        (["--grad-sync", "allreduce"], "--grad-sync: invalid choice: 'allreduce'"),
        (["--ddp-comm-hook", "nccl"], "--ddp-comm-hook: invalid choice: 'nccl'"),
    ],
)
def test_bad_distributed_flags_are_refused(argv, match, capsys):
    with pytest.raises(SystemExit) as e:
        main(["suite", "train", "--tiny"] + argv)
    assert e.value.code == 2
    import re

    assert re.search(match, capsys.readouterr().err)


def test_a_trace_records_the_last_warm_up_steps(tmp_path):
    """--trace PREFIX: a torch.profiler Chrome trace per adapter of its last warm-up
    steps (the timed ones never carry the profiler), named by adapter and rank."""
    out, prefix = tmp_path / "t.json", tmp_path / "tr"
    argv = ["suite", "train", "--tiny", "--adapters", "torch_eager", "--trace", str(prefix), f"--out={out}"]
    assert main(argv) == 0
    trace = json.loads((tmp_path / "tr-torch_eager-rank0.json").read_text())
    ops = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("cat") == "cpu_op"]
    assert any("embedding" in e["name"] for e in ops) and any("cross_entropy" in e["name"] for e in ops)
    assert json.loads(out.read_text())["config"]["trace"] == str(prefix)


def test_a_failing_adapter_is_one_line_in_the_table_and_whole_in_the_json(monkeypatch, tmp_path):
    """A compiler's multi-line error used to land raw in the markdown table (breaking it):
    the table gets its first line, the JSON row keeps the whole text."""
    from helios.harness.workloads.train import TINY, TrainConfig, adapters, train_markdown
    from helios.harness.workloads.train.loop import run_train

    real = adapters.ops_for

    def planted(adapter, cuda):
        if adapter == "helios":
            raise RuntimeError("CppCompileError: first line | with a pipe\n  /x.cpp:1: fatal error\nmore")
        return real(adapter, cuda)

    monkeypatch.setattr(adapters, "ops_for", planted)
    cfg = TrainConfig(**{**TINY, "steps": 3, "warmup_steps": 1}, adapters=["torch_eager", "helios"])
    res = run_train(cfg)
    row = {r["adapter"]: r for r in res["rows"]}["helios"]
    assert row["status"] == "error: RuntimeError: CppCompileError: first line | with a pipe"
    assert "fatal error" in row["error_log"] and "more" in row["error_log"]
    table = train_markdown(res)
    line = next(x for x in table.splitlines() if x.startswith("| helios |"))
    assert "\\|" in line and "fatal" not in table and line.count(" | ") == 10


def test_torch_compile_is_probed_before_it_runs():
    from helios.harness.workloads.train.loop import compile_unavailable

    class Broken:
        @staticmethod
        def compile(fn):
            def run(x):
                raise RuntimeError("BackendCompilerFailed: inductor\n  ATen/NumericUtils.h: No such file")

            return run

        @staticmethod
        def ones(n, device=None):
            return [1.0] * n

    why = compile_unavailable(Broken, "cpu")
    assert why is not None and why[0] == "BackendCompilerFailed: inductor" and "NumericUtils" in why[1]


def test_the_cell_shows_a_compilers_diagnostic():
    from helios.harness.workloads.train.loop import first_line

    err = RuntimeError(
        "backend='inductor' raised:\nCppCompileError: C++ compile error\n\n/t/c.h:19:10: fatal error: ATen/N.h: No such file"
    )
    assert first_line(err) == "fatal error: ATen/N.h: No such file"
    assert first_line(RuntimeError("lead-in:\nthe reason\nmore")) == "the reason"
    assert first_line(RuntimeError("")) == "RuntimeError" and len(first_line(RuntimeError("x" * 999))) == 200

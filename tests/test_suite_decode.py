"""helios suite decode --tiny end to end (on lavapipe: torch CPU eager and the Helios
plan; on a CUDA machine every adapter), its table, report and refusals."""

from __future__ import annotations

import json

import pytest
from helpers import persistent_runs

from helios import _helios
from helios.cli import main
from helios.harness.results.suite_tables import decode_markdown

torch = pytest.importorskip("torch", reason="helios suite decode needs torch")


def test_tiny_decoding_through_a_plan_matches_eager(device, tmp_path, capsys):
    out = tmp_path / "decode.json"
    assert main(["suite", "decode", "--tiny", f"--out={out}"]) == 0
    d = json.loads(out.read_text())
    assert d["schema"] == "helios-decode/1" and d["status"] == "ok"
    assert d["helios_wait_spin_us"] == device.info["wait_spin_us"]  # how a step's wall time was waited for
    assert d["helios_bf16_coop_unavailable"] == device.info.get("bf16_coop_unavailable")
    rows = {r["adapter"]: r for r in d["rows"]}
    plan, eager = rows["helios_plan"], rows["torch_eager"]
    assert plan["status"] == "ok" and plan["same_tokens"] is True, plan.get("first_divergence")
    assert plan["tokens"] == eager["tokens"] and len(plan["tokens"]) == d["config"]["new"]
    assert plan["tokens_per_s"] > 0 and plan["ms_per_token_p95"] >= plan["ms_per_token_p50"] > 0
    assert "decode: training step 10:" in capsys.readouterr().out  # progress while training
    assert plan["host_ms_p50"] > 0 and plan["peak_memory_bytes"] > 0
    assert [c["context"] for c in plan["contexts"]] == d["config"]["contexts"]
    # a layer's norm with QKV (the norm as the product's head), attention (one dispatch),
    # projection, norm with up, and down; then the embedding, the last norm with the
    # logits, and the top-1. With persistent runs, a layer's five are members of runs of
    # at most PERSIST_MEMBERS (shaders/families.py), the logits (fp32) apart.
    layers, members = d["config"]["layers"], _helios.PERSIST_MEMBERS
    want = 3 + -(-5 * layers // members) if persistent_runs(device) else 5 * layers + 3
    assert plan["dispatches"] == want and 0 < plan["barriers"] <= plan["dispatches"] + 2
    assert plan["grid_barriers"] == (
        5 * layers - (want - 3) if persistent_runs(device) else 0
    )  # a run's members less one
    if not torch.cuda.is_available():  # said per row, never silently left out
        assert rows["torch_cuda_graphs"]["status"] == rows["helios_torch"]["status"] == "skipped: needs CUDA"
        assert d["roof_gb_s"] is None and d["roof_clock_warmup"] is None and plan["roof_pct"] is None
    # The sweep times steps as the greedy run does: about the same cost a token. (Not judged
    # for torch_eager here: torch's CPU threads share CI's 2 cores with lavapipe's, and
    # its steps then stall for whole time slices; test_the_context_sweep_times_steps_after_
    # their_first_run checks the sweep's rule for every adapter.)
    for c in plan["contexts"]:
        assert c["ms_per_token_p50"] < 3 * plan["ms_per_token_p50"] + 1.0, (c, plan["ms_per_token_p50"])
    md = (tmp_path / "decode.md").read_text()
    assert md.count("| helios_plan |") == 2 and "ms/token (p50) by context length" in md
    counted = f"{plan['dispatches']} dispatches, {plan['barriers']} barriers and {plan['grid_barriers']} grid barriers"
    assert f"helios_plan: {counted} a step" in md
    ramp = {"done": True, "reached": True, "sm_clock_mhz": 1980.0, "max_sm_clock_mhz": 1980.0}
    head = decode_markdown({**d, "roof_gb_s": 4000.0, "roof_clock_warmup": ramp}).splitlines()[0]
    assert head.endswith("memory roof 4000 GB/s (1 GiB read, CUDA events; SM clock 1980 of 1980 MHz after the ramp)")
    scalar = "Helios's bfloat16 products ran on the scalar fp32 path"
    assert (scalar in md) == bool(d["helios_bf16_coop_unavailable"]), md
    why = "this build's glslc lacked GL_EXT_bfloat16 (rebuild with a newer glslc)"
    assert f"{scalar}, not on cooperative matrices: {why}." in decode_markdown(
        {**d, "helios_bf16_coop_unavailable": why}
    )
    assert scalar not in decode_markdown({**d, "helios_bf16_coop_unavailable": None})
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "| helios_plan | ok |" in capsys.readouterr().out


def test_the_numpy_initial_weights_are_the_models_names_shapes_and_rule():
    from helios.harness.workloads.decode.weights import INIT_STD, initial_state
    from helios.harness.workloads.train.config import TrainConfig
    from helios.harness.workloads.train.model import GPT

    torch.manual_seed(0)
    ref = GPT(TrainConfig(layers=3, d_model=32, heads=2, seq=40, vocab=50)).state_dict()
    got = initial_state(3, 32, 50, 40, seed=0)
    assert list(got) == list(ref) and {k: v.shape for k, v in got.items()} == {
        k: tuple(v.shape) for k, v in ref.items()
    }
    for name, w in got.items():
        r = ref[name].numpy()
        if w.ndim == 2:  # both N(0, 0.02): the same spread, not the same draws
            assert abs(float(w.std()) - INIT_STD) < 0.1 * INIT_STD and abs(float(r.std()) - INIT_STD) < 0.1 * INIT_STD
        else:
            assert (w == r).all(), name  # biases 0, LayerNorm weights 1


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--heads", "3"], "d_model 64 is not a multiple of heads 3"),
        (["--d-model", "96", "--heads", "2"], "head_dim 48 must divide 256"),
        (["--adapters", "torch_compile"], "unknown torch_compile for decode"),
        (["--new", "1"], "--new >= 2"),
    ],
)
def test_bad_decode_flags_are_refused_before_any_work(argv, message, capsys):
    assert main(["suite", "decode", "--tiny"] + argv) == 2
    assert message in capsys.readouterr().err


def test_sigterm_during_the_plan_keeps_eager_row(device, tmp_path, monkeypatch):
    """SIGTERM while the plan's adapter decodes: torch_eager's row, measured before,
    is written, the run marked interrupted, exit 143 (the signal policy)."""
    import os
    import signal

    from helios.harness.workloads.decode import runners

    real = runners.PlanRunner.step

    def step(self, token, position):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(self, token, position)

    monkeypatch.setattr(runners.PlanRunner, "step", step)
    out = tmp_path / "decode.json"
    assert main(["suite", "decode", "--tiny", "--adapters", "torch_eager,helios_plan", f"--out={out}"]) == 143
    d = json.loads(out.read_text())
    assert d["status"] == "interrupted" and "SIGTERM" in d["failure"]
    assert [r["adapter"] for r in d["rows"]] == ["torch_eager"] and d["rows"][0]["status"] == "ok"


class FirstLengthCost:
    """A runner whose step at a key length it has not run yet costs `first` ms and `then`
    ms after (torch's cuDNN attention builds a plan per length), on a fake clock."""

    def __init__(self, first: float, then: float) -> None:
        self.seen: set = set()
        self.first, self.then = first, then
        self.host_ms = self.gpu_ms = None

    def prefill(self, tokens: list) -> int:
        return 0

    def step(self, token: int, position: int) -> int:
        self.gpu_ms = self.then if position in self.seen else self.first
        self.seen.add(position)
        return token


def test_the_context_sweep_times_steps_after_their_first_run():
    """torch_eager's sweep read 45 ms a token against 3.6 in its main row on an H200 and an
    H100 (every timed step a new key length); the sweep now leaves first runs untimed."""
    from helios.harness.workloads.decode.run import context_steps

    runner = FirstLengthCost(40.0, 3.0)
    _, _, _, gpu = context_steps(runner, list(range(256)), 32)
    assert len(gpu) == 32 and set(gpu) == {3.0}


def test_the_step_line_counts_both_barriers_and_bounds_their_cost():
    """GPU time off the roof over every barrier of the step: 1 ms at 60% leaves 400 us,
    over 9 + 71 barriers 5 us each at most; without a GPU time or roof, the counts only."""
    from helios.harness.results.rows import DecodeRow, read_row
    from helios.harness.results.suite_tables import step_counts

    row = {"adapter": "helios_plan", "status": "ok", "dispatches": 8, "barriers": 9, "grid_barriers": 71}
    assert step_counts(read_row(DecodeRow, {**row, "gpu_ms_p50": 1.0, "roof_pct": 60.0})) == (
        "8 dispatches, 9 barriers and 71 grid barriers a step; 400 us off the roof, 5.00 us a barrier at most"
    )
    older = {k: v for k, v in row.items() if k != "grid_barriers"}  # a file from before the field: none counted
    assert step_counts(read_row(DecodeRow, older)) == "8 dispatches, 9 barriers and 0 grid barriers a step"
    runs = {**row, "run_grid": 132, "run_registers": 131}  # over 128: one workgroup an SM, which the line names
    assert step_counts(read_row(DecodeRow, runs)) == (
        "8 dispatches, 9 barriers and 71 grid barriers a step (runs of 132 workgroups, 131 registers a thread)"
    )
    unreported = {**row, "run_grid": 2, "run_registers": 0}  # lavapipe: no registers reported
    assert step_counts(read_row(DecodeRow, unreported)).endswith("(runs of 2 workgroups)")

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
    from helios.harness.train import markov_stream

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
    assert (tmp_path / "train.md").read_text().count("| helios |") == 1


def test_unknown_train_adapters_are_refused(capsys):
    assert main(["suite", "train", "--tiny", "--adapters", "helios_per_call"]) == 2
    assert "unknown helios_per_call" in capsys.readouterr().err


def test_decoding_with_the_kv_cache_equals_the_full_forward():
    from helios.harness.train import TINY, TrainConfig, build, greedy

    GPT, TorchOps, _, _ = build(torch)
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
    """A helios adapter whose linear is 1.5x off must fail its first-step gate and
    get no numbers (the gate can fail)."""
    from helios.harness import train

    real = train.build

    def planted(torch_mod):
        GPT, TorchOps, HeliosOps, HostOps = real(torch_mod)

        class Wrong(HostOps):
            def linear(self, x, w, b=None, act=None):
                return super().linear(x, w, b, act) * 1.5

        return GPT, TorchOps, Wrong, Wrong

    monkeypatch.setattr(train, "build", planted)
    cfg = train.TrainConfig(**train.TINY, adapters=["torch_eager", "helios"])
    res = train.run_train(cfg)
    row = {r["adapter"]: r for r in res["rows"]}["helios"]
    assert res["status"] == "failed" and row["status"] == "gate failed" and not row["gate"]["passed"]
    assert "loss" not in row

"""`helios suite decode --model llama`'s other stacks: hf_transformers (transformers'
static-cache generate, judged against its own logits) and llama_cpp (an external
command, LLAMA_CPP_BENCH_CMD: here a stand-in that decodes through helios.models, and
every way such a command can fail); the checkpoint folder a preset is written to for
it, and the placeholder tokenizer tools/adapters/llama_cpp/bench.py gives llama.cpp's
converter."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helios.models import LlamaConfig, read_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(vocab=97, d_model=64, layers=2, heads=4, kv_heads=2, head_dim=16, hidden=96, eps=1e-5,
            rope_theta=10000.0, max_positions=64, tie_embeddings=True,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16})  # fmt: skip


def _bench_tool():
    spec = importlib.util.spec_from_file_location("llama_cpp_bench", ROOT / "tools/adapters/llama_cpp/bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _suite(tmp_path, adapters: str, *more: str) -> dict:
    from helios.cli import main

    out = tmp_path / "d.json"
    rc = main(["suite", "decode", "--model", "llama", "--tiny", "--adapters", adapters, "--out", str(out), *more])
    doc = json.loads(out.read_text())
    doc["rc"] = rc
    return doc


def test_a_checkpoint_written_reads_back_as_the_model_rounded(tmp_path):
    pytest.importorskip("safetensors", reason="checkpoints are written with safetensors")
    cfg = LlamaConfig(**TINY)
    w = {k: np.random.default_rng(1).standard_normal(s).astype(np.float32) for k, s in cfg.shapes().items()}
    save_checkpoint(tmp_path, cfg, w)
    got_cfg, got, raw = read_checkpoint(tmp_path)
    assert got_cfg == cfg and raw["torch_dtype"] == "bfloat16"
    import ml_dtypes

    for k in w:
        np.testing.assert_array_equal(got[k].astype(np.float32), w[k].astype(ml_dtypes.bfloat16).astype(np.float32))


def test_hf_transformers_generates_on_the_suites_table(tmp_path):
    pytest.importorskip("torch", reason="torch_eager is the suite's reference")
    pytest.importorskip("transformers", reason="the adapter is transformers' generate")
    doc = _suite(tmp_path, "torch_eager,hf_transformers,helios_plan", "--prefill", "9")
    rows = {r["adapter"]: r for r in doc["rows"]}
    hf = rows["hf_transformers"]
    assert doc["rc"] == 0 and hf["status"] == "ok", hf
    assert len(hf["tokens"]) == doc["config"]["new"] and hf["tokens_per_s"] > 0
    assert hf["same_tokens"] or hf["tie"], hf
    assert [c["context"] for c in hf["contexts"]] == doc["config"]["contexts"]
    assert all(c["ms_per_token_p50"] > 0 for c in hf["contexts"])
    assert hf["prefill_tokens"] == 9 and hf["prefill_ms_p50"] > 0


def test_transformers_and_the_plan_pick_the_same_first_tokens(device):
    """The adapter's model is the suite's: its greedy tokens from a prompt are the
    plan's (both bf16; transformers' residual stream is bf16, so only a few)."""
    torch = pytest.importorskip("torch", reason="transformers runs on torch")
    pytest.importorskip("transformers", reason="the adapter is transformers' generate")
    from helios.harness.workloads.decode.hf import HFRunner
    from helios.models import LlamaDecoder

    cfg = LlamaConfig(**TINY)
    w = {k: (np.ones(s) if len(s) == 1 else 0.1 * np.random.default_rng(3).standard_normal(s)).astype(np.float32)
         for k, s in cfg.shapes().items()}  # fmt: skip
    prompt = [5, 17, 42, 8, 3]
    hf = HFRunner(torch, cfg, w, cuda=False, max_len=16)
    toks, walls, _, _ = hf.greedy(prompt, 4)
    assert len(walls) == 3 and all(x > 0 for x in walls)
    for k in range(4):  # the judge's logits: the scores of the step that picked each token
        assert int(hf.logits_at(prompt + toks[:k]).argmax()) == toks[k]
    with LlamaDecoder(device, cfg, w, max_len=16) as m:
        assert m.generate(prompt, 4)[:2] == toks[:2]


FAKE = textwrap.dedent(
    """
    import json, sys
    req = json.load(sys.stdin)
    assert sys.argv[1:3] == ["--workload", "decode-llama"] and "--checkpoint" in sys.argv, sys.argv
    mode = {mode!r}
    if mode == "skip":
        print(json.dumps({{"status": "skipped: no GPU backend"}})); sys.exit(0)
    if mode == "crash":
        sys.exit(3)
    import helios
    from helios.models import load
    with load(req["checkpoint"], max_len=len(req["prompt"]) + req["new"] + 1) as m:
        toks = m.generate(req["prompt"], req["new"])
    if mode == "short":
        toks = toks[:-1]
    steps = [1.0 + 0.01 * i for i in range(req["new"] - 1)]
    print("building...")
    print(json.dumps({{"status": "ok", "latency_ms": {{"mean": 1.1, "p50": 1.1, "p95": 1.2, "min": 1.0,
          "max": 1.3}}, "throughput_tokens_per_sec": 900.0, "peak_memory_bytes": None, "samples_ms": steps,
          "tokens": toks, "contexts": [{{"context": c["context"], "step_ms": [2.0] * req["steps"]}}
          for c in req["contexts"]], "prefill": None, "llama_bench": [{{"n_prompt": 0, "n_gen": 128,
          "n_depth": 0, "avg_ts": 950.0, "stddev_ts": 3.0, "samples_ts": [950.0]}}],
          "build": {{"backend": "fake"}}}}))
    """
)


@pytest.mark.parametrize("mode,status", [("ok", "ok"), ("skip", "reported: skipped: no GPU backend"),
                                         ("crash", "crashed: exit status 3"),
                                         ("short", "malformed JSON: 'tokens' must list the 32 greedy tokens")])  # fmt: skip
def test_llama_cpp_runs_as_an_external_command(tmp_path, monkeypatch, device, mode, status):
    pytest.importorskip("torch", reason="torch_eager is the suite's reference")
    pytest.importorskip("safetensors", reason="the preset is written as a checkpoint for the command")
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE.format(mode=mode))
    monkeypatch.setenv("LLAMA_CPP_BENCH_CMD", f"{sys.executable} {fake}")
    doc = _suite(tmp_path, "torch_eager,helios_plan,llama_cpp")
    rows = {r["adapter"]: r for r in doc["rows"]}
    lc = rows["llama_cpp"]
    assert lc["status"] == status, lc
    if mode == "ok":
        assert lc["tokens"] == rows["helios_plan"]["tokens"] and (lc["same_tokens"] or lc["tie"])
        assert lc["ms_per_token_p50"] == 1.1 and lc["tokens_per_s"] == 900.0
        assert [c["ms_per_token_p50"] for c in lc["contexts"]] == [2.0, 2.0]
        assert lc["llama_bench"][0]["avg_ts"] == 950.0 and doc["rc"] == 0
    else:
        assert "tokens" not in lc and doc["rc"] == 0  # its row says why; the run's verdict is the judged rows


def test_llama_cpp_without_its_command_is_a_skipped_row(tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="torch_eager is the suite's reference")
    monkeypatch.delenv("LLAMA_CPP_BENCH_CMD", raising=False)
    doc = _suite(tmp_path, "torch_eager,llama_cpp")
    lc = {r["adapter"]: r for r in doc["rows"]}["llama_cpp"]
    assert lc["status"].startswith("skipped: LLAMA_CPP_BENCH_CMD is not set") and doc["rc"] == 0


def test_the_placeholder_tokenizer_is_a_llama_tokenizer_of_the_models_size(tmp_path):
    transformers = pytest.importorskip("transformers", reason="the converter reads it through transformers")
    tool = _bench_tool()
    for vocab in (97, 300):
        folder = tmp_path / str(vocab)
        folder.mkdir()
        tool.placeholder_tokenizer(folder, vocab)
        tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        assert len(tok) == vocab and tok.is_fast
    assert [i - 3 for i in tok("hi", add_special_tokens=False).input_ids][-2:] == [ord("h"), ord("i")]  # byte pieces


def test_the_llama_cpp_tool_says_what_it_needs(monkeypatch, tmp_path):
    tool = _bench_tool()
    monkeypatch.delenv("LLAMA_CPP_SOURCE", raising=False)
    with pytest.raises(tool.Refused, match="LLAMA_CPP_SOURCE is not set"):
        tool.answer({"checkpoint": str(tmp_path)})
    monkeypatch.setenv("LLAMA_CPP_SOURCE", str(tmp_path / "nothing"))
    monkeypatch.setenv("LLAMA_CPP_WORK", str(tmp_path / "work"))
    with pytest.raises(tool.Refused, match="neither a llama.cpp folder nor an sdist"):
        tool.answer({"checkpoint": str(tmp_path)})
    monkeypatch.setenv("LLAMA_CPP_BACKEND", "metal")
    with pytest.raises(tool.Refused, match="LLAMA_CPP_BACKEND 'metal'"):
        tool.answer({"checkpoint": str(tmp_path)})

"""helios.models: Llama-family checkpoints decoded by a plan. Greedy tokens against a
float64 NumPy Llama and against Hugging Face transformers' LlamaForCausalLM (a tiny
random checkpoint it writes, grouped-query attention and Llama 3's rope scaling on,
tied and untied heads); and checkpoints refused before any upload, naming the key."""

from __future__ import annotations

import json

import numpy as np
import pytest

import helios
from helios.models import LlamaConfig, LlamaDecoder, UnsupportedModelError, load, rope_table

TINY = dict(vocab=97, d_model=64, layers=2, heads=4, kv_heads=2, head_dim=16, hidden=96, eps=1e-5,
            rope_theta=10000.0, max_positions=64)  # fmt: skip
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}  # fmt: skip


def random_weights(cfg: LlamaConfig, seed: int, std: float = 0.1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        k: (1.0 + 0.1 * rng.standard_normal(s) if len(s) == 1 else std * rng.standard_normal(s)).astype(np.float32)
        for k, s in cfg.shapes().items()
    }


def _rms(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def reference_logits(cfg: LlamaConfig, w: dict, tokens: list[int]) -> np.ndarray:
    """Every position's logits, float64, as LlamaForCausalLM computes them."""
    W = {k: v.astype(np.float64) for k, v in w.items()}
    n, H, KV, hd = len(tokens), cfg.heads, cfg.kv_heads, cfg.head_dim
    table = rope_table(cfg, n).astype(np.float64)
    cos, sin = table[:, : hd // 2], table[:, hd // 2 :]

    def rope(t):  # (n, heads, hd)
        a, b = t[..., : hd // 2], t[..., hd // 2 :]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)

    x = W["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(cfg.layers):
        b = f"model.layers.{i}."
        h = _rms(x, W[b + "input_layernorm.weight"], cfg.eps)
        q = rope((h @ W[b + "self_attn.q_proj.weight"].T).reshape(n, H, hd))
        k = rope((h @ W[b + "self_attn.k_proj.weight"].T).reshape(n, KV, hd))
        v = (h @ W[b + "self_attn.v_proj.weight"].T).reshape(n, KV, hd)
        att = np.zeros((n, H, hd))
        for hh in range(H):
            kh = hh // (H // KV)
            sc = q[:, hh] @ k[:, kh].T / np.sqrt(hd) + mask
            p = np.exp(sc - sc.max(-1, keepdims=True))
            att[:, hh] = (p / p.sum(-1, keepdims=True)) @ v[:, kh]
        x = x + att.reshape(n, H * hd) @ W[b + "self_attn.o_proj.weight"].T
        h = _rms(x, W[b + "post_attention_layernorm.weight"], cfg.eps)
        g, u = h @ W[b + "mlp.gate_proj.weight"].T, h @ W[b + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[b + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight" if cfg.tie_embeddings else "lm_head.weight"]
    return _rms(x, W["model.norm.weight"], cfg.eps) @ head.T


def agree_up_to_a_tie(ref_logits_at, prompt: list[int], want: list[int], got: list[int]) -> tuple[bool, str]:
    """got equals want, or leaves it first where the reference's logits for both picks
    are within one bfloat16 step of the largest (the decode suite's rule)."""
    div = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), None)
    if div is None:
        return len(want) == len(got), "same tokens"
    row = ref_logits_at(prompt + want[:div])
    gap = float(row[want[div]] - row[got[div]])
    return gap <= abs(float(row.max())) * 2.0**-7, f"first divergence at {div}: margin {gap:.3g}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("tie,scaling", [(False, None), (True, LLAMA3)])
def test_greedy_tokens_match_a_float64_llama(device, dtype, tie, scaling):
    cfg = LlamaConfig(**TINY, tie_embeddings=tie, rope_scaling=scaling)
    w = random_weights(cfg, seed=3)
    prompt = [5, 17, 42, 8, 3]
    with LlamaDecoder(device, cfg, w, max_len=40, dtype=dtype) as m:
        got = m.generate(prompt, 20)
        assert m.plan.counts[0] == 1 + cfg.layers * 9 + 3  # embed; 9 ops a layer; norm, head, top-1
    want, seq = [], list(prompt)
    for _ in range(20):
        want.append(int(reference_logits(cfg, w, seq)[-1].argmax()))
        seq.append(want[-1])
    ok, why = agree_up_to_a_tie(lambda s: reference_logits(cfg, w, s)[-1], prompt, want, got)
    assert ok, f"{why}: {got} against {want}"


def _hf_checkpoint(tmp_path, tie: bool, scaling, seed: int = 0):
    torch = pytest.importorskip("torch", reason="transformers (the oracle) needs torch")
    transformers = pytest.importorskip("transformers", reason="the oracle is transformers' LlamaForCausalLM")
    torch.manual_seed(seed)
    hf_cfg = transformers.LlamaConfig(
        vocab_size=TINY["vocab"], hidden_size=TINY["d_model"], intermediate_size=TINY["hidden"],
        num_hidden_layers=TINY["layers"], num_attention_heads=TINY["heads"], num_key_value_heads=TINY["kv_heads"],
        max_position_embeddings=TINY["max_positions"], rms_norm_eps=TINY["eps"], rope_scaling=scaling,
        tie_word_embeddings=tie, initializer_range=0.1,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(hf_cfg).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    return torch, model


@pytest.mark.parametrize("tie,scaling", [(False, LLAMA3), (True, None)])
def test_greedy_tokens_match_transformers(device, tmp_path, tie, scaling):
    torch, model = _hf_checkpoint(tmp_path, tie, scaling)
    prompt = [11, 3, 60, 7]
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, pad_token_id=0)[0]
    want = [int(t) for t in want[len(prompt) :]]

    def logits_at(seq):
        with torch.no_grad():
            return model(torch.tensor([seq])).logits[0, -1].double().numpy()

    with load(tmp_path, device=device, dtype="float16", max_len=32) as m:
        got = m.generate(prompt, 24)
        assert list(m.stream(prompt, 3)) == got[:3]  # the iterator form, a second run on the same caches
    ok, why = agree_up_to_a_tie(logits_at, prompt, want, got)
    assert ok, f"{why}: {got} against transformers' {want}"


def _write(folder, cfg_dict, tensors):
    st = pytest.importorskip("safetensors.numpy", reason="helios.models reads checkpoints with safetensors")
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg_dict))
    st.save_file(tensors, str(folder / "model.safetensors"))


def _hf_dict(cfg: LlamaConfig) -> dict:
    return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": cfg.vocab,
            "hidden_size": cfg.d_model, "num_hidden_layers": cfg.layers, "num_attention_heads": cfg.heads,
            "num_key_value_heads": cfg.kv_heads, "intermediate_size": cfg.hidden, "rms_norm_eps": cfg.eps,
            "max_position_embeddings": cfg.max_positions, "tie_word_embeddings": cfg.tie_embeddings}  # fmt: skip


def test_checkpoints_helios_cannot_run_are_refused_before_any_upload(device, tmp_path):
    cfg = LlamaConfig(**TINY)
    w = random_weights(cfg, 1)
    good = _hf_dict(cfg)
    before = device.telemetry()["device_bytes"]
    cases = [
        ({**good, "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}, w, "model_type 'gpt2'"),
        ({**good, "hidden_act": "gelu"}, w, "hidden_act = 'gelu'"),
        ({**good, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, w, "rope_type 'yarn'"),
        ({**good, "num_key_value_heads": 3}, w, "num_key_value_heads 3 does not divide 4"),
        ({k: v for k, v in good.items() if k != "hidden_size"}, w, "the key 'hidden_size' is missing"),
        (good, {k: v for k, v in w.items() if "layers.1.mlp.up_proj" not in k}, "'model.layers.1.mlp.up_proj.weight'"),
        (good, {**w, "model.norm.weight": np.ones(63, np.float32)}, r"model.norm.weight is \(63,\); the config says"),
    ]
    for i, (cfg_dict, tensors, says) in enumerate(cases):
        _write(tmp_path / f"c{i}", cfg_dict, tensors)
        with pytest.raises(UnsupportedModelError, match=says):
            load(tmp_path / f"c{i}", device=device)
    _write(tmp_path / "cut", good, w)
    data = (tmp_path / "cut" / "model.safetensors").read_bytes()
    (tmp_path / "cut" / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(UnsupportedModelError, match="model.safetensors: not a readable safetensors file"):
        load(tmp_path / "cut", device=device)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load(tmp_path / "nothing", device=device)
    assert device.telemetry()["device_bytes"] == before  # nothing left allocated


def test_both_config_formats_name_the_same_rope():
    """transformers 4 writes rope_theta and rope_scaling, transformers 5 one rope_parameters dict."""
    old = {**_hf_dict(LlamaConfig(**TINY)), "rope_theta": 500000.0, "rope_scaling": LLAMA3}
    new = {k: v for k, v in old.items() if k not in ("rope_theta", "rope_scaling")}
    new["rope_parameters"] = {**LLAMA3, "rope_theta": 500000.0}
    a, b = LlamaConfig.from_hf(old), LlamaConfig.from_hf(new)
    assert a.rope_theta == b.rope_theta == 500000.0 and a.rope_scaling["factor"] == b.rope_scaling["factor"] == 8.0
    np.testing.assert_array_equal(rope_table(a, 16), rope_table(b, 16))
    plain = LlamaConfig.from_hf({**new, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}})
    assert plain.rope_scaling is None and plain.rope_theta == 1e4
    with pytest.raises(UnsupportedModelError, match="rope_type 'yarn'"):
        LlamaConfig.from_hf({**new, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}})


def test_prompts_and_tokens_past_the_model_are_refused(device):
    cfg = LlamaConfig(**TINY)
    with LlamaDecoder(device, cfg, random_weights(cfg, 2), max_len=8, dtype="float16") as m:
        with pytest.raises(ValueError, match="need 12 positions; the cache holds 8"):
            m.generate([1, 2, 3, 4, 5], 8)
        with pytest.raises(ValueError, match="token 97 is past the vocabulary of 97"):
            m.generate([97], 2)
        with pytest.raises(ValueError, match="the prompt is empty"):
            m.generate([], 2)
        assert len(m.generate([1, 2], 7)) == 7  # the largest that fits: positions 0..7


def test_the_rope_table_is_transformers_where_it_is_installed():
    torch = pytest.importorskip("torch", reason="transformers (the oracle) needs torch")
    transformers = pytest.importorskip("transformers", reason="the oracle is transformers' rotary embedding")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    for scaling in (None, LLAMA3):
        cfg = LlamaConfig(**TINY, rope_scaling=scaling)
        hf = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64,
                                      rope_scaling=scaling)  # fmt: skip
        rot = LlamaRotaryEmbedding(hf)
        pos = torch.arange(40)[None]
        cos, sin = rot(torch.zeros(1, dtype=torch.float32), pos)
        table = rope_table(cfg, 40)
        np.testing.assert_allclose(table[:, :8], cos[0, :, :8].numpy(), atol=2e-6)
        np.testing.assert_allclose(table[:, 8:], sin[0, :, :8].numpy(), atol=2e-6)


def test_the_decode_suite_runs_a_llama_preset_and_a_checkpoint(device, tmp_path, capsys):
    """`helios suite decode --model llama`: the tiny preset, then a checkpoint folder; the
    plan's tokens are torch eager's (up to a tie), and the shape comes from the model."""
    from helios.cli import main

    pytest.importorskip("torch", reason="the suite's reference adapter is torch eager")
    out = tmp_path / "llama.json"
    assert main(["suite", "decode", "--model", "llama", "--tiny", f"--out={out}"]) == 0
    d = json.loads(out.read_text())
    rows = {r["adapter"]: r for r in d["rows"]}
    assert d["config"]["model"] == "llama" and d["config"]["preset"] == "tiny" and d["config"]["layers"] == 2
    assert rows["helios_plan"]["status"] == "ok" and rows["torch_eager"]["status"] == "ok"
    assert rows["helios_plan"]["same_tokens"] or rows["helios_plan"]["tie"], rows["helios_plan"]
    assert len(rows["helios_plan"]["tokens"]) == d["config"]["new"]
    cfg = LlamaConfig(**TINY, tie_embeddings=True)
    _write(tmp_path / "ckpt", _hf_dict(cfg), random_weights(cfg, 4))
    args = ["suite", "decode", "--model", "llama", "--tiny", "--checkpoint", str(tmp_path / "ckpt"), "--adapters",
            "helios_plan", f"--out={tmp_path / 'ck.json'}"]  # fmt: skip
    assert main(args) == 0
    ck = json.loads((tmp_path / "ck.json").read_text())
    assert ck["config"]["vocab"] == 97 and ck["config"]["preset"] is None and ck["rows"][0]["status"] == "ok"
    capsys.readouterr()
    assert main(["report", str(out)]) == 0 and "| helios_plan | ok |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,says",
    [
        (["--model", "llama", "--layers", "3"], "the preset or the checkpoint sets the shape, not --layers"),
        (["--preset", "tiny"], "--preset: for --model llama"),
        (["--model", "llama", "--adapters", "helios_torch"], "unknown helios_torch for decode --model llama"),
        (["--model", "llama", "--preset", "tiny", "--checkpoint", "x"], "--preset and --checkpoint: one of them"),
    ],
)
def test_the_decode_suite_refuses_llama_flags_that_cannot_apply(argv, says, capsys, device):
    from helios.cli import main

    pytest.importorskip("torch", reason="helios suite decode's reference needs torch")
    assert main(["suite", "decode", "--tiny"] + argv) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [2, 7, 17, 40])
def test_a_prefill_decodes_as_the_prompt_fed_token_by_token(device, dtype, n):
    """The prompt through the tile products (one capture per length bucket, padded)
    fills the caches and picks the first token as the decode plan fed a token a step
    does (up to a tie), and decoding goes on from there."""
    from helios.models.prefill import bucket_of

    cfg = LlamaConfig(**TINY)
    w = random_weights(cfg, seed=5)
    prompt = [int(t) for t in np.random.default_rng(n).integers(0, cfg.vocab, n)]
    new = 41 - n if n < 40 else 1
    with LlamaDecoder(device, cfg, w, max_len=40, dtype=dtype) as m:
        want = m.generate(prompt, new, prefill=False)
        caches = [c.numpy()[:n].astype(np.float64) for c in m.k_cache + m.v_cache]
        got = m.generate(prompt, new)
        assert list(m.prefills) == [bucket_of(n, 40)]
        # the prompt's K and V rows as the steps wrote them, within a few roundings of the largest: the tile
        # products sum in another order than the matrix-vector kernel's (identical on lavapipe; an H100's
        # bf16 rows differ by up to 3 of its roundings)
        ulp = 2.0**-7 if dtype == "bfloat16" else 2.0**-10
        for before, c in zip(caches, m.k_cache + m.v_cache):
            after = c.numpy()[:n].astype(np.float64)
            assert np.abs(after - before).max() <= 4 * ulp * np.abs(before).max()
    ok, why = agree_up_to_a_tie(lambda s: reference_logits(cfg, w, s)[-1], prompt, want, got)
    assert ok, f"{why}: prefill {got} against step by step {want}"


def test_the_decode_suite_times_a_llama_prefill(device, tmp_path, capsys):
    pytest.importorskip("torch", reason="torch_eager's prefill is the reference row")
    from helios.cli import main

    out = tmp_path / "d.json"
    assert main(["suite", "decode", "--model", "llama", "--tiny", "--prefill", "9", "--adapters",
                 "torch_eager,helios_plan", "--out", str(out)]) == 0  # fmt: skip
    rows = {r["adapter"]: r for r in json.loads(out.read_text())["rows"]}
    for name in ("torch_eager", "helios_plan"):
        r = rows[name]
        assert r["prefill_tokens"] == 9 and r["prefill_ms_p50"] > 0 and r["prefill_tokens_per_s"] > 0
    assert "Prefill of a 9-token prompt" in capsys.readouterr().out
    assert main(["suite", "decode", "--tiny", "--prefill", "9"]) == 2  # the GPT has no prefill


def test_the_swiglu_runs_inside_the_down_product(monkeypatch):
    """The MLP's SwiGLU is computed by the down product as it reads its A (FLAG_A_SWIGLU):
    one dispatch and one barrier fewer a layer than with HELIOS_DISABLE_PLAN_SWIGLU_FUSION=1,
    A rounded to float16 as the SwiGLU op stores it, so the same logits bit for bit and
    the same tokens."""
    cfg = LlamaConfig(**TINY)
    w = random_weights(cfg, seed=3)
    out = {}
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", "0")  # each step its own dispatch: the counts say what fused
    for fused in (True, False):
        monkeypatch.setenv("HELIOS_DISABLE_PLAN_SWIGLU_FUSION", "0" if fused else "1")
        with helios.Device() as dev, LlamaDecoder(dev, cfg, w, max_len=24, dtype="float16") as m:
            toks = m.generate([5, 17, 42, 8, 3], 12, prefill=False)
            out[fused] = (m.plan.counts, toks, m.logits.numpy().astype(np.float64))
    (ops1, disp1, bar1), toks1, logits1 = out[True]
    (ops0, disp0, bar0), toks0, logits0 = out[False]
    assert ops1 == ops0 and disp1 == disp0 - cfg.layers and bar1 == bar0 - cfg.layers
    assert toks1 == toks0
    np.testing.assert_array_equal(logits1, logits0)


@pytest.mark.parametrize("grid", ["0", "2"])
def test_the_rope_runs_inside_the_attention(monkeypatch, grid):
    """The rope on q and k is applied by the decode attention as it reads the QKV row
    (HELIOS_DISABLE_PLAN_ROPE_FUSION=1 keeps its own step): the same rounding, so the
    same tokens and logits and the same K cache rows; a dispatch fewer a layer without
    persistent runs, and with them (grid 2 on a CPU device) each layer's steps one run."""
    cfg = LlamaConfig(**TINY, rope_scaling=LLAMA3)
    w = random_weights(cfg, seed=4)
    monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", grid)
    out = {}
    for fused in (True, False):
        monkeypatch.setenv("HELIOS_DISABLE_PLAN_ROPE_FUSION", "0" if fused else "1")
        with helios.Device() as dev, LlamaDecoder(dev, cfg, w, max_len=24, dtype="bfloat16") as m:
            toks = m.generate([5, 17, 42, 8, 3], 12, prefill=False)
            out[fused] = (m.plan.counts, toks, m.logits.numpy(), [c.numpy() for c in m.k_cache])
    (ops1, disp1, _), toks1, logits1, k1 = out[True]
    (ops0, disp0, _), toks0, logits0, k0 = out[False]
    assert ops1 == ops0 and toks1 == toks0
    np.testing.assert_array_equal(logits1, logits0)
    for a, b in zip(k1, k0):
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    if grid == "0":
        assert disp1 == disp0 - cfg.layers
    else:  # embed, one run of every layer's products and attentions, the LM head, the top-1
        assert disp1 == 4 < disp0


@pytest.mark.parametrize("heads,kv_heads", [(8, 2), (8, 1), (4, 1), (2, 1)])
def test_grouped_attention_in_a_persistent_run_decodes_as_apart(monkeypatch, heads, kv_heads):
    """Query heads on fewer KV heads inside each layer's run (grid 2 on a CPU device) give
    the steps apart's tokens and logits past 96 keys (a 100-token prompt: two of the
    run's splits): 8 on 2, 8 on 1, 4 on 1 and 2 on 1."""
    cfg = LlamaConfig(**dict(TINY, heads=heads, kv_heads=kv_heads))
    w = random_weights(cfg, seed=6)
    prompt = [int(t) for t in np.random.default_rng(6).integers(0, cfg.vocab, 100)]
    out = {}
    for grid in ("2", "0"):
        monkeypatch.setenv("HELIOS_PLAN_PERSISTENT_GRID", grid)
        with helios.Device() as dev, LlamaDecoder(dev, cfg, w, max_len=110, dtype="float16") as m:
            toks = m.generate(prompt, 4, prefill=False)
            out[grid] = (m.plan.counts, toks, m.logits.numpy().astype(np.float64))
    (_, disp_run, _), toks_run, logits_run = out["2"]
    (_, disp_apart, _), toks_apart, logits_apart = out["0"]
    assert disp_run == 4 < disp_apart
    assert toks_run == toks_apart
    assert np.abs(logits_run - logits_apart).max() <= 2.0**-7 * np.abs(logits_apart).max()


@pytest.mark.parametrize("with_torch", [False, True])
def test_preset_weights_are_values_a_bfloat16_checkpoint_holds(with_torch):
    """torch eager read the preset's float32 embedding rows while the plan read them
    rounded to bfloat16: the judge compared two models, not two engines."""
    from helios.dtypes import bfloat16
    from helios.harness.workloads.decode.llama import PRESETS, preset_weights

    torch = pytest.importorskip("torch", reason="torch's generator") if with_torch else None
    w = preset_weights(LlamaConfig(**PRESETS["tiny"]), 3, torch)
    for name, a in w.items():
        assert a.dtype == np.float32 and np.array_equal(a, a.astype(bfloat16).astype(np.float32)), name
    assert np.std(w["model.embed_tokens.weight"]) == pytest.approx(0.02, rel=0.1)


@pytest.mark.parametrize("tie", [True, False])
def test_the_judges_float32_model_is_the_float64_llama(tie):
    """What the decode suite weighs eager's rounding against (decode/llama.py)."""
    torch = pytest.importorskip("torch", reason="the judge's model is torch's")
    from helios.dtypes import bfloat16
    from helios.harness.workloads.decode.llama import float32_logits, torch_weights

    cfg = LlamaConfig(**{**TINY, "tie_embeddings": tie})
    w = {k: v.astype(bfloat16).astype(np.float32) for k, v in random_weights(cfg, 6).items()}  # as 16-bit reads
    seq = [3, 17, 5, 90, 41, 8, 60]
    got = float32_logits(torch, cfg, torch_weights(torch, cfg, w, cuda=False), seq).double().numpy()
    np.testing.assert_allclose(got, reference_logits(cfg, w, seq)[-1], rtol=1e-4, atol=1e-4)


def test_a_divergence_is_a_tie_where_eager_cannot_call_the_pick_at_its_precision():
    from helios.harness.workloads.decode.run import judge

    eager = np.array([5.40, 5.19, 0.0])  # eager's margin 0.21: past one bfloat16 step of 5.4 (0.042)
    assert judge(lambda s: eager, [1], [0], [1]) == {"same_tokens": False, "first_divergence": 0,
                                                    "margin_to_pick": pytest.approx(0.21), "tie": False}  # fmt: skip
    near = judge(lambda s: eager, [1], [0], [1], lambda s: np.array([5.30, 5.21, 0.0]))
    assert near["tie"] and near["float32_margin"] == pytest.approx(0.09) and near["eager_error"] == pytest.approx(0.12)
    far = judge(lambda s: eager, [1], [0], [1], lambda s: np.array([5.36, 5.17, 0.0]))
    assert not far["tie"] and far["float32_margin"] == pytest.approx(0.19)  # eager's error 0.06
    same = judge(lambda s: eager, [1], [0, 2], [0, 2], lambda s: 1 / 0)
    assert same == {"same_tokens": True, "first_divergence": None}


def test_a_divergence_is_a_tie_where_the_adapter_is_as_near_the_float32_model_as_eager():
    """Past eager's error on the two picks, the adapter's own logits against the float32
    model's, RMS over the vocabulary: no farther than eager's, a tie; farther, not."""
    from helios.harness.workloads.decode.run import judge

    # eager: 0.06 off on the two picks (the float32 margin 0.19 is past it), 0.3 and 0.2 elsewhere
    eager, exact = np.array([5.40, 5.19, 0.3, 1.2]), np.array([5.36, 5.17, 0.0, 1.0])
    near = judge(lambda s: eager, [1], [0], [1], lambda s: exact, lambda s: np.array([5.26, 5.27, 0.0, 1.0]))
    assert near["tie"] and near["eager_rms"] == pytest.approx(np.sqrt(0.132 / 4))
    assert near["adapter_rms"] == pytest.approx(np.sqrt(0.02 / 4))  # its flip: 0.1 off on each pick
    far = judge(lambda s: eager, [1], [0], [1], lambda s: exact, lambda s: np.array([5.26, 5.27, 0.5, 1.0]))
    assert not far["tie"] and far["adapter_rms"] == pytest.approx(np.sqrt(0.27 / 4))
    seen: list = []
    judge(lambda s: eager, [1, 2], [0, 0], [0, 1], lambda s: exact, lambda s: seen.append(s) or exact)
    assert seen == [[1, 2, 0]]  # the prompt and eager's tokens up to the divergence


def test_the_plan_runner_gives_its_logits_after_a_sequence(device):
    """What the judge reads of helios_plan: its fp32 logits after stepping through seq,
    against the float64 model's."""
    from helios.harness.workloads.decode.runners import PlanRunner

    cfg = LlamaConfig(**TINY)
    w = random_weights(cfg, seed=5)
    seq = [5, 17, 42, 8, 3, 60]
    with LlamaDecoder(device, cfg, w, max_len=16, dtype="bfloat16") as m:
        m.generate([1, 2, 3], 4)  # caches written at other tokens first
        got = PlanRunner(m).logits_after(seq).astype(np.float64)
    want = reference_logits(cfg, w, seq)[-1]
    assert got.shape == want.shape and np.abs(got - want).max() <= 0.02 * np.abs(want).max()

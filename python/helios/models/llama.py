"""Llama-family decoders (Llama 2 and 3, and the checkpoints that share their shape)
as one Helios plan per token: RMSNorm, rotary positions (with Llama 3's frequency
scaling), grouped-query attention over a KV cache, a SwiGLU MLP, a tied or untied LM
head. Weights and caches are resident in Helios Tensors, the token and the position
in the plan's parameter words, the next token from the plan's top-1; no torch.

The step, as Hugging Face's LlamaForCausalLM computes it: the token's embedding row
(the 16-bit table, which a tied LM head reads too) into the fp32 residual stream; per layer RMSNorm (the previous MLP's output added to
the stream in the same pass), the q, k and v products as one (their weights stacked),
rotary positions on q and k, attention over the cache (this position's K and V
appended), the output product, RMSNorm with that branch added, the gate and up
products as one, silu(gate) * up, the down product; the final RMSNorm, the LM head
(fp32 logits) and the top-1. Products in the model's 16-bit type with fp32
accumulation; the residual stream and the norms in fp32."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

import numpy as np

from ..dtypes import as_dtype, bfloat16, float16

TOKEN, POSITION = 0, 1  # the plan's parameter words


class UnsupportedModelError(ValueError):
    """A checkpoint whose architecture or a setting Helios does not run, naming the key."""


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama-family model (Hugging Face's config.json names in brackets)."""

    vocab: int  # vocab_size
    d_model: int  # hidden_size
    layers: int  # num_hidden_layers
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    hidden: int  # intermediate_size
    eps: float = 1e-5  # rms_norm_eps
    rope_theta: float = 10000.0  # rope_theta (transformers 5: rope_parameters' rope_theta)
    rope_scaling: Optional[dict] = None  # rope_scaling (or rope_parameters): None or Llama 3's
    tie_embeddings: bool = False  # tie_word_embeddings
    max_positions: int = 2048  # max_position_embeddings

    @classmethod
    def from_hf(cls, cfg: Mapping[str, Any], where: str = "config.json") -> "LlamaConfig":
        """From a Hugging Face config.json dict; UnsupportedModelError naming the key
        for an architecture or a setting this decoder does not compute."""
        arch = list(cfg.get("architectures") or [])
        if cfg.get("model_type") != "llama" and "LlamaForCausalLM" not in arch:
            raise UnsupportedModelError(
                f"{where}: model_type {cfg.get('model_type')!r} (architectures {arch}): helios.models runs llama only"
            )
        for key, want in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False)):
            if cfg.get(key, want) != want:
                raise UnsupportedModelError(f"{where}: {key} = {cfg[key]!r}; helios.models runs {want!r} only")
        theta = cfg.get("rope_theta", 10000.0)
        scaling = cfg.get("rope_scaling")
        if isinstance(cfg.get("rope_parameters"), dict):  # transformers 5: the rope's settings and theta in one dict
            scaling = cfg["rope_parameters"]
            theta = scaling.get("rope_theta", theta)
        kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
        if kind not in ("default", "llama3"):
            raise UnsupportedModelError(f"{where}: rope_scaling rope_type {kind!r}; helios.models runs llama3 only")
        try:
            heads = int(cfg["num_attention_heads"])
            d = int(cfg["hidden_size"])
            out = cls(
                vocab=int(cfg["vocab_size"]), d_model=d, layers=int(cfg["num_hidden_layers"]), heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads), head_dim=int(cfg.get("head_dim") or d // heads),
                hidden=int(cfg["intermediate_size"]), eps=float(cfg.get("rms_norm_eps", 1e-6)),
                rope_theta=float(theta), rope_scaling=scaling if kind == "llama3" else None,
                tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                max_positions=int(cfg.get("max_position_embeddings", 2048)),
            )  # fmt: skip
        except KeyError as e:
            raise UnsupportedModelError(f"{where}: the key {e.args[0]!r} is missing") from None
        if out.heads % out.kv_heads:
            raise UnsupportedModelError(f"{where}: num_key_value_heads {out.kv_heads} does not divide {out.heads}")
        if out.head_dim < 8 or 256 % out.head_dim:
            raise UnsupportedModelError(f"{where}: head_dim {out.head_dim} must divide 256 (8..256)")
        return out

    def to_hf(self) -> dict[str, Any]:
        """The shape as a Hugging Face config.json (transformers 4's names; from_hf reads it back)."""
        return {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": self.vocab,
                "hidden_size": self.d_model, "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
                "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim, "intermediate_size": self.hidden,
                "rms_norm_eps": self.eps, "rope_theta": self.rope_theta, "rope_scaling": self.rope_scaling,
                "tie_word_embeddings": self.tie_embeddings, "max_position_embeddings": self.max_positions,
                "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}  # fmt: skip

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight the model reads, by its Hugging Face name, and its shape."""
        d, hd = self.d_model, self.head_dim
        out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (self.vocab, self.d_model)}
        for i in range(self.layers):
            b = f"model.layers.{i}."
            out[b + "input_layernorm.weight"] = (d,)
            out[b + "self_attn.q_proj.weight"] = (self.heads * hd, d)
            out[b + "self_attn.k_proj.weight"] = (self.kv_heads * hd, d)
            out[b + "self_attn.v_proj.weight"] = (self.kv_heads * hd, d)
            out[b + "self_attn.o_proj.weight"] = (d, self.heads * hd)
            out[b + "post_attention_layernorm.weight"] = (d,)
            out[b + "mlp.gate_proj.weight"] = (self.hidden, d)
            out[b + "mlp.up_proj.weight"] = (self.hidden, d)
            out[b + "mlp.down_proj.weight"] = (d, self.hidden)
        out["model.norm.weight"] = (d,)
        if not self.tie_embeddings:
            out["lm_head.weight"] = (self.vocab, d)
        return out


def rope_inv_freq(cfg: LlamaConfig) -> np.ndarray:
    """The rotary frequencies (head_dim / 2, float32) as transformers computes them:
    theta^(-2i / head_dim), then Llama 3's scaling where the config has it (long
    wavelengths divided by `factor`, the band between smoothly)."""
    hd = cfg.head_dim
    inv = (1.0 / np.float32(cfg.rope_theta) ** (np.arange(0, hd, 2, dtype=np.float32) / np.float32(hd))).astype(
        np.float32
    )
    s = cfg.rope_scaling
    if not s:
        return inv
    factor, low, high = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * np.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def rope_table(cfg: LlamaConfig, rows: int) -> np.ndarray:
    """(rows, head_dim) float32: each position's cos (first half) and sin (second half)
    of its angles, the angle position x frequency in float32 as transformers takes it."""
    ang = np.arange(rows, dtype=np.float32)[:, None] * rope_inv_freq(cfg)[None, :]
    a = ang.astype(np.float64)
    return np.concatenate([np.cos(a), np.sin(a)], axis=1).astype(np.float32)


def _w16(x: np.ndarray, dt: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32).astype(dt))


class LlamaDecoder:
    """A Llama-family model's greedy decoding on a Helios Device. weights: by Hugging
    Face name (LlamaConfig.shapes), any float dtype; max_len: the KV cache's positions;
    dtype: the products' 16-bit type (default bfloat16)."""

    def __init__(self, dev: Any, cfg: LlamaConfig, weights: Mapping[str, np.ndarray], max_len: int,
                 dtype: Any = "bfloat16") -> None:  # fmt: skip
        dt = as_dtype(dtype, "LlamaDecoder: dtype", (float16, bfloat16))
        missing = [k for k in cfg.shapes() if k not in weights]
        if missing:
            raise UnsupportedModelError(f"LlamaDecoder: the weight {missing[0]!r} is missing ({len(missing)} in all)")
        for k, shape in cfg.shapes().items():
            if tuple(np.shape(weights[k])) != shape:
                raise UnsupportedModelError(
                    f"LlamaDecoder: {k} is {tuple(np.shape(weights[k]))}; the config says {shape}"
                )
        self.dev, self.cfg, self.max_len = dev, cfg, int(max_len)
        self.weight_bytes = 0
        f32 = lambda a: dev.upload(np.ascontiguousarray(a, dtype=np.float32), dtype=np.float32)  # noqa: E731

        def w16(*names: str) -> Any:  # the named weights stacked by rows, in the 16-bit type
            t = dev.upload(_w16(np.concatenate([weights[n] for n in names], axis=0), dt), dtype=dt)
            self.weight_bytes += t.size * 2
            return t

        H, KV, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.dtype = dt
        self.k_cache = [dev.empty((max_len, KV * hd), dt) for _ in range(cfg.layers)]
        self.v_cache = [dev.empty((max_len, KV * hd), dt) for _ in range(cfg.layers)]
        self.table = table = f32(rope_table(cfg, max_len))
        # the uploaded weights, which a prefill (models/prefill.py) reads too
        self.embed = w16("model.embed_tokens.weight")  # the 16-bit table the tied head reads too
        self.head = self.embed if cfg.tie_embeddings else w16("lm_head.weight")
        self.norm = f32(weights["model.norm.weight"])
        self.layers: list[dict[str, Any]] = []
        for i in range(cfg.layers):
            b = f"model.layers.{i}."
            self.layers.append({
                "ln1": f32(weights[b + "input_layernorm.weight"]),
                "qkv": w16(*(b + f"self_attn.{n}_proj.weight" for n in "qkv")),
                "o": w16(b + "self_attn.o_proj.weight"),
                "ln2": f32(weights[b + "post_attention_layernorm.weight"]),
                "gu": w16(b + "mlp.gate_proj.weight", b + "mlp.up_proj.weight"),
                "down": w16(b + "mlp.down_proj.weight"),
            })  # fmt: skip
        self.plan = p = dev.plan(params=2)
        x = p.embed(self.embed, token=TOKEN)
        branch = None
        for i, w in enumerate(self.layers):
            h, x = p.rmsnorm(x, w["ln1"], residual=branch, eps=cfg.eps, dtype=dt)
            qkv = p.matmul(h, w["qkv"], trans_b=True)
            p.rope(qkv, table, heads=H, kv_heads=KV, position=POSITION)
            a = p.attention_decode(qkv, self.k_cache[i], self.v_cache[i], heads=H, kv_heads=KV, position=POSITION)
            o = p.matmul(a, w["o"], trans_b=True)
            h, x = p.rmsnorm(x, w["ln2"], residual=o, eps=cfg.eps, dtype=dt)
            gu = p.matmul(h, w["gu"], trans_b=True)
            branch = p.matmul(p.swiglu(gu), w["down"], trans_b=True)
        h, x = p.rmsnorm(x, self.norm, residual=branch, eps=cfg.eps, dtype=dt)
        self.logits = p.matmul(h, self.head, trans_b=True, out_dtype="float32")
        p.top1(self.logits, into=TOKEN)
        p.record()
        self.last: Any = None  # the last replay's PlanRun
        self.prefills: dict[int, Any] = {}  # by prompt-length bucket (models/prefill.py), recorded when first needed
        self.last_prefill: Any = None  # the last prefill's PlanRun

    def step(self, token: int, position: int) -> int:
        """Feeds `token` at `position` (its K and V enter the caches there); returns the
        greedy next token."""
        if not 0 <= int(token) < self.cfg.vocab:
            raise ValueError(f"LlamaDecoder: token {token} is past the vocabulary of {self.cfg.vocab}")
        if not 0 <= int(position) < self.max_len:
            raise ValueError(f"LlamaDecoder: position {position} is past the cache of {self.max_len} positions")
        self.last = self.plan.replay(params=[int(token), int(position)])
        return self.plan.params(TOKEN, 1)[0]

    def prefill(self, prompt: list[int]) -> int:
        """The prompt at positions 0.. in one replay of the prefill for its length's bucket
        (the tile products over every position; recorded at the bucket's first prompt):
        the caches filled, the greedy first new token returned."""
        from .prefill import Prefill, bucket_of

        for t in prompt:
            if not 0 <= int(t) < self.cfg.vocab:
                raise ValueError(f"LlamaDecoder: token {t} is past the vocabulary of {self.cfg.vocab}")
        if not 1 <= len(prompt) <= self.max_len:
            raise ValueError(f"LlamaDecoder: a prompt of {len(prompt)} tokens; the cache holds {self.max_len}")
        rows = bucket_of(len(prompt), self.max_len)
        if rows not in self.prefills:
            self.prefills[rows] = Prefill(self, rows)
        nxt, self.last_prefill = self.prefills[rows].run([int(t) for t in prompt])
        return nxt

    def stream(self, prompt: list[int], max_new_tokens: int, prefill: bool = True) -> Iterator[int]:
        """Greedy decoding: the prompt (through prefill(), or with prefill=False fed a
        token a step from position 0), then up to max_new_tokens tokens, each yielded as
        it comes and fed back."""
        if not prompt:
            raise ValueError("LlamaDecoder: the prompt is empty")
        if len(prompt) + max_new_tokens - 1 > self.max_len:
            raise ValueError(
                f"LlamaDecoder: a prompt of {len(prompt)} and {max_new_tokens} new tokens need "
                f"{len(prompt) + max_new_tokens - 1} positions; the cache holds {self.max_len}"
            )
        nxt = 0
        if prefill and len(prompt) > 1:
            nxt = self.prefill(prompt)
        else:
            for i, t in enumerate(prompt):
                nxt = self.step(t, i)
        for i in range(max_new_tokens):
            yield nxt
            if i + 1 < max_new_tokens:
                nxt = self.step(nxt, len(prompt) + i)

    def generate(self, prompt: list[int], max_new_tokens: int, prefill: bool = True) -> list[int]:
        """The greedy tokens after the prompt, as a list (stream's)."""
        return list(self.stream(prompt, max_new_tokens, prefill))

    def close(self) -> None:
        self.plan.close()
        for p in self.prefills.values():
            p.capture.close()

    def __enter__(self) -> "LlamaDecoder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

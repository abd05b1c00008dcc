"""`helios suite decode --model llama`: a Llama-family model decoding greedily at batch
1, the suite's table for it: a preset's shape with random weights (no download:
`--preset llama-3.2-1b`, `llama-3.1-8b`, `tiny`) or a checkpoint (`--checkpoint DIR`).

Adapters: torch_eager (the model's step in torch: bf16 products, SDPA over static
KV caches with grouped-query attention, the fp32 residual stream and norms, as
helios.models computes it; on the CPU without CUDA), torch_cuda_graphs (that step
captured in a CUDA graph), torch_compile (that step through torch.compile's
reduce-overhead mode with static caches: gpt-fast's recipe), hf_transformers
(transformers' LlamaForCausalLM and its static-cache generate: hf.py), helios_plan
(helios.models.LlamaDecoder, one plan a token), llama_cpp (an external command:
llama_cpp.py).
torch_eager's tokens are the reference; a divergence counts as a tie where torch's
logits for both picks are within one bfloat16 step (the suite's rule), or where the
model in float32 separates the two picks by less than eager's own rounding of those
two logits (run.judge: eager cannot call that pick at its precision)."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import numpy as np

from ....dtypes import bfloat16
from ....models import LlamaConfig, LlamaDecoder, read_checkpoint, rope_table
from .runners import PlanRunner, capture_graph

_LLAMA3_1B = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}  # fmt: skip
_LLAMA3_8B = {**_LLAMA3_1B, "factor": 8.0}
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(vocab=256, d_model=64, layers=2, heads=4, kv_heads=2, head_dim=16, hidden=128, eps=1e-5,
                 rope_theta=10000.0, tie_embeddings=True, max_positions=4096,
                 rope_scaling={**_LLAMA3_1B, "factor": 4.0, "original_max_position_embeddings": 32}),
    "llama-3.2-1b": dict(vocab=128256, d_model=2048, layers=16, heads=32, kv_heads=8, head_dim=64, hidden=8192,
                         eps=1e-5, rope_theta=500000.0, tie_embeddings=True, max_positions=131072,
                         rope_scaling=_LLAMA3_1B),
    "llama-3.1-8b": dict(vocab=128256, d_model=4096, layers=32, heads=32, kv_heads=8, head_dim=128, hidden=14336,
                         eps=1e-5, rope_theta=500000.0, tie_embeddings=False, max_positions=131072,
                         rope_scaling=_LLAMA3_8B),
}  # fmt: skip


def preset_weights(cfg: LlamaConfig, seed: int, torch: Any = None) -> dict[str, np.ndarray]:
    """Random weights of the model's shape (every matrix N(0, 0.02), norms 1), float32
    values a bfloat16 checkpoint holds: every adapter reads the same numbers (torch's
    float32 embedding rows and the plan's 16-bit table alike), as from a real
    checkpoint. Drawn by torch's generator where torch is given (on every core: an 8B
    shape's 8e9 draws took NumPy's one core 99 s on an H100's host), else by NumPy's."""
    if torch is not None:
        g = torch.Generator().manual_seed(seed)
        draw = lambda s: torch.randn(s, generator=g, dtype=torch.float32).mul_(0.02).bfloat16().float().numpy()  # noqa: E731
    else:
        rng = np.random.default_rng(seed)
        draw = (
            lambda s: (rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)).astype(bfloat16).astype(np.float32)
        )  # noqa: E731
    return {k: np.ones(s, np.float32) if len(s) == 1 else draw(s) for k, s in cfg.shapes().items()}


def weight_bytes(cfg: LlamaConfig) -> int:
    """The 16-bit weights a step reads: every product's, and the LM head."""
    d, hd = cfg.d_model, cfg.head_dim
    per_layer = (cfg.heads + 2 * cfg.kv_heads) * hd * d + d * cfg.heads * hd + 3 * d * cfg.hidden
    return 2 * (cfg.layers * per_layer + cfg.vocab * d)


class TorchLlama:
    """The step in torch (bf16 products with fp32 accumulation, fp32 stream and norms),
    static KV caches of max_len rows; graph: captured in a CUDA graph and replayed;
    compiled: torch.compile(mode="reduce-overhead", fullgraph=True) of the step with the
    caches and weights at static addresses (gpt-fast's recipe: Inductor's kernels in a
    CUDA graph), compiled at the first step."""

    def __init__(self, torch: Any, cfg: LlamaConfig, w: dict, max_len: int, cuda: bool, graph: bool,
                 compiled: bool = False) -> None:  # fmt: skip
        import torch.nn.functional as F

        self.torch, self.F, self.cfg, self.max_len = torch, F, cfg, max_len
        dev = "cuda" if cuda else "cpu"
        bf = torch.bfloat16
        KV, hd, L = cfg.kv_heads, cfg.head_dim, cfg.layers
        self.kc = [torch.zeros(1, KV, max_len, hd, dtype=bf, device=dev) for _ in range(L)]
        self.vc = [torch.zeros(1, KV, max_len, hd, dtype=bf, device=dev) for _ in range(L)]
        self.tab = torch.from_numpy(rope_table(cfg, max_len)).to(dev)
        self.tok_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.pos_in = torch.zeros(1, dtype=torch.long, device=dev)
        self.ar = torch.arange(max_len, device=dev)
        self.w, self.cuda = w, cuda
        self.host_ms: Optional[float] = None
        self.gpu_ms: Optional[float] = None
        self.logits = torch.zeros(1, cfg.vocab, device=dev)
        self.graph = None
        self.compiled: Any = None
        if graph:
            with torch.no_grad():
                self.graph = capture_graph(torch, self._step)
        if compiled:
            for t in [*self.kc, *self.vc, self.tok_in, self.pos_in, self.logits, *w.values()]:
                torch._dynamo.mark_static_address(t)
            self.compiled = torch.compile(self._step, mode="reduce-overhead", fullgraph=True)
        if graph or compiled:
            self.e0 = torch.cuda.Event(enable_timing=True)
            self.e1 = torch.cuda.Event(enable_timing=True)

    def _rms(self, x: Any, g: Any) -> Any:
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * g

    def _rope(self, t: Any) -> Any:
        half = self.cfg.head_dim // 2
        c, s = self.tab[self.pos_in, :half], self.tab[self.pos_in, half:]
        a, b = t[..., :half].float(), t[..., half:].float()
        return self.torch.cat([a * c - b * s, b * c + a * s], -1).to(self.torch.bfloat16)

    def _step(self) -> None:
        torch, F, cfg, w = self.torch, self.F, self.cfg, self.w
        H, KV, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        x = w["embed"][self.tok_in].float()
        mask = (self.ar <= self.pos_in).view(1, 1, 1, self.max_len)
        for i in range(cfg.layers):
            qkv = F.linear(self._rms(x, w[f"ln1.{i}"]).to(torch.bfloat16), w[f"qkv.{i}"])
            q = self._rope(qkv[:, : H * hd].view(1, H, 1, hd))
            k = self._rope(qkv[:, H * hd : (H + KV) * hd].view(1, KV, 1, hd))
            self.kc[i].index_copy_(2, self.pos_in, k)
            self.vc[i].index_copy_(2, self.pos_in, qkv[:, (H + KV) * hd :].view(1, KV, 1, hd))
            a = F.scaled_dot_product_attention(q, self.kc[i], self.vc[i], attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.reshape(1, H * hd), w[f"o.{i}"]).float()
            gu = F.linear(self._rms(x, w[f"ln2.{i}"]).to(torch.bfloat16), w[f"gu.{i}"])
            x = x + F.linear(F.silu(gu[:, : cfg.hidden]) * gu[:, cfg.hidden :], w[f"down.{i}"]).float()
        self.logits.copy_(F.linear(self._rms(x, w["norm"]).to(torch.bfloat16), w["head"]).float())

    @property
    def prefills(self) -> bool:
        """torch_eager times its prefill (the graph and compiled steps have none of their own)."""
        return self.graph is None and self.compiled is None

    def time_prefill(self, prompt: list[int]) -> tuple[float, Optional[float]]:
        """The prompt's positions 0..n-1 in one forward (the caches written), the first
        token picked: (wall ms, GPU ms between CUDA events; None without CUDA)."""
        torch, F, cfg, w = self.torch, self.F, self.cfg, self.w
        H, KV, hd, n = cfg.heads, cfg.kv_heads, cfg.head_dim, len(prompt)
        ids = torch.tensor(prompt, device=self.logits.device)
        half = hd // 2
        c, s = self.tab[:n, :half], self.tab[:n, half:]

        def rope(t: Any) -> Any:  # (1, heads, n, hd)
            a, b = t[..., :half].float(), t[..., half:].float()
            return torch.cat([a * c - b * s, b * c + a * s], -1).to(torch.bfloat16)

        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if self.cuda else None
        t0 = time.perf_counter()
        with torch.no_grad():
            if events:
                events[0].record()
            x = w["embed"][ids].float()
            for i in range(cfg.layers):
                qkv = F.linear(self._rms(x, w[f"ln1.{i}"]).to(torch.bfloat16), w[f"qkv.{i}"])
                q = rope(qkv[:, : H * hd].view(n, H, hd).transpose(0, 1)[None])
                k = rope(qkv[:, H * hd : (H + KV) * hd].view(n, KV, hd).transpose(0, 1)[None])
                v = qkv[:, (H + KV) * hd :].view(n, KV, hd).transpose(0, 1)[None]
                self.kc[i][:, :, :n] = k
                self.vc[i][:, :, :n] = v
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                x = x + F.linear(a[0].transpose(0, 1).reshape(n, H * hd), w[f"o.{i}"]).float()
                gu = F.linear(self._rms(x, w[f"ln2.{i}"]).to(torch.bfloat16), w[f"gu.{i}"])
                x = x + F.linear(F.silu(gu[:, : cfg.hidden]) * gu[:, cfg.hidden :], w[f"down.{i}"]).float()
            logits = F.linear(self._rms(x[-1:], w["norm"]).to(torch.bfloat16), w["head"]).float()
            if events:
                events[1].record()
        int(logits.argmax(-1)[0])  # waits for the GPU
        wall = (time.perf_counter() - t0) * 1e3
        return wall, events[0].elapsed_time(events[1]) if events else None

    def step(self, token: int, position: int) -> int:
        self.tok_in.fill_(token)
        self.pos_in.fill_(position)
        t0 = time.perf_counter()
        with self.torch.no_grad():
            if self.graph is None and self.compiled is None:
                self._step()
            else:
                self.e0.record()
                self.graph.replay() if self.graph is not None else self.compiled()
                self.e1.record()
        self.host_ms = (time.perf_counter() - t0) * 1e3
        nxt = int(self.logits.argmax(-1)[0])  # waits for the GPU
        if self.graph is not None or self.compiled is not None:
            self.gpu_ms = self.e0.elapsed_time(self.e1)
        return nxt


def torch_weights(torch: Any, cfg: LlamaConfig, w: dict, cuda: bool) -> dict:
    """helios.models' weights by Hugging Face name as the torch step's tensors: products
    stacked as the plan stacks them (qkv, gate and up), bf16; norms fp32."""
    dev = "cuda" if cuda else "cpu"

    def bf(*names: str) -> Any:
        return torch.from_numpy(np.concatenate([w[n] for n in names])).to(dev, torch.bfloat16)

    out = {"embed": torch.from_numpy(w["model.embed_tokens.weight"]).to(dev, torch.float32)}
    out["head"] = bf("model.embed_tokens.weight" if cfg.tie_embeddings else "lm_head.weight")
    out["norm"] = torch.from_numpy(w["model.norm.weight"]).to(dev, torch.float32)
    for i in range(cfg.layers):
        b = f"model.layers.{i}."
        out[f"ln1.{i}"] = torch.from_numpy(w[b + "input_layernorm.weight"]).to(dev, torch.float32)
        out[f"ln2.{i}"] = torch.from_numpy(w[b + "post_attention_layernorm.weight"]).to(dev, torch.float32)
        out[f"qkv.{i}"] = bf(*(b + f"self_attn.{n}_proj.weight" for n in "qkv"))
        out[f"o.{i}"] = bf(b + "self_attn.o_proj.weight")
        out[f"gu.{i}"] = bf(b + "mlp.gate_proj.weight", b + "mlp.up_proj.weight")
        out[f"down.{i}"] = bf(b + "mlp.down_proj.weight")
    return out


def float32_logits(torch: Any, cfg: LlamaConfig, tw: dict, seq: list[int]) -> Any:
    """The last position's logits of the model on seq (positions 0..) in float32 from
    torch_weights' tensors, each 16-bit weight widened as its layer runs."""
    dev = tw["embed"].device
    H, KV, hd, n = cfg.heads, cfg.kv_heads, cfg.head_dim, len(seq)
    tab, half = torch.from_numpy(rope_table(cfg, n)).to(dev), cfg.head_dim // 2

    def rms(x: Any, g: Any) -> Any:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps) * g

    def rope(t: Any) -> Any:  # (n, heads, hd)
        c, s, a, b = tab[:, None, :half], tab[:, None, half:], t[..., :half], t[..., half:]
        return torch.cat([a * c - b * s, b * c + a * s], -1)

    with torch.no_grad():
        x = tw["embed"][torch.tensor(seq, device=dev)].float()
        mask = torch.ones(n, n, dtype=torch.bool, device=dev).tril()
        for i in range(cfg.layers):
            qkv = rms(x, tw[f"ln1.{i}"]) @ tw[f"qkv.{i}"].float().T
            q = rope(qkv[:, : H * hd].reshape(n, H, hd))
            k = rope(qkv[:, H * hd : (H + KV) * hd].reshape(n, KV, hd)).repeat_interleave(H // KV, 1)
            v = qkv[:, (H + KV) * hd :].reshape(n, KV, hd).repeat_interleave(H // KV, 1)
            s = torch.einsum("thd,uhd->htu", q, k) * hd**-0.5
            a = torch.einsum("htu,uhd->thd", s.masked_fill(~mask, float("-inf")).softmax(-1), v)
            x = x + a.reshape(n, H * hd) @ tw[f"o.{i}"].float().T
            gu = rms(x, tw[f"ln2.{i}"]) @ tw[f"gu.{i}"].float().T
            x = x + (torch.nn.functional.silu(gu[:, : cfg.hidden]) * gu[:, cfg.hidden :]) @ tw[f"down.{i}"].float().T
        return (rms(x[-1:], tw["norm"]) @ tw["head"].float().T)[0]


class LlamaAdapters:
    """Makes each adapter's runner (run.py's interface) for a cache of max_len positions."""

    def __init__(self, lcfg: LlamaConfig, weights: dict, hdev: Any, cuda: bool, torch: Any, max_len: int) -> None:
        self.lcfg, self.weights, self.hdev, self.cuda, self.torch = lcfg, weights, hdev, cuda, torch
        self.max_len = max_len  # the longest cache any phase asks for
        self.hf: Any = None  # hf_transformers' model, kept over its phases (finish() drops it)
        self.kv_width = lcfg.kv_heads * lcfg.head_dim
        self.tw: dict = torch_weights(torch, lcfg, weights, cuda) if torch is not None else {}
        self.model = self.tw or None  # run.measure: torch_eager runs first where there is a torch model
        self.decoders: list = []

    def unavailable(self, adapter: str) -> Optional[str]:
        """Why an adapter cannot run here (its row's status), or None."""
        if adapter == "hf_transformers":
            try:
                import transformers  # noqa: F401
            except ImportError:
                return "skipped: transformers is not installed (pip install transformers)"
        if adapter == "llama_cpp":
            from .llama_cpp import unavailable

            return unavailable()
        return None

    def make(self, adapter: str, max_len: int) -> Any:
        if adapter == "hf_transformers":
            from .hf import HFRunner

            if self.hf is None:
                self.hf = HFRunner(self.torch, self.lcfg, self.weights, self.cuda, self.max_len)
            return self.hf
        if adapter == "helios_plan":
            dec = LlamaDecoder(self.hdev, self.lcfg, self.weights, max_len, "bfloat16")
            self.decoders.append(dec)
            return PlanRunner(dec)
        return TorchLlama(self.torch, self.lcfg, self.tw, max_len, self.cuda, graph=adapter == "torch_cuda_graphs",
                          compiled=adapter == "torch_compile")  # fmt: skip

    def logits_at(self, seq: list[int]) -> Any:
        """torch_eager's logits after seq (the judge's reference)."""
        r = TorchLlama(self.torch, self.lcfg, self.tw, len(seq), self.cuda, graph=False)
        for i, t in enumerate(seq):
            r.step(t, i)
        return r.logits[0]

    def float32_logits_at(self, seq: list[int]) -> Any:
        """The model's logits after seq with every product, norm and the attention in
        float32 (the weights the 16-bit values every adapter reads): what the judge
        weighs torch eager's own rounding against."""
        return float32_logits(self.torch, self.lcfg, self.tw, seq)

    def release(self) -> None:
        for d in self.decoders:
            d.close()
        self.decoders.clear()

    def finish(self) -> None:
        """An adapter's row is done: what it kept over its phases goes."""
        self.release()
        self.hf = None
        if self.cuda:
            self.torch.cuda.empty_cache()


def llama_model(preset: Optional[str], checkpoint: Optional[str], seed: int, log: Callable[[str], None],
                torch: Any = None) -> tuple[LlamaConfig, dict]:  # fmt: skip
    """The model's config and weights (float32 by Hugging Face name): a checkpoint's, or
    a preset's shape with random weights (drawn by torch where it is given)."""
    if checkpoint is not None:
        lcfg, stored, _ = read_checkpoint(checkpoint)
        return lcfg, {k: np.asarray(v, np.float32) for k, v in stored.items()}
    lcfg = LlamaConfig(**PRESETS[preset or "llama-3.2-1b"])
    t0 = time.perf_counter()
    weights = preset_weights(lcfg, seed, torch)
    log(f"decode: {preset} random weights drawn in {time.perf_counter() - t0:.1f} s")
    return lcfg, weights

"""The decode suite's hf_transformers adapter: Hugging Face transformers'
LlamaForCausalLM in bfloat16 (SDPA attention) generating greedily the way its users
run it: `generate(do_sample=False)` with a StaticCache (one, of the run's longest
length, reset between calls), which on CUDA compiles the decoding step (torch.compile,
reduce-overhead: transformers' own choice) once.
Each token's time comes from a streamer (generate hands it every token as it is
picked, on the host, so the GPU's work for it is done). transformers keeps the
residual stream in bfloat16 where the suite's other adapters keep it in fp32, so its
tokens are judged against its own logits: a divergence from eager's tokens counts as
a tie where the step of its generate that picked it (an untimed second run, its scores
kept) scored both picks within one bfloat16 step."""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from ....models import LlamaConfig, rope_inv_freq


class StepClock:
    """A generate streamer: the host clock at every token after the prompt."""

    def __init__(self) -> None:
        self.prompt_seen = False
        self.stamps: list[float] = []
        self.tokens: list[int] = []

    def put(self, value: Any) -> None:
        if not self.prompt_seen:  # generate hands the prompt over first
            self.prompt_seen = True
            return
        self.stamps.append(time.perf_counter())
        self.tokens.extend(int(t) for t in value.reshape(-1).tolist())

    def end(self) -> None:
        pass


def hf_config(transformers: Any, cfg: LlamaConfig) -> Any:
    """transformers' LlamaConfig for the shape (its config.json form, which transformers
    5 reads too, rope_theta and rope_scaling into its rope_parameters), no stop tokens."""
    hf = {k: v for k, v in cfg.to_hf().items() if k not in ("model_type", "architectures")}
    return transformers.LlamaConfig(**hf, bos_token_id=None, eos_token_id=None, pad_token_id=0)


class HFRunner:
    """transformers' model on torch's device (CUDA where there is one), the weights by
    Hugging Face name (float32 NumPy) in bfloat16."""

    def __init__(self, torch: Any, cfg: LlamaConfig, weights: dict, cuda: bool, max_len: int) -> None:
        import transformers

        self.torch, self.cfg = torch, cfg
        self.dev = torch.device("cuda" if cuda else "cpu")
        with self.dev:  # its initial weights drawn where they will live, then replaced
            self.model = transformers.LlamaForCausalLM._from_config(
                hf_config(transformers, cfg), dtype=torch.bfloat16, attn_implementation="sdpa"
            )
        state = {k: torch.from_numpy(np.asarray(v)).to(self.dev, torch.bfloat16) for k, v in weights.items()}
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (cfg.tie_embeddings and k == "lm_head.weight")]
        if missing or unexpected:
            raise ValueError(f"hf_transformers: weights missing {missing[:3]}, unexpected {unexpected[:3]}")
        if cfg.tie_embeddings:
            self.model.tie_weights()
        self.model.eval()
        inv = self.model.model.rotary_emb.inv_freq.float().cpu().numpy()
        if not np.allclose(inv, rope_inv_freq(cfg), rtol=1e-5):  # the same rope as the other adapters
            raise ValueError("hf_transformers: transformers' rotary frequencies are not the config's")
        gc = self.model.generation_config
        gc.eos_token_id, gc.bos_token_id, gc.pad_token_id = None, None, 0
        # one static cache of the run's longest length for every call (reset between them): the
        # compiled step's shapes stay those of its first compilation
        self.cache = transformers.StaticCache(config=self.model.config, max_cache_len=max_len)
        self.cache_used = False
        self.host_ms: Optional[float] = None
        self.gpu_ms: Optional[float] = None

    def _generate(self, prompt: list[int], new: int) -> tuple[list[int], float, list[float]]:
        """generate's tokens, the wall ms to the first new one, and each later one's wall ms."""
        clock = StepClock()
        ids = self.torch.tensor([prompt], device=self.dev)
        t0 = time.perf_counter()
        if self.cache_used:
            self.cache.reset()
        self.cache_used = True
        with self.torch.no_grad():
            self.model.generate(ids, max_new_tokens=new, do_sample=False, past_key_values=self.cache,
                                streamer=clock, attention_mask=self.torch.ones_like(ids))  # fmt: skip
        stamps = [t0] + clock.stamps
        walls = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
        return clock.tokens, walls[0], walls[1:]

    def greedy(self, prompt: list[int], new: int) -> tuple[list[int], list[float], list, list]:
        """The greedy run: new tokens after the prompt, the steps after the first timed;
        then once more untimed, each step's scores kept for logits_at."""
        toks, _, walls = self._generate(prompt, new)
        self.cache.reset()
        ids = self.torch.tensor([prompt], device=self.dev)
        with self.torch.no_grad():
            out = self.model.generate(ids, max_new_tokens=new, do_sample=False, past_key_values=self.cache,
                                      attention_mask=self.torch.ones_like(ids), output_scores=True,
                                      return_dict_in_generate=True)  # fmt: skip
        self.scored = (list(prompt), [s[0].float() for s in out.scores])
        return toks, walls, [None] * len(walls), [None] * len(walls)

    def context(self, context: list[int], warm: int, n: int) -> tuple[list[int], list[float], list, list]:
        """n steps timed after `warm` untimed ones past the context, on the second of two
        identical generate calls (the first compiles the step for this cache's length)."""
        self._generate(context, warm + n + 1)
        toks, _, walls = self._generate(context, warm + n + 1)
        return toks[-n:], walls[-n:], [None] * n, [None] * n

    prefills = True

    def time_prefill(self, prompt: list[int]) -> tuple[float, Optional[float]]:
        """Wall ms from generate's call to the first new token (the time to first token)."""
        _, first, _ = self._generate(prompt, 1)
        return first, None

    def logits_at(self, seq: list[int]) -> Any:
        """transformers' logits (float32) after seq: the scores its generate had for that
        step where seq continues the last greedy run's prompt, else its forward (no cache)."""
        prompt, scores = getattr(self, "scored", (None, []))
        i = len(seq) - len(prompt) if prompt is not None else -1
        if prompt is not None and seq[: len(prompt)] == prompt and 0 <= i < len(scores):
            return scores[i]
        with self.torch.no_grad():
            out = self.model(self.torch.tensor([seq], device=self.dev), use_cache=False)
        return out.logits[0, -1].float()

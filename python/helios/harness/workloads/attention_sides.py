"""The attention bench's rounds (attention.py): each shape's inputs, its two
sides (Helios, timed with GPU timestamps; every SDPA backend, with CUDA events) and
the check of every timed output (sampled query rows, or for a backward sampled
heads' whole gradients, against float64; every element finite)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...attention import random_qkv, reference_attention, reference_attention_backward
from ...check import check_close
from ...matmul_timing import warmup_launches

ROW_CHECK_ROWS = 16  # query rows per head checked against float64 for timed shapes
GRAD_CHECK_HEADS = 2  # (batch, head) pairs whose whole gradients are checked (backward)


def _sample_rows(s: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(s, size=min(ROW_CHECK_ROWS, s), replace=False))


def _checked(out: np.ndarray, ref_rows: np.ndarray, rows: np.ndarray, atol: float, rtol: float) -> dict:
    r = check_close(out[:, :, rows], ref_rows, atol=atol, rtol=rtol)
    nonfinite = int((~np.isfinite(out)).sum())
    d = r.as_dict()
    d.update(
        {
            "rows_checked_per_head": int(len(rows)),
            "all_finite": nonfinite == 0,
            "nonfinite_total": nonfinite,
            "passed": r.passed and nonfinite == 0,
        }
    )
    return d


def _grad_heads(b: int, h: int, seed: int) -> list[tuple[int, int]]:
    """The (batch, head) pairs whose gradients a backward row checks."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(b * h, size=min(GRAD_CHECK_HEADS, b * h), replace=False)
    return sorted((int(x) // h, int(x) % h) for x in picks)


def _grad_reference(q, k, v, do, heads: list, causal: bool) -> list:
    """float64 (dQ, dK, dV) of each checked head."""
    return [
        reference_attention_backward(*(x[i : i + 1, j : j + 1] for x in (q, k, v, do)), causal=causal)[:3]
        for i, j in heads
    ]


def _checked_grads(grads, want: list, heads: list, atol: float, rtol: float) -> dict:
    """dQ, dK, dV of the checked heads against float64 (one verdict over all three),
    and every element of the three finite."""
    got = np.concatenate([g[i : i + 1, j : j + 1].ravel() for i, j in heads for g in grads])
    ref = np.concatenate([w.ravel() for ws in want for w in ws])
    d = check_close(got, ref, atol=atol, rtol=rtol).as_dict()
    nonfinite = int(sum((~np.isfinite(np.asarray(g, dtype=np.float32))).sum() for g in grads))
    d.update(
        {
            "heads_checked": [list(x) for x in heads],
            "all_finite": nonfinite == 0,
            "nonfinite_total": nonfinite,
            "passed": d["passed"] and nonfinite == 0,
        }
    )
    return d


class AttentionSides:
    """One bench run's rounds: the slot a shape's samples collect in, and per round
    the Helios and reference sides (run_rounds alternates which goes first)."""

    def __init__(self, cfg: Any, dev: Any, ref: Any, chosen: dict, backends: list, flush: int,
                 tolerances: tuple[float, float], label: Callable[[tuple], str],
                 log: Callable[[str], None]) -> None:  # fmt: skip
        self.cfg, self.dev, self.ref, self.chosen, self.backends = cfg, dev, ref, chosen, backends
        self.flush, (self.atol, self.rtol), self.label, self.log = flush, tolerances, label, log
        self.ramp_in: list = []

    def clock_work(self) -> None:
        cfg = self.cfg
        if not self.ramp_in:
            self.ramp_in.extend(random_qkv(8, 16, 1024, 1024, 64, seed=cfg.seed + 1, dtype=cfg.dtype))
        self.dev.time_attention(
            8, 16, 1024, 64, iters=30, warmup=0, inputs=tuple(self.ramp_in), dtype=cfg.dtype, backward=cfg.backward
        )

    def new_slot(self, shape: tuple[int, int, int, int]) -> dict:
        def per_backend() -> dict[str, list]:
            return {be: [] for be in self.backends}

        return {"h": [], "hb": [], "hw": [], "hchk": [], "tel": None, "r": per_backend(), "rb": per_backend(),
                "rchk": per_backend(), "err": {}, "mode": {}}  # fmt: skip

    def sides(self, shape: tuple[int, int, int, int], si: int, rnd: int, slot: dict) -> tuple:
        cfg = self.cfg
        b, h, s, d = shape
        q, k, v = random_qkv(b, h, s, s, d, seed=cfg.seed + si, dtype=cfg.dtype)
        if cfg.backward:
            do = random_qkv(b, h, s, s, d, seed=cfg.seed + si + 104729, dtype=cfg.dtype)[0]
            heads = _grad_heads(b, h, cfg.seed + rnd)
            want: Any = _grad_reference(q, k, v, do, heads, cfg.causal)
            verdict = lambda out: _checked_grads(out, want, heads, self.atol, self.rtol)  # noqa: E731
            inputs: tuple = (q, k, v, do)
        else:
            rows = _sample_rows(s, cfg.seed + rnd)
            want = reference_attention(q, k, v, causal=cfg.causal, rows=rows)
            verdict = lambda out: _checked(out, want, rows, self.atol, self.rtol)  # noqa: E731
            inputs = (q, k, v)
        return (lambda: self.helios_side(shape, inputs, slot, verdict)), (
            lambda: self.ref_side(shape, inputs, slot, verdict)
        )

    def helios_side(self, shape: tuple, inputs: tuple, slot: dict, verdict: Callable) -> None:
        cfg, dev = self.cfg, self.dev
        b, h, s, d = shape
        grad_kw = {"backward": True, "grad_output": inputs[3]} if cfg.backward else {}
        kw = dict(causal=cfg.causal, variant=self.chosen[shape], inputs=inputs[:3], dtype=cfg.dtype, **grad_kw)
        est = dev.time_attention(b, h, s, d, iters=2, warmup=1, **kw)
        w = warmup_launches(est.median_ms, cfg.warmup, cfg.warmup_ms)
        dev.reset_telemetry()
        t = dev.time_attention(b, h, s, d, iters=cfg.iters, warmup=w, flush_bytes=self.flush, **kw)
        slot["hw"].append(w)
        slot["h"].append(t.samples_ms)
        slot["hb"].append(t.batch_ms)
        slot["tel"] = t.telemetry
        slot["hchk"].append(verdict(t.grads if cfg.backward else t.output))

    def ref_side(self, shape: tuple, inputs: tuple, slot: dict, verdict: Callable) -> None:
        cfg, ref = self.cfg, self.ref
        d = shape[3]
        run = ref.run_backward if cfg.backward else ref.run
        kw = dict(causal=cfg.causal, scale=1.0 / np.sqrt(d))
        for be in self.backends:
            if be in slot["err"]:
                continue
            est = run(*inputs, **kw, backend=be, iters=2, warmup=1)
            if est.timing is None:
                slot["err"][be] = est.error
                self.log(f"{self.label(shape)} sdpa {be}: unavailable ({est.error})")
                continue
            w = warmup_launches(float(np.median(est.timing.samples_ms)), cfg.warmup, cfg.warmup_ms)
            r = run(*inputs, **kw, backend=be, iters=cfg.iters, warmup=w, flush_bytes=self.flush)
            if r.timing is None:
                slot["err"][be] = r.error
                continue
            slot["r"][be].append(r.timing.samples_ms)
            slot["rb"][be].append(r.timing.batch_ms)
            slot["mode"][be] = r.timing.batch_mode
            slot["rchk"][be].append(verdict(r.output))

"""`helios check --decode`: the decode step's attention over a KV cache (a plan's
attention_decode) against float64 on random cases: heads, a head dimension that
divides 256, a cache of random rows, and a run of positions in it (the first, one
at a split's edge, random ones); each replay appends its K and V, which the next
position attends to, and the caches are compared bit for bit with what was
appended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ....check import check_close
from ....dtypes import as_dtype, bfloat16, float16

HEAD_DIMS = (8, 16, 32, 64, 128, 256)
CPU_HEAD_DIMS = (8, 16, 32, 64)  # each d is a pipeline compile on a CPU device
SPLIT = 64  # decode.comp: keys per split workgroup


MAX_HEADS = 8  # decode_fuzz draws 1..8 heads


def most_rows(info: dict) -> int:
    """The largest cache decode_fuzz can draw on this device: a (rows, heads x head_dim)
    16-bit cache at the widest draw within what one buffer binds (max_storage_buffer_range)."""
    dims = CPU_HEAD_DIMS if info["device_type"] == "cpu" else HEAD_DIMS
    return int(info["max_storage_buffer_range"]) // (2 * MAX_HEADS * max(dims))


@dataclass
class DecodeCase:
    index: int
    heads: int
    head_dim: int
    rows: int
    positions: list[int]
    fails: int
    line: str

    @property
    def passed(self) -> bool:
        return self.fails == 0

    def label(self) -> str:
        return f"heads={self.heads} d={self.head_dim} cache={self.rows} positions={self.positions}"


def reference(q: np.ndarray, K: np.ndarray, V: np.ndarray, heads: int, p: int) -> np.ndarray:
    d = K.shape[1]
    hd = d // heads
    out = np.zeros(d)
    for h in range(heads):
        s = slice(h * hd, (h + 1) * hd)
        sc = K[: p + 1, s].astype(np.float64) @ q[s].astype(np.float64) / np.sqrt(hd)
        w = np.exp(sc - sc.max())
        out[s] = (w / w.sum()) @ V[: p + 1, s].astype(np.float64)
    return out


def decode_fuzz(dev, n: int, seed: int, *, dtype: str = "float16", max_seq: int = 300, atol: float = 0.02,
                rtol: float = 0.01) -> Iterator[DecodeCase]:  # fmt: skip
    dt = as_dtype(dtype, "decode fuzz: dtype", (float16, bfloat16))
    rng = np.random.default_rng(seed)
    dims = CPU_HEAD_DIMS if dev.info["device_type"] == "cpu" else HEAD_DIMS
    for i in range(n):
        heads, hd = int(rng.integers(1, MAX_HEADS + 1)), int(dims[i % len(dims)])
        d, rows = heads * hd, int(rng.integers(1, max_seq + 1))
        K = rng.standard_normal((rows, d)).astype(dt)
        V = rng.standard_normal((rows, d)).astype(dt)
        kc, vc = dev.upload(K, dtype=dt.name), dev.upload(V, dtype=dt.name)
        qkv = dev.empty((1, 3 * d), dt.name)
        with dev.plan(params=1) as p:
            out = p.attention_decode(qkv, kc, vc, heads=heads, position=0)
        edge = min(rows - 1, SPLIT * int(rng.integers(1, 4)))
        positions = sorted({0, edge, *(int(x) for x in rng.integers(0, rows, size=2))})
        fails, worst = 0, ""
        for pos in positions:
            row = rng.standard_normal((1, 3 * d)).astype(dt)
            qkv.copy_(row)
            p.replay(params=[pos])
            K[pos], V[pos] = row[0, d : 2 * d], row[0, 2 * d :]
            r = check_close(out.numpy(), reference(row[0, :d], K, V, heads, pos)[None], atol=atol, rtol=rtol)
            same = np.array_equal(kc.numpy().view(np.uint16), K.view(np.uint16)) and np.array_equal(
                vc.numpy().view(np.uint16), V.view(np.uint16)
            )
            if not r.passed or not same:
                fails += 1
                worst = f"pos {pos}: {r.line()}" + ("" if same else "; the caches differ from what was appended")
        p.close()
        yield DecodeCase(i, heads, hd, rows, positions, fails, worst)

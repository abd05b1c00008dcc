"""Shape strings: '2048x2048x2048' (M x N x K), lists, and named sets."""

from __future__ import annotations

NAMED_SETS: dict[str, list[tuple[int, int, int]]] = {
    "canonical": [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072)],
    "large": [(4096, 4096, 4096), (8192, 8192, 8192)],
    # Transformer projections (tokens x out x in): Llama-2-7B / -13B style QKV and MLP
    # up/down at 4096 and 2048 tokens, and Llama-3-8B's at 512 tokens (small grids:
    # 512x4096x14336 is the MLP down projection ggml's anchor times).
    "llm": [
        (4096, 4096, 4096),
        (4096, 11008, 4096),
        (4096, 4096, 11008),
        (2048, 5120, 5120),
        (2048, 13824, 5120),
        (512, 4096, 4096),
        (512, 14336, 4096),
        (512, 4096, 14336),
    ],
    "small": [(64, 64, 64), (127, 129, 65), (256, 256, 256)],
}


MAX_DIM = 2**32 - 1  # kernels index rows and columns with 32 bits


def parse_shape(s: str) -> tuple[int, int, int]:
    parts = s.strip().lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"bad shape {s!r}: expected MxNxK with positive integers, e.g. 2048x2048x2048")
    m, n, k = (int(p) for p in parts)
    if max(m, n, k) > MAX_DIM:
        raise ValueError(f"bad shape {s!r}: dimensions above {MAX_DIM} cannot be indexed by the kernels")
    return m, n, k


def parse_shapes(spec: str) -> list[tuple[int, int, int]]:
    """'canonical,4096x4096x4096' -> shapes in order, duplicates dropped."""
    out: list[tuple[int, int, int]] = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        for shape in NAMED_SETS.get(item.lower(), None) or [parse_shape(item)]:
            if shape not in out:
                out.append(shape)
    if not out:
        raise ValueError(f"no shapes in {spec!r}")
    return out


def shape_str(shape: tuple[int, ...]) -> str:
    return "x".join(str(x) for x in shape)

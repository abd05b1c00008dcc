"""Shape strings: products' '2048x2048x2048' (M x N x K) and attention's '32x8x512x64'
(B x H x S x d), lists, and the named sets of each (what --shapes takes)."""

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


# B x H x S x d sets: short sequences, the baseline shape the attention protocol was
# validated on, the shapes ggml's Vulkan attention anchor is measured on, and long context.
ATTENTION_SETS: dict[str, list[tuple[int, int, int, int]]] = {
    "short": [(1, 1, 128, 64), (8, 4, 128, 64), (32, 8, 128, 64), (32, 8, 256, 64)],
    "baseline": [(32, 8, 512, 64)],
    "anchor": [
        (32, 8, 256, 64),
        (32, 8, 512, 64),
        (16, 16, 640, 64),
        (48, 4, 448, 64),
        (1, 32, 2048, 128),
        (1, 32, 4096, 128),
        (4, 32, 4096, 128),
    ],
    "long": [(1, 32, 2048, 128), (1, 32, 4096, 128), (1, 32, 8192, 128), (4, 32, 4096, 128)],
    "small": [(1, 2, 64, 64), (2, 1, 77, 32)],
}

# The names the sets had in the playbooks they come from, still taken by --shapes.
ATTENTION_SET_ALIASES = {"seed004": "short", "seed003": "baseline"}


def parse_attention_shapes(spec: str) -> list[tuple[int, int, int, int]]:
    """'short,1x32x2048x128' -> B x H x S x d shapes in order, duplicates dropped (a set
    also by its old name: ATTENTION_SET_ALIASES)."""
    out: list[tuple[int, int, int, int]] = []
    for item in (x.strip().lower() for x in spec.split(",")):
        if not item:
            continue
        item = ATTENTION_SET_ALIASES.get(item, item)
        if item in ATTENTION_SETS:
            shapes = ATTENTION_SETS[item]
        else:
            parts = item.split("x")
            if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
                raise ValueError(
                    f"bad attention shape {item!r}: expected BxHxSxd with positive integers "
                    f"(e.g. 32x8x512x64) or a set: {', '.join(ATTENTION_SETS)}"
                )
            shapes = [tuple(int(p) for p in parts)]  # type: ignore[list-item]
        out.extend(s for s in shapes if s not in out)
    if not out:
        raise ValueError(f"no shapes in {spec!r}")
    return out


# What each named set is, in a few words (--shapes' help says them).
SET_NOTES = {
    "canonical": "1024/2048/3072 cubes",
    "large": "4096/8192 cubes",
    "llm": "transformer projections",
    "small": "64-256",
}
ATTENTION_SET_NOTES = {
    "short": "S=128..256, d=64; also seed004",
    "baseline": "32x8x512x64; also seed003",
    "anchor": "the shapes ggml's Vulkan attention is measured on",
    "long": "S=2048..8192, d=128",
    "small": "S=64..77",
}

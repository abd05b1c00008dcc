"""How a decoder's parameters lie in the one flat tuple its autograd function
takes: each layer's ``LAYER_PARAMS`` in order, then the final LayerNorm's weight
and bias, then the head's weight where there is one. Every offset into that tuple
comes from here."""

from __future__ import annotations

LAYER_PARAMS = (
    "ln1_w",
    "ln1_b",
    "w_qkv",
    "b_qkv",
    "w_out",
    "b_out",
    "ln2_w",
    "ln2_b",
    "w_up",
    "b_up",
    "w_down",
    "b_down",
)
PER_LAYER = len(LAYER_PARAMS)
OFFSET = {name: i for i, name in enumerate(LAYER_PARAMS)}  # a parameter's place inside its layer
FINAL_W, FINAL_B, HEAD = 0, 1, 2  # after the layers: the final LayerNorm's weight and bias, the head


def index(layer: int, name: str) -> int:
    """Where layer `layer`'s parameter `name` lies in the flat tuple."""
    return layer * PER_LAYER + OFFSET[name]


def tail(n_layers: int, which: int) -> int:
    """Where FINAL_W, FINAL_B or HEAD lies in the flat tuple of n_layers layers."""
    return n_layers * PER_LAYER + which


def layers_of(flat: tuple, n_layers: int) -> list[dict]:
    """Each layer's parameters by name."""
    return [dict(zip(LAYER_PARAMS, flat[i * PER_LAYER : (i + 1) * PER_LAYER])) for i in range(n_layers)]


def reads_fp32(i: int, n_layers: int) -> bool:
    """Whether the ops read flat[i] as fp32: LayerNorm parameters (the final one's
    too) and product biases; product weights and the head are read as they are."""
    if i < n_layers * PER_LAYER:
        return LAYER_PARAMS[i % PER_LAYER].startswith(("ln", "b_"))
    return i - n_layers * PER_LAYER in (FINAL_W, FINAL_B)


def product_params(n_layers: int, has_head: bool) -> list[int]:
    """The flat indices of product weights and biases (what compute_dtype casts)."""
    idx = [index(i, name) for i in range(n_layers) for name in LAYER_PARAMS if not name.startswith("ln")]
    return idx + ([tail(n_layers, HEAD)] if has_head else [])

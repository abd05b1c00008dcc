"""The decode suite's GPT initial weights without torch: the parameters the training
suite's model (helios/harness/workloads/train/model.py) starts from, by its state_dict names, drawn
with NumPy under its rule (every 2-D parameter N(0, 0.02), biases 0, LayerNorm weights 1).
What `--adapters helios_plan` decodes where torch is not installed: no training, so
the weights are random (the step's cost does not depend on their values)."""

from __future__ import annotations

import numpy as np

INIT_STD = 0.02  # GPT.__init__'s normal init of every 2-D parameter


def parameter_shapes(layers: int, d: int, vocab: int, positions: int) -> dict[str, tuple[int, ...]]:
    """Each parameter's name and shape, in the order GPT registers them."""
    shapes: dict[str, tuple[int, ...]] = {"tok.weight": (vocab, d), "pos.weight": (positions, d)}
    for i in range(layers):
        b = f"blocks.{i}."
        for name, shape in (
            ("ln1.weight", (d,)), ("ln1.bias", (d,)), ("ln2.weight", (d,)), ("ln2.bias", (d,)),
            ("qkv.weight", (3 * d, d)), ("qkv.bias", (3 * d,)), ("proj.weight", (d, d)), ("proj.bias", (d,)),
            ("up.weight", (4 * d, d)), ("up.bias", (4 * d,)), ("down.weight", (d, 4 * d)), ("down.bias", (d,)),
        ):  # fmt: skip
            shapes[b + name] = shape
    shapes["lnf.weight"], shapes["lnf.bias"] = (d,), (d,)
    return shapes


def initial_state(layers: int, d: int, vocab: int, positions: int, seed: int) -> dict[str, np.ndarray]:
    """float32 arrays by name: the model's initial parameters under its init rule."""
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}
    for name, shape in parameter_shapes(layers, d, vocab, positions).items():
        if len(shape) == 2:
            state[name] = rng.normal(0.0, INIT_STD, size=shape).astype(np.float32)
        elif name.endswith("bias"):
            state[name] = np.zeros(shape, np.float32)
        else:  # a LayerNorm's weight
            state[name] = np.ones(shape, np.float32)
    return state

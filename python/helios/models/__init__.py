"""Real models through Helios: Hugging Face checkpoints read with the safetensors
library and decoded by one plan per token (no torch)::

    m = helios.models.load("path/to/Llama-3.2-1B")      # config.json + *.safetensors
    tokens = m.generate(prompt_ids, max_new_tokens=128)   # greedy
    for t in m.stream(prompt_ids, 128): ...               # as they come

Supported: the Llama family (llama.py: Llama 2 and 3, grouped-query attention, Llama
3's rope scaling, tied or untied heads); anything else is refused naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .. import files
from ..files import read_bytes
from ..optional import require
from .llama import LlamaConfig, LlamaDecoder, UnsupportedModelError, rope_inv_freq, rope_table

MAX_CHECKPOINT_BYTES = 1 << 40  # a safetensors file read whole (its bfloat16 entries), at most

__all__ = ["LlamaConfig", "LlamaDecoder", "UnsupportedModelError", "load", "read_checkpoint", "read_safetensors", "rope_inv_freq",
           "rope_table", "save_checkpoint", "weight_files"]  # fmt: skip


def weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(files.read_json(index, what="a safetensors index")["weight_map"].values()))
        except (KeyError, AttributeError, TypeError) as e:
            raise UnsupportedModelError(f"{index}: not a safetensors index ({type(e).__name__}: {e})") from None
        return [folder / n for n in names]
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json")


def read_safetensors(path: Path, want: Optional[set] = None) -> dict[str, np.ndarray]:
    """The tensors of one safetensors file (those in `want`, or all) as NumPy arrays;
    bfloat16 ones as ml_dtypes' bfloat16 (safetensors' NumPy reader lacks it)."""
    st = require("safetensors", "helios.models (reading a checkpoint)")
    from ..dtypes import bfloat16

    out: dict[str, np.ndarray] = {}
    raw: list = []
    try:
        with st.safe_open(str(path), framework="np") as f:
            for k in f.keys():
                if want is not None and k not in want:
                    continue
                if f.get_slice(k).get_dtype() == "BF16":
                    raw.append(k)
                else:
                    out[k] = f.get_tensor(k)
        if raw:  # the file's bytes, bfloat16 entries as 16-bit words
            entries = dict(st.deserialize(read_bytes(path, MAX_CHECKPOINT_BYTES, "a safetensors file")))
            for k in raw:
                e = entries[k]
                out[k] = np.frombuffer(e["data"], dtype=np.uint16).view(bfloat16).reshape(e["shape"])
    except Exception as e:  # the library's errors name no file: a truncated or damaged one
        if isinstance(e, (MemoryError, KeyboardInterrupt)):
            raise
        raise UnsupportedModelError(f"{path}: not a readable safetensors file ({type(e).__name__}: {e})") from None
    return out


def read_checkpoint(path: Any) -> tuple[LlamaConfig, dict[str, np.ndarray], dict]:
    """A Hugging Face checkpoint folder's config (checked), the weights it names (by
    Hugging Face name, as stored) and its raw config.json; refused naming file and key."""
    folder = Path(path)
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{folder}: no config.json")
    raw_cfg = files.read_json(cfg_file, what="a model's config.json")
    if not isinstance(raw_cfg, dict):
        raise UnsupportedModelError(f"{cfg_file}: not a JSON object")
    cfg = LlamaConfig.from_hf(raw_cfg, str(cfg_file))
    want = set(cfg.shapes())
    weights: dict[str, np.ndarray] = {}
    for f in weight_files(folder):
        weights.update(read_safetensors(f, want))
    return cfg, weights, raw_cfg


def save_checkpoint(path: Any, cfg: LlamaConfig, weights: dict[str, np.ndarray], dtype: Any = "bfloat16") -> Path:
    """A Hugging Face checkpoint folder (config.json, model.safetensors) of the model's
    weights (by Hugging Face name, any float dtype) stored as float16 or bfloat16, as
    read_checkpoint and transformers read it; the folder. bfloat16 is written through
    torch (safetensors' NumPy writer has no bfloat16), float16 through NumPy."""
    from ..dtypes import as_dtype, bfloat16, float16

    dt = as_dtype(dtype, "save_checkpoint: dtype", (float16, bfloat16))
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    out = str(folder / "model.safetensors")
    arrays = {k: np.ascontiguousarray(np.asarray(weights[k], dtype=np.float32)) for k in cfg.shapes()}
    if dt is bfloat16:
        torch = require("torch", "helios.models.save_checkpoint (a bfloat16 checkpoint)")
        st = require("safetensors.torch", "helios.models (writing a checkpoint)")
        st.save_file({k: torch.from_numpy(a).to(torch.bfloat16) for k, a in arrays.items()}, out,
                     metadata={"format": "pt"})  # fmt: skip
    else:
        require("safetensors", "helios.models (writing a checkpoint)")
        import safetensors.numpy

        safetensors.numpy.save_file({k: a.astype(np.float16) for k, a in arrays.items()}, out,
                                    metadata={"format": "pt"})  # fmt: skip
    files.Target(folder / "config.json", "save_checkpoint", replace=True).write(
        json.dumps({**cfg.to_hf(), "torch_dtype": dt.name}, indent=1)
    )
    return folder


def load(path: Any, *, device: Any = None, dtype: Any = None, max_len: Optional[int] = None) -> LlamaDecoder:
    """A Hugging Face checkpoint folder (config.json and model.safetensors, or shards with
    their index) as a decoder on `device` (default: helios.default_device()). dtype: the
    products' 16-bit type (default: the checkpoint's float16 or bfloat16, else bfloat16);
    max_len: the KV cache's positions (default: the config's, at most 4096). Refused
    before any upload, naming the file and the key, where the checkpoint is not one
    Helios runs."""
    cfg, weights, raw_cfg = read_checkpoint(path)
    if dtype is None:
        dtype = raw_cfg.get("torch_dtype") if raw_cfg.get("torch_dtype") in ("float16", "bfloat16") else "bfloat16"
    if device is None:
        from ..functions import default_device

        device = default_device()
    return LlamaDecoder(device, cfg, weights, max_len or min(cfg.max_positions, 4096), dtype)

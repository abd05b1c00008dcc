"""Element types: the one place that says which dtypes Helios stores and computes in.

float16 and bfloat16 are the 16-bit input types of products and attention (each
computes with fp32 accumulation; bfloat16 runs on bf16 cooperative matrices where
the device has them, else on the scalar fp32 kernels, never as float16, whose
range is smaller); float32 is an output and bias type; int32 holds token ids and targets (integer host
data becomes a Tensor only as int32, asked for by name: never a silent conversion). NumPy has no bfloat16, so
Helios uses ml_dtypes' (the one JAX and CuPy use): ``helios.bfloat16`` is that
NumPy dtype. At the C layer a bfloat16 buffer travels as its 16-bit patterns
(uint16 views), which is what :func:`wire` makes.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
int32 = np.dtype(np.int32)  # token ids and targets (a training step's ops read them)

INPUT_DTYPES = (float16, bfloat16)  # what the kernels multiply
FLOAT_DTYPES = (float16, bfloat16, float32)  # what a product or attention writes
TENSOR_DTYPES = FLOAT_DTYPES + (int32,)  # what a Tensor holds
# Host data an entry point takes: real floating point, rounded once to what the
# kernel reads. Integer, bool, complex and object dtypes are a TypeError.
HOST_FLOATS = (float16, bfloat16, float32, np.dtype(np.float64))

_NAMES = {
    "float16": float16,
    "f16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "bf16": bfloat16,
    "float32": float32,
    "f32": float32,
    "float": float32,
    "int32": int32,
    "i32": int32,
}


def as_dtype(value: Any, what: str = "dtype", allowed: tuple = TENSOR_DTYPES) -> np.dtype:
    """A NumPy dtype from a name ('float16', 'bfloat16', 'float32', 'bf16', ...), a
    NumPy dtype or type, or a torch dtype (torch.bfloat16); a TypeError naming
    `what` and the allowed types otherwise."""
    if isinstance(value, str):
        dt = _NAMES.get(value.lower())
    elif type(value).__module__ == "torch":  # torch.float16 / torch.bfloat16 / torch.float32
        dt = _NAMES.get(str(value).removeprefix("torch."))
    else:
        try:
            dt = np.dtype(value)
        except TypeError:
            dt = None
    if dt is None or dt not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise TypeError(f"{what} must be one of {names}, got {value!r}")
    return dt


def name(dt: Any) -> str:
    """The name the C layer takes: 'float16', 'bfloat16', 'float32' or 'int32'."""
    return np.dtype(dt).name


def wire(arr: np.ndarray) -> np.ndarray:
    """arr as the C layer reads it: bfloat16 as a uint16 view (no copy), others as they are."""
    return arr.view(np.uint16) if arr.dtype == bfloat16 else arr


def unwire(arr: np.ndarray, dt: Any) -> np.ndarray:
    """The inverse of wire for a result of dtype dt."""
    return arr.view(bfloat16) if np.dtype(dt) == bfloat16 and arr.dtype == np.uint16 else arr


def compute_dtype(*dtypes: Any) -> np.dtype:
    """The 16-bit type an op computes in, from its inputs' dtypes: bfloat16 when any
    input is bfloat16, else float16 (float32 and float64 inputs are rounded to it).
    float16 and bfloat16 inputs together are a TypeError: neither holds the other."""
    got = {np.dtype(d) for d in dtypes}
    if float16 in got and bfloat16 in got:
        raise TypeError(
            "inputs mix float16 and bfloat16: convert one side (neither type holds the other: "
            "bfloat16 has float32's range, float16 3 more bits of precision)"
        )
    return bfloat16 if bfloat16 in got else float16


def result_name(compute: np.dtype, *dtypes: Any) -> str:
    """The default output dtype of an op: its 16-bit compute type when every input
    has it, else float32 (NumPy's result type, capped at float32)."""
    return compute.name if all(np.dtype(d) == compute for d in dtypes) else "float32"

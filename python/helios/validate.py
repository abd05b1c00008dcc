"""Argument checks shared by every entry point: one rule per kind of argument,
each error naming the argument and what it got."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def count(name: str, v: Any, lo: int, hi: int) -> int:
    """An integer argument in [lo, hi]: ints and NumPy integers, not bools or floats."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {lo}..{hi}, got {v}")
    return v


def real(name: str, v: Any) -> float:
    """A finite real number: int, float or a NumPy real scalar; not a bool, a
    string, a complex number, NaN or an infinity."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, not {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        raise ValueError(f"{name} is too large for a float: {v}") from None
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {f}")
    return f


def flag(name: str, v: Any) -> bool:
    """A bool argument: True/False (or a NumPy bool), never a string or None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{name} must be True or False, not {type(v).__name__} {v!r}")


def got_tensor(t: Any) -> str:
    """What an argument that must be a float32 Tensor got instead, with the hint for the
    usual cause: Device.upload makes float16 Tensors unless given dtype=np.float32."""
    dt = getattr(t, "dtype", None)
    if dt is None or not hasattr(t, "shape"):
        return f"got {type(t).__name__}"
    text = f"got a {tuple(t.shape)} {dt} {type(t).__name__}"
    if np.dtype(dt) != np.float32:
        text += " (Device.upload makes float16 unless told: upload(x, dtype=np.float32))"
    return text

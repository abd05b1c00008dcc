"""Fp32 master weights cast to the compute type for a decoder call, into buffers
kept across calls (one slot per master weight, lent to one forward at a time)."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Optional

import torch

from .. import _helios
from ._params import product_params
from ._staging import memory_pool
from ._state import MAX_HANDED, RUNTIME, cuda_ordinal


def casts_pool(t: torch.Tensor) -> Any:
    """Where a group's own casts are allocated: memory_pool() on t's GPU (Helios
    reads them in place), else the ordinary allocator (they are then copied in)."""
    ordinal = cuda_ordinal(t)
    if ordinal not in RUNTIME.no_pool:
        try:
            return memory_pool(ordinal)
        except _helios.UnsupportedError:
            RUNTIME.no_pool.add(ordinal)
    return contextlib.nullcontext()


class CastSlot:
    """A master weight's cast, kept across calls (in memory_pool(), so Helios reads it
    in place and its view is cached): refilled in place each forward, and lent to at
    most one forward whose backward has not run yet and whose graph lives (pending:
    that forward's lending number; 0 free)."""

    __slots__ = ("master", "buf", "pending")

    def __init__(self, master: torch.Tensor, buf: torch.Tensor) -> None:
        self.master = weakref.ref(master)
        self.buf = buf
        self.pending = 0


def cast_slot(master: torch.Tensor, dtype: torch.dtype, anchor: torch.Tensor) -> Optional[CastSlot]:
    """master's slot, made on first use; None where it is lent to a forward whose
    backward has not run (a second forward first: that one casts afresh, so the
    first's saved cast is never overwritten)."""
    slot = RUNTIME.cast_slots.get(id(master))
    if slot is not None and (slot.master() is not master or slot.buf.dtype != dtype or slot.buf.shape != master.shape):
        slot = None  # a new tensor at a freed one's id, or another dtype
    if slot is None:
        if len(RUNTIME.cast_slots) >= MAX_HANDED:
            for k in [k for k, sl in RUNTIME.cast_slots.items() if sl.master() is None]:
                del RUNTIME.cast_slots[k]
        with casts_pool(anchor):
            buf = torch.empty(master.shape, dtype=dtype, device=master.device)
        slot = RUNTIME.cast_slots[id(master)] = CastSlot(master, buf)
    return None if slot.pending else slot


def cast_products(
    flat: tuple, n_layers: int, has_head: bool, dtype: torch.dtype, anchor: torch.Tensor, lend: int
) -> tuple[tuple, list]:
    """flat with every product weight and bias not already in dtype cast to it (a
    decoder given fp32 master weights: the casts are made here, inside the
    autograd function, so they cost no autograd work of their own), and the cast
    slots used. lend: nonzero where the casts are saved for a backward, the number
    the slots stay pending with until release_casts(slots, lend)."""
    todo = [i for i in product_params(n_layers, has_head) if flat[i] is not None and flat[i].dtype != dtype]
    if not todo:
        return flat, []
    out = list(flat)
    slots: list[CastSlot] = []
    fresh = todo
    if not _helios.env_flag("HELIOS_DISABLE_CAST_CACHE"):
        fresh, dsts, srcs = [], [], []
        for i in todo:
            slot = cast_slot(flat[i], dtype, anchor)
            if slot is None:
                fresh.append(i)
                continue
            slot.pending = lend
            slots.append(slot)
            dsts.append(slot.buf)
            srcs.append(flat[i])
            out[i] = slot.buf
        if dsts:
            torch._foreach_copy_(dsts, srcs)
    if fresh:
        with casts_pool(anchor):
            for i in fresh:
                out[i] = flat[i].to(dtype)
    return tuple(out), slots


def release_casts(slots: list, lend: int) -> None:
    """Forward `lend`'s backward has read its casts, or its graph was freed: the
    slots it still holds may be refilled (one lent again since is left alone)."""
    for slot in slots:
        if slot.pending == lend:
            slot.pending = 0

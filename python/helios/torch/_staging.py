"""Where an op's operands and results live: torch memory Helios reads in place
(``memory_pool()`` imports, results handed back whole), the per-shape staging
tensors the other operands are copied into, and the pool of exportable results
torch receives through DLPack."""

from __future__ import annotations

import math
import weakref
from typing import Any, Optional

import torch

from .. import _helios, engine
from ..device import Device
from ..tensor import Tensor
from ._state import DTYPES, MAX_HANDED, MAX_POOLED, MAX_VIEWS, RUNTIME, TORCH_TO_HELIOS, check, device_for


class memory_pool:
    """``with helios.torch.memory_pool(): w = torch.empty(..., device="cuda")``: the
    CUDA tensors allocated inside come from memory Helios reads in place (CUDA's
    virtual-memory API, each segment exported once to Vulkan), so ops and
    ``to_helios`` take them with no copy. A ``torch.cuda.MemPool`` whose allocator
    is this module's ``helios_cuda_alloc`` (a ``CUDAPluggableAllocator``); one per
    CUDA device, kept for the process (``.pool``). UnsupportedError, before any
    allocation, naming what is missing where the pool cannot work."""

    def __init__(self, device: Any = None) -> None:
        if not torch.cuda.is_available():
            raise _helios.UnsupportedError("helios.torch.memory_pool: torch.cuda is not available here")
        ordinal = torch.device("cuda", torch.cuda.current_device() if device is None else device).index
        ordinal = torch.cuda.current_device() if ordinal is None else ordinal
        pool = RUNTIME.pools.get(ordinal)
        if pool is None:
            engine.probe_cuda_pool(ordinal)  # the driver's reason, not torch's OOM, where it fails
            from torch.cuda.memory import CUDAPluggableAllocator

            alloc = CUDAPluggableAllocator(_helios.__file__, "helios_cuda_alloc", "helios_cuda_free")
            pool = torch.cuda.MemPool(alloc.allocator())
            RUNTIME.pools[ordinal] = pool
        self.pool, self.ordinal = pool, ordinal
        self._ctx: Any = None

    def __enter__(self) -> Any:
        self._ctx = torch.cuda.use_mem_pool(self.pool, torch.device("cuda", self.ordinal))
        self._ctx.__enter__()
        return self.pool

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


def imported(dev: Device, t: torch.Tensor, cached: bool = False) -> Optional[Any]:
    """A Helios Tensor over t's own memory (no copy) where t is contiguous and lives
    in the pool on dev's GPU and its offset is one the kernels can bind; else None.
    cached: the ops' own operands, one view per place and shape kept and reused
    (a view is metadata over the segment's memory: it never goes stale while the
    segment lives, and the cache goes with the segment)."""
    if not t.is_contiguous() or t.dtype not in TORCH_TO_HELIOS or t.numel() == 0:
        return None
    nbytes = t.numel() * t.element_size()
    found = _helios.cuda_pool_lookup(t.data_ptr(), nbytes)
    if found is None:
        return None
    segment, base, size, _ = found
    key = (id(dev), segment)
    entry = RUNTIME.imports.get(key)
    if entry is None:
        for k in [k for k in RUNTIME.imports if k[0] == id(dev)]:  # segments torch released since
            b, sz = RUNTIME.imports[k][:2]
            if (_helios.cuda_pool_lookup(b, sz) or (None,))[0] != k[1]:
                del RUNTIME.imports[k]
        whole = engine.set_meta(Tensor(dev, size, cuda_segment=segment), (size // 4,), "float32", size // 4)
        entry = RUNTIME.imports[key] = (base, size, whole, {})
    offset = t.data_ptr() - entry[0]
    shape = tuple(t.shape) if t.dim() else (1,)
    vkey = (offset, nbytes, shape, t.dtype)
    views = entry[3]
    if cached and vkey in views:
        return views[vkey]
    try:
        view = engine.view(entry[2], offset, nbytes, shape, TORCH_TO_HELIOS[t.dtype], shape[-1])
    except _helios.UnsupportedError:  # an offset the device cannot bind (a torch view into a larger tensor)
        return None
    view.is_slice = True
    if cached:
        if len(views) >= MAX_VIEWS:
            views.clear()
        views[vkey] = view
    return view


def to_helios(t: torch.Tensor, copy: Optional[bool] = None) -> Any:
    """The Helios Tensor of a torch CUDA tensor (float16, bfloat16 or float32) on the
    Vulkan device with its GPU's UUID: zero-copy where t lives in ``memory_pool()``
    (contiguous, at an offset the device can bind; the Tensor then shares t's memory
    and is an operand, not an output), else (copy=None) one device-to-device copy
    on torch's current stream into an exportable Tensor. copy=False: BufferError
    where zero-copy is impossible; copy=True: always the copy. Returns once torch's
    pending work on t is done (one wait for its current stream), so any Helios call
    may read it."""
    check("t", t, dtypes=TORCH_TO_HELIOS)
    dev = device_for(t)
    view = None if copy else imported(dev, t)
    if view is None:
        if copy is False:
            raise BufferError(
                "helios.torch.to_helios(copy=False): the tensor is not in helios.torch.memory_pool() "
                "(or is not contiguous, or starts at an offset the device cannot bind); allocate it inside "
                "`with helios.torch.memory_pool():`, or pass copy=None for one device-to-device copy"
            )
        h = dev.empty(tuple(t.shape) or (1,), TORCH_TO_HELIOS[t.dtype], exportable=True)
        torch.from_dlpack(h).copy_(t.reshape(h.shape))
        view = h
    torch.cuda.current_stream(t.device).synchronize()
    return view


def stage_tensor(dev: Device, ordinal: int, slot: str, t: torch.Tensor, dtype: Optional[str] = None) -> Any:
    """A Helios tensor holding t's values as `dtype` (default t's own): t itself where
    it lives in memory_pool() in that dtype (no copy), else t copied (and converted)
    device to device on torch's current stream into this slot's exportable tensor
    (made once per shape and dtype). Either way Helios reads it only after the
    stream's work so far (the ordering of ordered())."""
    h, copy_to = stage_target(dev, ordinal, slot, t, dtype)
    if copy_to is not None:
        copy_to.copy_(t)
    return h


def stage_target(
    dev: Device, ordinal: int, slot: str, t: torch.Tensor, dtype: Optional[str] = None
) -> tuple[Any, Optional[torch.Tensor]]:
    """_stage without its copy: (the Helios tensor, None) where t is read in place,
    else (this slot's tensor, torch's view of it that t must be copied into)."""
    dtype = dtype or DTYPES.get(t.dtype, "float32")
    if TORCH_TO_HELIOS.get(t.dtype) == dtype:
        view = handed_back(dev, t)
        if view is None:
            view = imported(dev, t, cached=True)
        if view is not None:
            return view, None
    key = (ordinal, slot, tuple(t.shape), dtype)
    entry = RUNTIME.staging.get(key)
    if entry is None:
        h = dev.empty(tuple(t.shape), dtype, exportable=True)
        entry = (h, torch.from_dlpack(h))
        RUNTIME.staging[key] = entry
    return entry


def pooled_result(dev: Device, ordinal: int, shape: tuple, dtype: torch.dtype) -> Any:
    """An exportable Helios tensor (float16, bfloat16 or float32) for an op's result: one
    torch has released (no export held) from the pool, else a new one. Reuse is safe:
    Helios writes it only after everything queued before on torch's stream (and so any
    reader of the old result, and the Helios op that wrote it) has run."""
    key = (ordinal, shape, TORCH_TO_HELIOS[dtype])
    pool = RUNTIME.results.setdefault(key, [])
    start = RUNTIME.pool_next.get(key, 0)  # round robin: the tensors just handed out are the last to be free again
    for i in range(len(pool)):
        h = pool[(start + i) % len(pool)]
        if h.exports == 0 and id(h) not in RUNTIME.busy:
            RUNTIME.pool_next[key] = (start + i + 1) % len(pool)
            return h
    h = dev.empty(shape, TORCH_TO_HELIOS[dtype], exportable=True)
    if len(pool) < MAX_POOLED:
        pool.append(h)
    return h


def to_torch(h: Any) -> torch.Tensor:
    # The capsule straight from the engine (results are whole, packed, exportable): the
    # DLPack protocol's checks and stream queries cost more host time than the export.
    t = torch.utils.dlpack.from_dlpack(engine.dlpack_capsule(h))
    if len(RUNTIME.handed) >= MAX_HANDED:  # entries of results freed since
        for k in [k for k, r in RUNTIME.handed.items() if r() is None or r().exports == 0]:
            del RUNTIME.handed[k]
    RUNTIME.handed[(id(h.device), t.data_ptr())] = weakref.ref(h)
    return t


def handed_back(dev: Device, t: torch.Tensor) -> Optional[Any]:
    """The Helios result t is torch's view of, whole and in order (t as to_torch
    gave it, or reshaped), as an operand of a later op: no copy. Safe to read like
    a pool import (after the stream's work so far, ordered()); None otherwise.
    exports > 0 proves the address is still that result's (torch holds it), not a
    reuse of a freed one."""
    ref = RUNTIME.handed.get((id(dev), t.data_ptr()))
    h = ref() if ref is not None else None
    if h is None or h.exports == 0 or not t.is_contiguous() or h.dtype.name != TORCH_TO_HELIOS.get(t.dtype):
        return None
    shape = tuple(t.shape)
    if shape == h.shape:
        return h
    if not shape or math.prod(shape) != h.size or not h.packed:
        return None
    return h.reshape(*shape)

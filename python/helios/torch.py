"""``helios.torch``: Helios's products and attention on torch CUDA tensors,
inside ``torch.autograd``.

``matmul(a, b)``, ``linear(x, weight, bias=None, activation=None)`` and
``attention(q, k, v, causal=False, scale=None)`` take float16 or bfloat16 CUDA
tensors (all inputs of one op the same type) on the GPU Helios runs on (the Vulkan device with that CUDA device's UUID) and
return torch CUDA tensors. ``mlp``, ``self_attention`` and ``decoder`` are whole
blocks (a transformer MLP; QKV product, heads, attention and projection; a
pre-LayerNorm decoder stack with its final LayerNorm and head) whose ops, with
the activations, LayerNorms and residual adds between them, go to
Helios as one group per direction.

Groups: each op, or block, is one group of Helios submissions ordered with torch's
stream, and every group costs one pair of switches of the GPU between the CUDA and
the Vulkan context (about 0.3 ms on the H100: a one-off probe, ``scripts/semaphore_latency.py`` at 89c21a3),
while ops inside a group cost only their kernels. Calling the block ops instead of
chains of ``linear`` and torch ops between is what makes a model fast here
(``helios suite train``: per op, per block, whole decoder). Inside a group the ops
are recorded into command buffers that reach the GPU in chunks as they are
recorded (eight ops, or fewer where the GPU has run out of work). Gradients: matmul and linear backward run as Helios
products (the transposed layouts; both gradients of one product submitted
together); attention backward runs Helios's backward
kernels (FlashAttention-2's recomputation from the forward's log-sum-exp, which
the forward keeps for it).

How data moves: an input allocated inside ``memory_pool()`` (torch memory made
with CUDA's virtual-memory API, which Vulkan can import) is read in place, with
no copy, and so is a result of an earlier Helios op handed to the next one whole
(an activation, a gradient: the same memory, also reshaped); any other input is
copied device to device, on torch's current stream,
into an exportable Helios tensor kept per shape (weights too, every call: a
tensor modified through ``.data`` keeps its version counter, so a cached copy
could go stale: allocate weights in the pool instead). Helios runs the op into
an exportable tensor that torch receives with no copy (DLPack), taken from a
pool of results torch has freed. There is never a host round trip.
``to_helios(t, copy=None)`` (also ``helios.from_dlpack`` for CUDA tensors) gives
the Helios Tensor itself. Ordering: where the device shares a timeline
semaphore with CUDA (``VK_KHR_external_semaphore_fd``), torch's stream signals it
after the copies, Helios's submission waits for that and signals when done, and
the stream waits for Helios before anything reads the result: the call returns
without any host wait. Elsewhere the stream is synchronized before Helios runs
(one host wait per op). ``ordering()`` says which applies.

bfloat16 runs on Helios's bf16 cooperative-matrix kernels where the device has
them (``Device.info["bf16_coop_enabled"]``), else on its scalar fp32 kernels:
always bfloat16 in and out with fp32 accumulation, never through float16.

DistributedDataParallel: register ``ddp_comm_hook`` on the wrapped model. DDP's own
hook starts each bucket's all-reduce on NCCL's stream as soon as the bucket fills,
unordered against Helios's queued work (which waits for torch's stream only); the
GPU then time-slices the CUDA and Vulkan contexts, and Helios's backward took over
twice its time (2 H100s: 46.6 against 19.8 ms). The hook has torch's stream wait for
each all-reduce, so Helios's next group starts after it.

``torch.compile``: these functions are excluded from tracing
(``torch.compiler.disable``): a compiled model runs them eagerly between its
compiled graphs.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import warnings
import weakref
from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F

from . import _helios
from .attention import resolve_scale
from .device import Device
from .dtypes import bfloat16
from .elementwise import LAYERNORM_ROWS as _LN_ROWS
from .gemm import activation_code
from .tensor import Tensor

_lock = threading.Lock()  # one op at a time: the staging tensors are shared
_devices: dict[int, Device] = {}  # CUDA ordinal -> the Helios Device with its UUID
_staging: dict[tuple, tuple] = {}  # (ordinal, slot, shape, dtype) -> (Helios tensor, torch view)
_results: dict[tuple, list] = {}  # (ordinal, shape, dtype) -> Helios tensors handed out before
_host_sync: dict[int, str] = {}  # CUDA ordinal -> why ops on it synchronize the host (no shared semaphore)
_pools: dict[int, Any] = {}  # CUDA ordinal -> the torch.cuda.MemPool over Helios's CUDA pool
_imports: dict[tuple, tuple] = {}  # (ordinal, segment) -> (segment base, size, the Helios Tensor over it)
# Results kept per shape for reuse once torch frees them. A training step keeps one
# activation of a shape per layer and more (a block's q, k, v and output: 4 per
# layer; a whole decoder as one group holds five (B*S, D) activations per layer at
# once), and a result the pool cannot hand back is a new exportable allocation and
# CUDA import: with 8 per shape the suite's grouped step took 112-125 ms, with 64
# 68-70 ms (a one-off profile, scripts/train_profile.py at 89c21a3).
MAX_POOLED = 256
_pool_next: dict[tuple, int] = {}  # where _result's next scan of a pool starts
# ids of pooled results a group uses inside itself only (never exported to torch, so no
# export count keeps them out of the pool): not handed out again until it is submitted
_busy: set[int] = set()
# (device id, CUDA address) -> the Helios result torch sees there (_to_torch): a later
# op reads it in place instead of copying it (activations and gradients that go from
# one Helios op to the next)
_handed: dict[tuple, Any] = {}
MAX_HANDED = 4096
# (device id, id(torch tensor), requested dtype, slot) -> (weakrefs to the tensor, to the
# Helios tensor stage_all gave for it and to the torch view copied into, or None; the
# tensor's address and shape then): the same object over the same memory gets the same
# answer (the decoder's cast weights and LayerNorm parameters, every step) without the
# lookups (~8 us a tensor, ~1.1 ms before the forward's first op could start).
# Weak: an entry keeps nothing alive. HELIOS_DISABLE_STAGE_MEMO=1: looked up each time.
_stage_memo: dict[tuple, tuple] = {}

_ACTIVATIONS: dict[Optional[str], Callable[[torch.Tensor], torch.Tensor]] = {
    None: lambda z: z,
    "relu": F.relu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "silu": F.silu,
}


def device_for(t: torch.Tensor) -> Device:
    """The Helios Device that runs this CUDA tensor's ops: the Vulkan device with
    the UUID of the tensor's CUDA device (opened once, kept for the process)."""
    ordinal = t.device.index if t.device.index is not None else torch.cuda.current_device()
    dev = _devices.get(ordinal)
    if dev is None or dev.closed:
        want = str(torch.cuda.get_device_properties(ordinal).uuid).replace("-", "")
        for i in range(_helios.device_count()):
            cand = Device(i)
            if str(cand.info["uuid"]).replace("-", "") == want:
                dev = cand
                break
            cand.close()
        else:
            raise _helios.UnsupportedError(
                f"helios.torch: no Vulkan device has the UUID of CUDA device {ordinal} ({want})"
            )
        _devices[ordinal] = dev
        why = dev.info.get("bf16_coop_unavailable") or ""
        if dev.info.get("bf16_cooperative_matrix") and why.startswith("this build"):
            warnings.warn(
                f"helios.torch: {dev.info['name']} has bfloat16 cooperative matrices but {why}: "
                "bfloat16 ops run on the scalar fp32 path, many times slower",
                stacklevel=2,
            )
    return dev


def ordering(t: torch.Tensor) -> str:
    """How ops on this tensor's GPU are ordered with torch: "semaphore" (no host
    wait) or "host sync: <why>"."""
    ordinal = t.device.index if t.device.index is not None else torch.cuda.current_device()
    dev = device_for(t)
    if _helios.env_flag("HELIOS_DISABLE_SEMAPHORE_ORDERING"):
        # the kill switch: the host waits for torch's stream before each group, and for
        # Helios before handing its results back (no CUDA work can run beside Helios's)
        return "host sync: HELIOS_DISABLE_SEMAPHORE_ORDERING=1"
    if ordinal not in _host_sync:
        try:
            w, s = dev._async_values()
            # an unused pair: the stream signals it and waits for it, keeping the values in order
            stream = torch.cuda.current_stream(t.device).cuda_stream
            dev._cuda_signal(stream, w)
            dev._cuda_signal(stream, s)
        except BufferError as e:
            _host_sync[ordinal] = str(e)
        else:
            _host_sync[ordinal] = ""
    why = _host_sync[ordinal]
    return "semaphore" if not why else f"host sync: {why}"


def _run_ordered(dev: Device, t: torch.Tensor, ops: list[Callable[[], Any]]) -> None:
    """Run ops (each op()) after the work queued on torch's current stream, and
    make that stream wait for them: through the shared semaphore, else a host wait
    before. A group of ops is one submission and one pair of CUDA <-> Vulkan hops:
    the stream signals once, the ops are recorded into one command buffer (each after
    the one before: Device._group_begin) that waits for that signal, and the stream
    waits for the group's. Each hop pair costs a switch of the GPU between the CUDA
    and the Vulkan context, about 0.2-0.5 ms on the H100 (perf notes at 89c21a3, session
    9): grouping the ops that need no torch work between them saves it."""
    stream = torch.cuda.current_stream(t.device)
    if ordering(t) != "semaphore":
        stream.synchronize()  # the copies are done before Helios reads
        for op in ops:
            op()
        return
    handle = stream.cuda_stream
    w, s = dev._async_values()
    dev._cuda_signal(handle, w)  # the inputs are staged once the stream gets here
    dev._group_begin(w, s)
    try:
        for op in ops:
            op()  # recorded into the group
    finally:
        # Submitted even when an op failed (what was recorded runs and s is signalled),
        # and the stream waits for it: nothing on the stream reads before Helios is
        # done, and the stream's next signal stays above Helios's.
        dev._group_end()
        dev._cuda_wait(handle, s)


# torch dtype -> Helios's name: what Tensors hold, and what ops compute in.
_TORCH_TO_HELIOS = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
_DTYPES = {k: v for k, v in _TORCH_TO_HELIOS.items() if k is not torch.float32}


def _same_dtype(op: str, *named: tuple) -> None:
    """One 16-bit type per op: Helios does not mix float16 and bfloat16."""
    kinds = {t.dtype for _, t in named}
    if len(kinds) > 1:
        desc = ", ".join(f"{n} {t.dtype}" for n, t in named)
        raise TypeError(f"helios.torch.{op}: inputs must share one dtype (float16 or bfloat16), got {desc}")


def _check(name: str, t: Any, ndim: Optional[tuple] = None, dtypes: Optional[dict] = None) -> None:
    """A torch CUDA tensor of one of `dtypes` (default: the ops' 16-bit types)."""
    dtypes = _DTYPES if dtypes is None else dtypes
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"helios.torch: {name} must be a torch.Tensor, not {type(t).__name__}")
    if not t.is_cuda:
        raise TypeError(f"helios.torch: {name} must be a CUDA tensor, got one on {t.device}")
    if t.dtype not in dtypes:
        names = " or ".join(dtypes.values())
        raise TypeError(f"helios.torch: {name} is {t.dtype}; Helios takes {names} CUDA tensors")
    if ndim is not None and t.dim() not in ndim:
        raise ValueError(f"helios.torch: {name} must have {' or '.join(map(str, ndim))} dimensions, got {t.dim()}")


def _ordinal(t: torch.Tensor) -> int:
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


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
        pool = _pools.get(ordinal)
        if pool is None:
            ptr = _helios._cuda_pool_alloc(1, ordinal)  # the driver's reason, not torch's OOM, where it fails
            _helios._cuda_pool_free(ptr)
            from torch.cuda.memory import CUDAPluggableAllocator

            alloc = CUDAPluggableAllocator(_helios.__file__, "helios_cuda_alloc", "helios_cuda_free")
            pool = torch.cuda.MemPool(alloc.allocator())
            _pools[ordinal] = pool
        self.pool, self.ordinal = pool, ordinal
        self._ctx: Any = None

    def __enter__(self) -> Any:
        self._ctx = torch.cuda.use_mem_pool(self.pool, torch.device("cuda", self.ordinal))
        self._ctx.__enter__()
        return self.pool

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


MAX_VIEWS = 256  # operand views kept per imported segment (ops reuse them call after call)


def _imported(dev: Device, t: torch.Tensor, cached: bool = False) -> Optional[Any]:
    """A Helios Tensor over t's own memory (no copy) where t is contiguous and lives
    in the pool on dev's GPU and its offset is one the kernels can bind; else None.
    cached: the ops' own operands, one view per place and shape kept and reused
    (a view is metadata over the segment's memory: it never goes stale while the
    segment lives, and the cache goes with the segment)."""
    if not t.is_contiguous() or t.dtype not in _TORCH_TO_HELIOS or t.numel() == 0:
        return None
    nbytes = t.numel() * t.element_size()
    found = _helios.cuda_pool_lookup(t.data_ptr(), nbytes)
    if found is None:
        return None
    segment, base, size, _ = found
    key = (id(dev), segment)
    entry = _imports.get(key)
    if entry is None:
        for k in [k for k in _imports if k[0] == id(dev)]:  # segments torch released since
            b, sz = _imports[k][:2]
            if (_helios.cuda_pool_lookup(b, sz) or (None,))[0] != k[1]:
                del _imports[k]
        whole = Tensor(dev, size, cuda_segment=segment)._set_meta((size // 4,), "float32", size // 4)
        entry = _imports[key] = (base, size, whole, {})
    offset = t.data_ptr() - entry[0]
    shape = tuple(t.shape) if t.dim() else (1,)
    vkey = (offset, nbytes, shape, t.dtype)
    views = entry[3]
    if cached and vkey in views:
        return views[vkey]
    try:
        view = entry[2]._slice(offset, nbytes)
    except _helios.UnsupportedError:  # an offset the device cannot bind (a torch view into a larger tensor)
        return None
    view._set_meta(shape, _TORCH_TO_HELIOS[t.dtype], shape[-1])
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
    _check("t", t, dtypes=_TORCH_TO_HELIOS)
    dev = device_for(t)
    view = None if copy else _imported(dev, t)
    if view is None:
        if copy is False:
            raise BufferError(
                "helios.torch.to_helios(copy=False): the tensor is not in helios.torch.memory_pool() "
                "(or is not contiguous, or starts at an offset the device cannot bind); allocate it inside "
                "`with helios.torch.memory_pool():`, or pass copy=None for one device-to-device copy"
            )
        h = dev.empty(tuple(t.shape) or (1,), _TORCH_TO_HELIOS[t.dtype], exportable=True)
        torch.from_dlpack(h).copy_(t.reshape(h.shape))
        view = h
    torch.cuda.current_stream(t.device).synchronize()
    return view


def _stage(dev: Device, ordinal: int, slot: str, t: torch.Tensor, dtype: Optional[str] = None) -> Any:
    """A Helios tensor holding t's values as `dtype` (default t's own): t itself where
    it lives in memory_pool() in that dtype (no copy), else t copied (and converted)
    device to device on torch's current stream into this slot's exportable tensor
    (made once per shape and dtype). Either way Helios reads it only after the
    stream's work so far (the ordering of _run_ordered)."""
    h, copy_to = _stage_target(dev, ordinal, slot, t, dtype)
    if copy_to is not None:
        copy_to.copy_(t)
    return h


def _stage_target(
    dev: Device, ordinal: int, slot: str, t: torch.Tensor, dtype: Optional[str] = None
) -> tuple[Any, Optional[torch.Tensor]]:
    """_stage without its copy: (the Helios tensor, None) where t is read in place,
    else (this slot's tensor, torch's view of it that t must be copied into)."""
    dtype = dtype or _DTYPES.get(t.dtype, "float32")
    if _TORCH_TO_HELIOS.get(t.dtype) == dtype:
        view = _handed_back(dev, t)
        if view is None:
            view = _imported(dev, t, cached=True)
        if view is not None:
            return view, None
    key = (ordinal, slot, tuple(t.shape), dtype)
    entry = _staging.get(key)
    if entry is None:
        h = dev.empty(tuple(t.shape), dtype, exportable=True)
        entry = (h, torch.from_dlpack(h))
        _staging[key] = entry
    return entry


def _result(dev: Device, ordinal: int, shape: tuple, dtype: torch.dtype) -> Any:
    """An exportable Helios tensor (float16, bfloat16 or float32) for an op's result: one
    torch has released (no export held) from the pool, else a new one. Reuse is safe:
    Helios writes it only after everything queued before on torch's stream (and so any
    reader of the old result, and the Helios op that wrote it) has run."""
    key = (ordinal, shape, _TORCH_TO_HELIOS[dtype])
    pool = _results.setdefault(key, [])
    start = _pool_next.get(key, 0)  # round robin: the tensors just handed out are the last to be free again
    for i in range(len(pool)):
        h = pool[(start + i) % len(pool)]
        if h.exports == 0 and id(h) not in _busy:
            _pool_next[key] = (start + i + 1) % len(pool)
            return h
    h = dev.empty(shape, _TORCH_TO_HELIOS[dtype], exportable=True)
    if len(pool) < MAX_POOLED:
        pool.append(h)
    return h


def _to_torch(h: Any) -> torch.Tensor:
    # The capsule straight from the engine (results are whole, packed, exportable): the
    # DLPack protocol's checks and stream queries cost more host time than the export.
    t = torch.utils.dlpack.from_dlpack(h._dlpack(h.shape, 4 if h.dtype == bfloat16 else 2, h.dtype.itemsize * 8))
    if len(_handed) >= MAX_HANDED:  # entries of results freed since
        for k in [k for k, r in _handed.items() if r() is None or r().exports == 0]:
            del _handed[k]
    _handed[(id(h.device), t.data_ptr())] = weakref.ref(h)
    return t


def _handed_back(dev: Device, t: torch.Tensor) -> Optional[Any]:
    """The Helios result t is torch's view of, whole and in order (t as _to_torch
    gave it, or reshaped), as an operand of a later op: no copy. Safe to read like
    a pool import (after the stream's work so far, _run_ordered); None otherwise.
    exports > 0 proves the address is still that result's (torch holds it), not a
    reuse of a freed one."""
    ref = _handed.get((id(dev), t.data_ptr()))
    h = ref() if ref is not None else None
    if h is None or h.exports == 0 or not t.is_contiguous() or h.dtype.name != _TORCH_TO_HELIOS.get(t.dtype):
        return None
    shape = tuple(t.shape)
    if shape == h.shape:
        return h
    if not shape or math.prod(shape) != h.size or not h.packed:
        return None
    return h.reshape(*shape)


class _Group:
    """Helios ops on one CUDA device submitted as one ordered group (_run_ordered: one
    CUDA <-> Vulkan hop pair for all of them). Operands are torch tensors (staged,
    _stage: each distinct tensor once per group) or Helios tensors an earlier op of the
    group wrote; every result is exported to torch as soon as it is taken (an export
    keeps it out of the result pool, so no later op of the group is handed the same
    memory) and its torch view is kept until the group is submitted."""

    def __init__(self, anchor: torch.Tensor) -> None:
        self.anchor = anchor
        self.dev = device_for(anchor)
        self.ordinal = _ordinal(anchor)
        self.ops: list[Callable[[], Any]] = []
        self.count = 0  # ops in the group
        self._staged: dict = {}
        self._held: list[torch.Tensor] = []
        self._live = False  # recording each op as it is built (live())
        self._internal: list = []  # results used inside the group only (_busy until it is submitted)

    def _op(self, fn: Callable[[], Any], label: str) -> None:
        """An op of the group: recorded now when live, else when the group runs (label:
        what it is, collected in _profile_labels while a profile is on)."""
        self.count += 1
        if _profile_labels is not None:
            _profile_labels.append(label)
        if self._live:
            fn()
        else:
            self.ops.append(fn)

    @contextlib.contextmanager
    def live(self) -> Any:
        """The group open while it is built: each op is recorded as it comes, and the
        engine sends the recorded ops to the GPU in chunks (the GPU starts on the first
        while the host builds the rest). Every torch operand that needs a copy must be
        staged before (stage() refuses one after): the stream signals the group once,
        here, after those copies."""
        stream = torch.cuda.current_stream(self.anchor.device)
        ordered = ordering(self.anchor) == "semaphore"
        handle, s = 0, 0
        if ordered:
            handle = stream.cuda_stream
            w, s = self.dev._async_values()
            self.dev._cuda_signal(handle, w)
            self.dev._group_begin(w, s)
        else:
            stream.synchronize()  # the copies are done before Helios reads; each op then runs alone
        self._live = True
        try:
            yield self
        finally:
            self._live = False
            try:
                if ordered:  # as _run_ordered: submitted (also after a failure) and waited for by the stream
                    self.dev._group_end()
                    self.dev._cuda_wait(handle, s)
            finally:
                self._release()
            _group_done(self.count)

    def stage(self, t: Any, dtype: Optional[str] = None) -> Any:
        """A torch tensor as a Helios operand (a Helios Tensor passes through)."""
        if isinstance(t, Tensor):
            return t
        t = t.contiguous()
        self._held.append(t)  # a contiguous copy's address stays its own until the group is submitted
        key = (t.data_ptr(), tuple(t.shape), t.dtype, dtype)
        if key not in self._staged:
            if self._live and _TORCH_TO_HELIOS.get(t.dtype) == (dtype or _DTYPES.get(t.dtype, "float32")):
                view = _handed_back(self.dev, t) or _imported(self.dev, t, cached=True)
                if view is not None:  # read in place: no copy to order
                    self._staged[key] = view
                    return view
            if self._live:
                raise RuntimeError(
                    f"helios.torch: a {tuple(t.shape)} {t.dtype} operand would be copied after its group started "
                    "recording (Helios could read it before the copy): stage it before live()"
                )
            self._staged[key] = _stage(self.dev, self.ordinal, f"s{len(self._staged)}", t, dtype)
        return self._staged[key]

    def stage_all(self, items: list) -> None:
        """Stages (tensor, dtype or None) pairs before live(), as stage() each: the
        tensors read in place looked up, the copies the others need issued in one
        torch._foreach_copy_ call (host time before the group's first op can start:
        the decoder's forward staging 0.86-1.22 ms with it, 1.00-1.80 with a copy_
        each, in two H100 calls)."""
        if self._live:
            raise RuntimeError("helios.torch: stage_all() comes before the group goes live()")
        dsts: list[torch.Tensor] = []
        srcs: list[torch.Tensor] = []
        memo = not _helios.env_flag("HELIOS_DISABLE_STAGE_MEMO")
        for t, dtype in items:
            t = t.contiguous()
            self._held.append(t)
            ptr, shape = t.data_ptr(), tuple(t.shape)
            key = (ptr, shape, t.dtype, dtype)
            if key in self._staged:
                continue
            slot = f"s{len(self._staged)}"
            mkey = (id(self.dev), id(t), dtype, slot)
            m = _stage_memo.get(mkey) if memo else None
            h = copy_to = None
            if m is not None and m[0]() is t and m[3] == ptr and m[4] == shape:
                h, copy_to = m[1](), (m[2]() if m[2] is not None else None)
                if h is None or (m[2] is not None and copy_to is None):
                    h = None  # what it named is gone: look it up again
            if h is None:
                h, copy_to = _stage_target(self.dev, self.ordinal, slot, t, dtype)
                if memo:
                    if len(_stage_memo) >= MAX_HANDED:
                        for k in [k for k, e in _stage_memo.items() if e[0]() is None]:
                            del _stage_memo[k]
                    cw = weakref.ref(copy_to) if copy_to is not None else None
                    _stage_memo[mkey] = (weakref.ref(t), weakref.ref(h), cw, ptr, shape)
            self._staged[key] = h
            if copy_to is not None:
                dsts.append(copy_to)
                srcs.append(t)
        if dsts:
            torch._foreach_copy_(dsts, srcs)

    def result(self, shape: tuple, dtype: torch.dtype, export: bool = True) -> tuple[Any, Any]:
        """A result tensor: (Helios, torch's view of it), or with export=False one the
        group's own later ops read and torch never sees (Helios, None: no DLPack export,
        which costs host time; kept out of the pool until the group is submitted)."""
        h = _result(self.dev, self.ordinal, tuple(shape), dtype)
        if not export:
            _busy.add(id(h))
            self._internal.append(h)
            return h, None
        t = _to_torch(h)
        self._held.append(t)
        return h, t

    def _release(self) -> None:
        """After submission: the group's torch views and internal results go (later
        groups are ordered after this one's work)."""
        self._held.clear()
        for h in self._internal:
            _busy.discard(id(h))
        self._internal.clear()

    def product(
        self,
        a: Any,
        b: Any,
        *,
        trans_a: bool = False,
        trans_b: bool = False,
        bias: Optional[torch.Tensor] = None,
        activation: Optional[str] = None,
        export: bool = True,
    ) -> tuple[Any, Any]:
        """op(a) @ op(b) (+ bias, activation) of 2-D operands of one 16-bit dtype (export: as result's)."""
        ha, hb = self.stage(a), self.stage(b)
        m = ha.shape[1] if trans_a else ha.shape[0]
        n = hb.shape[0] if trans_b else hb.shape[1]
        k = ha.shape[0] if trans_a else ha.shape[1]
        dt = ha.dtype.name
        out, result = self.result((m, n), _HELIOS_TO_TORCH[dt], export)
        # The engine's own entry, not Device.matmul: shapes, dtypes and layouts were
        # checked by the callers (the core checks every size against the tensors again),
        # and the generic layer's conversions cost more host time than the product.
        fields = {
            "a": ha,
            "b": hb,
            "m": m,
            "n": n,
            "k": k,
            "trans_a": trans_a,
            "trans_b": trans_b,
            "lda": ha.shape[-1],
            "ldb": hb.shape[-1],
            "in_dtype": dt,
            "out_dtype": dt,
            "out": out,
            "act": activation_code(activation),
            # the epilogue reads fp32: converted by the staging copy itself
            "bias": None if bias is None else self.stage(bias, "float32"),
            "variant": self.dev._pick(None, m, n, k, dt),
        }
        dev = self.dev

        def run() -> None:
            dev._gemm(**fields)

        tail = ("" if bias is None else " +bias") + (f" {activation}" if activation else "")
        self._op(run, f"product {m}x{n}x{k} {'T' if trans_a else 'N'}{'T' if trans_b else 'N'}{tail}")
        return out, result

    def activation(self, z: Any, name: str, out: Any, grad: Any = None) -> None:
        """y = act(z), or with grad the activation's backward at z, into a result of the group."""
        dev, hz, hg = self.dev, self.stage(z), None if grad is None else self.stage(grad)
        n, code, dt = hz.size, activation_code(name), hz.dtype.name
        self._op(lambda: dev._activation(hz, out, n, code, dt, hg), f"{name}{'' if hg is None else ' backward'} {n}")

    def layernorm(self, x: Any, gamma: Any, beta: Any, branch: Any, eps: float, dtype: torch.dtype) -> tuple:
        """LayerNorm of the fp32 stream x (rows, d) (+ a 16-bit branch first): (h, its
        torch view, the stream normalised and its torch view, stats and its torch view)."""
        hx, hg, hb = self.stage(x), self.stage(gamma, "float32"), self.stage(beta, "float32")
        rows, d = hx.size // hx.shape[-1], hx.shape[-1]
        h, h_t = self.result((rows, d), dtype)
        stats, stats_t = self.result((rows, 2), torch.float32)
        if branch is None:
            stream, stream_t = hx, x
        else:
            stream, stream_t = self.result((rows, d), torch.float32)
        hr = None if branch is None else self.stage(branch)
        dev, dt, x_out = self.dev, _TORCH_TO_HELIOS[dtype], None if hr is None else stream
        label = f"layernorm {rows}x{d}" + ("" if hr is None else " +branch")
        self._op(lambda: dev._layernorm(hx, hg, hb, h, stats, rows, d, eps, dt, hr, x_out), label)
        return h, h_t, stream, stream_t, stats, stats_t

    def layernorm_backward(
        self, grad_h: Any, x: Any, stats: Any, gamma: Any, grad_res: Any, export_gx: bool = True
    ) -> tuple:
        """(gx fp32, gx16 (grad_h's dtype), their torch views (gx's None without
        export_gx), the partial gamma/beta sums' torch view)."""
        hgh, hx, hst = self.stage(grad_h), self.stage(x), self.stage(stats)
        hg = self.stage(gamma, "float32")
        hres = None if grad_res is None else self.stage(grad_res)
        rows, d = hx.size // hx.shape[-1], hx.shape[-1]
        gx, gx_t = self.result((rows, d), torch.float32, export_gx)
        gx16, gx16_t = self.result((rows, d), _HELIOS_TO_TORCH[hgh.dtype.name])
        partial, partial_t = self.result((-(-rows // _LN_ROWS), 2, d), torch.float32)
        dev, dt = self.dev, hgh.dtype.name
        label = f"layernorm backward {rows}x{d}" + ("" if hres is None else " +stream")
        self._op(lambda: dev._layernorm_backward(hgh, hx, hst, hg, gx, gx16, partial, rows, d, dt, hres), label)
        return gx, gx_t, gx16, gx16_t, partial_t

    def attention(self, q: Any, k: Any, v: Any, out: Any, lse: Any, causal: bool, scale: Optional[float]) -> None:
        """The attention forward on (B, H, S, d) operands, writing out and the log-sum-exp."""
        dev = self.dev
        hq, hk, hv = (self.stage(x) for x in (q, k, v))
        args = _attention_args(dev, hq, hk, causal, scale, False)
        label = f"attention {'x'.join(map(str, hq.shape))}" + (" causal" if causal else "")
        self._op(lambda: dev._attention(hq, hk, hv, *args[0], **args[1], out=out, lse=lse), label)

    def attention_backward(
        self, q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, grads: list, causal: bool, scale: Optional[float]
    ) -> None:
        """dQ, dK, dV (written into grads) from the forward's operands, output and log-sum-exp."""
        dev = self.dev
        hq, hk, hv, ho, hdo, hl = (self.stage(x) for x in (q, k, v, o, do, lse))
        args = _attention_args(dev, hq, hk, causal, scale, True)
        label = f"attention backward {'x'.join(map(str, hq.shape))}" + (" causal" if causal else "")
        self._op(lambda: dev._attention_backward(hq, hk, hv, ho, hdo, hl, *grads, *args[0], **args[1]), label)

    def attention_rows(
        self, qkv: Any, out: Any, lse: Any, heads: int, bsd: tuple, causal: bool, scale: Optional[float]
    ) -> None:
        """The attention forward straight on a QKV product's rows (B*S, 3*D: each row
        Q, K, V of every head), O written as (B*S, D) rows (the heads merged, what the
        output projection reads) and the log-sum-exp (B, H, S): no layout copies."""
        dev, h = self.dev, self.stage(qkv)
        sizes, kw, label = self._rows_args(h, heads, bsd, causal, scale, False)
        self._op(lambda: dev._attention(h, h, h, *sizes, **kw, out=out, lse=lse), label)

    def attention_rows_backward(
        self,
        qkv: Any,
        o: Any,
        do: Any,
        lse: Any,
        grad_qkv: Any,
        heads: int,
        bsd: tuple,
        causal: bool,
        scale: Optional[float],
    ) -> None:
        """attention_rows' backward: dO as (B*S, D) rows, dQ, dK and dV written into
        grad_qkv's (B*S, 3*D) rows where Q, K and V lie in qkv's."""
        dev, g = self.dev, grad_qkv
        hq, ho, hdo, hl = (self.stage(x) for x in (qkv, o, do, lse))
        sizes, kw, label = self._rows_args(hq, heads, bsd, causal, scale, True)
        self._op(lambda: dev._attention_backward(hq, hq, hq, ho, hdo, hl, g, g, g, *sizes, **kw), label)

    def _rows_args(
        self, qkv: Any, heads: int, bsd: tuple, causal: bool, scale: Optional[float], backward: bool
    ) -> tuple:
        """What attention on a QKV product's rows hands the engine, either direction:
        (bh, sq, skv, d), its keywords (the device's variant, the scale resolved, the
        row layout: Q, K, V at offsets 0, D, 2D of 3D-element rows, O in D-element
        rows) and the op's label."""
        b, s, d = bsd
        hd, dt = d // heads, qkv.dtype
        kw = {
            "causal": bool(causal),
            "scale": resolve_scale(scale, hd),
            "variant": self.dev._pick_attention(None, hd, s, causal, backward, dt),
            "dtype": dt.name,
            "layout": (heads, 3 * d, d, 0, d, 2 * d),
        }
        label = f"attention{' backward' if backward else ''} {b}x{heads}x{s}x{hd} rows" + (" causal" if causal else "")
        return (b * heads, s, s, hd), kw, label

    def run(self) -> None:
        try:
            _run_ordered(self.dev, self.anchor, self.ops)
        finally:
            self._release()
        _group_done(self.count)


def _attention_args(dev: Device, q: Any, k: Any, causal: bool, scale: Optional[float], backward: bool) -> tuple:
    """The engine call's sizes and keywords for attention (either direction) on (B, H,
    S, d) Tensors the group made: the device's pick of variant, the scale resolved."""
    b, h, sq, d = (int(x) for x in q.shape)
    skv = int(k.shape[2])
    dt = q.dtype
    variant = dev._pick_attention(None, d, skv, causal, backward, dt)
    kw = {"causal": bool(causal), "scale": resolve_scale(scale, d), "variant": variant, "dtype": dt.name}
    return (b * h, sq, skv, d), kw


# What each op of every group is, in recording order, while a list (scripts that
# profile set it: Device._profile_start's timestamps come in the same order).
_profile_labels: Optional[list[str]] = None


def _group_done(ops: int) -> None:
    """Called with each group's op count once it is submitted (tests count groups here)."""


_HELIOS_TO_TORCH = {v: k for k, v in _TORCH_TO_HELIOS.items()}


def _products(*specs: tuple) -> list[torch.Tensor]:
    """Several products, each (a, b, keywords of _Group.product), on one device,
    submitted as one group (one CUDA <-> Vulkan hop pair, _run_ordered)."""
    with _lock:
        group = _Group(specs[0][0])
        results = [group.product(a, b, **kw)[1] for a, b, kw in specs]
        group.run()
        return results


def _product(a: torch.Tensor, b: torch.Tensor, **kw: Any) -> torch.Tensor:
    """op(a) @ op(b) (+ bias, activation) for 2-D float16 or bfloat16 CUDA tensors, as a torch tensor."""
    return _products((a, b, kw))[0]


def _grad_products(needs: tuple, ga: tuple, gb: tuple) -> tuple:
    """The two gradient products of a product's backward that autograd asks for
    (needs: needs_input_grad of the two operands), as one group."""
    specs = [spec for need, spec in zip(needs, (ga, gb)) if need]
    outs = iter(_products(*specs) if specs else [])
    return tuple(next(outs) if need else None for need in needs)


class _Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return _product(a, b)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        a, b = ctx.saved_tensors
        g = grads[0].contiguous()
        # g @ b^T and a^T @ g
        return _grad_products(ctx.needs_input_grad[:2], (g, b, {"trans_b": True}), (a, g, {"trans_a": True}))


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], act: Optional[str]):
        ctx.act = act
        if act is None or not any(t is not None and t.requires_grad for t in (x, w, bias)):
            ctx.save_for_backward(x, w, bias, None)
            return _product(x, w, trans_b=True, bias=bias, activation=act)  # the fused epilogue
        # Training: the pre-activation from Helios, the activation in torch, and the
        # pre-activation kept for the backward (recomputing it there would cost a
        # product and another CUDA <-> Vulkan hop pair per call).
        z = _product(x, w, trans_b=True, bias=bias)
        ctx.save_for_backward(x, w, bias, z)
        return _ACTIVATIONS[act](z.float()).to(z.dtype)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x, w, bias, z = ctx.saved_tensors
        g = grads[0].contiguous()
        if ctx.act is not None:  # the activation's derivative at the saved pre-activation
            zf = z.float().requires_grad_(True)
            with torch.enable_grad():
                y = _ACTIVATIONS[ctx.act](zf)
            (gz,) = torch.autograd.grad(y, zf, g.float())
            g = gz.to(x.dtype).contiguous()
        # g @ w and g^T @ x
        gx, gw = _grad_products(ctx.needs_input_grad[:2], (g, w, {}), (g, x, {"trans_a": True}))
        gb = g.sum(0, dtype=torch.float32).to(bias.dtype) if bias is not None and ctx.needs_input_grad[2] else None
        return gx, gw, gb, None


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: Optional[float]):
        ctx.causal, ctx.scale = causal, scale
        with _lock:
            group = _Group(q)
            out, o = group.result(tuple(q.shape), q.dtype)
            lse, lse_t = group.result(tuple(q.shape[:3]), torch.float32)  # what the backward recomputes P from
            group.attention(q, k, v, out, lse, causal, scale)
            group.run()
        # Saved as torch tensors (their exports keep the Helios memory out of the result
        # pool, and autograd's version counters catch an in-place change of o).
        ctx.save_for_backward(q, k, v, o, lse_t)
        ctx.helios = (out, lse)
        return o

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        q, k, v, _, _ = ctx.saved_tensors
        out, lse = ctx.helios
        with _lock:
            group = _Group(q)
            gs, gts = zip(*(group.result(tuple(t.shape), t.dtype) for t in (q, k, v)))
            group.attention_backward(q, k, v, out, grads[0], lse, list(gs), ctx.causal, ctx.scale)
            group.run()
        return gts[0], gts[1], gts[2], None, None


def _bias_grad(g: torch.Tensor, bias: Optional[torch.Tensor], needed: bool) -> Optional[torch.Tensor]:
    """A bias's gradient: the rows of its output's gradient summed (in torch, after the group)."""
    return g.sum(0, dtype=torch.float32).to(bias.dtype) if bias is not None and needed else None


def _mlp_forward(
    group: _Group, x: Any, w_up: Any, b_up: Any, w_down: Any, b_down: Any, act: str, training: bool, export: bool = True
):
    """The MLP's forward into the group: (y, its torch view, what the backward keeps:
    the pre-activation and the activation, torch views; z None without training)."""
    if training:  # the pre-activation kept for the backward, the activation its own op
        z, z_t = group.product(x, w_up, trans_b=True, bias=b_up)
        h, h_t = group.result(tuple(z.shape), _HELIOS_TO_TORCH[z.dtype.name])
        group.activation(z, act, out=h)
    else:  # inference: the fused epilogue
        h, h_t = group.product(x, w_up, trans_b=True, bias=b_up, activation=act)
        z_t = None
    y, y_t = group.product(h, w_down, trans_b=True, bias=b_down, export=export)  # export: y's torch view
    return y, y_t, (z_t, h_t)


def _mlp_backward(
    group: _Group, g: Any, x: Any, w_up: Any, w_down: Any, kept: tuple, act: str, need: tuple, export: bool = True
):
    """The MLP's backward into the group at the output gradient g: (gx, its torch
    view, gw_up, gw_down, gz: torch views; None where need (x, w_up, w_down) says no;
    gz is what b_up's gradient sums)."""
    z, h = kept
    gh, _ = group.product(g, w_down, export=False)  # dL/dh = g @ w_down
    gw_down = group.product(g, h, trans_a=True)[1] if need[2] else None
    gz, gz_t = group.result(tuple(gh.shape), _HELIOS_TO_TORCH[gh.dtype.name])
    group.activation(z, act, out=gz, grad=gh)
    gx, gx_t = group.product(gz, w_up, export=export) if need[0] else (None, None)  # export: gx's torch view
    gw_up = group.product(gz, x, trans_a=True)[1] if need[1] else None
    return gx, gx_t, gw_up, gw_down, gz_t


def _attention_forward(
    group: _Group,
    x: Any,
    w_qkv: Any,
    b_qkv: Any,
    w_out: Any,
    b_out: Any,
    bsd: tuple,
    heads: int,
    causal: bool,
    scale: Optional[float],
    export: bool = True,
):
    """Self-attention's forward into the group on x (B*S, D): (y (B*S, D), its torch
    view, what the backward keeps (_KEPT_ATTENTION torch views: the QKV product, the
    log-sum-exp and the merged heads)). The attention reads the heads straight out of
    the QKV product's rows and writes them merged: no layout copies."""
    b, s, d = bsd
    dt = _HELIOS_TO_TORCH[group.stage(w_qkv).dtype.name]
    qkv, qkv_t = group.product(x, w_qkv, trans_b=True, bias=b_qkv)  # kept: the backward reads it
    merged, merged_t = group.result((b * s, d), dt)
    lse, lse_t = group.result((b, heads, s), torch.float32)
    group.attention_rows(qkv, merged, lse, heads, bsd, causal, scale)
    y, y_t = group.product(merged, w_out, trans_b=True, bias=b_out, export=export)  # export: y's torch view
    return y, y_t, (qkv_t, lse_t, merged_t)


_KEPT_ATTENTION = 3  # torch views _attention_forward keeps for the backward
_KEPT_MLP = 2  # and _mlp_forward


def _attention_backward(
    group: _Group,
    g: Any,
    x: Any,
    w_qkv: Any,
    w_out: Any,
    kept: tuple,
    bsd: tuple,
    heads: int,
    causal: bool,
    scale: Optional[float],
    need: tuple,
    export: bool = True,
):
    """Self-attention's backward into the group at the output gradient g (B*S, D):
    (gx, its torch view, gw_qkv, gw_out, g_qkv: torch views; None where need (x,
    w_qkv, w_out) says no; g_qkv is what b_qkv's gradient sums). dO is read as the
    output projection's gradient rows and dQ, dK, dV written as a QKV product's
    gradient rows: no layout copies."""
    qkv, lse, merged = kept
    b, s, d = bsd
    dt = _HELIOS_TO_TORCH[group.stage(w_out).dtype.name]
    g_merged, _ = group.product(g, w_out, export=False)
    gw_out = group.product(g, merged, trans_a=True)[1] if need[2] else None
    g_qkv, g_qkv_t = group.result((b * s, 3 * d), dt)
    group.attention_rows_backward(qkv, merged, g_merged, lse, g_qkv, heads, bsd, causal, scale)
    gx, gx_t = group.product(g_qkv, w_qkv, export=export) if need[0] else (None, None)  # export: gx's torch view
    gw_qkv = group.product(g_qkv, x, trans_a=True)[1] if need[1] else None
    return gx, gx_t, gw_qkv, gw_out, g_qkv_t


class _MLP(torch.autograd.Function):
    """act(x @ w_up^T + b_up) @ w_down^T + b_down, each direction one group."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w_up: torch.Tensor, b_up: Any, w_down: torch.Tensor, b_down: Any, act: str):
        ctx.act = act
        training = any(t is not None and t.requires_grad for t in (x, w_up, b_up, w_down, b_down))
        with _lock:
            group = _Group(x)
            _, y, (z_t, h_t) = _mlp_forward(group, x, w_up, b_up, w_down, b_down, act, training)
            group.run()
        ctx.save_for_backward(x, w_up, b_up, w_down, b_down, z_t, h_t)
        return y

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x, w_up, b_up, w_down, b_down, z, h = ctx.saved_tensors
        need = ctx.needs_input_grad
        g = grads[0]
        with _lock:
            group = _Group(g)
            _, gx, gw_up, gw_down, gz = _mlp_backward(
                group, g, x, w_up, w_down, (z, h), ctx.act, (need[0], need[1], need[3])
            )
            group.run()
        return gx, gw_up, _bias_grad(gz, b_up, need[2]), gw_down, _bias_grad(g, b_down, need[4]), None


class _SelfAttention(torch.autograd.Function):
    """Multi-head self-attention on (B, S, D): the QKV product, the heads split out,
    attention, the heads merged and the output projection; each direction one group."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        w_qkv: torch.Tensor,
        b_qkv: Any,
        w_out: torch.Tensor,
        b_out: Any,
        heads: int,
        causal: bool,
        scale: Optional[float],
    ):
        b, s, d = x.shape
        x2 = x.reshape(b * s, d)
        with _lock:
            group = _Group(x)
            _, y, kept = _attention_forward(group, x2, w_qkv, b_qkv, w_out, b_out, (b, s, d), heads, causal, scale)
            group.run()
        ctx.save_for_backward(x2, w_qkv, b_qkv, w_out, b_out, *kept)
        ctx.meta = (b, s, d, heads, causal, scale)
        return y.reshape(b, s, d)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        x2, w_qkv, b_qkv, w_out, b_out, *kept = ctx.saved_tensors
        b, s, d, heads, causal, scale = ctx.meta
        need = ctx.needs_input_grad
        g = grads[0].reshape(b * s, d)
        with _lock:
            group = _Group(g)
            _, gx, gw_qkv, gw_out, g_qkv = _attention_backward(
                group, g, x2, w_qkv, w_out, tuple(kept), (b, s, d), heads, causal, scale, (need[0], need[1], need[3])
            )
            group.run()
        return (
            None if gx is None else gx.reshape(b, s, d),
            gw_qkv,
            _bias_grad(g_qkv, b_qkv, need[2]),
            gw_out,
            _bias_grad(g, b_out, need[4]),
            None,
            None,
            None,
        )


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


def _prestage(group: _Group, tensors: list, flat: Any, n_layers: int) -> None:
    """Stages a decoder's torch operands before its group goes live: the tensors as
    they are, and its parameters the way the ops read them (LayerNorm parameters and
    product biases fp32, product weights as they are)."""
    items: list[tuple[Any, Optional[str]]] = [(t, None) for t in tensors if t is not None]
    per_layer = n_layers * len(LAYER_PARAMS)
    for i, t in enumerate(flat):
        if t is None:
            continue
        if i < per_layer:
            fp32 = LAYER_PARAMS[i % len(LAYER_PARAMS)].startswith(("ln", "b_"))
        else:
            fp32 = i < per_layer + 2  # the final LayerNorm's weight and bias (then the head's weight)
        items.append((t, "float32" if fp32 else None))
    group.stage_all(items)


_no_pool: set[int] = set()  # CUDA ordinals where memory_pool() is unsupported (asked once)


def _casts_pool(t: torch.Tensor) -> Any:
    """Where a group's own casts are allocated: memory_pool() on t's GPU (Helios
    reads them in place), else the ordinary allocator (they are then copied in)."""
    ordinal = _ordinal(t)
    if ordinal not in _no_pool:
        try:
            return memory_pool(ordinal)
        except _helios.UnsupportedError:
            _no_pool.add(ordinal)
    return contextlib.nullcontext()


class _CastSlot:
    """A master weight's cast, kept across calls (in memory_pool(), so Helios reads it
    in place and its view is cached): refilled in place each forward, and lent to at
    most one forward whose backward has not run yet and whose graph lives (pending:
    that forward's lending number; 0 free)."""

    __slots__ = ("master", "buf", "pending")

    def __init__(self, master: torch.Tensor, buf: torch.Tensor) -> None:
        self.master = weakref.ref(master)
        self.buf = buf
        self.pending = 0


# id(master weight) -> its _CastSlot. A training step's casts were 65 .to() calls
# before the group could start (~1.2 ms of host time on the H100); refilling kept
# buffers is one torch._foreach_copy_ call. HELIOS_DISABLE_CAST_CACHE=1: a .to() each.
_cast_slots: dict[int, _CastSlot] = {}
_lendings = itertools.count(1)  # each training forward's number on the slots it holds


def _cast_slot(master: torch.Tensor, dtype: torch.dtype, anchor: torch.Tensor) -> Optional[_CastSlot]:
    """master's slot, made on first use; None where it is lent to a forward whose
    backward has not run (a second forward first: that one casts afresh, so the
    first's saved cast is never overwritten)."""
    slot = _cast_slots.get(id(master))
    if slot is not None and (slot.master() is not master or slot.buf.dtype != dtype or slot.buf.shape != master.shape):
        slot = None  # a new tensor at a freed one's id, or another dtype
    if slot is None:
        if len(_cast_slots) >= MAX_HANDED:
            for k in [k for k, sl in _cast_slots.items() if sl.master() is None]:
                del _cast_slots[k]
        with _casts_pool(anchor):
            buf = torch.empty(master.shape, dtype=dtype, device=master.device)
        slot = _cast_slots[id(master)] = _CastSlot(master, buf)
    return None if slot.pending else slot


def _cast_products(
    flat: tuple, n_layers: int, has_head: bool, dtype: torch.dtype, anchor: torch.Tensor, lend: int
) -> tuple[tuple, list]:
    """flat with every product weight and bias not already in dtype cast to it (a
    decoder given fp32 master weights: the casts are made here, inside the
    autograd function, so they cost no autograd work of their own), and the cast
    slots used. lend: nonzero where the casts are saved for a backward, the number
    the slots stay pending with until _release_casts(slots, lend)."""
    idx = [
        i * len(LAYER_PARAMS) + j
        for i in range(n_layers)
        for j, name in enumerate(LAYER_PARAMS)
        if not name.startswith("ln")
    ] + ([n_layers * len(LAYER_PARAMS) + 2] if has_head else [])
    todo = [i for i in idx if flat[i] is not None and flat[i].dtype != dtype]
    if not todo:
        return flat, []
    out = list(flat)
    slots: list[_CastSlot] = []
    fresh = todo
    if not _helios.env_flag("HELIOS_DISABLE_CAST_CACHE"):
        fresh, dsts, srcs = [], [], []
        for i in todo:
            slot = _cast_slot(flat[i], dtype, anchor)
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
        with _casts_pool(anchor):
            for i in fresh:
                out[i] = flat[i].to(dtype)
    return tuple(out), slots


def _release_casts(slots: list, lend: int) -> None:
    """Forward `lend`'s backward has read its casts, or its graph was freed: the
    slots it still holds may be refilled (one lent again since is left alone)."""
    for slot in slots:
        if slot.pending == lend:
            slot.pending = 0


class _Decoder(torch.autograd.Function):
    """A pre-LayerNorm decoder stack (and its final LayerNorm and head), each
    direction one group: see ``decoder``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cfg: tuple, *flat: Any):
        n_layers, heads, causal, eps, act, has_head, dtype, compute_dtype = cfg
        b, s, d = x.shape
        bsd = (b, s, d)
        training = any(t is not None and t.requires_grad for t in (x, *flat))  # before the casts (which do not)
        ctx.flat_dtypes = [None if t is None else t.dtype for t in flat]
        ctx.cast_slots, ctx.cast_lend = [], next(_lendings) if training else 0
        if compute_dtype is not None:
            flat, ctx.cast_slots = _cast_products(flat, n_layers, has_head, dtype, x, lend=ctx.cast_lend)
            if ctx.cast_lend and ctx.cast_slots:  # a graph freed without its backward gives them back too
                weakref.finalize(ctx, _release_casts, ctx.cast_slots, ctx.cast_lend)
        layers = [flat[i * 12 : (i + 1) * 12] for i in range(n_layers)]
        lnf_w, lnf_b = flat[n_layers * 12], flat[n_layers * 12 + 1]
        w_head = flat[n_layers * 12 + 2] if has_head else None
        saved: list = []
        with _lock:
            group = _Group(x)
            stream: Any = x.reshape(b * s, d)
            _prestage(group, [stream], flat, n_layers)
            with group.live():  # built and recorded op by op: the GPU starts on the first layers at once
                branch = None
                for ln1_w, ln1_b, w_qkv, b_qkv, w_out, b_out, ln2_w, ln2_b, w_up, b_up, w_down, b_down in layers:
                    h1, h1_t, stream, stream_t, st1, st1_t = group.layernorm(stream, ln1_w, ln1_b, branch, eps, dtype)
                    a, _, kept_a = _attention_forward(
                        group, h1, w_qkv, b_qkv, w_out, b_out, bsd, heads, causal, None, export=False
                    )
                    h2, h2_t, mid, mid_t, st2, st2_t = group.layernorm(stream, ln2_w, ln2_b, a, eps, dtype)
                    branch, _, kept_m = _mlp_forward(group, h2, w_up, b_up, w_down, b_down, act, training, export=False)
                    saved += [stream_t, st1_t, h1_t, *kept_a, mid_t, st2_t, h2_t, *kept_m]
                    stream = mid
                hf, hf_t, stream, stream_t, stf, stf_t = group.layernorm(stream, lnf_w, lnf_b, branch, eps, dtype)
                saved += [stream_t, stf_t, hf_t]
                out_t = group.product(hf, w_head, trans_b=True)[1] if w_head is not None else hf_t
        ctx.cfg, ctx.bsd = cfg, bsd
        ctx.save_for_backward(*flat, *saved)
        return out_t.reshape(b, s, -1)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        n_layers, heads, causal, eps, act, has_head, dtype, _ = ctx.cfg
        b, s, d = ctx.bsd
        n_flat = n_layers * 12 + 2 + int(has_head)
        every = ctx.saved_tensors
        _release_casts(
            ctx.cast_slots, ctx.cast_lend
        )  # read (the version check above) and held by `every` until this returns
        flat, saved = every[:n_flat], list(every[n_flat:])
        layers = [flat[i * 12 : (i + 1) * 12] for i in range(n_layers)]
        lnf_w = flat[n_layers * 12]
        w_head = flat[n_layers * 12 + 2] if has_head else None
        per_layer = (len(saved) - 3) // n_layers if n_layers else 0
        stream_f, stf, hf = saved[-3:]
        g_out = grads[0].reshape(b * s, -1)
        gflat: list = [None] * n_flat
        sums: list = []  # (index in flat, torch tensor whose rows sum to its gradient, or partials)
        with _lock:
            group = _Group(g_out)
            _prestage(group, [g_out, *saved], flat, n_layers)
            with group.live():
                if w_head is not None:
                    g_hf, _ = group.product(g_out, w_head, export=False)
                    gflat[n_layers * 12 + 2] = group.product(g_out, hf, trans_a=True)[1]
                else:
                    g_hf = g_out
                g_stream, g_stream_t, g_branch, g_branch_t, pf = group.layernorm_backward(
                    g_hf, stream_f, stf, lnf_w, None, export_gx=n_layers == 0
                )
                sums.append((n_layers * 12, pf))
                for li in reversed(range(n_layers)):
                    ln1_w, _, w_qkv, _, w_out, _, ln2_w, _, w_up, _, w_down, _ = layers[li]
                    rec = saved[li * per_layer : (li + 1) * per_layer]
                    stream_in, st1, h1 = rec[0:3]
                    ka = 3 + _KEPT_ATTENTION
                    kept_a = tuple(rec[3:ka])
                    mid, st2, h2 = rec[ka : ka + 3]
                    kept_m = tuple(rec[ka + 3 : ka + 3 + _KEPT_MLP])
                    base = li * 12
                    gh2, _, gw_up, gw_down, gz = _mlp_backward(
                        group, g_branch, h2, w_up, w_down, kept_m, act, (True,) * 3, export=False
                    )
                    gflat[base + 8], gflat[base + 10] = gw_up, gw_down
                    sums += [(base + 9, gz), (base + 11, g_branch_t)]
                    g_mid, _, g_a, g_a_t, p2 = group.layernorm_backward(gh2, mid, st2, ln2_w, g_stream, export_gx=False)
                    sums.append((base + 6, p2))
                    gh1, _, gw_qkv, gw_out, g_qkv = _attention_backward(
                        group, g_a, h1, w_qkv, w_out, kept_a, (b, s, d), heads, causal, None, (True,) * 3, export=False
                    )
                    gflat[base + 2], gflat[base + 4] = gw_qkv, gw_out
                    sums += [(base + 3, g_qkv), (base + 5, g_a_t)]
                    g_stream, g_stream_t, g_branch, g_branch_t, p1 = group.layernorm_backward(
                        gh1,
                        stream_in,
                        st1,
                        ln1_w,
                        g_mid,
                        export_gx=li == 0,  # layer 0's: the input's gradient
                    )
                    sums.append((base, p1))
        g_x = g_stream_t
        for index, t in sums:  # bias and LayerNorm gradients: row sums, in torch after the group
            ref = flat[index]
            if t.dim() == 3:  # LayerNorm partials: (groups, 2, d) -> gamma's and beta's gradients
                both = t.sum(0)
                gflat[index], gflat[index + 1] = both[0].to(ref.dtype), both[1].to(flat[index + 1].dtype)
            elif ref is not None:
                gflat[index] = t.sum(0, dtype=torch.float32).to(ref.dtype)  # fp32 sums, no fp32 copy
        needs = ctx.needs_input_grad
        gflat = [gv if needs[2 + i] else None for i, gv in enumerate(gflat)]
        # fp32 master weights (cast in forward): their gradients back in fp32, in one call
        widen = [i for i, gv in enumerate(gflat) if gv is not None and gv.dtype != ctx.flat_dtypes[i]]
        if widen:
            wide = [torch.empty(gflat[i].shape, dtype=ctx.flat_dtypes[i], device=gflat[i].device) for i in widen]
            torch._foreach_copy_(wide, [gflat[i] for i in widen])
            for i, gv in zip(widen, wide):
                gflat[i] = gv
        return (g_x.reshape(b, s, d) if needs[0] else None, None, *gflat)


@torch.compiler.disable
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D float16 or bfloat16 CUDA tensors (fp32 accumulation, rounded
    once to the inputs' type), differentiable: both gradients are Helios products."""
    _check("a", a, (2,))
    _check("b", b, (2,))
    _same_dtype("matmul", ("a", a), ("b", b))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"helios.torch.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not chain")
    return _Matmul.apply(a, b)


@torch.compiler.disable
def linear(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, activation: Optional[str] = None
) -> torch.Tensor:
    """activation(x @ weight.T + bias) as torch.nn.functional.linear (weight is
    out_features x in_features; x is (..., in_features)), with the bias and the
    activation fused into the product's epilogue. activation: None, "relu",
    "gelu_tanh" or "silu". Differentiable: x and weight gradients are Helios
    products, submitted together. Where a gradient is wanted and there is an
    activation, Helios gives the pre-activation (bias fused), torch applies the
    activation in fp32 and the pre-activation is kept for the backward (its
    derivative is taken there, with no product recomputed)."""
    _check("x", x)
    _check("weight", weight, (2,))
    _same_dtype("linear", ("x", x), ("weight", weight))
    if activation not in _ACTIVATIONS:
        raise ValueError(f"helios.torch.linear: activation must be one of {list(_ACTIVATIONS)}, got {activation!r}")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.shape != (weight.shape[0],) or not bias.is_cuda:
            raise ValueError(f"helios.torch.linear: bias must be a CUDA tensor of shape ({weight.shape[0]},)")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"helios.torch.linear: x's last dimension {x.shape[-1]} is not weight's in_features {weight.shape[1]}"
        )
    lead = x.shape[:-1]
    y = _Linear.apply(x.reshape(-1, x.shape[-1]), weight, bias, activation)
    return y.reshape(*lead, weight.shape[0])


@torch.compiler.disable
def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: Optional[float] = None
) -> torch.Tensor:
    """softmax(scale * q k^T [+ causal mask]) v for (B, H, S, d) float16 or bfloat16
    CUDA tensors, as torch's scaled_dot_product_attention (is_causal=causal).
    Differentiable: the backward is Helios's (``Device.attention_backward``: dQ, dK
    and dV from the saved output and log-sum-exp, no recomputed forward)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check(name, t, (4,))
    _same_dtype("attention", ("q", q), ("k", k), ("v", v))
    return _Attention.apply(q, k, v, bool(causal), scale)


def _linear_operands(op: str, x: torch.Tensor, pairs: tuple) -> None:
    """Weights (out, in) and optional biases (out,) of one 16-bit dtype with x, chaining."""
    for wname, w, bname, bias, width in pairs:
        _check(wname, w, (2,))
        _same_dtype(op, ("x", x), (wname, w))
        if w.shape[1] != width:
            raise ValueError(f"helios.torch.{op}: {wname} is {tuple(w.shape)}; its in_features must be {width}")
        if bias is not None:
            _check(bname, bias, (1,), _TORCH_TO_HELIOS)
            if bias.shape != (w.shape[0],):
                raise ValueError(f"helios.torch.{op}: {bname} must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


@torch.compiler.disable
def mlp(
    x: torch.Tensor,
    w_up: torch.Tensor,
    b_up: Optional[torch.Tensor],
    w_down: torch.Tensor,
    b_down: Optional[torch.Tensor],
    activation: str = "gelu_tanh",
) -> torch.Tensor:
    """A transformer MLP, act(x @ w_up.T + b_up) @ w_down.T + b_down (weights as
    torch.nn.Linear stores them, (out, in); x is (..., in)), with each direction one
    group of Helios submissions: one CUDA <-> Vulkan hop pair for the forward (two
    products and, when a gradient is wanted, the activation as its own op on the kept
    pre-activation; without one, the activation fused in the first product's
    epilogue) and one for the backward (four products and the activation's backward;
    the bias gradients are summed by torch after). activation: "relu", "gelu_tanh"
    or "silu". Calling ``linear`` twice costs two hop pairs each way and a torch
    activation between."""
    _check("x", x)
    if activation not in _ACTIVATIONS or activation is None:
        raise ValueError(
            f"helios.torch.mlp: activation must be one of {[a for a in _ACTIVATIONS if a]}, got {activation!r}"
        )
    _linear_operands("mlp", x, (("w_up", w_up, "b_up", b_up, x.shape[-1]),))
    _linear_operands("mlp", x, (("w_down", w_down, "b_down", b_down, w_up.shape[0]),))
    lead = x.shape[:-1]
    y = _MLP.apply(x.reshape(-1, x.shape[-1]), w_up, b_up, w_down, b_down, activation)
    return y.reshape(*lead, w_down.shape[0])


@torch.compiler.disable
def self_attention(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    b_qkv: Optional[torch.Tensor],
    w_out: torch.Tensor,
    b_out: Optional[torch.Tensor],
    heads: int,
    causal: bool = True,
    scale: Optional[float] = None,
) -> torch.Tensor:
    """Multi-head self-attention on x (B, S, D): qkv = x @ w_qkv.T + b_qkv (w_qkv
    (3D, D), q, k and v in that order, each split into `heads` heads of D/heads),
    softmax(scale q k^T [+ causal mask]) v per head, the heads merged back to
    (B, S, D) and projected by w_out (D, D) and b_out, as the usual
    ``qkv.reshape(B, S, 3, H, hd).permute(2, 0, 3, 1, 4)`` / ``transpose(1, 2).reshape``
    composition. Each direction is one group of Helios submissions (one CUDA <->
    Vulkan hop pair): the products and the attention kernels, which read the heads
    straight out of the QKV product's rows and write them merged (backward: Helios's
    attention backward, dQ, dK, dV into the QKV gradient's rows); bias gradients are
    summed by torch after. scale: default 1/sqrt(D/heads)."""
    _check("x", x, (3,))
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or x.shape[-1] % heads:
        raise ValueError(
            f"helios.torch.self_attention: heads must be a positive int dividing D={x.shape[-1]}, got {heads!r}"
        )
    d = x.shape[-1]
    _linear_operands("self_attention", x, (("w_qkv", w_qkv, "b_qkv", b_qkv, d), ("w_out", w_out, "b_out", b_out, d)))
    if w_qkv.shape[0] != 3 * d or w_out.shape[0] != d:
        raise ValueError(
            f"helios.torch.self_attention: w_qkv must be ({3 * d}, {d}) and w_out ({d}, {d}), got "
            f"{tuple(w_qkv.shape)} and {tuple(w_out.shape)}"
        )
    return _SelfAttention.apply(x, w_qkv, b_qkv, w_out, b_out, heads, bool(causal), scale)


@torch.compiler.disable
def decoder(
    x: torch.Tensor,
    layers: Any,
    heads: int,
    final_norm: tuple,
    head_weight: Optional[torch.Tensor] = None,
    *,
    causal: bool = True,
    eps: float = 1e-5,
    activation: str = "gelu_tanh",
    compute_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """A pre-LayerNorm transformer decoder stack on the fp32 residual stream x (B, S,
    D), each direction one group of Helios submissions (one CUDA <-> Vulkan hop pair
    for the whole forward and one for the whole backward). Per layer:
    ``x = x + self_attention(LN1(x)); x = x + mlp(LN2(x))`` (as ``self_attention``
    and ``mlp``), then the final LayerNorm and, with head_weight (V, D), the logits
    ``LN_f(x) @ head_weight.T`` (B, S, V); without it LN_f(x) (B, S, D). layers: one
    sequence per layer of the 12 tensors named in ``LAYER_PARAMS`` (LayerNorm
    weights and biases fp32 (D,); product weights (out, in) in the 16-bit compute
    type; product biases (out,) or None); final_norm: (weight, bias), fp32. The
    residual stream and the LayerNorm statistics stay fp32 on the device (the
    residual adds are fused into the next LayerNorm); products, attention and the
    activation run in the weights' type (float16 or bfloat16) with fp32
    accumulation. Differentiable in every input: LayerNorm and bias gradients are
    summed by torch from the group's per-block partial sums after it.
    compute_dtype (torch.float16 or torch.bfloat16): the product weights, biases
    and head weight may then also be fp32 master weights; the decoder casts them
    to it each call (inside its autograd function, into memory_pool() where the GPU
    has it) and returns their gradients in fp32: what a mixed-precision training
    step needs, without a cast op per weight in the caller's autograd graph."""
    _check("x", x, (3,), {torch.float32: "float32"})
    if compute_dtype is not None and compute_dtype not in _DTYPES:
        raise TypeError(
            f"helios.torch.decoder: compute_dtype must be torch.float16 or torch.bfloat16, got {compute_dtype}"
        )
    layers = [tuple(layer) for layer in layers]
    if any(len(layer) != len(LAYER_PARAMS) for layer in layers):
        raise ValueError(f"helios.torch.decoder: each layer is {len(LAYER_PARAMS)} tensors, {LAYER_PARAMS}")
    d = x.shape[-1]
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or d % heads:
        raise ValueError(f"helios.torch.decoder: heads must be a positive int dividing D={d}, got {heads!r}")
    if activation not in _ACTIVATIONS or activation is None:
        raise ValueError(f"helios.torch.decoder: activation must be one of {[a for a in _ACTIVATIONS if a]}")
    fp32 = {torch.float32: "float32"}
    dtype = compute_dtype or (
        layers[0][2].dtype if layers else (head_weight.dtype if head_weight is not None else torch.bfloat16)
    )
    if dtype not in _DTYPES:
        raise TypeError(
            f"helios.torch.decoder: the product weights are {dtype}: pass float16 or bfloat16 weights "
            "(fp32 master weights need compute_dtype=torch.bfloat16 or torch.float16)"
        )
    # the types a product weight may have: the compute type, and fp32 masters with compute_dtype
    weight_types = {dtype: _TORCH_TO_HELIOS[dtype], **({torch.float32: "float32"} if compute_dtype else {})}
    for i, layer in enumerate(layers):
        named = dict(zip(LAYER_PARAMS, layer))
        for nm in ("ln1_w", "ln1_b", "ln2_w", "ln2_b"):
            _check(f"layers[{i}].{nm}", named[nm], (1,), fp32)
            if named[nm].shape != (d,):
                raise ValueError(f"helios.torch.decoder: layers[{i}].{nm} must be ({d},), got {tuple(named[nm].shape)}")
        hidden = named["w_up"].shape[0] if isinstance(named["w_up"], torch.Tensor) else 0
        for wn, bn, rows, cols in (
            ("w_qkv", "b_qkv", 3 * d, d),
            ("w_out", "b_out", d, d),
            ("w_up", "b_up", hidden, d),
            ("w_down", "b_down", d, hidden),
        ):
            _check(f"layers[{i}].{wn}", named[wn], (2,), {**_DTYPES, **weight_types})
            if named[wn].dtype not in weight_types:
                raise TypeError(
                    f"helios.torch.decoder: layers[{i}].{wn} is {named[wn].dtype}; the weights share {dtype}"
                    + ("" if compute_dtype else " (fp32 master weights need compute_dtype)")
                )
            if tuple(named[wn].shape) != (rows, cols):
                raise ValueError(
                    f"helios.torch.decoder: layers[{i}].{wn} must be ({rows}, {cols}), got {tuple(named[wn].shape)}"
                )
            bias = named[bn]
            if bias is not None:
                _check(f"layers[{i}].{bn}", bias, (1,), _TORCH_TO_HELIOS)
                if bias.shape != (rows,):
                    raise ValueError(
                        f"helios.torch.decoder: layers[{i}].{bn} must be ({rows},), got {tuple(bias.shape)}"
                    )
    if len(final_norm) != 2:
        raise ValueError("helios.torch.decoder: final_norm is (weight, bias)")
    for nm, t in zip(("final_norm weight", "final_norm bias"), final_norm):
        _check(nm, t, (1,), fp32)
        if t.shape != (d,):
            raise ValueError(f"helios.torch.decoder: {nm} must be ({d},), got {tuple(t.shape)}")
    if head_weight is not None:
        _check("head_weight", head_weight, (2,), {**_DTYPES, **weight_types})
        if head_weight.dtype not in weight_types or head_weight.shape[1] != d:
            raise ValueError(
                f"helios.torch.decoder: head_weight must be (V, {d}) {dtype}, got {tuple(head_weight.shape)} {head_weight.dtype}"
            )
    flat = (
        [t for layer in layers for t in layer] + list(final_norm) + ([head_weight] if head_weight is not None else [])
    )
    cfg = (len(layers), heads, bool(causal), float(eps), activation, head_weight is not None, dtype, compute_dtype)
    return _Decoder.apply(x.contiguous(), cfg, *flat)


# Unannotated on purpose: DistributedDataParallel.register_comm_hook compares the
# hook's annotations with its own classes, and this module's are strings (PEP 563).
def ddp_comm_hook(state, bucket):
    """A DistributedDataParallel communication hook for models with Helios ops:
    ``ddp.register_comm_hook(None, helios.torch.ddp_comm_hook)`` (state: the process
    group, None for the default one). Each bucket's gradients are averaged over the
    group, as DDP's default hook does, by an all-reduce that torch's current stream
    waits for (the host does not), so that no collective runs on the GPU beside
    Helios's work: Helios's next group waits on torch's stream, hence on the
    all-reduce. Overlap of communication with Helios's own compute is given up; the
    CUDA and Vulkan contexts would time-slice it away anyway."""
    import torch.distributed as dist

    group = state if state is not None else dist.group.WORLD
    buf = bucket.buffer()
    buf.div_(dist.get_world_size(group))
    dist.all_reduce(buf, group=group)  # not async_op: the current stream waits for NCCL's
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(buf)
    return done

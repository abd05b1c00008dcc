"""What ``helios.torch`` keeps for the process (one ``Runtime``), the device of a
CUDA tensor, how its ops are ordered with torch's stream, and the operand checks
every op shares."""

from __future__ import annotations

import collections
import contextlib
import itertools
import threading
import warnings
from typing import Any, Callable, Iterator, Optional

import torch
import torch.nn.functional as F

from .. import _helios, engine
from ..device import Device

# Results kept per shape for reuse once torch frees them. A training step keeps one
# activation of a shape per layer and more (a block's q, k, v and output: 4 per
# layer; a whole decoder as one group holds five (B*S, D) activations per layer at
# once), and a result the pool cannot hand back is a new exportable allocation and
# CUDA import: with 8 per shape the suite's grouped step took 112-125 ms, with 64
# 68-70 ms.
MAX_POOLED = 256
MAX_HANDED = 4096  # entries of the handed-back, stage-memo and cast-slot maps before a sweep of dead ones
MAX_VIEWS = 256  # operand views kept per imported segment (ops reuse them call after call)


GROUPS_KEPT = 256  # Runtime.groups: the op counts of the last this many groups


class Runtime:
    """Every piece of state ``helios.torch`` keeps across calls, in one place (one
    instance, ``RUNTIME``). Ops take ``lock`` for their whole group: the staging
    tensors and pools are shared."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.devices: dict[int, Device] = {}  # CUDA ordinal -> the Helios Device with its UUID
        # CUDA ordinal -> why ops on it synchronize the host (no shared semaphore); "" where they do not
        self.host_sync: dict[int, str] = {}
        self.pools: dict[int, Any] = {}  # CUDA ordinal -> the torch.cuda.MemPool over Helios's CUDA pool
        self.no_pool: set[int] = set()  # CUDA ordinals where memory_pool() is unsupported (asked once)
        # (id(device), segment) -> (segment base, size, the Helios Tensor over it, its cached views)
        self.imports: dict[tuple, tuple] = {}
        self.staging: dict[tuple, tuple] = {}  # (ordinal, slot, shape, dtype) -> (Helios tensor, torch view)
        self.results: dict[tuple, list] = {}  # (ordinal, shape, dtype) -> Helios results handed out before
        self.pool_next: dict[tuple, int] = {}  # where the next scan of a result pool starts
        # ids of pooled results a group uses inside itself only (never exported to torch, so no
        # export count keeps them out of the pool): not handed out again until it is submitted
        self.busy: set[int] = set()
        # (device id, CUDA address) -> weakref to the Helios result torch sees there: a later
        # op reads it in place instead of copying it (activations and gradients that go from
        # one Helios op to the next)
        self.handed: dict[tuple, Any] = {}
        # (device id, id(torch tensor), requested dtype, slot) -> (weakrefs to the tensor, to the
        # Helios tensor stage_all gave for it and to the torch view copied into, or None; the
        # tensor's address and shape then): the same object over the same memory gets the same
        # answer (the decoder's cast weights and LayerNorm parameters, every step) without the
        # lookups (~8 us a tensor, ~1.1 ms before the forward's first op could start).
        # Weak: an entry keeps nothing alive. HELIOS_DISABLE_STAGE_MEMO=1: looked up each time.
        self.stage_memo: dict[tuple, tuple] = {}
        # id(master weight) -> its cast slot (helios.torch._casts). A training step's casts were
        # 65 .to() calls before the group could start (~1.2 ms of host time on the H100);
        # refilling kept buffers is one torch._foreach_copy_ call. HELIOS_DISABLE_CAST_CACHE=1:
        # a .to() each.
        self.cast_slots: dict[int, Any] = {}
        self.lendings = itertools.count(1)  # each training forward's number on the cast slots it holds
        # What each op of every group is, in recording order, while a list (a profile sets
        # it: Device._profile_start's timestamps come in the same order).
        self.profile_labels: Optional[list[str]] = None
        # The op count of each group submitted, the last GROUPS_KEPT (how many CUDA <->
        # Vulkan hop pairs a model's step paid, and what each held).
        self.groups: collections.deque[int] = collections.deque(maxlen=GROUPS_KEPT)


RUNTIME = Runtime()

ACTIVATIONS: dict[Optional[str], Callable[[torch.Tensor], torch.Tensor]] = {
    None: lambda z: z,
    "relu": F.relu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "silu": F.silu,
}

# torch dtype -> Helios's name: what Tensors hold, and what ops compute in.
TORCH_TO_HELIOS = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
HELIOS_TO_TORCH = {v: k for k, v in TORCH_TO_HELIOS.items()}
DTYPES = {k: v for k, v in TORCH_TO_HELIOS.items() if k is not torch.float32}  # what ops compute in


def cuda_ordinal(t: torch.Tensor) -> int:
    """The CUDA device of a CUDA tensor; TypeError for anything else (a CPU tensor would
    otherwise map to the current CUDA device)."""
    if not isinstance(t, torch.Tensor) or not t.is_cuda:
        where = f"one on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"helios.torch: t must be a CUDA tensor, got {where}")
    return t.device.index if t.device.index is not None else torch.cuda.current_device()


def device_for(t: torch.Tensor) -> Device:
    """The Helios Device that runs this CUDA tensor's ops: the Vulkan device with
    the UUID of the tensor's CUDA device (opened once, kept for the process)."""
    ordinal = cuda_ordinal(t)
    dev = RUNTIME.devices.get(ordinal)
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
        RUNTIME.devices[ordinal] = dev
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
    ordinal = cuda_ordinal(t)  # TypeError for a CPU tensor, as every helios.torch function
    dev = device_for(t)
    if _helios.env_flag("HELIOS_DISABLE_SEMAPHORE_ORDERING"):
        # the kill switch: the host waits for torch's stream before each group, and for
        # Helios before handing its results back (no CUDA work can run beside Helios's)
        return "host sync: HELIOS_DISABLE_SEMAPHORE_ORDERING=1"
    if ordinal not in RUNTIME.host_sync:
        try:
            engine.probe_stream_order(dev, torch.cuda.current_stream(t.device).cuda_stream)
        except BufferError as e:
            RUNTIME.host_sync[ordinal] = str(e)
        else:
            RUNTIME.host_sync[ordinal] = ""
    why = RUNTIME.host_sync[ordinal]
    return "semaphore" if not why else f"host sync: {why}"


@contextlib.contextmanager
def ordered(dev: Device, t: torch.Tensor) -> Iterator[None]:
    """The Helios work done inside runs after the work queued on t's current torch
    stream, and that stream waits for it: through the shared semaphore, else a host
    wait before. Inside, Helios's ops are one submission and one pair of CUDA <->
    Vulkan hops: the stream signals once, the ops are recorded into one group
    (each after the one before: helios.engine.group_on_stream) that waits for that signal,
    and the stream waits for the group's. Each hop pair costs a switch of the GPU
    between the CUDA and the Vulkan context, about 0.2-0.5 ms on the H100:
    grouping the ops that need no torch work between them saves it."""
    stream = torch.cuda.current_stream(t.device)
    if ordering(t) != "semaphore":
        stream.synchronize()  # the copies are done before Helios reads; each op then runs alone
        yield
        return
    with engine.group_on_stream(dev, stream.cuda_stream):  # after the inputs are staged
        yield


def same_dtype(op: str, *named: tuple) -> None:
    """One 16-bit type per op: Helios does not mix float16 and bfloat16."""
    kinds = {t.dtype for _, t in named}
    if len(kinds) > 1:
        desc = ", ".join(f"{n} {t.dtype}" for n, t in named)
        raise TypeError(f"helios.torch.{op}: inputs must share one dtype (float16 or bfloat16), got {desc}")


def check(name: str, t: Any, ndim: Optional[tuple] = None, dtypes: Optional[dict] = None, cuda: bool = True) -> None:
    """A torch CUDA tensor of one of `dtypes` (default: the ops' 16-bit types); cuda
    False: any device (a custom op's fake implementation, traced on meta tensors)."""
    dtypes = DTYPES if dtypes is None else dtypes
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"helios.torch: {name} must be a torch.Tensor, not {type(t).__name__}")
    if cuda and not t.is_cuda:
        raise TypeError(f"helios.torch: {name} must be a CUDA tensor, got one on {t.device}")
    if t.dtype not in dtypes:
        names = " or ".join(dtypes.values())
        raise TypeError(f"helios.torch: {name} is {t.dtype}; Helios takes {names} CUDA tensors")
    if ndim is not None and t.dim() not in ndim:
        raise ValueError(f"helios.torch: {name} must have {' or '.join(map(str, ndim))} dimensions, got {t.dim()}")

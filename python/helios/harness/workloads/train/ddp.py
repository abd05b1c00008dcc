"""Many GPUs: the process group under a launcher, DistributedDataParallel with
the adapter's communication hook, and the one-all-reduce gradient average."""

from __future__ import annotations

from typing import Any, Optional

from ....launcher import launcher_info
from .config import HELIOS_ADAPTERS, TrainConfig


def distributed_rank() -> Optional[tuple[int, int, int]]:
    """(rank, world size, local rank) under a launcher with more than one process, the
    NCCL process group initialised and this rank's CUDA device set; None otherwise."""
    info = launcher_info()
    if info is None or (info.get("world_size") or 1) <= 1:
        return None
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        raise RuntimeError("helios suite train under a launcher runs DistributedDataParallel over NCCL: it needs CUDA")
    torch.cuda.set_device(info["local_rank"])
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", info["local_rank"]))
    return dist.get_rank(), dist.get_world_size(), info["local_rank"]


def comm_hook_for(cfg: TrainConfig, adapter: str) -> str:
    """The DDP communication hook an adapter trains with: "torch", "helios" or "none"."""
    if cfg.ddp_comm_hook != "auto":
        return cfg.ddp_comm_hook
    return "helios" if adapter in HELIOS_ADAPTERS else "torch"


def wrap_ddp(torch: Any, model: Any, cfg: TrainConfig, device_ids: Optional[list], adapter: str) -> Any:
    """The model in DistributedDataParallel with cfg's bucket size and the adapter's
    communication hook (comm_hook_for): torch's default, helios.torch.ddp_comm_hook, or
    one that hands each bucket back as it is (no collective is launched)."""
    from torch.nn.parallel import DistributedDataParallel

    kw: dict[str, Any] = {} if cfg.ddp_bucket_mb is None else {"bucket_cap_mb": cfg.ddp_bucket_mb}
    wrapped = DistributedDataParallel(model, device_ids=device_ids, **kw)
    hook = comm_hook_for(cfg, adapter)
    if hook == "helios":
        from ....torch import ddp_comm_hook

        wrapped.register_comm_hook(None, ddp_comm_hook)
    elif hook == "none":
        wrapped.register_comm_hook(None, keep_bucket)
    return wrapped


# Unannotated: register_comm_hook compares annotations with its own classes (PEP 563
# makes these strings).
def keep_bucket(state, bucket):
    import torch

    fut: Any = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def average_grads(torch: Any, model: Any, world: int) -> None:
    """Every gradient averaged over the ranks with one all-reduce of them all, flattened."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    torch.distributed.all_reduce(flat)
    flat.div_(world)
    torch._foreach_copy_(grads, [f.view_as(g) for f, g in zip(flat.split([g.numel() for g in grads]), grads)])

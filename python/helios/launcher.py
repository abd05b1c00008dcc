"""Ranks from the launchers people already run (Slurm, torchrun, mpirun): which
GPU a process measures, and how its result is named.

Under `srun --ntasks-per-node=G --gpus-per-task=1`, `torchrun` or `mpirun`, a
process with no HELIOS_DEVICE takes its Vulkan device from the launcher: the
GPU that CUDA_VISIBLE_DEVICES leaves it (matched by UUID: Vulkan ignores that
variable and orders GPUs its own way), else the local rank's hardware GPU. On a
CPU-only Vulkan device (lavapipe) every rank shares that device.
"""

from __future__ import annotations

import os
import platform
import re
from typing import Optional, Sequence

from . import _helios

LOCAL_RANK_VARS = ("SLURM_LOCALID", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
RANK_VARS = ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK")
WORLD_VARS = ("SLURM_NTASKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")


def _first_int(names: Sequence[str]) -> tuple[Optional[int], Optional[str]]:
    for n in names:
        v = os.environ.get(n, "").strip()
        if v:
            try:
                return int(v), n
            except ValueError:
                raise ValueError(f"{n}={v!r} is not an integer") from None
    return None, None


def launcher_info() -> Optional[dict]:
    """{source, local_rank, rank, world_size} when a launcher started this process."""
    local, src = _first_int(LOCAL_RANK_VARS)
    if local is None:
        return None
    rank, _ = _first_int(RANK_VARS)
    world, _ = _first_int(WORLD_VARS)
    return {
        "source": src,
        "local_rank": local,
        "rank": rank if rank is not None else local,
        "world_size": world,
        "host": platform.node(),
    }


def _visible_cuda_uuid() -> Optional[str]:
    """The UUID of the one GPU CUDA_VISIBLE_DEVICES leaves this process, if any."""
    cvd = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    if len(cvd) != 1:
        return None
    if cvd[0].upper().startswith("GPU-"):
        return cvd[0][4:].lower()
    try:
        import pynvml

        pynvml.nvmlInit()
        try:  # a numeric entry is an NVML (PCI-order) index in the default CUDA order
            u = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(cvd[0])))
        finally:
            pynvml.nvmlShutdown()
        u = u.decode() if isinstance(u, bytes) else u
        return u[4:].lower() if u.upper().startswith("GPU-") else u.lower()
    except Exception:
        return None


def launcher_device(identities: Sequence[dict]) -> Optional[int]:
    """The Vulkan device index for this rank (None: no launcher). identities:
    per Vulkan device, {uuid, device_type}."""
    info = launcher_info()
    if info is None:
        return None
    want = _visible_cuda_uuid()
    if want:
        for i, d in enumerate(identities):
            if d["uuid"] == want:
                return i
    gpus = [i for i, d in enumerate(identities) if d["device_type"] != "cpu"]
    if not gpus:  # CPU Vulkan devices only: ranks share the first
        return 0 if identities else None
    lr = info["local_rank"]
    if not 0 <= lr < len(gpus):
        raise ValueError(
            f"{info['source']}={lr}: this host has {len(gpus)} Vulkan GPU"
            f"{'s' if len(gpus) != 1 else ''}; set HELIOS_DEVICE or launch at most "
            f"{len(gpus)} task{'s' if len(gpus) != 1 else ''} per node"
        )
    return gpus[lr]


def expand_out(path: str, uuid: str, info: Optional[dict]) -> str:
    """--out placeholders: {host}, {uuid}, {rank}, {local_rank} (rank 0 without a
    launcher), substituted as text: any other brace is an error (no format-string
    attribute or index access)."""
    fields = {
        "host": platform.node(),
        "uuid": uuid,
        "rank": str((info or {}).get("rank", 0)),
        "local_rank": str((info or {}).get("local_rank", 0)),
    }

    def sub(m: "re.Match[str]") -> str:
        name = m.group(1)
        if name not in fields:
            raise ValueError(
                f"--out {path!r}: unknown placeholder {{{name}}}; use {{host}}, {{uuid}}, {{rank}}, {{local_rank}}"
            )
        return fields[name].replace("/", "_")

    out = re.sub(r"\{([^{}]*)\}", sub, path)
    if "{" in out.replace(platform.node(), "") or "}" in out.replace(platform.node(), ""):
        raise ValueError(
            f"--out {path!r}: unbalanced brace; placeholders are {{host}}, {{uuid}}, {{rank}}, {{local_rank}}"
        )
    return out


_identities: Optional[list[dict]] = None


def identities() -> list[dict]:
    """Per Vulkan device (in Vulkan's order): index, name, device_type, vendor_id,
    uuid, pci_bus_id. Opened once per process."""
    global _identities
    if _identities is None:
        out = []
        for i in range(_helios.device_count()):
            d = _helios.Device(i)
            try:
                info = d.info
                out.append(
                    {"index": i, **{k: info[k] for k in ("name", "device_type", "vendor_id", "uuid", "pci_bus_id")}}
                )
            finally:
                d.close()
        _identities = out
    return _identities

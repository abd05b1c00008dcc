"""`helios suite train` under DistributedDataParallel with one rank (NCCL world of
one, this process, CUDA device 0), which the suite itself runs without DDP: what DDP's
machinery costs the helios adapter with no peer to wait for.

    python3 scripts/ddp_one_rank.py [helios suite train flags...]
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

import helios.harness.train as train
from helios.cli import main


def one_rank() -> tuple[int, int, int]:
    torch.cuda.set_device(0)
    if not dist.is_initialized():
        dist.init_process_group(
            "nccl", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1, device_id=torch.device("cuda", 0)
        )
    return 0, 1, 0


train.distributed_rank = one_rank
sys.exit(main(["suite", "train", *sys.argv[1:]]))

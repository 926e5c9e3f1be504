"""Process-group and device plumbing for one training run (single process, torchrun or deepspeed)."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

import torch

__all__ = [
    "DistInfo", "all_gather_objects", "all_reduce_sum", "exit_process", "free_port", "setup_distributed", "teardown",
]


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: rank, world size, local rank, device, and who initialised the group."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    initialized_here: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pick_device(device: str, local_rank: int, backend: str) -> torch.device:
    if backend == "deepspeed":
        from deepspeed.accelerator import get_accelerator

        acc = get_accelerator()
        if device == "cpu" and acc.device_name() != "cpu":
            raise ValueError("device 'cpu' was asked for but DeepSpeed picked the "
                             f"{acc.device_name()!r} accelerator; set DS_ACCELERATOR=cpu")
        if acc.device_name() == "cpu":
            return torch.device("cpu")
        acc.set_device(local_rank)
        return torch.device(acc.device_name(local_rank))
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup_distributed(backend: str, device: str = "auto") -> DistInfo:
    """Join (or create) the process group described by the launcher's environment.

    A plain ``python`` process gets ``RANK=0 WORLD_SIZE=1`` and a free ``MASTER_PORT`` so that
    DeepSpeed does not fall back to MPI discovery. The torch backend creates a group only when
    ``WORLD_SIZE > 1`` (gloo on CPU, NCCL on CUDA).

    Args:
        backend: ``"torch"`` or ``"deepspeed"``.
        device: ``"auto"``, ``"cpu"`` or ``"cuda"``.
    """
    import torch.distributed as dist

    if backend == "deepspeed" and not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("LOCAL_RANK", os.environ.get("RANK", "0"))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = _pick_device(device, local_rank, backend)
    here = False
    if backend == "deepspeed":
        import deepspeed

        if not dist.is_initialized():
            deepspeed.init_distributed(dist_backend="nccl" if dev.type == "cuda" else "gloo")
            here = True
    elif world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
        here = True
    return DistInfo(rank, world, local_rank, dev, here)


def teardown(info: DistInfo) -> None:
    """Destroy the process group if this module created it."""
    import torch.distributed as dist

    if info.initialized_here and dist.is_initialized():
        dist.destroy_process_group()


def exit_process(code: int) -> NoReturn:
    """End a training process with ``code`` once its results are on disk, skipping interpreter finalisation.

    At finalisation, objects of C++ libraries that a distributed run leaves behind (the process
    group's store and worker threads, DeepSpeed's communication ops) are destroyed in no defined
    order; on some machines that aborts the process (``terminate called without an active
    exception``, exit -6) after all of its work has been saved, and the launcher reports the run as
    failed. Everything a run writes is written atomically before this is called.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def all_reduce_sum(tensor: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum ``tensor`` over ranks in place (no-op with one process)."""
    import torch.distributed as dist

    if info.world_size > 1 and dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_gather_objects(obj: Any, info: DistInfo) -> list[Any]:
    """Every rank's ``obj`` in rank order (a one-element list with one process)."""
    import torch.distributed as dist

    if info.world_size > 1 and dist.is_initialized():
        out: list[Any] = [None] * info.world_size
        dist.all_gather_object(out, obj)
        return out
    return [obj]

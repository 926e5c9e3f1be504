"""Process-group and device plumbing for one training run (single process, torchrun or deepspeed)."""

from __future__ import annotations

import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch

from ...solver.vocabulary import AUTO

__all__ = [
    "DistInfo", "all_gather_objects", "all_reduce_sum", "clear_stale_build_locks", "exit_process",
    "free_port",
    "setup_distributed", "teardown",
]

# an extension build that has written nothing for this long is dead (a build takes ~1 min)
STALE_BUILD_S = 600.0


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


def clear_stale_build_locks(max_idle_s: float = STALE_BUILD_S) -> list[Path]:
    """Remove the ``lock`` files that killed builds of PyTorch C++ extensions left behind; return them.

    DeepSpeed compiles its CPU communication op on first use, and PyTorch guards each build with a
    ``lock`` file in the extension's build folder; every later process waits, forever, until that
    file goes away. A build killed mid-way (Ctrl-C, SIGKILL, a machine restart) never removes it,
    and every DeepSpeed run on the machine then hangs at start. A lock counts as stale when nothing
    in its folder has changed for ``max_idle_s`` seconds, far longer than a build takes.
    """
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    removed: list[Path] = []
    for lock in [*root.glob("*/lock"), *root.glob("*/*/lock")]:
        try:
            newest = max(p.stat().st_mtime for p in lock.parent.iterdir())
            if time.time() - newest > max_idle_s:
                lock.unlink()
                removed.append(lock)
        except FileNotFoundError:  # another process finished or cleared it meanwhile
            continue
    if removed:
        warnings.warn(f"removed stale extension build locks (a killed build left them): "
                      f"{', '.join(map(str, removed))}", RuntimeWarning, stacklevel=2)
    return removed


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
    if device == "cuda" or (device == AUTO and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def setup_distributed(backend: str, device: str = AUTO) -> DistInfo:
    """Join (or create) the process group described by the launcher's environment.

    A plain ``python`` process gets ``RANK=0 WORLD_SIZE=1`` and a free ``MASTER_PORT`` so that
    DeepSpeed does not fall back to MPI discovery. The torch backend creates a group only when
    ``WORLD_SIZE > 1`` (gloo on CPU, NCCL on CUDA). ``backend``: ``"torch"`` or ``"deepspeed"``; ``device``:
    ``"auto"``, ``"cpu"`` or ``"cuda"``.
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

        clear_stale_build_locks()
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

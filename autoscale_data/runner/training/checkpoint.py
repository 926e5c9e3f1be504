"""Resumable checkpoints of one run: model, optimiser, schedule, every rank's RNG and the data state.

``ckpt/latest.json`` names the newest complete checkpoint and is replaced atomically only after
that checkpoint is fully written, so a kill during a save leaves the previous one usable. Older
checkpoints are deleted after the pointer moves. The torch backend writes ``ckpt/<tag>.pt``; the
DeepSpeed backend uses ``engine.save_checkpoint`` / ``engine.load_checkpoint`` (one directory per
tag, every rank writing its ZeRO partition) with the runner's state as ``client_state``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from ..._io import atomic_write_json
from ..records import CheckpointPointer
from .dist import DistInfo, all_gather_objects

__all__ = ["load_checkpoint", "save_checkpoint"]

_POINTER = "latest.json"


def _barrier(info: DistInfo) -> None:
    import torch.distributed as dist

    if info.world_size > 1 and dist.is_initialized():
        dist.barrier()


def _rng_state(info: DistInfo) -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if info.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(info.device)
    return state


def _set_rng_state(state: dict[str, Any], info: DistInfo) -> None:
    """Restore the saved generators; their states must be CPU byte tensors, wherever the checkpoint put them."""
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and info.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), info.device)


def save_checkpoint(ckpt_dir: Path, trainer: Any, info: DistInfo, extra: dict[str, Any]) -> None:
    """Save a checkpoint tagged ``step<N>`` (all ranks call this) and move the pointer to it.

    Args:
        ckpt_dir: the run's ``ckpt/`` directory.
        trainer: holds ``model``, ``optimizer``, ``scheduler`` and ``engine`` (DeepSpeed or ``None``).
        info: the process group.
        extra: the runner's JSON-able state (``step`` required); RNG states are added here.
    """
    tag = f"step{int(extra['step'])}"
    extra = {**extra, "rng": all_gather_objects(_rng_state(info), info)}
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    if trainer.engine is not None:
        trainer.engine.save_checkpoint(os.fspath(ckpt_dir), tag=tag, client_state={"autoscale": extra})
    elif info.is_main:
        tmp = ckpt_dir / f".{tag}.pt.tmp"
        torch.save({"model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
                    "scheduler": trainer.scheduler.state_dict(), "autoscale": extra}, tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, ckpt_dir / f"{tag}.pt")
    _barrier(info)
    if info.is_main:
        atomic_write_json(ckpt_dir / _POINTER, CheckpointPointer(tag=tag, step=int(extra["step"])).to_json())
        for old in ckpt_dir.iterdir():
            if old.name in (_POINTER, tag, f"{tag}.pt", "latest"):
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            elif old.suffix in (".pt", ".tmp"):
                old.unlink(missing_ok=True)
    _barrier(info)


def load_checkpoint(ckpt_dir: Path, trainer: Any, info: DistInfo) -> dict[str, Any] | None:
    """Restore the newest complete checkpoint into ``trainer``; returns the runner state or ``None``."""
    try:
        pointer = json.loads((ckpt_dir / _POINTER).read_text())
    except (FileNotFoundError, ValueError):
        return None
    tag = pointer["tag"]
    if trainer.engine is not None:
        path, client = trainer.engine.load_checkpoint(os.fspath(ckpt_dir), tag=tag)
        if path is None or not client or "autoscale" not in client:
            raise ValueError(f"checkpoint {os.fspath(ckpt_dir / tag)!r} named by {_POINTER} could not be loaded")
        extra = client["autoscale"]
    else:
        # to the CPU first: load_state_dict moves parameters and optimiser state to their device, and the
        # RNG states must stay CPU byte tensors (mapped to a GPU, torch.set_rng_state refuses them)
        blob = torch.load(ckpt_dir / f"{tag}.pt", map_location="cpu", weights_only=False)
        trainer.model.load_state_dict(blob["model"])
        trainer.optimizer.load_state_dict(blob["optimizer"])
        trainer.scheduler.load_state_dict(blob["scheduler"])
        extra = blob["autoscale"]
    rngs = extra.get("rng") or []
    if len(rngs) == info.world_size:
        _set_rng_state(rngs[info.rank], info)
    return extra

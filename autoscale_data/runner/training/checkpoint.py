"""Resumable checkpoints of one run: model, optimiser, LR scheduler, every rank's RNG and the data state.

``ckpt/latest.json`` names the newest complete checkpoint and is replaced atomically only after
that checkpoint is fully written, so a kill during a save leaves the previous one usable. Older
checkpoints are deleted after the pointer moves. The torch backend writes ``ckpt/<tag>.pt``; the
DeepSpeed backend uses ``engine.save_checkpoint`` / ``engine.load_checkpoint`` (one directory per
tag, every rank writing its ZeRO partition) with the runner's state as ``client_state``.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ..._io import atomic_write_json
from ..._records import Record, omitted
from .. import layout
from ..records import CheckpointPointer, EvalPoint
from .dist import DistInfo, all_gather_objects

__all__ = ["CheckpointState", "TrainTimes", "final_model", "load_checkpoint", "save_checkpoint"]


@dataclass
class TrainTimes(Record):
    """Seconds a run has spent so far, summed over its attempts (a checkpoint's ``elapsed``)."""

    train_s: float = 0.0
    """Training steps (data waits included)."""
    eval_s: float = 0.0
    """Evaluations."""
    data_wait_s: float = 0.0
    """Waiting for the next batch."""


@dataclass(frozen=True)
class CheckpointState(Record):
    """What a checkpoint records besides the model, optimiser and schedule (``"autoscale"`` in its blob).

    Its field names are the blob's keys, as checkpoints of earlier versions wrote them, so those resume;
    a key they lack takes its default.
    """

    step: int
    """The run's own optimiser steps done (an extension's parent's excluded)."""
    curve: list[EvalPoint] = field(default_factory=list)
    """The evaluations so far."""
    elapsed: TrainTimes = field(default_factory=TrainTimes)
    """Time spent so far."""
    resumed_at: list[int] = field(default_factory=list)
    """The steps earlier attempts resumed at."""
    dataset: dict[str, Any] = field(default_factory=dict)
    """The training stream's state (the dataset's own keys)."""
    counts: list[list[int]] = field(default_factory=list)
    """Per rank, the sequences of each domain trained so far by this run."""
    last_loss: float = math.nan
    """The training loss of the last step."""
    train_meter: list[dict[str, Any]] | None = None
    """Per rank, the per-domain training-loss meter's state (the meter's own keys)."""
    step_hook: dict[str, Any] | None = omitted(default=None)
    """The step hook's state (the hook's own keys; runs with a hook only)."""
    rng: list[dict[str, Any]] = omitted(default_factory=list)
    """Per rank, the random generators' states (tensors, which the codec passes through as they are; added by
    :func:`save_checkpoint`)."""


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
    """Restore the saved generators; their states must be CPU byte tensors, wherever the checkpoint put
    them."""
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and info.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), info.device)


def save_checkpoint(ckpt_dir: Path, trainer: Any, info: DistInfo, state: CheckpointState) -> None:
    """Save a checkpoint tagged ``step<N>`` in ``ckpt_dir`` (all ranks call this) and move the pointer to it.

    ``trainer`` holds ``model``, ``optimizer``, ``scheduler`` and ``engine`` (DeepSpeed or ``None``); every
    rank's RNG states are added to ``state`` here.
    """
    tag = f"step{state.step}"
    extra = replace(state, rng=all_gather_objects(_rng_state(info), info)).to_json()
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
        atomic_write_json(ckpt_dir / layout.CHECKPOINT_POINTER,
                          CheckpointPointer(tag=tag, step=state.step).to_json())
        for old in ckpt_dir.iterdir():
            if old.name in (layout.CHECKPOINT_POINTER, tag, f"{tag}.pt", "latest"):
                continue
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            elif old.suffix in (".pt", ".tmp"):
                old.unlink(missing_ok=True)
    _barrier(info)


def final_model(spec: Any, run_dir: Path, eos_id: int) -> torch.nn.Module | None:
    """The model of the finished run ``spec`` from ``run_dir/final_ckpt`` (torch or DeepSpeed layout, ZeRO
    stages 0-2), built as its settings say
    (:meth:`~autoscale_data.runner.planning.settings.ModelSettings.build`), on the CPU in eval mode; ``None``
    without a complete final checkpoint."""
    final = run_dir / layout.FINAL_CHECKPOINT_DIR
    pointer: CheckpointPointer | None = layout.read(final, layout.CHECKPOINT_POINTER)
    if pointer is None:
        return None
    torch_file, ds_file = final / f"{pointer.tag}.pt", final / pointer.tag / "mp_rank_00_model_states.pt"
    blob = torch.load(torch_file if torch_file.is_file() else ds_file, map_location="cpu", weights_only=False)
    model = spec.training.model.build(eos_id)
    model.load_state_dict(blob["model"] if "model" in blob else blob["module"])
    return model.eval()


def load_checkpoint(ckpt_dir: Path, trainer: Any, info: DistInfo) -> CheckpointState | None:
    """Restore the newest complete checkpoint into ``trainer``; returns the runner state or ``None``."""
    pointer: CheckpointPointer | None = layout.read(ckpt_dir, layout.CHECKPOINT_POINTER)
    if pointer is None:
        return None
    tag = pointer.tag
    if trainer.engine is not None:
        path, client = trainer.engine.load_checkpoint(os.fspath(ckpt_dir), tag=tag)
        if path is None or not client or "autoscale" not in client:
            raise ValueError(f"checkpoint {os.fspath(ckpt_dir / tag)!r} named by {layout.CHECKPOINT_POINTER} "
                             "could not be loaded")
        extra = client["autoscale"]
    else:
        # to the CPU first: load_state_dict moves parameters and optimiser state to their device, and the
        # RNG states must stay CPU byte tensors (mapped to a GPU, torch.set_rng_state refuses them)
        blob = torch.load(ckpt_dir / f"{tag}.pt", map_location="cpu", weights_only=False)
        trainer.model.load_state_dict(blob["model"])
        trainer.optimizer.load_state_dict(blob["optimizer"])
        trainer.scheduler.load_state_dict(blob["scheduler"])
        extra = blob["autoscale"]
    state = CheckpointState.from_json(extra, "checkpoint")
    if len(state.rng) == info.world_size:
        _set_rng_state(state.rng[info.rank], info)
    return state

"""Megatron: the mixture as an external data iterator (``--dataloader-type external``) with save/restore.

Megatron-LM passes the provider's object through and calls ``next()`` on ``iter(obj)`` once per
micro-batch; with ``--dataloader-save DIR`` it saves the iterator's ``save_state()`` at every checkpoint,
and restoring is the provider's job (docs/ecosystem.md). :class:`MixtureExternalIterator` is that
iterator, and :func:`load_megatron_dataloader_state` finds and applies the saved state::

    def train_valid_test_datasets_provider(train_val_test_num_samples):
        args = get_args()
        ds = ScaleAwareMixtureDataset(stores, weights, budget_tokens=N, seq_len=args.seq_length + 1,
                                      batch_size=args.micro_batch_size,
                                      rank=mpu.get_data_parallel_rank(),
                                      world_size=mpu.get_data_parallel_world_size())
        it = MixtureExternalIterator(ds, num_workers=args.num_workers)
        if args.load and args.dataloader_save:
            load_megatron_dataloader_state(it, args.dataloader_save, args.iteration)
        return it, None, None

Each micro-batch is a dict in the layout of Megatron's GPT datasets: ``tokens`` and ``labels``
(the sequence shifted by one, so build the dataset with ``seq_len = seq_length + 1``),
``loss_mask`` (ones), ``position_ids``, plus ``domain`` and ``seq_index``. The iterator runs pass
after pass (Megatron stops at ``--train-iters``). Its state is the global stream position after
the micro-batches handed out: any data-parallel rank's file resumes every rank, under any
data-parallel size. Megatron's rerun machinery replays micro-batches from its own buffer, so a
replay does not move the stream.

Imports megatron-core (the ``megatron`` extra) to check that it is installed; the training
loop itself is Megatron-LM's (``megatron.training``, not on PyPI).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from typing import Any

import torch

from ._loader import require_library

require_library("megatron", "autoscale_data.integrations.megatron", "megatron.core", "megatron-core")

from ..dataset import ScaleAwareMixtureDataset  # noqa: E402
from ._loader import MixtureLoader  # noqa: E402

__all__ = ["MixtureExternalIterator", "load_megatron_dataloader_state", "megatron_state_path"]

_STATE_FORMAT = "autoscale_data.integrations.megatron"


def megatron_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """A mixture batch in the layout of Megatron's GPT datasets (``tokens``/``labels`` shifted by one)."""
    ids = batch["input_ids"].long()
    tokens, labels = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    position_ids = torch.arange(tokens.shape[1], dtype=torch.long, device=tokens.device).expand_as(tokens)
    return {"tokens": tokens, "labels": labels, "loss_mask": torch.ones_like(tokens, dtype=torch.float32),
            "position_ids": position_ids.contiguous(), "domain": batch["domain"],
            "seq_index": batch["seq_index"]}


class MixtureExternalIterator(Iterator[dict[str, Any]]):
    """Megatron micro-batches from a mixture dataset, with Megatron's ``save_state`` / ``restore_state``.

    Args:
        dataset: a fresh mixture dataset with ``batch_size`` = Megatron's ``--micro-batch-size`` and
            ``rank`` / ``world_size`` = the data-parallel rank and size (not the global rank).
        num_workers: DataLoader worker processes.
        raw: yield the dataset's batches unchanged instead of Megatron's GPT layout.

    ``iter()`` returns the object itself (Megatron wraps ``iter(obj)``), so Megatron's
    ``train_iterator.iterable.save_state()`` reaches :meth:`save_state`.
    """

    def __init__(self, dataset: ScaleAwareMixtureDataset, *, num_workers: int = 0, raw: bool = False) -> None:
        self.loader = MixtureLoader(dataset, num_workers=num_workers)
        self.raw = bool(raw)
        self.passes_completed = 0
        self._it: Iterator[dict[str, Any]] | None = None

    def __iter__(self) -> MixtureExternalIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        for _ in range(2):  # at most one pass boundary per micro-batch
            if self._it is None:
                self._it = iter(self.loader)
            try:
                batch = next(self._it)
            except StopIteration:
                self._it = None
                self.passes_completed += 1
                continue
            return batch if self.raw else megatron_batch(batch)
        raise RuntimeError("the mixture stream of this rank is empty")

    def save_state(self) -> dict[str, Any]:
        """The state Megatron's ``--dataloader-save`` writes: the stream position after the micro-batches
        taken."""
        return {"format": _STATE_FORMAT, "loader": self.loader.state_dict(),
                "passes_completed": self.passes_completed}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`save_state`'s state (saved by any data-parallel rank and size).

        Raises:
            ValueError: not a state of this class, or of another mixture.
        """
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ValueError(f"not a {_STATE_FORMAT} state: {type(state).__name__} with keys "
                             f"{sorted(state) if isinstance(state, dict) else '-'}")
        self.loader.load_state_dict(state["loader"])
        self.passes_completed = int(state.get("passes_completed", 0))
        self._it = None

    # torch-style names, for code that checkpoints stateful objects generically
    state_dict = save_state
    load_state_dict = restore_state


def megatron_state_path(dataloader_save: str | os.PathLike[str], iteration: int, dp_rank: int = 0) -> str:
    """The file Megatron-LM's ``--dataloader-save`` wrote for ``iteration`` and data-parallel rank
    ``dp_rank``.

    Raises:
        FileNotFoundError: no such file (the directory names the tensor / pipeline rank 0 layout).
    """
    pattern = os.path.join(os.fspath(dataloader_save), f"iter_{int(iteration):07d}", "mp_rank_00*",
                           f"train_dataloader_dprank{int(dp_rank):03d}.pt")
    found = sorted(glob.glob(pattern))
    if not found:
        raise FileNotFoundError(f"no Megatron dataloader state matches {pattern}")
    return found[0]


def load_megatron_dataloader_state(iterator: MixtureExternalIterator, dataloader_save: str | os.PathLike[str],
                                   iteration: int) -> str:
    """Restore ``iterator`` from the state Megatron saved at ``iteration`` (data-parallel rank 0's file).

    The stream position is global, so rank 0's file resumes every rank, under any data-parallel size.

    Returns:
        The file read.
    """
    path = megatron_state_path(dataloader_save, iteration, 0)
    saved = torch.load(path, map_location="cpu", weights_only=True)  # plain values only
    iterator.restore_state(saved["dataloader_state_dict"])
    return path

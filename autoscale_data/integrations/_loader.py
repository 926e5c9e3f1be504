"""``MixtureLoader``: a mixture dataset behind a DataLoader, with a state that counts consumed samples.

Trainers read ahead: Lightning's fetcher holds the next batch before the current step runs,
Megatron and torchtitan pull from an iterator whose consumer may stop at any step, and DataLoader
workers run several batches ahead. The dataset's own ``state_dict()`` follows its iterator, so it
would skip what was fetched but not trained on. :class:`MixtureLoader` instead asks the dataset for
the state at the samples the *trainer* has taken (``state_dict(samples_taken=...)``), which is exact
for any number of workers, and valid for any world size on resume.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import DataLoader

from .._checks import check_int
from .._extras import MissingExtraError, require
from ..dataset import CURSOR_KEY, TOTAL_SEQUENCES_KEY, ScaleAwareMixtureDataset

__all__ = ["LOADER_STATE_FORMAT", "MixtureLoader", "require_library"]

#: The ``format`` tag of :meth:`MixtureLoader.state_dict`.
LOADER_STATE_FORMAT = "autoscale_data.integrations.MixtureLoader"
_LOADER_STATE_VERSION = 1


def require_library(extra: str, part: str, module: str, distribution: str) -> None:
    """:func:`~autoscale_data._extras.require` of ``extra`` for ``part``, and a
    :class:`~autoscale_data.MissingExtraError` naming ``distribution`` unless ``module`` can be imported
    (so a source checkout whose metadata predates the extra fails the same way)."""
    require(extra, part)
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a None entry in sys.modules
        found = False
    if not found:
        raise MissingExtraError(part, extra, [distribution])


def _to_device(batch: dict[str, Any], device: torch.device, non_blocking: bool) -> dict[str, Any]:
    return {k: (v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v)
            for k, v in batch.items()}


class MixtureLoader:
    """Batches of a :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset` with an exact resume state.

    Args:
        dataset: a mixture dataset built with ``batch_size=B`` (it yields whole batches, so workers
            take batches in turn and the loader delivers this rank's stream in order), not yet
            iterated or loaded from a state (load states into this loader instead).
        num_workers: DataLoader worker processes (0: read in this process).
        pin_memory: pin batches (for a CUDA ``device``).
        device: move every batch's tensors there (``None``: leave them on the CPU).
        count_on_yield: count a batch as consumed when it is yielded (a loop that trains on every
            batch it takes); ``False`` when the trainer reads ahead and reports each batch it
            trains on with :meth:`mark_consumed` (the Lightning adapter does this).

    Iterating starts a pass over this rank's slice: at the loaded state's position once after
    :meth:`load_state_dict`, else at the start. ``len()`` is the number of batches of a whole pass
    (the same after a resume: a resumed pass yields only the rest of it). The state at the end of
    a pass is the start of the next one.

    Raises:
        ValueError: a per-sample dataset (no ``batch_size``), a dataset already positioned, or a
            bad argument.
    """

    def __init__(self, dataset: ScaleAwareMixtureDataset, *, num_workers: int = 0, pin_memory: bool = False,
                 device: str | torch.device | None = None, count_on_yield: bool = True) -> None:
        if not isinstance(dataset, ScaleAwareMixtureDataset):
            raise ValueError(f"dataset must be a ScaleAwareMixtureDataset, got {type(dataset).__name__}")
        if dataset.batch_size is None:
            raise ValueError("MixtureLoader needs a dataset that yields batches: build it with batch_size=B "
                             "(ScaleAwareMixtureDataset(..., batch_size=8))")
        check_int("num_workers", num_workers, minimum=0)
        start = dataset.state_dict(samples_taken=0)
        if start.get(CURSOR_KEY) != 0:
            raise ValueError(f"the dataset is already positioned at cursor {start.get(CURSOR_KEY)}; wrap a "
                             "fresh dataset and load the state into the MixtureLoader")
        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.pin_memory = bool(pin_memory)
        self.device = None if device is None else torch.device(device)
        self.count_on_yield = bool(count_on_yield)
        self._start_state = start  # the state "the next pass starts at 0"
        self._batches_per_pass = len(dataset)
        self._resume_pending = False  # a loaded state waits for the next pass
        self._consumed = 0  # samples of the current pass the trainer has taken
        self._yielded = 0  # samples of the current pass handed out

    @property
    def batch_size(self) -> int:
        """Samples per batch (the last batch of a pass may be shorter)."""
        return int(self.dataset.batch_size)

    def __len__(self) -> int:
        return self._batches_per_pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._pass()  # a generator: nothing happens until the first batch is asked for

    def _pass(self) -> Iterator[dict[str, Any]]:
        # Trainers call iter() to probe a loader (Lightning's _check_dataloader_iterable), so the pass
        # only starts, and takes a loaded resume point, when its first batch is requested.
        if not self._resume_pending:
            self.dataset.load_state_dict(self._start_state)  # clears what an earlier, abandoned pass left
        self._resume_pending = False
        self._consumed = self._yielded = 0
        # A generator of its own: DataLoader draws its workers' base seed from it at every pass start, which
        # would otherwise consume torch's global RNG where a resumed run starts a pass and the uninterrupted
        # one did not (dropout would then see other numbers). The dataset draws nothing from torch's RNG.
        loader = DataLoader(self.dataset, batch_size=None, num_workers=self.num_workers,
                            pin_memory=self.pin_memory,
                            generator=torch.Generator().manual_seed(int(self.dataset.seed)))
        device, non_blocking = self.device, self.pin_memory
        for batch in loader:
            rows = len(batch["domain"])
            self._yielded += rows
            if self.count_on_yield:
                self._consumed += rows
            yield batch if device is None else _to_device(batch, device, non_blocking)

    def mark_consumed(self, batch: Mapping[str, Any]) -> None:
        """Count ``batch`` as trained on (with ``count_on_yield=False``; ignored otherwise).

        Raises:
            ValueError: more samples marked than this loader has yielded in the current pass.
        """
        if self.count_on_yield:
            return
        rows = len(batch["domain"])
        if self._consumed + rows > self._yielded:
            raise ValueError(f"mark_consumed: {self._consumed + rows} samples marked, only {self._yielded} "
                             "yielded in this pass")
        self._consumed += rows

    def state_dict(self) -> dict[str, Any]:
        """The resume state: the dataset's state after the samples consumed so far (plain JSON values).

        Returns:
            ``{"format", "version", "dataset", "samples_consumed"}``; ``dataset`` is a
            ``ScaleAwareMixtureDataset`` state (a new pass at 0 once a pass is complete).
        """
        if self._resume_pending:  # loaded, not iterated yet
            state = self.dataset.state_dict()
        else:
            state = self.dataset.state_dict(samples_taken=self._consumed)
            if state.get(CURSOR_KEY, 0) >= state.get(TOTAL_SEQUENCES_KEY, float("inf")):
                state = self._start_state  # the pass is complete: the next one starts at 0
        return {"format": LOADER_STATE_FORMAT, "version": _LOADER_STATE_VERSION, "dataset": state,
                "samples_consumed": self._consumed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state`` (from :meth:`state_dict`, of any world size): the next pass starts there.

        Raises:
            ValueError: not a loader state, or a state of a different mixture (see
                ``ScaleAwareMixtureDataset.load_state_dict``).
        """
        if not isinstance(state, Mapping) or state.get("format") != LOADER_STATE_FORMAT:
            raise ValueError(f"not a {LOADER_STATE_FORMAT} state: {type(state).__name__} with keys "
                             f"{sorted(state) if isinstance(state, Mapping) else '-'}")
        if state.get("version") != _LOADER_STATE_VERSION:
            raise ValueError(f"unsupported MixtureLoader state version {state.get('version')!r}, expected "
                             f"{_LOADER_STATE_VERSION}")
        self.dataset.load_state_dict(state["dataset"])
        self._resume_pending = True
        self._consumed = self._yielded = 0

    def __repr__(self) -> str:
        return (f"MixtureLoader({self._batches_per_pass} batches of {self.batch_size} per pass, "
                f"{self.num_workers} workers, {self._consumed} samples consumed; {self.dataset!r})")

"""A mixture dataset read through ``DataLoader(num_workers=...)`` in batches, as a stateful iterable for the
resume helper (its state by the samples taken)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader

__all__ = ["LoaderRun"]


class LoaderRun:
    """Iterates ``ds`` (built in batch mode) through a DataLoader with ``workers`` workers."""

    def __init__(self, ds: Any, workers: int) -> None:
        self.ds = ds
        self.workers = workers
        self.taken = 0

    def __iter__(self) -> Any:
        for batch in DataLoader(self.ds, batch_size=None, num_workers=self.workers):
            self.taken += len(batch["domain"])
            yield batch

    def state_dict(self) -> dict[str, Any]:
        return self.ds.state_dict(samples_taken=self.taken)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ds.load_state_dict(state)

"""The stream of an online mixture: the segments decided so far, growing as its shared segment table does."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..mixing import InterleaveTree, MixtureStream
from ._state import ONLINE_KEY
from ._stream import ONLINE_CONFIG_KEY, MixtureSource

__all__ = ["OnlineStream"]

_WAIT_S = 0.002  # a worker's poll interval while its next segment is undecided
_NO_CONTINUE = "an online dataset cannot continue another configuration's run (continue_run=True)"


class OnlineStream(MixtureStream, MixtureSource):
    """The decided segments of ``owner`` (an :class:`~autoscale_data.dataset.OnlineMixture`), looked up one
    position at a time, so a DataLoader worker never waits on a segment it does not need yet."""

    chunk = 1
    continuable = False

    def __init__(self, owner: Any, names: list[str], available: list[int], seed: int) -> None:
        super().__init__(names, available, seed, [0], np.zeros((0, len(names)), dtype=np.int64))
        self.owner = owner
        self.looked_up = False  # whether this process has looked up a position (iterated) yet
        self.grow()

    def restart(self) -> None:
        """Forget the grown segments and grow again (after the owner replayed a log into its table)."""
        self.starts, self.counts = np.zeros(1, dtype=np.int64), self.counts[:0]
        self.offsets, self.trees, self.phases, self.end = self.offsets[:1], [], self.phases[:0], 0
        self.grow()

    def grow(self) -> None:
        """Append the segments published since the last call."""
        have, published = len(self.trees), self.owner.published
        if published <= have:
            return
        rows = self.owner.counts_table[have:published].numpy().copy()
        lengths = rows.sum(axis=1)
        self.starts = np.concatenate([self.starts, self.end + np.cumsum(lengths)])
        self.counts = np.vstack([self.counts, rows])
        self.offsets = np.vstack([self.offsets, self.offsets[-1] + np.cumsum(rows, axis=0)])
        self.trees.extend(InterleaveTree(r) for r in rows)
        self.phases = np.arange(len(self.trees))
        self.end = int(self.starts[-1])

    def ensure(self, end: int) -> None:
        """Make positions ``< end`` decided: grow, wait (in a DataLoader worker) or raise (in the loop)."""
        if end <= self.end:
            return
        self.grow()
        if end <= self.end:
            return
        owner = self.owner
        if owner.is_owner:
            seg = (end - 1) // owner.segment_sequences
            raise ValueError(f"stream position {end - 1} is in segment {seg}, which is not decided yet "
                             f"(decided: {self.end} positions, {len(self.trees)} segments after "
                             f"{owner.updates} updates): the training loop must call update(step) every "
                             f"{owner.every} steps")
        while end > self.end:
            try:
                os.kill(owner.owner_pid, 0)  # the deciding process is alive (any start method)
            except ProcessLookupError:
                raise RuntimeError("the training process that decides the segments has exited") from None
            time.sleep(_WAIT_S)
            self.grow()

    def _locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.asarray(positions, dtype=np.int64).reshape(-1)
        self.looked_up = True
        if p.size:
            self.ensure(int(p.max()) + 1)
        return super()._locate(p)

    def domain_counts(self, cursor: int) -> np.ndarray:
        self.ensure(int(cursor))
        return super().domain_counts(cursor)

    # -------------------------------------------------------- the dataset's stream
    def config_entries(self) -> dict[str, Any]:
        return {ONLINE_CONFIG_KEY: self.owner.config}

    def continued(self, record: Mapping[str, Any]) -> MixtureSource:
        raise ValueError(_NO_CONTINUE)

    def get_state(self) -> dict[str, Any]:
        return {ONLINE_KEY: self.owner.dataset_state()}

    def reset(self, state: Mapping[str, Any], continue_run: bool) -> None:
        """Load the state's online part (training process) or check that it is loaded (DataLoader worker)."""
        if continue_run:
            raise ValueError(_NO_CONTINUE)
        self.owner.load_dataset_state(state.get(ONLINE_KEY))

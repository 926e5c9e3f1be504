"""Where a mixture dataset is in its stream: the one object behind ``state_dict`` / ``load_state_dict``.

The stream has positions ``0 .. total-1``. Rank ``r`` of ``W`` owns the positions ``p >= base``
with ``p % W == r`` (:class:`RankSlice`); its samples, in that order, are grouped in units of
``block`` samples (a batch, or one sample), and DataLoader worker ``w`` of ``N`` takes the units
``w, w + N, ...`` (:class:`StreamPosition` is one iterator's progress through them). Ranks consume
in step, so when every rank has taken ``k`` samples from ``base`` the positions ``[base, base + k W)``
are done: that global *cursor* is the resume point, valid for any world size and worker count.

Contract of :class:`StreamState` (modelled on torchdata.nodes' ``reset(initial_state)`` /
``get_state()``):

* ``reset(cursor, step=s)`` — the next pass starts at ``cursor``, which the training loop reached
  at its global step ``s`` (``None``: unknown) (once; later passes start at the origin, 0 unless
  the run was continued from another configuration);
  ``reset(cursor, worker=saved)`` — a DataLoader worker resumes its own saved progress (only the
  same worker of the same layout may); ``reset()`` — the next pass starts at 0.
* ``start(num_workers, worker)`` — called by ``__iter__``: takes the pending start, returns the
  :class:`StreamPosition` the new iterator advances (and which ``get_state`` then reads).
* ``get_state(samples_taken=None, in_worker=False, step=None)`` — ``{"cursor": int, "worker": dict
  | None, "step": int | None}``: with ``samples_taken`` (this rank's samples since the pass
  started, as the training loop counts them; :meth:`StreamState.samples_at` turns a global step
  into that count) the cursor follows from it; else from the latest iterator of this process;
  inside a DataLoader worker the worker's own progress is recorded too.

The step travels with the state, so a loop that counts its global step from the start of training
(resumes included) gets the right cursor before and after a resume; a step before the resume
point, or beyond what this process's iterator has yielded, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._state import (
    BASE_KEY,
    BLOCK_KEY,
    CURSOR_KEY,
    NEXT_UNIT_KEY,
    NUM_WORKERS_KEY,
    RANK_KEY,
    STEP_KEY,
    WORKER_ID_KEY,
    WORKER_KEY,
    WORLD_SIZE_KEY,
)

__all__ = ["RankSlice", "StreamPosition", "StreamState"]

_WORKER_LAYOUT = (WORKER_ID_KEY, NUM_WORKERS_KEY, BLOCK_KEY, RANK_KEY, WORLD_SIZE_KEY)


@dataclass(frozen=True)
class RankSlice:
    """Rank ``rank`` of ``world_size``'s positions of a ``total``-position stream from cursor ``base``."""

    base: int
    total: int
    rank: int
    world_size: int

    @property
    def first(self) -> int:
        """The rank's first position at or after ``base``."""
        return self.base + (self.rank - self.base) % self.world_size

    @property
    def size(self) -> int:
        """How many positions the rank owns from ``base``."""
        first = self.first
        return 0 if first >= self.total else -(-(self.total - first) // self.world_size)

    def cursor_after(self, samples_taken: int) -> int:
        """The global cursor once every rank has taken ``samples_taken`` samples of its slice."""
        size = self.size
        if not 0 <= samples_taken <= size:
            raise ValueError(f"samples_taken={samples_taken} is outside [0, {size}]: this rank has {size} "
                             f"samples from position {self.base}")
        return min(self.total, self.base + samples_taken * self.world_size)


class StreamPosition:
    """One iterator's progress: its rank slice, the next unit it yields, its worker layout, and the
    training step at its slice's base (``None``: unknown)."""

    __slots__ = ("next_unit", "num_workers", "slice", "step", "worker")

    def __init__(self, slice_: RankSlice, next_unit: int, num_workers: int, worker: int,
                 step: int | None = 0) -> None:
        self.slice = slice_
        self.next_unit = next_unit  # advanced by the iterator as it yields
        self.num_workers = num_workers
        self.worker = worker
        self.step = step

    def yielded(self, block: int) -> int | None:
        """Samples this iterator has handed out from its slice's base (``None`` for one DataLoader
        worker of several, which sees only its own units)."""
        if self.num_workers != 1:
            return None
        return min(self.next_unit * block, self.slice.size)


class StreamState:
    """Where the next pass starts and how far the current one got (see the module docstring).

    Args:
        total: positions in the stream.
        rank, world_size: this process's rank slice.
        block: samples per unit (the batch size, or 1).
        origin: where a pass starts by default (0, or the cursor a continued run starts from).
    """

    def __init__(self, total: int, rank: int, world_size: int, block: int, origin: int = 0) -> None:
        self.total, self.rank, self.world_size, self.block = total, rank, world_size, block
        self.origin = origin
        self.origin_step: int | None = 0  # the training step at the origin (unknown for a continued run)
        # (cursor, a worker's own next unit, the training step at the cursor) of the next pass
        self._pending: tuple[int, int | None, int | None] | None = None
        self.live: StreamPosition | None = None  # the latest iterator of this process

    def slice_at(self, base: int) -> RankSlice:
        return RankSlice(base, self.total, self.rank, self.world_size)

    @property
    def next_start(self) -> int:
        """The cursor the next pass starts at."""
        return self._pending[0] if self._pending else self.origin

    def units(self) -> int:
        """Units (samples or batches) the next pass yields on this rank, all workers together."""
        return -(-self.slice_at(self.next_start).size // self.block)

    @property
    def base_step(self) -> int | None:
        """The training step at the start of the pass in progress (or of the next one); ``None``: unknown."""
        if self.live is not None:
            return self.live.step
        return self._pending[2] if self._pending else self.origin_step

    def reset(self, cursor: int = 0, worker: dict[str, Any] | None = None,
              here: dict[str, Any] | None = None, step: int | None = 0) -> None:
        """Start the next pass at ``cursor``, or at a DataLoader worker's saved progress.

        Args:
            cursor: a global stream position in ``[0, total]``.
            worker: a worker state from :meth:`get_state` (``None`` for a global cursor).
            here: this process's worker id and count (``{"id", "num_workers"}``), None outside one.
            step: the training loop's global step at ``cursor`` (``None``: unknown).

        Raises:
            ValueError: a worker state resumed anywhere but the same worker of the same layout.
        """
        self.live = None
        if not worker:
            self._pending = (cursor, None, step)
            return
        now = None if here is None else {**here, BLOCK_KEY: self.block, RANK_KEY: self.rank,
                                          WORLD_SIZE_KEY: self.world_size}
        saved = {k: worker.get(k) for k in _WORKER_LAYOUT}
        if now != saved:
            raise ValueError(f"this state describes one DataLoader worker's progress ({saved}) and can only "
                             f"be resumed by that same worker, not here ({now}); for a new layout save "
                             "the state with state_dict(samples_taken=...) from the main process")
        self._pending = (int(worker[BASE_KEY]), int(worker[NEXT_UNIT_KEY]), None)

    def start(self, num_workers: int, worker: int) -> StreamPosition:
        """A new iterator's position (taking the pending start, if any)."""
        base, unit, step = self._pending or (self.origin, None, self.origin_step)
        self._pending = None
        self.live = StreamPosition(self.slice_at(base), worker if unit is None else unit, num_workers, worker,
                                   step)
        return self.live

    def _current_slice(self) -> RankSlice:
        """This rank's slice of the pass in progress (or of the next one, before iterating)."""
        return self.slice_at(self.live.slice.base if self.live is not None else self.next_start)

    def samples_at(self, step: int, samples_per_step: int) -> int:
        """This rank's samples since the start of the current pass once the training loop has done
        ``step`` steps in all (resumes included) of ``samples_per_step`` samples each.

        Raises:
            ValueError: the pass's start step is unknown (a state saved without a step), ``step`` is
                before it, or ``step`` is past the end of this rank's slice.
        """
        base = self.base_step
        if base is None:
            raise ValueError(f"step={step}: the loaded state does not record the training step it was saved "
                             "at (it was saved with samples_taken=, from the iterator, or by an earlier "
                             "autoscale_data); load it with load_state_dict(state, step=<the step it was "
                             "saved at>), or pass samples_taken= (this rank's samples since the load)")
        rank_slice = self._current_slice()
        steps = -(-rank_slice.size // samples_per_step)
        if step < base:
            raise ValueError(f"step={step} is before the loaded state's step {base}: pass the training "
                             "loop's global step, counted from the start of training with the resumes "
                             "included")
        if step - base > steps:
            raise ValueError(f"step={step} is {step - base} steps after the pass's start (step {base}, "
                             f"cursor {rank_slice.base}), but this rank has only {steps} steps of "
                             f"{samples_per_step} samples from there")
        return min(rank_slice.size, (step - base) * samples_per_step)

    def yielded(self) -> int | None:
        """Samples this process's iterator has handed out in the current pass (``None``: not iterated
        here, or one DataLoader worker of several)."""
        return None if self.live is None else self.live.yielded(self.block)

    def get_state(self, samples_taken: int | None = None, *, in_worker: bool = False,
                  step: int | None = None) -> dict[str, Any]:
        """``{"cursor", "worker", "step"}`` (see the module docstring).

        Args:
            samples_taken: this rank's samples since the pass started.
            in_worker: record a DataLoader worker's own progress.
            step: the training step ``samples_taken`` was computed from (:meth:`samples_at`), to record.

        Raises:
            ValueError: ``samples_taken`` outside this rank's slice, or a loaded worker state that
                was not iterated yet (its cursor is unknown without ``samples_taken``).
        """
        live = self.live
        if samples_taken is not None:
            rank_slice = self._current_slice()
            if self.block > 1 and samples_taken % self.block and samples_taken != rank_slice.size:
                raise ValueError(
                    f"samples_taken={samples_taken} is not a whole number of batches of {self.block}: it "
                    "counts samples (sequences), while len() and the loader count batches in batch mode; "
                    "pass step=<the global step> if that is a number of batches (steps), or "
                    f"samples_taken={samples_taken * self.block} for that many batches of {self.block}")
            if step is None and samples_taken == 0:
                step = self.base_step
            return {CURSOR_KEY: rank_slice.cursor_after(int(samples_taken)), WORKER_KEY: None, STEP_KEY: step}
        if live is None:
            if self._pending is not None and self._pending[1] is not None:
                raise ValueError("this dataset holds a DataLoader worker's state that has not been iterated; "
                                 "call state_dict(samples_taken=...) or iterate first")
            return {CURSOR_KEY: self.next_start, WORKER_KEY: None, STEP_KEY: self.base_step}
        taken = min(live.next_unit * self.block, live.slice.size)
        worker = None
        if in_worker:
            worker = {WORKER_ID_KEY: live.worker, NUM_WORKERS_KEY: live.num_workers,
                      BASE_KEY: live.slice.base,
                      NEXT_UNIT_KEY: live.next_unit, BLOCK_KEY: self.block, RANK_KEY: self.rank,
                      WORLD_SIZE_KEY: self.world_size}
        return {CURSOR_KEY: live.slice.cursor_after(taken), WORKER_KEY: worker, STEP_KEY: None}

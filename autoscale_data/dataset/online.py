"""Online mixing: a :class:`ScaleAwareMixtureDataset` whose weights a controller chooses during training.

The stream is cut into *segments* of ``every`` training steps (``every × sequences_per_step``
positions), each drawn at the weights decided for it with exact per-domain counts
(:func:`~autoscale_data.online.carry.carried_counts`). The first ``lookahead`` segments are drawn at
the controller's initial weights; update ``u`` (at step ``u × every``) decides segment
``u - 1 + lookahead``. The segment table is shared memory: a DataLoader worker that reaches an
undecided segment waits for the decision, the training loop never does. Memory is O(segments).
:class:`OnlineMixture` provides the dataset's stream (``_online_stream.OnlineStream``), not its state.
docs/dataset.md ("Online mixing") states the guarantees: exact segments, the apply-from rule, the
state and its resume at any world size or worker count.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .._checks import check_int
from ..mixing import allowed_draws
from ..online import Window, carried_counts, check_proposal
from ._online_stream import OnlineStream
from ._state import CONFIG_KEY, FORMAT_KEY, config_diff
from ._stream import CONTINUED_KEY, ONLINE_CONFIG_KEY
from .domain_loss import DomainLossMeter

__all__ = [
    "CONTROLLER_KEY",
    "DIGEST_KEY",
    "LOG_KEY",
    "METER_KEY",
    "ONLINE_FORMAT",
    "OnlineMixture",
    "SEGMENTS_KEY",
    "UPDATES_KEY",
]

ONLINE_FORMAT = "autoscale-online-state"
# The keys of the online state (``OnlineMixture.state_dict``) besides the mixture state's FORMAT_KEY and
# CONFIG_KEY.
SEGMENTS_KEY = "segments"  # how many segments are decided
DIGEST_KEY = "digest"  # a hash of their counts
UPDATES_KEY = "updates"  # the controller updates done
LOG_KEY = "log"  # {"weights": each decided segment's weights}
CONTROLLER_KEY = "controller"  # the controller's own state
METER_KEY = "meter"  # the loss window since the last update, summed over the ranks


def _followable(dataset: Any, controller: Any) -> list[str]:
    """The dataset's domain names, once it is one that can follow ``controller``: the same domains, a plain
    dataset (no shuffle window, phases, anytime schedule, continued run or pools) that follows no other
    controller."""
    names = list(dataset.domain_names)
    if list(getattr(controller, "domain_names", [])) != names:
        raise ValueError(f"the controller's domains {list(getattr(controller, 'domain_names', []))} are not "
                         f"the dataset's {names} (in this order)")
    if ONLINE_CONFIG_KEY in dataset.config:
        raise ValueError("this dataset already follows a controller")
    if dataset.shuffle_window or dataset.config.get("phases") or dataset.config.get(CONTINUED_KEY) \
            or dataset.config.get("schedule") != "fixed":
        raise ValueError("online mixing needs a plain dataset: no shuffle_window, phases, anytime schedule "
                         "or continued run")
    if getattr(dataset, "pools", None):
        raise ValueError("online mixing does not support domain pools (pool=...) yet")
    return names


class OnlineMixture:
    """Makes a dataset follow a controller: every ``every`` steps the next segment's weights.

    Args:
        dataset: a :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset` built with the
            controller's initial weights (or any weights: its budget, stores, seed, batching and
            ``max_epochs`` are used), before any DataLoader iterates it. No shuffle window, no
            phases, no domain pools, not a continued run.
        controller: anything with ``domain_names``, ``initial_weights()``, ``update(window)``,
            ``state_dict()`` and ``load_state_dict(state)`` (see :mod:`autoscale_data.online`).
        every: training steps per segment and between updates (``k``).
        sequences_per_step: sequences of the global batch of one step (all ranks); default
            ``batch_size × world_size`` of a batch-mode dataset.
        lookahead: segments decided ahead (>= 1); default ``ceil(prefetch_steps / every)``. A loop
            whose loader reads a batch ahead of the step it trains on in this process (the HF
            ``Trainer``'s) needs at least 2 (:meth:`require_lookahead`; the Trainer callback sets it).
        prefetch_steps: batches a loader may hold beyond the one in use (``num_workers ×
            prefetch_factor``), for the default ``lookahead``.

    Use :attr:`meter` (a :class:`DomainLossMeter`) for the per-domain losses and call
    :meth:`update` at every step where :meth:`due` is true (on every rank).
    """

    def __init__(self, dataset: Any, controller: Any, *, every: int, sequences_per_step: int | None = None,
                 lookahead: int | None = None, prefetch_steps: int = 4) -> None:
        check_int("every", every)
        check_int("prefetch_steps", prefetch_steps, minimum=0)
        check_int("lookahead", lookahead, allow_none=True)
        names = _followable(dataset, controller)
        if sequences_per_step is None:
            if dataset.batch_size is None:
                raise ValueError("sequences_per_step is needed for a dataset without batch_size (the "
                                 "sequences of one step's global batch, all ranks together)")
            sequences_per_step = dataset.batch_size * dataset.world_size
        check_int("sequences_per_step", sequences_per_step)
        self.dataset, self.controller, self.names = dataset, controller, names
        self.every, self.sequences_per_step = int(every), int(sequences_per_step)
        self.segment_sequences = self.every * self.sequences_per_step
        total = dataset.total_sequences
        self.num_segments = -(-total // self.segment_sequences)
        ahead = max(1, -(-prefetch_steps // self.every)) if lookahead is None else int(lookahead)
        self.lookahead = min(ahead, self.num_segments)
        self.initial = check_proposal(0, controller.initial_weights(), names)
        self.config = {"every": self.every, "sequences_per_step": self.sequences_per_step,
                       "lookahead": self.lookahead,
                       "controller": str(getattr(controller, "name", type(controller).__name__)),
                       "initial": dict(zip(names, self.initial.tolist(), strict=True))}
        d = len(names)
        self.counts_table = torch.zeros(self.num_segments, d, dtype=torch.int64).share_memory_()
        self.weights_table = torch.zeros(self.num_segments, d, dtype=torch.float64).share_memory_()
        self._published = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.owner_pid = os.getpid()
        self.updates = 0
        self.meter = DomainLossMeter(names)
        available = dataset.domain_sequences
        self._allowed = np.asarray([allowed_draws(a, dataset.max_epochs[n])
                                    for a, n in zip(available, names, strict=True)])
        self._target = np.zeros(d)
        self._drawn = np.zeros(d, dtype=np.int64)
        for _ in range(self.lookahead):
            self._append(self.initial, 0)
        self.stream = OnlineStream(self, names, available, dataset.seed)
        dataset.use_stream(self.stream)

    # ------------------------------------------------------------------ layout
    @property
    def is_owner(self) -> bool:
        """True in the process that built it (the training loop's), False in a DataLoader worker."""
        return os.getpid() == self.owner_pid

    @property
    def published(self) -> int:
        """Segments decided so far."""
        return int(self._published[0])

    def due(self, step: int) -> bool:
        """True when ``step`` (optimizer steps done) is an update step: a positive multiple of ``every``."""
        return step > 0 and step % self.every == 0

    def segment_log(self) -> dict[str, Any]:
        """The decided segments: ``{"starts", "weights", "counts"}`` (the realised counts; ``starts`` has one
        more)."""
        n = self.published
        counts = self.counts_table[:n].tolist()
        starts = [0, *np.cumsum([sum(r) for r in counts]).tolist()]
        return {"starts": starts, "weights": self.weights_table[:n].tolist(), "counts": counts}

    def require_lookahead(self, n: int) -> None:
        """Decide at least ``n`` segments ahead (a loop whose loader reads batches ahead of the step in
        use, like the HF ``Trainer``'s, needs 2): the extra segments are drawn at the initial weights.

        ``lookahead`` is part of the stream's configuration, so call it the same way on a resume.

        Raises:
            ValueError: ``n`` is not a positive integer, or the lookahead must grow after an update,
                a loaded state or an iteration (then the stream is already configured).
        """
        check_int("lookahead", n)
        n = min(int(n), self.num_segments)
        if n <= self.lookahead:
            return
        if self.updates or self.published != self.lookahead or self.stream.looked_up:
            raise ValueError(f"lookahead {self.lookahead} must become {n} before the first update, state "
                             f"load or iteration (now {self.updates} updates, {self.published} segments "
                             f"decided): build OnlineMixture(..., lookahead={n})")
        for _ in range(n - self.lookahead):
            self._append(self.initial, 0)
        self.lookahead = self.config["lookahead"] = n
        self.stream.grow()
        self.dataset.use_stream(self.stream)  # its config entries changed

    # ----------------------------------------------------------------- updates
    def update(self, step: int, loss_sums: Any = None, tokens: Any = None, *,
               group: Any = None) -> dict[str, float] | None:
        """Feed the controller the window's per-domain losses and decide the next segment.

        Args:
            step: optimizer steps done (a multiple of ``every``: the ``u``-th update is at ``u × every``).
            loss_sums, tokens: per-domain loss sums and token counts of the window, already summed over
                ranks; default: :attr:`meter`'s, all-reduced here (one ``all_reduce`` when
                ``torch.distributed`` is initialized) and then reset.
            group: the process group of that all-reduce.

        Returns:
            The weights of the segment decided (``None`` once every segment is decided).

        Raises:
            ValueError: ``step`` is not the next update step; the controller's weights are NaN,
                negative, not normalised or name unknown domains (the message names the step and the
                value); a domain asked for more sequences than it allows.
        """
        u = self.updates + 1
        if step != u * self.every:
            raise ValueError(f"update at step {step}: the next update is at step {u * self.every} (every "
                             f"{self.every} steps, {self.updates} updates done)")
        if loss_sums is None:
            sums, toks = self._window_totals(group)
            loss_sums, tokens = sums.cpu().numpy(), toks.cpu().numpy()
            self.meter.reset()
        j = self.lookahead + u - 1
        weights = None
        if j < self.num_segments:
            cursor = min(u * self.segment_sequences, self.dataset.total_sequences)
            window = Window(step=step, update=u, loss_sums=np.asarray(loss_sums, dtype=np.float64),
                            tokens=np.asarray(tokens, dtype=np.float64),
                            seen=self.stream.domain_counts(cursor))
            w = check_proposal(step, self.controller.update(window), self.names)
            self._append(w, step)
            self.stream.grow()
            weights = dict(zip(self.names, w.tolist(), strict=True))
        self.updates = u
        return weights

    def _append(self, w: np.ndarray, step: int) -> None:
        j = self.published
        length = min(self.segment_sequences, self.dataset.total_sequences - j * self.segment_sequences)
        target = self._target + w * length
        counts = carried_counts(target, self._drawn, length)
        drawn = self._drawn + counts
        over = np.flatnonzero(drawn > self._allowed)
        if over.size:
            d = int(over[0])
            raise ValueError(f"step {step}: weights {dict(zip(self.names, w.tolist(), strict=True))} ask "
                             f"domain {self.names[d]!r} for {int(drawn[d])} sequences by segment {j}, it "
                             f"allows {int(self._allowed[d])}; allow repetition with max_epochs, or bound "
                             "the controller")
        self.counts_table[j] = torch.from_numpy(counts)
        self.weights_table[j] = torch.from_numpy(w)
        self._target, self._drawn = target, drawn
        self._published[0] = j + 1

    # ------------------------------------------------------------------- state
    def _window_totals(self, group: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """:attr:`meter`'s totals, summed over the ranks when ``torch.distributed`` is initialized."""
        import torch.distributed as dist

        return self.meter.totals(all_reduce=dist.is_available() and dist.is_initialized(), group=group)

    def _digest(self, n: int) -> str:
        return hashlib.sha256(self.counts_table[:n].numpy().tobytes()).hexdigest()[:16]

    def state_dict(self, *, group: Any = None) -> dict[str, Any]:
        """The online part of the resume state: config, segment log, updates, controller and loss window.

        The loss window since the last update is saved summed over the ranks (one ``all_reduce``
        when ``torch.distributed`` is initialized: call it on every rank), so every rank saves the
        same state and a run resumed at another world size sums the same window; rank 0 loads it.
        """
        n = self.published
        sums, toks = self._window_totals(group)
        window = {"domain_names": list(self.names), "loss_sums": sums.tolist(), "tokens": toks.tolist()}
        return {FORMAT_KEY: ONLINE_FORMAT, CONFIG_KEY: self.config, SEGMENTS_KEY: n,
                DIGEST_KEY: self._digest(n),
                UPDATES_KEY: self.updates, LOG_KEY: {"weights": self.weights_table[:n].tolist()},
                CONTROLLER_KEY: self.controller.state_dict(), METER_KEY: window}

    def dataset_state(self) -> dict[str, Any]:
        """What the dataset's state carries: all of :meth:`state_dict` in the training process; in a
        DataLoader worker only the log's length and digest (the worker cannot see the controller)."""
        if self.is_owner:
            return self.state_dict()
        n = self.published
        return {FORMAT_KEY: ONLINE_FORMAT, CONFIG_KEY: self.config, SEGMENTS_KEY: n,
                DIGEST_KEY: self._digest(n)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (in the training process, before the loader iterates).

        The log is replayed through the same rounding, so its counts are recomputed, not trusted.

        Raises:
            ValueError: another online configuration, or a log that does not replay to its digest.
        """
        self._check_config(state)
        log = state.get(LOG_KEY)
        if not isinstance(log, Mapping) or state.get(CONTROLLER_KEY) is None:
            raise ValueError("this online state holds no segment log / controller state (a DataLoader "
                             "worker's state): load the training process's state "
                             "(OnlineMixture.state_dict())")
        weights = [np.asarray(w, dtype=np.float64) for w in log["weights"]]
        updates = int(state[UPDATES_KEY])
        if len(weights) != min(self.num_segments, self.lookahead + updates):
            raise ValueError(f"the online state has {len(weights)} segments after {updates} updates, "
                             f"expected {min(self.num_segments, self.lookahead + updates)}")
        self._published[0] = 0
        self._target = np.zeros(len(self.names))
        self._drawn = np.zeros(len(self.names), dtype=np.int64)
        for w in weights:
            self._append(w, 0)
        if self._digest(len(weights)) != state.get(DIGEST_KEY):
            raise ValueError("the online state's segment log does not replay to its recorded counts (digest "
                             f"{state.get('digest')!r}, replayed {self._digest(len(weights))!r})")
        self.controller.load_state_dict(state[CONTROLLER_KEY])
        window = dict(state[METER_KEY])
        if self.dataset.rank != 0:  # the saved window is every rank's sum: rank 0 carries it
            window = {**window, "loss_sums": [0.0] * len(self.names), "tokens": [0.0] * len(self.names)}
        self.meter.load_state_dict(window)
        self.updates = updates
        self.stream.restart()

    def _check_config(self, state: Any) -> None:
        if not isinstance(state, Mapping) or state.get(FORMAT_KEY) != ONLINE_FORMAT:
            raise ValueError(f"not an online mixing state: {type(state).__name__}")
        if dict(state.get(CONFIG_KEY) or {}) != self.config:
            raise ValueError("the online state was saved under another configuration; differences: "
                             + "; ".join(config_diff(dict(state.get(CONFIG_KEY) or {}), self.config)))

    def load_dataset_state(self, online: Any) -> None:
        """Take back the online part of a dataset state (:meth:`dataset_state`): load it in the training
        process; in a DataLoader worker, check that the training process has loaded it."""
        self._check_config(online)
        if self.is_owner:
            self.load_state_dict(online)
            return
        n = int(online[SEGMENTS_KEY])
        self.stream.grow()
        if self.published < n or self._digest(n) != online[DIGEST_KEY]:
            raise ValueError(f"this DataLoader worker's state needs {n} decided segments (digest "
                             f"{online[DIGEST_KEY]!r}); the training process holds {self.published}: load "
                             "the online state there first (OnlineMixture.load_state_dict / the dataset's "
                             "load_state_dict) before the loader iterates")

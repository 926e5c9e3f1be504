"""``ScaleAwareMixtureDataset``: the exact, resumable, partitioned mixture stream for PyTorch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .._checks import check_int, is_int
from .._options import build_options
from ..mixing import PlannedCounts, SegmentTable, check_draws, check_supply, resolve_pools, segment_table
from ._batch import new_batch
from ._fixed import FixedStream
from ._mixture_options import MixtureOptions, epoch_caps
from ._phased import PhasedStream, StreamPlan
from ._position import StreamPosition, StreamState
from ._source import DomainsArg, DomainSplits, open_domains, resolve_distributed
from ._state import (
    CONFIG_KEY,
    CURSOR_KEY,
    DOMAIN_COUNTS_KEY,
    FINGERPRINT_KEY,
    FORMAT_KEY,
    NUM_WORKERS_KEY,
    PHASE_KEY,
    RANK_KEY,
    STATE_FORMAT,
    STEP_KEY,
    TOTAL_SEQUENCES_KEY,
    VERSION_KEY,
    WORKER_ID_KEY,
    WORKER_KEY,
    WORLD_SIZE_KEY,
    compact_dtype,
    config_diff,
    fingerprint,
    store_summary,
    to_output,
)
from ._stream import CONTINUED_KEY, SEQUENCES_KEY, STREAM_CONFIG_KEYS, MixtureSource

__all__ = ["STATE_VERSION", "ScaleAwareMixtureDataset"]

STATE_VERSION = 3
STREAM_FORMAT = "closed-form-1"  # the stream's construction, part of the config (and so of the fingerprint)
_FIXED_ON_CONTINUE = ("domains", "stores", "seq_len", "seed", "shuffle_window", "stream", "pools")


def _check_format(state: Any) -> None:
    """Raise ``ValueError`` unless ``state`` is a state of this class and of this state version."""
    if not isinstance(state, Mapping) or state.get(FORMAT_KEY) != STATE_FORMAT:
        raise ValueError(f"not a {STATE_FORMAT} state: {type(state).__name__} with keys "
                         f"{sorted(state) if isinstance(state, Mapping) else '-'}")
    version = state.get(VERSION_KEY)
    if version in (1, 2):
        raise ValueError(f"this state (version {version}) was saved by an earlier autoscale_data whose "
                         "stream was a materialized index; the stream is now computed in closed form (state "
                         f"version {STATE_VERSION}) and visits the sequences in another order, so an older "
                         "state cannot be resumed: restart the data stream (or finish the run with the "
                         "earlier version)")
    if version != STATE_VERSION:
        raise ValueError(f"unsupported state version {version!r}, expected {STATE_VERSION}")


def _saved_step(state: Mapping[str, Any], step: int | None) -> int | None:
    """The training step ``state`` was saved at: the one it records, else ``step`` (``None``: unknown).

    Raises:
        ValueError: ``step`` differs from the one the state records, or either is not a step.
    """
    saved = state.get(STEP_KEY)
    if saved is not None and not (is_int(saved) and saved >= 0):
        raise ValueError(f"the state's step {saved!r} is not a training step (a non-negative integer)")
    if step is None:
        return None if saved is None else int(saved)
    check_int("step", step, minimum=0)
    if saved is not None and int(saved) != int(step):
        raise ValueError(f"load_state_dict(step={step}): the state records that it was saved at step {saved}")
    return int(step)


class ScaleAwareMixtureDataset(IterableDataset):
    """An exact weighted mixture of token stores, as one deterministic, resumable stream.

    The stream holds ``budget_tokens // seq_len`` sequences; domain ``i`` contributes its
    largest-remainder share of them. Domains are interleaved so that every prefix of length ``t``
    holds within 2 (measured: 1.5) sequences of ``share_i * t`` of each domain, and each domain's
    sequences are visited in a seeded permutation without replacement. The stream depends only on
    the stores, the weights, the budget, ``seq_len``, ``seed``, ``shuffle_window`` and ``schedule``
    (and, for a run continued under this configuration, the state it continued from). It is
    computed per position on demand (:class:`~autoscale_data.mixing.MixtureStream`): no memory
    grows with the budget.

    Ranks take strided slices of it (rank ``r`` of ``W`` gets positions ``r, r+W, ...``), and
    DataLoader workers take strided items (samples, or whole batches with ``batch_size``) of their
    rank's slice, so all consumers together yield the stream exactly once.

    Args:
        domains: name -> store directory, URL (see :func:`~autoscale_data.store.open_store`) or
            :class:`~autoscale_data.store.TokenStore`, or a
            directory with one store per sub-directory. Domains are ordered by name; a sample's
            ``domain`` is an index into :attr:`domain_names`.
        weights: name -> weight (summing to 1), or a plan with ``weights_for_budget(budget_tokens)``,
            or a list of :class:`~autoscale_data.mixing.Phase` (each a token budget and a mix or a
            plan evaluated at that budget; the budgets sum to ``budget_tokens``): exact and
            low-discrepancy inside each phase, each domain's order continuing across them. Planned whole
            sequences per domain go to :meth:`from_counts` instead.
        budget_tokens: total training tokens.
        seq_len: tokens per sequence.
        seed: seeds the per-domain permutations and the window shuffle.
        options: a :class:`MixtureOptions` (``max_epochs``, ``shuffle_window``, ``rank``,
            ``world_size``, ``output``, ``batch_size``, ``schedule``, ``verify``, ``continue_from``).
        **settings: the same settings as keywords (``ScaleAwareMixtureDataset(..., batch_size=8)``);
            they override ``options``.

    Samples are dicts ``{"input_ids", "labels", "domain", "seq_index"}``; ``labels`` is the same
    tensor object as ``input_ids`` (models shift labels internally; clone before editing in place).

    - Per sample (``batch_size=None``): ``input_ids`` is a ``[seq_len]`` tensor (``int64``, or the
      compact dtype), ``domain`` and ``seq_index`` are Python ints.
    - Batches (``batch_size=B``): ``input_ids`` is a ``[B, seq_len]`` tensor (``int64`` for
      ``"torch"``, ``torch.uint16`` / ``torch.int32`` for ``"compact"``), ``domain`` and ``seq_index``
      are ``int64`` tensors ``[B]`` (the last batch may be shorter). All three are views of ONE
      storage (``input_ids`` at its start), which crosses from a DataLoader worker to the main
      process in one piece (:mod:`autoscale_data.dataset._batch`). With ``output="numpy"`` all
      three are ``int64`` numpy arrays.
    """

    def __init__(
        self,
        domains: DomainsArg,
        weights: Mapping[str, float] | Any,
        budget_tokens: int,
        seq_len: int,
        seed: int = 0,
        *,
        options: MixtureOptions | None = None,
        **settings: Any,
    ) -> None:
        super().__init__()
        opts = build_options(MixtureOptions, options, settings, caller="ScaleAwareMixtureDataset")
        check_int("seq_len", seq_len)
        seq_len, seed, self.options, schedule = int(seq_len), int(seed), opts, opts.schedule
        self.rank, self.world_size = resolve_distributed(opts.rank, opts.world_size)
        stores = open_domains(domains, opts.verify)
        self.domain_names: list[str] = list(stores)
        self.seq_len, self.seed, self.budget_tokens = seq_len, seed, int(budget_tokens)
        self.output, self.batch_size, self.schedule, self.shuffle_window = (opts.output, opts.batch_size,
                                                                            schedule,
                                                                            opts.shuffle_window)
        self.max_epochs = epoch_caps(opts.max_epochs, self.domain_names)
        self._reader = DomainSplits(stores, "train", seq_len)
        self._available = self._reader.num_sequences
        self.pools = resolve_pools(opts.pool, self.domain_names, self._available, seq_len)
        if self.pools:  # a pooled domain's epochs (and its supply) count its pool
            self._available = [self.pools.get(n, a)
                               for n, a in zip(self.domain_names, self._available, strict=True)]
        segments, self.weights, phase_config = segment_table(weights, self.domain_names, budget_tokens,
                                                             seq_len,
                                                             schedule)
        self.total_sequences = segments.total
        self.phase_bounds: list[int] = phase_config["bounds"]
        self.config: dict[str, Any] = self._fingerprint_config(stores, phase_config["phases"])
        self._block = self.batch_size or 1
        plan = StreamPlan(self.domain_names, self._reader.num_sequences, self._available, seed, seq_len,
                          self.budget_tokens, self.max_epochs, segments, self.shuffle_window, self.pools)
        fixed = schedule == "fixed" and phase_config["phases"] is None
        self._start((FixedStream if fixed else PhasedStream)(plan))
        if opts.continue_from is not None:  # the supply check counts the prefix's draws
            _check_format(opts.continue_from)
            self._follow(opts.continue_from, True)
            self._resume(opts.continue_from, _saved_step(opts.continue_from, None))
        else:
            self._check_supplies(stores, segments, phased=phase_config["phases"] is not None)

    def _fingerprint_config(self, stores: Mapping[str, Any], phases: Any) -> dict[str, Any]:
        """What the dataset's fingerprint hashes (``self.config``); phases and pools only when set, so the
        fingerprint of a dataset without them does not hash them."""
        config: dict[str, Any] = {
            "domains": self.domain_names, "stores": {n: store_summary(s) for n, s in stores.items()},
            "weights": self.weights, SEQUENCES_KEY: {}, "budget_tokens": self.budget_tokens,
            "seq_len": self.seq_len, "seed": self.seed, "shuffle_window": self.shuffle_window,
            "schedule": self.schedule, "stream": STREAM_FORMAT}
        config.update({"phases": phases} if phases is not None else {},
                      **({"pools": dict(self.pools)} if self.pools else {}))
        return config

    @classmethod
    def from_counts(cls, domains: DomainsArg, counts: Mapping[str, int], seq_len: int, seed: int = 0, *,
                    options: MixtureOptions | None = None, **settings: Any) -> ScaleAwareMixtureDataset:
        """The stream of exactly ``counts`` whole sequences per domain (a plan's counts: no shares in
        between).

        Its budget is ``sum(counts) * seq_len`` tokens and its stream the one of the shares ``count / total``:
        the very stream of any ``weights`` whose largest-remainder split of the total is ``counts`` (so
        ``from_counts(d, {"a": 3, "b": 1}, L)`` streams as ``ScaleAwareMixtureDataset(d, {"a": 0.75, "b":
        0.25}, 4 * L, L)``). The other arguments are the constructor's; the schedule is fixed.

        Raises:
            ValueError: counts that are not whole numbers >= 0, of unknown domains, missing a domain (give it
                0) or summing to 0, or a schedule other than ``"fixed"``.
        """
        check_int("seq_len", seq_len)
        planned = PlannedCounts(counts)
        return cls(domains, planned, planned.total * int(seq_len), seq_len, seed, options=options, **settings)

    def _check_supplies(self, stores: Mapping[str, Any], segments: SegmentTable, *, phased: bool) -> None:
        """Refuse a mix that some domain cannot supply within its epoch cap, naming every such domain (and
        with phases, the phase where it runs out)."""
        if phased:
            check_draws(self.domain_names, segments, np.zeros(len(stores), dtype=np.int64), self._available,
                        self.seq_len, self.max_epochs)
        short = []
        for name, need, avail in zip(self.domain_names, segments.totals, self._available, strict=False):
            try:
                check_supply(name, int(need), avail, self.seq_len, self.max_epochs[name],
                             avail * self.seq_len if name in self.pools else stores[name].num_tokens)
            except ValueError as exc:
                short.append(str(exc))
        if short:
            raise ValueError("; ".join(short) if len(short) == 1 else
                             f"{len(short)} domains cannot supply their share: " + "; ".join(short))

    def _start(self, stream: MixtureSource) -> None:
        """Draw from ``stream``: its entries in the config, a position state at its origin."""
        entries = stream.config_entries()
        for key in set(STREAM_CONFIG_KEYS) - set(entries):
            self.config.pop(key, None)
        self.config.update(entries)
        self.fingerprint: str = fingerprint(self.config)
        if SEQUENCES_KEY in entries:  # known ahead (closed form); an online stream decides them in training
            self.sequences_per_domain: dict[str, int] = dict(entries[SEQUENCES_KEY])
        self._stream = stream
        self._state = StreamState(self.total_sequences, self.rank, self.world_size, self._block,
                                  origin=stream.origin)
        self._state.origin_step = stream.origin_step

    def use_stream(self, stream: MixtureSource) -> None:
        """Draw from ``stream`` from now on: the one an :class:`~autoscale_data.dataset.OnlineMixture`
        decides in training (it calls this when built and when its config entries change, before any
        iteration or state load). Its entries replace the closed-form stream's in :attr:`config`."""
        self._start(stream)

    # ------------------------------------------------------------------ layout
    @property
    def domain_sequences(self) -> list[int]:
        """Sequences a domain supplies per epoch (whole sequences of ``seq_len``; a pooled domain's pool)."""
        return list(self._available)

    @property
    def index_nbytes(self) -> int:
        """Bytes of the stream's tables (a few KB whatever the budget: positions are computed on demand)."""
        return self._stream.nbytes

    def __len__(self) -> int:
        """Items (samples, or batches with ``batch_size``) the next pass yields on this rank (all workers).

        In batch mode this counts batches, while ``state_dict(samples_taken=...)`` counts samples: use
        ``state_dict(step=...)`` to give the training loop's global step (one batch a step by default).
        """
        return self._state.units()

    # --------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        num_workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        pos = self._state.start(num_workers, worker)
        if self.batch_size is None:
            return self._samples(pos)
        return self._batches(pos)

    def _samples(self, pos: StreamPosition) -> Iterator[dict[str, Any]]:
        first, n_local, unit, step = pos.slice.first, pos.slice.size, pos.next_unit, pos.num_workers
        stride = self.world_size * step
        seq_len, output = self.seq_len, self.output
        # single: per domain, its one shard's array once mapped
        view, single = self._reader.view, self._reader.single
        lookup, per_lookup = self._stream.lookup, self._stream.chunk
        as_int64 = output == "torch"
        from_numpy, int64 = torch.from_numpy, np.int64
        for chunk in range(unit, n_local, step * per_lookup):
            a = first + chunk * self.world_size
            b = first + min(n_local - 1, chunk + step * (per_lookup - 1)) * self.world_size + 1
            domains, sequences = lookup(np.arange(a, b, stride, dtype=np.int64))
            u = chunk
            for d, s in zip(domains.tolist(), sequences.tolist(), strict=False):
                m = single[d]
                tokens = view(d, s) if m is None else m[s * seq_len : s * seq_len + seq_len]
                ids = from_numpy(tokens.astype(int64)) if as_int64 else to_output(tokens, output)
                u += step
                pos.next_unit = u
                yield {"input_ids": ids, "labels": ids, "domain": d, "seq_index": s}
        pos.next_unit = max(pos.next_unit, n_local)

    def _batches(self, pos: StreamPosition) -> Iterator[dict[str, Any]]:
        first, n_local, unit, step = pos.slice.first, pos.slice.size, pos.next_unit, pos.num_workers
        world, size, seq_len = self.world_size, self._block, self.seq_len
        lookup = self._stream.lookup
        read = self._reader.read_batch
        numpy_out = self.output == "numpy"
        compact = self.output == "compact"
        token_dtype = compact_dtype(self._reader.dtype) if compact else torch.int64
        in_worker = get_worker_info() is not None  # batches go to another process (see _batch)
        units = range(unit, -(-n_local // size), step)
        per_lookup = max(1, self._stream.chunk // size)  # units whose positions are looked up at once
        rows = np.arange(size, dtype=np.int64)
        for c0 in range(0, len(units), per_lookup):
            chunk = np.asarray(units[c0 : c0 + per_lookup], dtype=np.int64)
            local = (chunk[:, None] * size + rows).ravel()
            local = local[local < n_local]
            dom, seqs = lookup(first + local * world)
            seqs = seqs.astype(np.int64)
            at = 0
            for u in chunk.tolist():
                n = min(size, n_local - u * size)
                d, s = dom[at : at + n], seqs[at : at + n]
                at += n
                pos.next_unit = u + step
                if numpy_out:
                    arr = read(d, s, np.empty((n, seq_len), dtype=np.int64))
                    yield {"input_ids": arr, "labels": arr, "domain": d.copy(), "seq_index": s.copy()}
                    continue
                batch, ids, dom_t, seq_t = new_batch(n, seq_len, token_dtype, in_worker=in_worker)
                dom_t.numpy()[:] = d
                seq_t.numpy()[:] = s
                out = ids.numpy()
                read(d, s, out.view(self._reader.dtype) if compact else out)
                yield batch

    # ------------------------------------------------------------------- state
    def state_dict(self, samples_taken: int | None = None, *, step: int | None = None,
                   samples_per_step: int | None = None, batches_taken: Any = None) -> dict[str, Any]:
        """The resume state (plain JSON-able values); the ``get_state`` of :class:`StreamState`.

        Pass the training loop's position in one of two ways (or neither, below):

        Args:
            samples_taken: samples (sequences, not batches) this rank has taken since the start of the
                current pass: since the loaded resume point, or since 0. For loaders that count what
                they hand out (:class:`~autoscale_data.integrations.MixtureLoader`). In batch mode it
                must be a whole number of batches (or all of this rank's samples).
            step: the training loop's global step: steps done since the start of training, resumes
                included (the step a trainer reports and checkpoints). The state records it, so after
                :meth:`load_state_dict` the samples since the resume point are ``(step - saved step) ×
                samples_per_step``: the same call is right before and after a resume.
            samples_per_step: this rank's samples per step, with ``step``: default ``batch_size`` in
                batch mode (one batch a step); required for a per-sample dataset (e.g. the per-device
                batch size × gradient accumulation steps).
            batches_taken: removed (the error says why): pass ``step``.

        Without either the state follows the most recent iterator of this process; inside a
        DataLoader worker (torchdata's ``StatefulDataLoader`` calls it there) it describes that
        worker's own progress.

        Returns:
            ``{"format", "version", "fingerprint", "config", "cursor", "domain_counts", "total_sequences",
            "rank", "world_size", "worker", "phase", "step"}``: ``cursor`` is the global stream position
            before which every sample has been yielded; ``domain_counts`` the per-domain sample counts
            of that prefix; ``phase`` the phase of the position at the cursor; ``step`` the training
            step given (``None`` when unknown).

        Raises:
            ValueError: a count that cannot be right: outside this rank's slice, more than this
                process's iterator has yielded, a ``step`` before the loaded state's step, or a
                ``step`` after a state that records none (the message names both counts).
            TypeError: both ``samples_taken`` and ``step``, or ``batches_taken``.
        """
        samples_taken = self._samples_taken(samples_taken, step, samples_per_step, batches_taken)
        position = self._state.get_state(samples_taken, in_worker=get_worker_info() is not None,
                                         step=None if step is None else int(step))
        return self._state_of(position)

    def _samples_taken(self, samples_taken: int | None, step: int | None, samples_per_step: int | None,
                       batches_taken: Any) -> int | None:
        """:meth:`state_dict`'s position as samples since the pass's start, its arguments checked."""
        if batches_taken is not None:
            raise TypeError(f"state_dict(batches_taken={batches_taken}) was removed: it counted from the "
                            "loaded resume point, so a global step passed after a resume pointed too far; "
                            "pass step=<the training loop's global step> (the state records it)")
        if step is not None:
            if samples_taken is not None:
                raise TypeError("state_dict() got both samples_taken and step: pass one")
            check_int("step", step, minimum=0)
            if samples_per_step is None:
                if self.batch_size is None:
                    raise ValueError(f"step={step} needs samples_per_step for a dataset without batch_size "
                                     "(this rank's samples per training step, e.g. per-device batch size x "
                                     "gradient accumulation steps)")
                samples_per_step = self.batch_size
            check_int("samples_per_step", samples_per_step)
            if samples_per_step % self._block:
                raise ValueError(f"samples_per_step={samples_per_step} is not a whole number of batches of "
                                 f"{self._block}")
            samples_taken = self._state.samples_at(int(step), int(samples_per_step))
        elif samples_per_step is not None:
            raise TypeError("samples_per_step goes with step=: pass step too")
        yielded = self._state.yielded() if get_worker_info() is None else None
        if samples_taken is not None and yielded is not None and samples_taken > yielded:
            said = (f"step={step} ({samples_taken} samples since the pass's start at step "
                    f"{self._state.base_step})"
                    if step is not None else f"samples_taken={samples_taken}")
            raise ValueError(f"{said} is more than this dataset has yielded in this pass: {yielded} samples "
                             "(a count from another start: pass the global step as step=, or the samples "
                             "since the load as samples_taken=)")
        return samples_taken

    def _state_of(self, position: dict[str, Any]) -> dict[str, Any]:
        """:meth:`state_dict`'s state at ``position`` (:meth:`StreamState.get_state`'s)."""
        counts = self._stream.domain_counts(position[CURSOR_KEY])
        state = {
            FORMAT_KEY: STATE_FORMAT,
            VERSION_KEY: STATE_VERSION,
            FINGERPRINT_KEY: self.fingerprint,
            CONFIG_KEY: self.config,
            CURSOR_KEY: int(position[CURSOR_KEY]),
            DOMAIN_COUNTS_KEY: {n: int(c) for n, c in zip(self.domain_names, counts, strict=True)},
            TOTAL_SEQUENCES_KEY: self.total_sequences,
            RANK_KEY: self.rank,
            WORLD_SIZE_KEY: self.world_size,
            WORKER_KEY: position[WORKER_KEY],
            PHASE_KEY: self._stream.phase_at(int(position[CURSOR_KEY])),
            STEP_KEY: position[STEP_KEY],
        }
        state.update(self._stream.get_state())
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, continue_run: bool = False,
                        step: int | None = None) -> None:
        """Resume from a state: the next iteration starts at its cursor (once; later passes start at 0).

        The ``reset(initial_state)`` of :class:`StreamState`. The world size, rank and number of
        workers may differ from when the state was saved (the stream is global), except for a
        per-worker state saved inside a DataLoader worker, which only the same worker of the same
        layout can resume. A state of a continued run (see ``continue_run``) resumes that run on a
        dataset built with the configuration it was continued under.

        Args:
            state: a :meth:`state_dict`.
            continue_run: the state may come from another configuration of the same stores,
                ``seq_len``, ``seed`` and ``shuffle_window``: keep its consumed prefix and continue
                from its cursor under this dataset's configuration (new weights or phases after the
                cursor, or a larger budget); each domain's order goes on where the prefix left it,
                so nothing repeats or is skipped. Later passes start at that cursor.
            step: the training step the state was saved at, for a state that does not record it
                (saved with ``samples_taken``, or by an earlier autoscale_data), so that
                ``state_dict(step=...)`` counts from it.

        Raises:
            ValueError: not a state of this class or of this state version; a different mixture
                (the message names every config entry that differs; weights that give every domain
                the same sequences in one fixed phase are the same mixture) without ``continue_run``; with
                it, other stores / seq_len / seed / shuffle window, a budget smaller than the
                cursor, or a domain asked for more than it holds; a cursor outside the stream;
                per-domain counts that do not match the stream at the cursor; or a ``step`` other
                than the one the state records.
        """
        _check_format(state)
        step = _saved_step(state, step)
        saved = state.get(CONFIG_KEY)
        if state.get(FINGERPRINT_KEY) != self.fingerprint and not (
                isinstance(saved, Mapping) and self._stream.same_stream(saved, self.config)):
            self._follow(state, continue_run)
        self._stream.reset(state, continue_run)
        self._resume(state, step)

    def _resume(self, state: Mapping[str, Any], step: int | None = None) -> None:
        """Start the next pass at ``state``'s cursor, reached at training step ``step``."""
        cursor, origin = state.get(CURSOR_KEY), self._stream.origin
        if not is_int(cursor) or not origin <= cursor <= self.total_sequences:
            raise ValueError(f"state cursor {cursor!r} is outside the stream [{origin}, "
                             f"{self.total_sequences}]")
        expected = {n: int(c)
                    for n, c in zip(self.domain_names, self._stream.domain_counts(cursor), strict=True)}
        saved = dict(state.get(DOMAIN_COUNTS_KEY) or {})
        if saved != expected:
            raise ValueError(f"per-domain counts in the state {saved} do not match the stream at cursor "
                             f"{cursor}: expected {expected}")
        info = get_worker_info()
        here = None if info is None else {WORKER_ID_KEY: info.id, NUM_WORKERS_KEY: info.num_workers}
        self._state.reset(int(cursor), state.get(WORKER_KEY), here, step)

    def _follow(self, state: Mapping[str, Any], continue_run: bool) -> None:
        """Make this dataset's stream the one ``state`` belongs to: the same continued run, or (with
        ``continue_run``) a new continuation from its cursor; else raise naming the differences."""
        before = self._stream
        saved = state.get(CONFIG_KEY) or {}
        record = saved.get(CONTINUED_KEY) if isinstance(saved, Mapping) else None
        try:
            unreachable = ""
            if isinstance(record, Mapping):
                try:
                    continuation = before.continued(record)
                except ValueError as exc:  # this configuration cannot continue where the state's run was continued
                    unreachable = f"; nor can it continue where the saved run was continued: {exc}"
                else:
                    self._start(continuation)
                    if self.fingerprint == state.get(FINGERPRINT_KEY):
                        return  # a later state of a run continued under this configuration
            if not continue_run:
                self._start(before)
                diff = config_diff(saved, self.config) or ["(config not recorded)"]
                hint = " (to continue that run under this configuration, load_state_dict(state, continue_run=True))"
                raise ValueError("the state was saved for a different mixture (fingerprint "
                                 f"{state.get(FINGERPRINT_KEY)!r}, this dataset {self.fingerprint!r}); "
                                 "differences: " + "; ".join(diff) + unreachable
                                 + (hint if before.continuable else ""))
            fixed = {k: saved.get(k, "<absent>") for k in _FIXED_ON_CONTINUE}
            diff = config_diff(fixed, {k: self.config.get(k, "<absent>") for k in _FIXED_ON_CONTINUE})
            if diff:
                raise ValueError("a run can only be continued on the same stores, seq_len, seed and shuffle "
                                 "window; differences: " + "; ".join(diff))
            self._start(before.continued(state))
        except ValueError:
            self._start(before)
            raise

    def __repr__(self) -> str:
        shares = ", ".join(f"{n}={c}" for n, c in self.sequences_per_domain.items())
        return (f"ScaleAwareMixtureDataset({self.total_sequences} sequences of {self.seq_len} tokens: "
                f"{shares}; rank {self.rank}/{self.world_size}, fingerprint {self.fingerprint})")

"""``ScaleAwareMixtureDataset``: the exact, resumable, partitioned mixture stream for PyTorch."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ..mixing import build_index, check_supply, sequence_budget, validate_weights
from ._batch import new_batch
from ._source import DomainsArg, DomainSplits, open_domains, resolve_distributed
from ._state import (
    STATE_FORMAT,
    compact_dtype,
    config_diff,
    fingerprint,
    store_summary,
    to_output,
)

__all__ = ["OUTPUTS", "ScaleAwareMixtureDataset"]

OUTPUTS = ("torch", "numpy", "compact")
_STATE_VERSION = 1
_CHUNK = 256  # samples sliced from the index at once in per-sample mode


def _epoch_caps(max_epochs: float | Mapping[str, float] | None, names: list[str]) -> dict[str, float | None]:
    if max_epochs is None:
        return dict.fromkeys(names)
    if isinstance(max_epochs, Mapping):
        unknown = sorted(set(max_epochs) - set(names))
        if unknown:
            raise ValueError(f"max_epochs names unknown domain(s) {unknown}; the domains are {names}")
        caps = {n: max_epochs.get(n) for n in names}
    else:
        caps = dict.fromkeys(names, max_epochs)
    for name, cap in caps.items():
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float))
                                or not cap > 0 or math.isnan(cap)):
            raise ValueError(f"max_epochs for domain {name!r} must be a positive number, got {cap!r}")
    return {n: (None if c is None else float(c)) for n, c in caps.items()}


class ScaleAwareMixtureDataset(IterableDataset):
    """An exact weighted mixture of token stores, as one deterministic, resumable stream.

    The stream holds ``budget_tokens // seq_len`` sequences; domain ``i`` contributes its
    largest-remainder share of them. Domains are interleaved so that every prefix of length ``t``
    holds within 2 (measured: 1.5) sequences of ``share_i * t`` of each domain, and each domain's
    sequences are visited in a seeded permutation without replacement. The stream depends only on
    the stores, the weights, the budget, ``seq_len``, ``seed``, ``shuffle_window`` and ``schedule``.

    Ranks take strided slices of it (rank ``r`` of ``W`` gets positions ``r, r+W, ...``), and
    DataLoader workers take strided items (samples, or whole batches with ``batch_size``) of their
    rank's slice, so all consumers together yield the stream exactly once.

    Args:
        domains: name -> store directory (or :class:`~autoscale_data.store.TokenStore`), or a
            directory with one store per sub-directory. Domains are ordered by name; a sample's
            ``domain`` is an index into :attr:`domain_names`.
        weights: name -> weight (summing to 1), or a plan with ``weights_for_budget(budget_tokens)``.
        budget_tokens: total training tokens.
        seq_len: tokens per sequence.
        seed: seeds the per-domain permutations and the window shuffle.
        max_epochs: allow a domain to repeat up to this many epochs (a number for every domain, or
            a mapping name -> cap). By default a domain too small for its share is an error.
        shuffle_window: if > 1, shuffle positions inside consecutive windows of this many positions
            (the prefix bound then holds at window boundaries, and within the window size between).
        rank, world_size: this process's slice; default from ``torch.distributed`` when initialized.
        output: ``"torch"`` (int64 tensors), ``"numpy"`` (int64 arrays) or ``"compact"`` (tensors
            of the store dtype: ``uint16``, or ``int32`` for 32-bit vocabularies; convert on device).
        batch_size: if set, yield stacked batches of this many samples (the last may be shorter);
            use with ``DataLoader(ds, batch_size=None, num_workers=N)``: workers then take whole
            batches in turn, so the loader delivers this rank's stream in exact order.
        schedule: ``"fixed"`` (constant shares) or ``"anytime"`` (the cumulative counts follow the
            plan's ``allocation_for_budget`` path; needs such a plan as ``weights``).
        verify: shard check on open: ``"checksum"``, ``"size"`` or ``"none"``.

    Samples are dicts ``{"input_ids", "labels", "domain", "seq_index"}``; ``labels`` is the same
    tensor object as ``input_ids`` (models shift labels internally; clone before editing in place).

    - Per sample (``batch_size=None``): ``input_ids`` is a ``[seq_len]`` tensor (``int64``, or the
      compact dtype), ``domain`` and ``seq_index`` are Python ints.
    - Batches (``batch_size=B``): ``input_ids`` is a ``[B, seq_len]`` tensor (``int64`` for
      ``"torch"``, ``torch.uint16`` / ``torch.int32`` for ``"compact"``), ``domain`` and ``seq_index``
      are ``int64`` tensors ``[B]`` (the last batch may be shorter). All three are views of ONE
      storage (``input_ids`` at its start). From a DataLoader worker a batch of up to 1 MiB crosses
      to the main process as raw bytes through the worker's pipe (a ``dict`` subclass that
      unpickles as a plain ``dict``), a larger one as a single shared-memory segment; see
      :mod:`autoscale_data.dataset._batch`. ``pin_memory=True`` pins each of the three tensors (only ``input_ids`` is
      large). With ``output="numpy"`` all three are ``int64`` numpy arrays.
    """

    def __init__(
        self,
        domains: DomainsArg,
        weights: Mapping[str, float] | Any,
        budget_tokens: int,
        seq_len: int,
        seed: int = 0,
        *,
        max_epochs: float | Mapping[str, float] | None = None,
        shuffle_window: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        output: str = "torch",
        batch_size: int | None = None,
        schedule: str = "fixed",
        verify: str = "checksum",
    ) -> None:
        super().__init__()
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
            raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}")
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
        if schedule not in ("fixed", "anytime"):
            raise ValueError(f"schedule must be 'fixed' or 'anytime', got {schedule!r}")
        if isinstance(shuffle_window, bool) or not isinstance(shuffle_window, int) or shuffle_window < 0:
            raise ValueError(f"shuffle_window must be an integer >= 0, got {shuffle_window!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
        if verify not in ("checksum", "size", "none"):
            raise ValueError(f"verify must be 'checksum', 'size' or 'none', got {verify!r}")
        self.rank, self.world_size = resolve_distributed(rank, world_size)
        stores = open_domains(domains, verify)
        self.domain_names: list[str] = list(stores)
        plan = weights if hasattr(weights, "weights_for_budget") else None
        raw = plan.weights_for_budget(budget_tokens) if plan is not None else weights
        self.weights: dict[str, float] = validate_weights(raw, self.domain_names)
        total, counts = sequence_budget(list(self.weights.values()), budget_tokens, seq_len)
        stream = None
        if schedule == "anytime":
            from ..mixing.schedule import anytime_counts_and_stream

            if plan is None or not hasattr(plan, "allocation_for_budget"):
                raise ValueError("schedule='anytime' needs a plan object with allocation_for_budget(N) "
                                 "as weights, not a plain mapping")
            counts, stream = anytime_counts_and_stream(plan, self.domain_names, total, seq_len)
        self.seq_len = seq_len
        self.seed = seed
        self.budget_tokens = int(budget_tokens)
        self.output = output
        self.batch_size = batch_size
        self.schedule = schedule
        self.shuffle_window = shuffle_window
        self.max_epochs = _epoch_caps(max_epochs, self.domain_names)
        self._reader = DomainSplits(stores, "train", seq_len)
        available = self._reader.num_sequences
        for name, need, avail in zip(self.domain_names, counts, available, strict=False):
            check_supply(name, int(need), avail, seq_len, self.max_epochs[name], stores[name].num_tokens)
        self.sequences_per_domain: dict[str, int] = {n: int(c) for n, c in zip(self.domain_names, counts, strict=False)}
        self.total_sequences = int(total)
        self._index = build_index(self.domain_names, counts, available, seed,
                                  shuffle_window=shuffle_window, stream=stream)
        self.config: dict[str, Any] = {
            "domains": self.domain_names,
            "stores": {n: store_summary(s) for n, s in stores.items()},
            "weights": self.weights,
            "sequences": self.sequences_per_domain,
            "budget_tokens": self.budget_tokens,
            "seq_len": seq_len,
            "seed": int(seed),
            "shuffle_window": shuffle_window,
            "schedule": schedule,
        }
        self.fingerprint: str = fingerprint(self.config)
        self._block = batch_size or 1
        self._origin = 0  # resume cursor from the last load_state_dict
        self._pending = False  # the next __iter__ starts at _origin (else at 0)
        self._start_unit: int | None = None  # a DataLoader worker's own next unit, from its saved state
        self._live: dict[str, int] | None = None  # progress of the most recent iterator in this process

    # ------------------------------------------------------------------ layout
    @property
    def index_nbytes(self) -> int:
        """Bytes of the in-memory global index (about 5 per sequence)."""
        return self._index.nbytes

    def _layout(self, base: int) -> tuple[int, int]:
        """This rank's first global position at or after ``base`` and how many positions it owns."""
        first = base + (self.rank - base) % self.world_size
        n_local = 0 if first >= self.total_sequences else -(-(self.total_sequences - first) // self.world_size)
        return first, n_local

    def _cursor(self, base: int, k: int) -> int:
        """Global cursor after this rank took ``k`` samples of its slice from ``base``.

        Ranks consume in step, so after each took ``k`` samples the positions ``[base, base + k W)``
        are consumed, whichever rank reports it.
        """
        _, n_local = self._layout(base)
        if not 0 <= k <= n_local:
            raise ValueError(f"consumed={k} is outside [0, {n_local}]: this rank has {n_local} samples "
                             f"from position {base}")
        return min(self.total_sequences, base + k * self.world_size)

    def _current_base(self) -> int:
        if self._live is not None:
            return self._live["base"]
        return self._origin if self._pending else 0

    def __len__(self) -> int:
        """Items (samples, or batches with ``batch_size``) the next pass yields on this rank (all workers)."""
        _, n_local = self._layout(self._origin if self._pending else 0)
        return -(-n_local // self._block)

    # --------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        num_workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        base = self._origin if self._pending else 0
        unit = self._start_unit if (self._pending and self._start_unit is not None) else worker
        self._pending, self._start_unit = False, None
        live = {"base": base, "next_unit": unit, "num_workers": num_workers, "worker": worker}
        self._live = live
        first, n_local = self._layout(base)
        if self.batch_size is None:
            return self._samples(first, n_local, unit, num_workers, live)
        return self._batches(first, n_local, unit, num_workers, live)

    def _samples(self, first: int, n_local: int, unit: int, step: int,
                 live: dict[str, int]) -> Iterator[dict[str, Any]]:
        stride = self.world_size * step
        seq_len, output = self.seq_len, self.output
        sequence = [split.sequence for split in self._reader.splits]
        domains, sequences = self._index.domains, self._index.sequences
        as_int64 = output == "torch"
        from_numpy, int64 = torch.from_numpy, np.int64
        for chunk in range(unit, n_local, step * _CHUNK):
            a = first + chunk * self.world_size
            b = first + min(n_local - 1, chunk + step * (_CHUNK - 1)) * self.world_size + 1
            u = chunk
            for d, s in zip(domains[a:b:stride].tolist(), sequences[a:b:stride].tolist(), strict=False):
                tokens = sequence[d](s, seq_len)
                ids = from_numpy(tokens.astype(int64)) if as_int64 else to_output(tokens, output, owned=False)
                u += step
                live["next_unit"] = u
                yield {"input_ids": ids, "labels": ids, "domain": d, "seq_index": s}
        live["next_unit"] = max(live["next_unit"], n_local)

    def _batches(self, first: int, n_local: int, unit: int, step: int,
                 live: dict[str, int]) -> Iterator[dict[str, Any]]:
        world, size, seq_len = self.world_size, self._block, self.seq_len
        domains, sequences = self._index.domains, self._index.sequences
        read = self._reader.read_batch
        numpy_out = self.output == "numpy"
        compact = self.output == "compact"
        token_dtype = compact_dtype(self._reader.dtype) if compact else torch.int64
        in_worker = get_worker_info() is not None  # batches go to another process (see _batch)
        for u in range(unit, -(-n_local // size), step):
            i0, i1 = u * size, min(u * size + size, n_local)
            a, b = first + i0 * world, first + (i1 - 1) * world + 1
            d, s = domains[a:b:world], sequences[a:b:world]
            live["next_unit"] = u + step
            if numpy_out:
                arr = read(d, s, np.empty((d.size, seq_len), dtype=np.int64))
                yield {"input_ids": arr, "labels": arr, "domain": d.astype(np.int64), "seq_index": s.astype(np.int64)}
                continue
            batch, ids, dom, seq = new_batch(d.size, seq_len, token_dtype, in_worker=in_worker)
            dom.numpy()[:] = d
            seq.numpy()[:] = s
            rows = ids.numpy()
            read(d, s, rows.view(self._reader.dtype) if compact else rows)
            yield batch

    # ------------------------------------------------------------------- state
    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """The resume state (plain JSON-able values).

        Args:
            consumed: samples (not batches) this rank has taken since the start of the current pass
                (the loaded resume point, or 0). Needed with a plain ``DataLoader`` with workers,
                where the iteration runs in other processes. Without it the state follows the most
                recent iterator of this process; inside a DataLoader worker (torchdata's
                ``StatefulDataLoader`` calls it there) it describes that worker's own progress.

        Returns:
            ``{"format", "version", "fingerprint", "config", "cursor", "consumed", "total_sequences",
            "rank", "world_size", "worker"}``: ``cursor`` is the global stream position before which
            every sample has been yielded; ``consumed`` the per-domain counts of that prefix.
        """
        worker_state = None
        live = self._live
        if consumed is not None:
            cursor = self._cursor(self._current_base(), int(consumed))
        elif live is None:
            cursor = self._origin if self._pending else 0
            if self._pending and self._start_unit is not None:
                raise ValueError("this dataset holds a DataLoader worker's state that has not been iterated; "
                                 "call state_dict(consumed=...) or iterate first")
        else:
            _, n_local = self._layout(live["base"])
            k = min(live["next_unit"] * self._block, n_local)
            cursor = self._cursor(live["base"], k)
            if get_worker_info() is not None:
                worker_state = {"id": live["worker"], "num_workers": live["num_workers"],
                                "base": live["base"], "next_unit": live["next_unit"], "block": self._block,
                                "rank": self.rank, "world_size": self.world_size}
        counts = self._index.consumed(cursor)
        return {
            "format": STATE_FORMAT,
            "version": _STATE_VERSION,
            "fingerprint": self.fingerprint,
            "config": self.config,
            "cursor": int(cursor),
            "consumed": {n: int(c) for n, c in zip(self.domain_names, counts, strict=False)},
            "total_sequences": self.total_sequences,
            "rank": self.rank,
            "world_size": self.world_size,
            "worker": worker_state,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a state: the next iteration starts at its cursor (once; later passes start at 0).

        The world size, rank and number of workers may differ from when the state was saved (the
        stream is global), except for a per-worker state saved inside a DataLoader worker, which only
        the same worker of the same layout can resume.

        Raises:
            ValueError: not a state of this class, a different mixture (the message names every
                config entry that differs), a cursor outside the stream, or per-domain counts that
                do not match the stream at the cursor.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a {STATE_FORMAT} state: {type(state).__name__} with keys "
                             f"{sorted(state) if isinstance(state, Mapping) else '-'}")
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported state version {state.get('version')!r}, expected {_STATE_VERSION}")
        if state.get("fingerprint") != self.fingerprint:
            diff = config_diff(state.get("config") or {}, self.config) or ["(config not recorded)"]
            raise ValueError(f"the state was saved for a different mixture (fingerprint {state.get('fingerprint')!r}, "
                             f"this dataset {self.fingerprint!r}); differences: " + "; ".join(diff))
        cursor = state.get("cursor")
        if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor <= self.total_sequences:
            raise ValueError(f"state cursor {cursor!r} is outside the stream [0, {self.total_sequences}]")
        expected = {n: int(c) for n, c in zip(self.domain_names, self._index.consumed(cursor), strict=False)}
        if dict(state.get("consumed") or {}) != expected:
            raise ValueError(f"per-domain consumed counts in the state {dict(state.get('consumed') or {})} do "
                             f"not match the stream at cursor {cursor}: expected {expected}")
        worker = state.get("worker")
        if worker:
            info = get_worker_info()
            here = None if info is None else {"id": info.id, "num_workers": info.num_workers,
                                              "block": self._block, "rank": self.rank,
                                              "world_size": self.world_size}
            saved = {k: worker.get(k) for k in ("id", "num_workers", "block", "rank", "world_size")}
            if here != saved:
                raise ValueError(f"this state describes one DataLoader worker's progress ({saved}) and can only "
                                 f"be resumed by that same worker, not here ({here}); for a new layout save "
                                 "the state with state_dict(consumed=...) from the main process")
            self._origin, self._start_unit = int(worker["base"]), int(worker["next_unit"])
        else:
            self._origin, self._start_unit = cursor, None
        self._pending = True
        self._live = None

    def __repr__(self) -> str:
        shares = ", ".join(f"{n}={c}" for n, c in self.sequences_per_domain.items())
        return (f"ScaleAwareMixtureDataset({self.total_sequences} sequences of {self.seq_len} tokens: {shares}; "
                f"rank {self.rank}/{self.world_size}, fingerprint {self.fingerprint})")

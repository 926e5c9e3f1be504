"""Phases of a run and the segment table of a stream: exact counts per phase, cut at a cursor.

A stream is planned as *segments* ``[starts[j], starts[j+1])`` with exact per-domain counts and
the mix each was drawn from (``weights[j]``, used to re-plan a segment cut short when a run is
continued under another configuration). A phase is one segment; the anytime schedule is many.
:class:`PlannedCounts` gives a one-phase stream its counts directly (a plan's whole sequences per domain).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import is_int
from .budget import allowed_draws, largest_remainder, sequence_budget, validate_weights

__all__ = ["ANYTIME_SCHEDULE", "FIXED_SCHEDULE", "Phase", "PlannedCounts", "SCHEDULES", "SegmentTable",
           "check_draws", "phase_bounds", "segment_table"]

SCHEDULES: tuple[str, ...] = ("fixed", "anytime")
"""A stream's schedule: constant shares, or the cumulative counts of a plan's optimal-allocation path."""
FIXED_SCHEDULE, ANYTIME_SCHEDULE = SCHEDULES


@dataclass(frozen=True)
class Phase:
    """One phase of a run: ``budget_tokens`` tokens drawn at one mix.

    Args:
        budget_tokens: the phase's tokens (> 0); the phases of a dataset sum to its budget.
        weights: domain name -> weight (summing to 1), or a plan with
            ``weights_for_budget(budget_tokens)`` (evaluated at this phase's budget).
    """

    budget_tokens: int
    weights: Mapping[str, float] | Any

    def __post_init__(self) -> None:
        if not is_int(self.budget_tokens) or self.budget_tokens <= 0:
            raise ValueError("a phase's budget_tokens must be a positive integer, got "
                             f"{self.budget_tokens!r}")
        object.__setattr__(self, "budget_tokens", int(self.budget_tokens))


@dataclass(frozen=True)
class PlannedCounts:
    """Whole sequences per domain that a one-phase stream holds exactly: the ``weights`` of
    :func:`segment_table` that skips the largest-remainder split
    (:meth:`~autoscale_data.ScaleAwareMixtureDataset.from_counts`).

    Its stream is the one of the shares ``count / total``, and so the one of any weights whose
    largest-remainder split of the total gives these counts.

    Raises:
        ValueError: not a mapping of domain names to non-negative integers, or no sequence at all.
    """

    sequences: Mapping[str, int]

    def __post_init__(self) -> None:
        if not isinstance(self.sequences, Mapping):
            raise ValueError(f"counts = {self.sequences!r} is invalid: expected a mapping of domain name to "
                             "whole sequences")
        bad = {d: n for d, n in self.sequences.items() if not (is_int(n) and n >= 0)}
        if bad:
            raise ValueError(f"counts {bad} are invalid: expected whole numbers of sequences >= 0")
        if self.total < 1:
            raise ValueError(f"counts = {dict(self.sequences)} is invalid: expected at least one sequence in "
                             "all")
        object.__setattr__(self, "sequences", {str(d): int(n) for d, n in self.sequences.items()})

    @property
    def total(self) -> int:
        """Sequences of all domains."""
        return int(sum(int(n) for n in self.sequences.values()))

    def table(self, names: Sequence[str]) -> tuple[SegmentTable, dict[str, float]]:
        """The one segment of these counts over the domains ``names`` (in stream order) and their shares.

        Raises:
            ValueError: counts of unknown domains, or a domain without a count.
        """
        unknown = sorted(set(self.sequences) - set(names))
        missing = sorted(set(names) - set(self.sequences))
        if unknown:
            raise ValueError(f"counts name unknown domain(s) {unknown}; the domains are {list(names)}")
        if missing:
            raise ValueError(f"counts are missing domain(s) {missing}; give every domain a count (0 to skip "
                             "it)")
        total = self.total
        counts = np.asarray([[self.sequences[n] for n in names]], dtype=np.int64)
        # as RunSpec.weights and a user's count / total
        shares = {n: self.sequences[n] / total for n in names}
        return SegmentTable.of_counts(np.asarray([0, total], dtype=np.int64), counts), shares


def phase_bounds(budgets: Sequence[int], seq_len: int, budget_tokens: int) -> list[int]:
    """Stream positions where the phases start and end (``len(budgets) + 1`` of them).

    Phase ``p`` ends at ``floor(sum(budgets[:p+1]) / seq_len)`` sequences.

    Raises:
        ValueError: budgets that do not sum to ``budget_tokens``, or a phase shorter than one sequence.
    """
    if sum(budgets) != budget_tokens:
        raise ValueError(f"the phase budgets {list(budgets)} sum to {sum(budgets)} tokens, not the dataset's "
                         f"budget_tokens={budget_tokens}")
    bounds = [0]
    acc = 0
    for p, b in enumerate(budgets):
        acc += b
        bounds.append(acc // seq_len)
        if bounds[-1] <= bounds[-2]:
            raise ValueError(f"phase {p} ({b} tokens) holds no whole sequence of {seq_len} tokens")
    return bounds


@dataclass(frozen=True)
class SegmentTable:
    """Segments of a stream: ``starts`` (``J + 1``), ``counts [J, D]``, ``weights [J, D]``, ``phases [J]``
    (an empty plan, the rest of a stream cut at its end, keeps the last phase: ``phases [1]``)."""

    starts: np.ndarray
    counts: np.ndarray
    weights: np.ndarray
    phases: np.ndarray

    @classmethod
    def of_phases(cls, bounds: Sequence[int], weights: Sequence[Sequence[float]]) -> SegmentTable:
        """One segment per phase, each with the largest-remainder counts of its weights."""
        w = np.asarray(weights, dtype=np.float64)
        counts = np.stack([largest_remainder(w[p], bounds[p + 1] - bounds[p]) for p in range(w.shape[0])])
        return cls(np.asarray(bounds, dtype=np.int64), counts, w, np.arange(w.shape[0]))

    @classmethod
    def of_counts(cls, starts: np.ndarray, counts: np.ndarray) -> SegmentTable:
        """Segments given by counts (the anytime path); their mix is their counts' shares; one phase."""
        lengths = np.diff(starts).astype(np.float64)
        return cls(np.asarray(starts, dtype=np.int64), np.asarray(counts, dtype=np.int64),
                   counts / lengths[:, None], np.zeros(counts.shape[0], dtype=np.int64))

    @property
    def total(self) -> int:
        return int(self.starts[-1])

    @property
    def totals(self) -> np.ndarray:
        return self.counts.sum(axis=0)

    def after(self, cursor: int) -> SegmentTable:
        """The plan of ``[cursor, total)``: earlier segments dropped; the one cut short re-planned
        at its own mix (largest remainder over what is left of it).

        Raises:
            ValueError: ``cursor`` outside ``[0, total]``.
        """
        if not 0 <= cursor <= self.total:
            raise ValueError(f"cursor {cursor} is outside the planned stream [0, {self.total}]")
        if cursor == self.total:
            return SegmentTable(np.asarray([cursor], dtype=np.int64), self.counts[:0], self.weights[:0],
                               self.phases[-1:])  # no segment left; the phase it ended in
        j = int(np.searchsorted(self.starts, cursor, side="right")) - 1
        counts = self.counts[j:].copy()
        if cursor > self.starts[j]:
            counts[0] = largest_remainder(self.weights[j], int(self.starts[j + 1]) - cursor)
        starts = np.concatenate([[cursor], self.starts[j + 1:]])
        return SegmentTable(starts, counts, self.weights[j:], self.phases[j:])


def check_draws(names: Sequence[str], segments: SegmentTable, base: np.ndarray, available: Sequence[int],
                seq_len: int, caps: Mapping[str, float | None]) -> None:
    """Raise ``ValueError`` naming the domain and phase that asks more sequences than a domain allows.

    Without a cap a domain's sequences are drawn at most once; with ``max_epochs`` at most
    ``floor(max_epochs * available)`` times. ``base`` holds the draws already made (a continued run).
    """
    drawn = np.asarray(base, dtype=np.int64) + np.cumsum(segments.counts,
                                                         axis=0) if segments.counts.size else None
    if drawn is None:
        return
    for d, name in enumerate(names):
        avail, cap = int(available[d]), caps[name]
        allowed = allowed_draws(avail, cap)
        over = np.flatnonzero(drawn[:, d] > allowed)
        if over.size:
            j = int(over[0])
            hint = "allow repetition with max_epochs" if cap is None else f"raise max_epochs above {cap}"
            raise ValueError(
                f"phase {int(segments.phases[j])} asks more of domain {name!r} than is left: by position "
                f"{int(segments.starts[j + 1])} it would have drawn {int(drawn[j, d])} sequences of "
                f"{seq_len} tokens ({int(drawn[j, d]) * seq_len} tokens), it allows {allowed} ({avail} whole "
                f"sequences{'' if cap is None else f' x max_epochs {cap}'}); lower its weight or the budget, "
                f"or {hint}")


def _phase_list(weights: Any) -> list[Phase] | None:
    """``weights`` as a list of phases, or None for a single mix (a mapping or a plan)."""
    if isinstance(weights, Phase):
        return [weights]
    if isinstance(weights, Sequence) and not isinstance(weights, (str, bytes)):
        phases = [p if isinstance(p, Phase) else Phase(*p) for p in weights]
        if not phases:
            raise ValueError("phases is empty: give at least one Phase(budget_tokens, weights)")
        return phases
    return None


def _weights_of(weights: Any, names: Sequence[str], budget_tokens: int) -> dict[str, float]:
    plan = hasattr(weights, "weights_for_budget")
    return validate_weights(weights.weights_for_budget(budget_tokens) if plan else weights, names)


def segment_table(weights: Any, names: Sequence[str], budget_tokens: int, seq_len: int,
                  schedule: str = FIXED_SCHEDULE) -> tuple[SegmentTable, dict[str, float], dict[str, Any]]:
    """The segment table of a dataset's stream.

    Args:
        weights: a mapping name -> weight, a plan with ``weights_for_budget`` (and
            ``allocation_for_budget`` for ``schedule="anytime"``), or a sequence of :class:`Phase`
            (or ``(budget_tokens, weights)`` pairs) whose budgets sum to ``budget_tokens``.
        names: the domains, in stream order.
        budget_tokens: the run's tokens.
        seq_len: tokens per sequence.
        schedule: ``"fixed"`` or ``"anytime"`` (one phase only).

    Returns:
        ``(plan, weights, info)``: the weights of a single phase (else each domain's share of the
        whole run), and ``info = {"bounds": phase start/end positions, "phases": the phases' budgets
        and weights as JSON, or None for a single phase}``.
    """
    if isinstance(weights, PlannedCounts):
        return _counted(weights, names, budget_tokens, seq_len, schedule)
    phases = _phase_list(weights)
    if phases is not None and len(phases) == 1:  # one phase is the plain dataset
        phase_bounds([phases[0].budget_tokens], seq_len, budget_tokens)
        weights, phases = phases[0].weights, None
    if phases is None:
        w = _weights_of(weights, names, budget_tokens)
        total, _ = sequence_budget(list(w.values()), budget_tokens, seq_len)
        if schedule == ANYTIME_SCHEDULE:
            if not hasattr(weights, "allocation_for_budget"):
                raise ValueError("schedule='anytime' needs a plan object with allocation_for_budget(N) "
                                 "as weights, not a plain mapping")
            from .anytime import anytime_segments

            starts, counts = anytime_segments(weights, names, total, seq_len)
            return SegmentTable.of_counts(starts, counts), w, {"bounds": [0, total], "phases": None}
        return SegmentTable.of_phases([0, total], [list(w.values())]), w, {"bounds": [0, total],
                                                                           "phases": None}
    if schedule != FIXED_SCHEDULE:
        raise ValueError(f"schedule={schedule!r} follows one plan's path; it cannot be combined with phases")
    bounds = phase_bounds([p.budget_tokens for p in phases], seq_len, budget_tokens)
    mixes = [_weights_of(p.weights, names, p.budget_tokens) for p in phases]
    table = SegmentTable.of_phases(bounds, [list(m.values()) for m in mixes])
    shares = table.totals / table.total
    info = {"bounds": bounds, "phases": [{"budget_tokens": p.budget_tokens, "weights": m}
                                         for p, m in zip(phases, mixes, strict=True)]}
    return table, {n: float(x) for n, x in zip(names, shares, strict=True)}, info


def _counted(planned: PlannedCounts, names: Sequence[str], budget_tokens: int, seq_len: int,
             schedule: str) -> tuple[SegmentTable, dict[str, float], dict[str, Any]]:
    """:func:`segment_table` of planned counts: one segment holding exactly them."""
    if schedule != "fixed":
        raise ValueError(f"schedule={schedule!r} follows a plan's path; planned counts are a fixed schedule")
    total, _ = sequence_budget([1.0], budget_tokens, seq_len)
    if total != planned.total:
        raise ValueError(f"budget_tokens={budget_tokens} holds {total} sequences of {seq_len} tokens, the "
                         f"counts {planned.total}")
    table, shares = planned.table(names)
    return table, shares, {"bounds": [0, total], "phases": None}

"""The closed-form stream of a segment table: phases, the anytime path, runs continued from another mix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import is_int
from ..mixing import MixtureStream, SegmentTable, check_draws
from ._state import CURSOR_KEY, DOMAIN_COUNTS_KEY, FINGERPRINT_KEY
from ._stream import CONTINUED_KEY, SEQUENCES_KEY, MixtureSource

__all__ = ["PhasedStream", "StreamPlan"]

_CHUNK = 8192  # stream positions looked up at once


@dataclass(frozen=True)
class StreamPlan:
    """What a closed-form stream is built from, and what a continuation of it must respect.

    Attributes:
        names: the domains, in the dataset's order.
        sequences: whole sequences of each domain's training split (the size of its order).
        available: sequences a domain's epochs count (its pool's for a pooled domain).
        segments: the whole stream's segments (a continuation keeps those after its cursor).
    """

    names: list[str]
    sequences: list[int]
    available: list[int]
    seed: int
    seq_len: int
    budget_tokens: int
    max_epochs: Mapping[str, float]
    segments: SegmentTable
    shuffle_window: int = 0
    pools: Mapping[str, int] | None = None


class PhasedStream(MixtureStream, MixtureSource):
    """The stream of ``plan``'s segments, or of those after ``continued``'s cursor (a continued run).

    Args:
        plan: the configuration's stream.
        continued: ``{"cursor", "domain_counts", "fingerprint"}`` of the run this one continues (checked by
            :meth:`continued`), or ``None``.
    """

    chunk = _CHUNK

    def __init__(self, plan: StreamPlan, continued: Mapping[str, Any] | None = None) -> None:
        self.plan, self.record = plan, None if continued is None else dict(continued)
        segments, base = plan.segments, None
        if continued is not None:
            segments = plan.segments.after(int(continued[CURSOR_KEY]))
            base = [continued[DOMAIN_COUNTS_KEY][n] for n in plan.names]
        super().__init__(plan.names, plan.sequences, plan.seed, segments.starts, segments.counts, base=base,
                         shuffle_window=plan.shuffle_window, phases=segments.phases, pools=plan.pools or None)
        self.sequences = {n: int(c) for n, c in zip(plan.names, self.totals, strict=True)}

    @property
    def origin_step(self) -> int | None:
        """0; ``None`` for a continued run (the step at its cursor is not known to later passes)."""
        return 0 if self.record is None else None

    def config_entries(self) -> dict[str, Any]:
        entries: dict[str, Any] = {SEQUENCES_KEY: self.sequences}
        if self.record is not None:
            entries[CONTINUED_KEY] = self.record
        return entries

    def continued(self, record: Mapping[str, Any]) -> MixtureSource:
        """This configuration's stream after ``record``'s cursor, each domain's order going on from there.

        Raises:
            ValueError: a cursor beyond the budget, counts of other domains, a domain asked beyond its supply.
        """
        plan, names, total = self.plan, self.plan.names, self.plan.segments.total
        cursor, counts = record.get(CURSOR_KEY), record.get(DOMAIN_COUNTS_KEY)
        if not is_int(cursor) or cursor < 0:
            raise ValueError(f"state cursor {cursor!r} is not a stream position")
        if cursor > total:
            budget = f"{plan.budget_tokens} tokens, {total} sequences"
            raise ValueError(f"the budget of this configuration ({budget}) is smaller than the state's "
                             f"cursor ({cursor} sequences already consumed)")
        if (not isinstance(counts, Mapping) or set(counts) != set(names)
                or not all(is_int(v) and v >= 0 for v in counts.values()) or sum(counts.values()) != cursor):
            raise ValueError(f"the state's per-domain counts {counts!r} do not describe {cursor} sequences "
                             f"of the domains {names}")
        base = {n: int(counts[n]) for n in names}
        check_draws(names, plan.segments.after(int(cursor)), np.asarray(list(base.values()), dtype=np.int64),
                    plan.available, plan.seq_len, plan.max_epochs)
        return type(self)(plan, {CURSOR_KEY: int(cursor), DOMAIN_COUNTS_KEY: base,
                                 FINGERPRINT_KEY: record.get(FINGERPRINT_KEY)})

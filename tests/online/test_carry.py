"""Segments decided one at a time: exact counts, the residual carried, within one sequence of the targets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.online.carry import carried_counts

mixes = st.lists(st.lists(st.sampled_from([0.0, 0.01, 0.1, 0.3, 1.0, 2.5]), min_size=4, max_size=4)
                 .filter(lambda w: sum(w) > 0), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(mixes=mixes, lengths=st.lists(st.integers(1, 50), min_size=40, max_size=40))
def test_cumulative_counts_stay_within_one_sequence(mixes: list[list[float]], lengths: list[int]) -> None:
    target = np.zeros(4)
    drawn = np.zeros(4, dtype=np.int64)
    for raw, length in zip(mixes, lengths, strict=False):
        w = np.asarray(raw) / sum(raw)
        target = target + w * length
        counts = carried_counts(target, drawn, length)
        assert counts.dtype == np.int64 and counts.min() >= 0 and int(counts.sum()) == length
        drawn = drawn + counts
        assert np.abs(target - drawn).max() < 1.0


def test_by_hand() -> None:
    # 1/3 each over 2 positions: targets 2/3 each; two domains get 1 (largest remainder, lower index first)
    c = carried_counts(np.full(3, 2 / 3), np.zeros(3, dtype=np.int64), 2)
    assert c.tolist() == [1, 1, 0]
    # the next 1 position: targets 1 each; the third domain, behind by 1, gets it
    assert carried_counts(np.full(3, 1.0), c, 1).tolist() == [0, 0, 1]

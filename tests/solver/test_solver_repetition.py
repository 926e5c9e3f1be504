"""Effective tokens of repeated data (Muennighoff et al. 2023's data-constrained form) and the per-domain table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.solver.repetition import R_STAR, DomainEpochs, effective_tokens, epochs_table, raw_tokens


@settings(max_examples=200, deadline=None)
@given(unique=st.floats(1.0, 1e9), epochs=st.floats(0.0, 200.0))
def test_effective_tokens_invert_and_are_bounded(unique: float, epochs: float) -> None:
    tokens = epochs * unique
    eff = effective_tokens(tokens, unique)
    assert eff <= tokens * (1 + 1e-12) + 1e-9 and eff < unique * (1 + R_STAR)
    if epochs <= 1:
        assert eff == pytest.approx(tokens)
    assert raw_tokens(eff, unique) == pytest.approx(tokens, rel=1e-6, abs=1e-6)
    more = effective_tokens(tokens + unique, unique)  # one more epoch is worth something, but less
    assert eff < more <= eff + unique * (1 + 1e-9)


def test_known_values_and_the_bound() -> None:
    u = 1000.0
    assert effective_tokens(5 * u, u) == pytest.approx(u + u * R_STAR * (1 - math.exp(-4 / R_STAR)))
    assert effective_tokens(2 * u, u, r_star=1.0) == pytest.approx(u * (2 - math.exp(-1)))
    assert raw_tokens(u * (1 + R_STAR), u) == math.inf
    assert np.allclose(effective_tokens(np.asarray([0.0, u, 3 * u]), u)[:2], [0.0, u])
    for bad in ({"tokens": -1.0, "unique": u}, {"tokens": 1.0, "unique": 0.0}, {"tokens": 1.0, "unique": u,
                                                                                   "r_star": 0.0}):
        with pytest.raises(ValueError):
            effective_tokens(**bad)


def test_epochs_table_flags_short_and_capped_domains() -> None:
    rows = {r.domain: r for r in epochs_table({"a": 100.0, "b": 800.0, "c": 1200.0}, {"a": 1000.0, "b": 100.0,
                                                                                        "c": 100.0}, max_epochs=8)}
    assert rows["a"].epochs == 0.1 and not rows["a"].short and not rows["a"].at_cap
    assert rows["b"].epochs == 8 and rows["b"].at_cap and not rows["b"].short
    assert rows["c"].short and rows["c"].effective < rows["c"].tokens
    assert DomainEpochs.from_json(rows["c"].to_json()) == rows["c"]
    assert epochs_table({"a": 2.0}, {"a": 1.0})[0].short  # no max_epochs: one epoch
    with pytest.raises(ValueError, match="missing for domains"):
        epochs_table({"z": 1.0}, {"a": 1.0})

"""Tokens saved: interpolation in log-tokens, 'not reached', negative savings, seed means."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscale_data.runner.metrics import mean_curve, tokens_saved, tokens_to_reach


def test_interpolates_in_log_tokens() -> None:
    t, status = tokens_to_reach([100, 10_000], [4.0, 2.0], 3.0)
    assert status == "reached" and t == pytest.approx(1_000)


def test_first_eval_and_never() -> None:
    assert tokens_to_reach([100, 200], [1.0, 0.5], 2.0) == (100.0, "at_first_eval")
    assert tokens_to_reach([100, 200], [3.0, 2.5], 2.0) == (None, "not_reached")


def test_saving_positive_when_autoscale_is_better() -> None:
    auto = {"tokens": [1e3, 1e4, 1e5], "mean": [5.0, 3.0, 2.0]}
    base = {"tokens": [1e3, 1e4, 1e5], "mean": [5.0, 3.5, 3.0]}
    s = tokens_saved(auto, base)
    assert s["status"] == "reached"
    assert s["saved_fraction"] == pytest.approx(1 - 1e4 / 1e5)


def test_not_reached_gives_no_number_and_the_honest_reverse() -> None:
    auto = {"tokens": [1e3, 1e4, 1e5], "mean": [5.0, 3.5, 3.0]}
    base = {"tokens": [1e3, 1e4, 1e5], "mean": [5.0, 3.0, 2.0]}
    s = tokens_saved(auto, base)
    assert s["status"] == "not_reached" and s["saved_fraction"] is None
    assert s["baseline_saved_fraction"] == pytest.approx(1 - 1e4 / 1e5)


@given(st.lists(st.floats(0.1, 10), min_size=2, max_size=8))
def test_reached_point_lies_between_evaluations(values: list[float]) -> None:
    values = sorted(values, reverse=True)
    tokens = [1000.0 * 2**i for i in range(len(values))]
    level = (values[0] + values[-1]) / 2
    t, status = tokens_to_reach(tokens, values, level)
    if values[0] <= level:
        assert status == "at_first_eval"
    else:
        assert status == "reached" and tokens[0] <= t <= tokens[-1]


def test_mean_curve_over_seeds() -> None:
    c1 = [{"tokens": 10, "mean_loss": 2.0}, {"tokens": 20, "mean_loss": 1.0}]
    c2 = [{"tokens": 10, "mean_loss": 4.0}, {"tokens": 20, "mean_loss": 3.0}]
    m = mean_curve([c1, c2], "mean_loss")
    assert m["tokens"] == [10.0, 20.0] and m["mean"] == [3.0, 2.0] and m["n"] == 2
    assert m["std"][0] == pytest.approx(math.sqrt(2))

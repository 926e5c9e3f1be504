"""MixturePlan: weights for any budget, monotone path, JSON round trip, vectorised queries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.solver import MixturePlan

SCALES = [(200.0, {"a": 100.0, "b": 100.0}), (500.0, {"a": 300.0, "b": 200.0})]


def test_weights_for_budget_matches_paper_example():
    plan = MixturePlan.from_scales(SCALES, tokenizer="bytes")
    w = plan.weights_for_budget(1300)
    assert w["a"] == pytest.approx(900 / 1300) and w["b"] == pytest.approx(400 / 1300)
    assert plan.allocation_for_budget(3500) == pytest.approx({"a": 2700.0, "b": 800.0})
    assert plan.tokenizer == "bytes" and "MixturePlan" in repr(plan)


@settings(max_examples=30, deadline=None)
@given(budgets=st.lists(st.floats(1.0, 1e13), min_size=2, max_size=20))
def test_monotone_and_sums_to_budget(budgets):
    plan = MixturePlan.from_scales([(1e6, {"x": 2e5, "y": 3e5, "z": 5e5}), (4e6, {"x": 1.4e6, "y": 1.2e6, "z": 1.4e6})])
    nb = np.sort(np.array(budgets))
    alloc = plan.allocations_for_budgets(nb)
    assert alloc.sum(axis=1) == pytest.approx(nb, rel=1e-12)
    assert np.all(np.diff(alloc, axis=0) >= -1e-9 * alloc[1:])
    for n, row in zip(nb[:3], alloc[:3], strict=False):
        assert list(plan.allocation_for_budget(n).values()) == pytest.approx(row, rel=1e-12)


def test_json_round_trip(tmp_path):
    plan = MixturePlan.from_scales(SCALES, tokenizer="gpt2", token_caps={"a": 1e4, "b": 1e4},
                                   metadata={"objective": "mean_ppl"})
    plan.save(tmp_path / "plan.json")
    back = MixturePlan.load(tmp_path / "plan.json")
    assert back.tokenizer == "gpt2" and back.metadata == {"objective": "mean_ppl"}
    for n in (50, 777, 1e6):
        assert back.weights_for_budget(n) == pytest.approx(plan.weights_for_budget(n), rel=1e-12)
    assert back.warnings_for_budget(1e6) and not back.warnings_for_budget(1000)
    assert MixturePlan.from_json(plan.to_json()).domains == ("a", "b")


def test_bad_plans(tmp_path):
    with pytest.raises(ValueError, match="decrease.*allow_decreasing=True"):
        MixturePlan.from_scales([(200, {"a": 100, "b": 100}), (500, {"a": 420, "b": 80})])
    with pytest.raises(ValueError, match="tokenizer"):
        MixturePlan.from_scales(SCALES, tokenizer=3)
    with pytest.raises(ValueError, match="not a MixturePlan"):
        MixturePlan.from_json({"format": "other"})
    with pytest.raises(FileNotFoundError):
        MixturePlan.load(tmp_path / "missing.json")
    plan = MixturePlan.from_scales(SCALES)
    with pytest.raises(ValueError, match="> 0"):
        plan.weights_for_budget(0)


def test_a_plan_may_accept_decreasing_domains(tmp_path):
    scales = [(200, {"a": 100, "b": 100}), (500, {"a": 420, "b": 80})]
    plan = MixturePlan.from_scales(scales, allow_decreasing=True)
    assert plan.path.decreasing == ["b"] and 0 < plan.min_budget < 200
    assert plan.allocation_for_budget(500) == pytest.approx({"a": 420, "b": 80}, rel=1e-9)
    assert plan.weights_for_budget(2000)["b"] < 80 / 2000  # b keeps shrinking past N2, as projected
    with pytest.raises(ValueError, match="below the smallest total"):
        plan.allocation_for_budget(plan.min_budget * 0.99)
    plan.save(tmp_path / "p.json")
    back = MixturePlan.load(tmp_path / "p.json")
    assert back.allow_decreasing and back.min_budget == pytest.approx(plan.min_budget)
    assert MixturePlan.from_scales(SCALES).min_budget == 0.0

"""Weight bounds applied to a projected mix: inside the bounds, ratios kept among the free domains."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscale_data.solver import apply_weight_bounds


def test_a_weight_below_the_floor_is_raised_and_the_others_keep_their_ratio() -> None:
    out = apply_weight_bounds({"web": 0.6, "code": 0.371, "pydoc": 0.029}, min_weight=0.05)
    assert out["pydoc"] == pytest.approx(0.05)
    assert out["web"] / out["code"] == pytest.approx(0.6 / 0.371)
    assert sum(out.values()) == pytest.approx(1.0)


def test_inside_the_bounds_nothing_moves() -> None:
    w = {"a": 0.2, "b": 0.3, "c": 0.5}
    assert apply_weight_bounds(w, 0.1, 0.6) == pytest.approx(w)


def test_a_cap_and_a_floor_together() -> None:
    out = apply_weight_bounds({"a": 0.9, "b": 0.08, "c": 0.02}, 0.1, 0.7)
    assert out == pytest.approx({"a": 0.7, "b": 0.2, "c": 0.1})


@pytest.mark.parametrize("bad", [
    ({"a": 0.5, "b": 0.5}, 0.6, 1.0),      # 2 x 0.6 > 1
    ({"a": 0.5, "b": 0.5}, 0.0, 0.4),      # 2 x 0.4 < 1
    ({"a": -0.1, "b": 1.1}, 0.0, 1.0),
    ({"a": float("nan"), "b": 1.0}, 0.0, 1.0),
    ({}, 0.0, 1.0),
    ({"a": 1.0}, 0.5, 0.4),
])
def test_bad_input_is_named(bad: tuple) -> None:
    weights, lo, hi = bad
    with pytest.raises(ValueError):
        apply_weight_bounds(weights, lo, hi)


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8).filter(lambda w: sum(w) > 1e-6),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_result_is_a_mix_inside_the_bounds(raw: list[float], a: float, b: float) -> None:
    m = len(raw)
    lo = min(a, b) / m            # feasible: m * lo <= 1 <= m * hi
    hi = 1 / m + max(a, b) * (1 - 1 / m)
    w = {f"d{i}": x for i, x in enumerate(raw)}
    out = apply_weight_bounds(w, lo, hi)
    assert sum(out.values()) == pytest.approx(1.0)
    assert all(lo - 1e-9 <= v <= hi + 1e-9 for v in out.values())
    total = sum(raw)
    free = [d for d in w if lo + 1e-9 < out[d] < hi - 1e-9]
    for d, e in zip(free, free[1:], strict=False):  # domains not at a bound keep their ratios
        if w[e] > 0:
            assert out[d] / out[e] == pytest.approx(w[d] / w[e], rel=1e-6)
    if all(lo <= x / total <= hi for x in raw):
        assert out == pytest.approx({d: x / total for d, x in w.items()})


def test_infeasible_floor_names_every_short_domain() -> None:
    import numpy as np

    from autoscale_data.solver.contrib import multiplier_bounds

    with pytest.raises(ValueError, match=r"2 domains cannot supply(.|\n)*'web' \(4,433,040 tokens\), 'code' "
                                         r"(.|\n)*max_epochs"):
        multiplier_bounds(np.ones(3), 1e8, 0.05, 1.0, np.array([4_433_040.0, 1_000_000.0, 1e9]),
                          ["web", "code", "books"])


def test_a_subnormal_share_still_takes_up_what_is_left() -> None:
    out = apply_weight_bounds({"a": 1.0, "b": 5e-324}, 0.0, 0.5)  # found by hypothesis: b's rescale underflowed
    assert out == pytest.approx({"a": 0.5, "b": 0.5})

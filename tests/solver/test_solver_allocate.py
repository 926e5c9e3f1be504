"""The exact bounded allocation: agreement with SLSQP, KKT, bounds, degenerate cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from autoscale_data.solver.allocate import allocate, kkt_violation, multiplier_bounds


def _problem(seed: int, m: int):
    rng = np.random.default_rng(seed)
    beta = rng.uniform(0.5, 2.0, m)
    a = rng.uniform(0.2, 6.0, m)
    b = rng.uniform(0.1, 1.5, m)
    base = rng.uniform(0.5, 2.0, m) * 1e6
    return beta, a, b, base


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(2, 8), wmin=st.sampled_from([0.0, 0.02]),
       wmax=st.sampled_from([1.0, 0.4]))
def test_matches_slsqp_and_satisfies_kkt(seed, m, wmin, wmax):
    beta, a, b, base = _problem(seed, m)
    n = float(base.sum())
    if wmax * m < 1:
        wmax = 1.0
    lo, hi = multiplier_bounds(base, n, wmin, wmax, None)
    sol = allocate(beta, a, b, base, n, lo, hi)
    x = sol.x
    w = x * base / n
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(w >= wmin - 1e-12) and np.all(w <= wmax + 1e-12)
    assert kkt_violation(beta, a, b, base, x, lo, hi) < 1e-8

    def f(v):
        return float(np.sum(beta * (v + a) ** (-b)))

    ref = minimize(f, np.clip(np.ones(m), lo, hi), method="SLSQP", bounds=list(zip(lo, hi, strict=False)),
                   constraints=({"type": "eq", "fun": lambda v: v @ base / n - 1.0},),
                   options={"ftol": 1e-15, "maxiter": 2000})
    # SLSQP meets the budget only to its tolerance; ours is exact
    assert f(x) <= f(ref.x) + 1e-8 * abs(f(ref.x))


def test_caps_bind_and_are_reported():
    beta, a, b, base = _problem(5, 4)
    n = float(base.sum())
    free = allocate(beta, a, b, base, n, *multiplier_bounds(base, n, 0.0, 1.0, None)).x * base
    j = int(np.argmax(free))
    caps = np.full(4, np.inf)
    caps[j] = 0.5 * free[j]
    lo, hi = multiplier_bounds(base, n, 0.0, 1.0, caps)
    sol = allocate(beta, a, b, base, n, lo, hi)
    assert sol.x[j] * base[j] == pytest.approx(caps[j], rel=1e-12)
    assert sol.at_upper[j] and (sol.x @ base) == pytest.approx(n, rel=1e-13)


def test_flat_domains_absorb_surplus_only_when_needed():
    base = np.ones(3)
    beta, a, b = np.ones(3), np.ones(3), np.array([1.0, 0.0, 0.5])
    lo, hi = multiplier_bounds(base, 3.0, 0.0, 1.0, None)
    sol = allocate(beta, a, b, base, 3.0, lo, hi)
    assert sol.x[1] == 0.0 and not sol.degenerate
    lo, hi = multiplier_bounds(base, 3.0, 0.0, 0.4, None)
    sol = allocate(beta, a, b, base, 3.0, lo, hi)
    assert sol.x[0] == pytest.approx(1.2) and sol.x[2] == pytest.approx(1.2)
    assert sol.x[1] == pytest.approx(0.6) and sol.degenerate


def test_batched_equals_single():
    beta, a, b, base = _problem(9, 5)
    n = float(base.sum()) * 2
    lo, hi = multiplier_bounds(base, n, 0.01, 0.6, None)
    rng = np.random.default_rng(0)
    bb = b * rng.uniform(0.8, 1.2, (6, 5))
    many = allocate(beta, a, bb, base, n, lo, hi).x
    for i in range(6):
        assert many[i] == pytest.approx(allocate(beta, a, bb[i], base, n, lo, hi).x, rel=1e-12)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"min_weight": 0.5}, "exceeds 1"),
        ({"max_weight": 0.2}, "allow only"),
        ({"min_weight": -0.1}, "min_weight"),
        ({"max_weight": 0.0}, "max_weight"),
        ({"caps": np.array([1.0, 1e9, 1e9])}, "cannot supply that"),
    ],
)
def test_infeasible_bounds(kw, match):
    base = np.ones(3) * 10
    args = {"min_weight": 0.1, "max_weight": 1.0, "caps": None} | kw
    with pytest.raises(ValueError, match=match):
        multiplier_bounds(base, 30.0, args["min_weight"], args["max_weight"], args["caps"])

"""Projection (Theorem 1): the paper's worked example, exactness on pure power laws, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from autoscale_data.solver import fit_ddo, project
from autoscale_data.solver.allocation_path import fit_path
from autoscale_data.solver.synthetic import synthetic_ddo_runs

S1 = (200.0, {"a": 100.0, "b": 100.0})
S2 = (500.0, {"a": 300.0, "b": 200.0})


@pytest.mark.parametrize(
    "target, a, b, t",
    [(1300, 900, 400, 2), (3500, 2700, 800, 3), (9700, 8100, 1600, 4), (27500, 24300, 3200, 5),
     (681700, 656100, 25600, 8), (200, 100, 100, 0), (500, 300, 200, 1)],
)
def test_paper_worked_example(target, a, b, t):
    p = project([S1, S2], target)
    assert p.allocation_tokens["a"] == pytest.approx(a, rel=1e-12)
    assert p.allocation_tokens["b"] == pytest.approx(b, rel=1e-12)
    assert p.t == pytest.approx(t, abs=1e-10)
    assert p.weights["a"] + p.weights["b"] == pytest.approx(1.0, abs=1e-15)
    assert p.residual == 0.0 and p.warnings == []


def _power_law_optimum(beta, gamma, n):
    """Independent optimum of Σ β_i N_i^(-γ_i) s.t. Σ N_i = n: N_i(μ) = (β_i γ_i / μ)^(1/(γ_i+1))."""
    def total(log_mu):
        return np.sum(np.exp((np.log(beta * gamma) - log_mu) / (gamma + 1))) - n

    log_mu = brentq(total, -300.0, 300.0, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return np.exp((np.log(beta * gamma) - log_mu) / (gamma + 1))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), m=st.integers(2, 7), ratio=st.floats(1.5, 20.0))
def test_theorem1_projection_is_exact_on_pure_power_laws(seed, m, ratio):
    rng = np.random.default_rng(seed)
    beta, gamma = rng.uniform(0.2, 5.0, m), rng.uniform(0.05, 1.5, m)
    n1 = 1e6
    n2 = n1 * ratio
    doms = [f"d{i}" for i in range(m)]
    a1, a2 = _power_law_optimum(beta, gamma, n1), _power_law_optimum(beta, gamma, n2)
    for target in (100 * n2, 3 * n1, 0.1 * n1):
        p = project([(n1, dict(zip(doms, a1, strict=False))), (n2, dict(zip(doms, a2, strict=False)))], target)
        truth = _power_law_optimum(beta, gamma, target)
        assert np.array([p.allocation_tokens[d] for d in doms]) == pytest.approx(truth, rel=1e-6)


def test_three_budgets_fit_a_line_and_report_residual():
    doms = ["x", "y", "z"]
    beta, gamma = np.array([1.0, 2.0, 0.5]), np.array([0.3, 0.7, 1.1])
    scales = [(n, dict(zip(doms, _power_law_optimum(beta, gamma, n), strict=False))) for n in (1e6, 3e6, 1e7)]
    p = project(scales, 1e9)
    assert p.residual < 1e-10
    truth = _power_law_optimum(beta, gamma, 1e9)
    assert np.array(list(p.allocation_tokens.values())) == pytest.approx(truth, rel=1e-6)
    noisy = [(n, {d: v * (1.05 if (k == 1 and d == "x") else 1.0) for d, v in a.items()}) for k, (n, a) in enumerate(scales)]
    noisy = [(sum(a.values()), a) for _, a in noisy]
    assert project(noisy, 1e9).residual > 1e-3


def test_ddo_results_project_and_direct_route_is_reported():
    base = {"a": 1e6, "b": 1e6, "c": 1e6}
    aa, bb = [1.0, 2.0, 3.0], [0.4, 0.8, 1.2]
    r1 = fit_ddo(synthetic_ddo_runs(base, aa, bb, multipliers=(3, 1 / 3, 2)), objective="mean_loss")
    big = {d: 4 * v for d, v in base.items()}
    r2 = fit_ddo(synthetic_ddo_runs(big, np.array(aa) / 4, bb, multipliers=(3, 1 / 3, 2)), objective="mean_loss")
    p = project([r1, r2], 1.2e8, fit=r2)
    assert p.direct_weights is not None and set(p.disagreement) == {"max_abs", "total_variation"}
    assert 0.0 <= p.disagreement["total_variation"] <= 1.0
    assert sum(p.direct_weights.values()) == pytest.approx(1.0)
    js = p.to_json()
    assert {"weights", "budget_tokens", "allocation_tokens", "t"} <= set(js)


def test_caps_warn_and_decreasing_domains_warn():
    p = project([S1, S2], 9700, token_caps={"a": 4000, "b": 1e9}, max_epochs=1.5)
    assert len(p.warnings) == 1 and "'a' needs 8100" in p.warnings[0]
    dec = project([(200, {"a": 100, "b": 100}), (500, {"a": 420, "b": 80})], 2000)
    assert any("decreases" in w for w in dec.warnings)
    assert sum(dec.allocation_tokens.values()) == pytest.approx(2000)
    low = project([S1, S2], 100)
    assert low.t < 0 and any("below the smallest budget" in w for w in low.warnings)


@pytest.mark.parametrize(
    "scales, target, match",
    [
        ([S2, S1], 1000, "budgets must increase"),
        ([S1, S1], 1000, "budgets must increase"),
        ([S1], 1000, ">= 2 budgets"),
        ([S1, (500.0, {"a": 500.0, "b": 0.0})], 1000, "allocation of 'b' is 0"),
        ([S1, (500.0, {"a": 600.0, "b": -100.0})], 1000, "must be > 0"),
        ([S1, (500.0, {"a": 300.0, "c": 200.0})], 1000, "differ from scale #0"),
        ([S1, (600.0, {"a": 300.0, "b": 200.0})], 1000, "sum to 500"),
        ([S1, S2], 0, "target_tokens must be > 0"),
        ([S1, S2], -5, "target_tokens must be > 0"),
        ([S1, {"budget_tokens": 500}], 1000, "needs 'weights'"),
    ],
)
def test_bad_inputs(scales, target, match):
    with pytest.raises(ValueError, match=match):
        project(scales, target)


def test_decreasing_path_below_its_minimum_is_an_error():
    path = fit_path([(200, {"a": 100, "b": 100}), (500, {"a": 420, "b": 80})])
    assert path.decreasing == ["b"] and np.isfinite(path.t_min)
    with pytest.raises(ValueError, match="below the smallest total"):
        path.solve_t(1.0)

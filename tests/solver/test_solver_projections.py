"""project_all: the three projections from one call, the chosen one, the plan's scales; the joint fit
and the comparison take DDOOptions like fit_ddo."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autoscale_data.solver import (
    CandidateError,
    DDOOptions,
    MixturePlan,
    Projections,
    Run,
    RunTable,
    fit_ddo,
    fit_joint,
    project,
    project_all,
    robust_project,
)
from autoscale_data.solver.contrib import (
    compare_projections,
    fit_budget_law,
    log_share_sd,
    per_budget_optima,
    synthetic_budget_runs,
)

pytestmark = pytest.mark.timeout(120)

TARGET = 1e9
OPTS = DDOOptions(objective="mean_loss", min_weight=0.01)


@pytest.fixture(scope="module")
def tables():
    return synthetic_budget_runs((4e6, 1.2e7), [2e5, 5e4, 1e6], [0.3, 0.8, 0.5], [1.0, 0.5, 2.0], scale=[1e6] * 3)


@pytest.fixture(scope="module")
def geometric(tables):
    return project_all(tables, TARGET, OPTS, method="geometric")


def test_the_three_projections_are_the_single_functions(tables, geometric):
    optima = per_budget_optima(tables, OPTS)
    assert geometric.method == "geometric" and len(geometric.optima) == 2
    assert geometric.geometric == project(optima, TARGET)
    assert geometric.joint.weights == fit_joint(tables, OPTS, target_tokens=TARGET).weights
    sd = [log_share_sd(optima[0]), log_share_sd(optima[-1])]
    assert geometric.robust == robust_project(optima, TARGET, sd)
    assert geometric.weights == geometric.geometric.weights and geometric.budget_tokens == TARGET
    assert geometric.failures() == {}
    out = geometric.record().to_json()
    assert out["method"] == "geometric" and out["joint"]["weights"] == geometric.joint.weights
    assert out["t"] == geometric.geometric.t and set(out["disagreement"]) == {"l1", "total_variation", "max_abs"}


def test_keywords_and_options_agree(tables, geometric):
    by_keywords = project_all(tables, TARGET, objective="mean_loss", min_weight=0.01, method="geometric")
    assert by_keywords.record().to_json() == geometric.record().to_json()
    joint = fit_joint(tables, OPTS, target_tokens=TARGET)
    assert fit_joint(tables, target_tokens=TARGET, objective="mean_loss", min_weight=0.01) == joint
    assert fit_joint(tables, OPTS, target_tokens=TARGET, level=0.95) == joint  # the older name of profile_level
    narrower = fit_joint(tables, OPTS, target_tokens=TARGET, level=0.5)
    assert narrower.identifiability.level == 0.5 == fit_joint(tables, OPTS, target_tokens=TARGET,
                                                               profile_level=0.5).identifiability.level
    with pytest.raises(TypeError, match="both level and profile_level"):
        fit_joint(tables, OPTS, level=0.9, profile_level=0.9)
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['n_boot'\]"):
        fit_joint(tables, OPTS, n_boot=3)
    with pytest.raises(ValueError, match="objective must be"):
        fit_joint(tables, objective="mean_acc")
    swarm = _swarm(6e7)
    assert fit_budget_law(swarm, OPTS) == fit_budget_law(swarm, objective="mean_loss", min_weight=0.01)
    assert fit_budget_law(swarm, OPTS, level=0.5).identifiability.level == 0.5


def _swarm(budget: float, n: int = 40) -> RunTable:
    """Runs of random mixtures at one budget, losses from a known law."""
    rng = np.random.default_rng(0)
    runs = []
    for i, w in enumerate(rng.dirichlet(np.ones(3), size=n)):
        tok = w * budget
        loss = 1.5 + float(np.array([1.0, 0.6, 0.8]) @ ((np.array([2e6, 1e6, 5e5]) + tok) / 1e7) ** -np.array([0.4, 0.7, 0.3]))
        runs.append(Run(f"r{i:03d}", dict(zip(("web", "code", "books"), tok.tolist(), strict=True)), {"v": loss}))
    return RunTable(runs)


def test_compare_projections_takes_options(tables):
    held = fit_ddo(tables[1], OPTS)
    a = compare_projections(tables, TARGET, OPTS, heldout=held)
    b = compare_projections(tables, TARGET, heldout=held, objective="mean_loss", min_weight=0.01)
    assert a == b and a["joint"]["weights"] == fit_joint(tables, OPTS, target_tokens=TARGET).weights


@pytest.mark.parametrize("method", ["geometric", "joint", "robust"])
def test_the_plan_runs_through_the_chosen_projection(tables, method):
    res = project_all(tables, TARGET, OPTS, method=method)
    assert res.method == method and res.weights == getattr(res, method).weights
    plan = MixturePlan.from_scales(res.plan_scales(), allow_decreasing=True)
    assert plan.weights_for_budget(TARGET) == pytest.approx(res.weights, abs=1e-9)
    scales = res.plan_scales()
    if method == "joint":
        assert scales[0][0] == res.optima[0].budget_tokens and res.plan_scales(first_budget=2e6)[0][0] == 2e6
    elif method == "robust":
        assert scales[0] == (res.optima[-1].budget_tokens, res.optima[-1].allocation_tokens)
    else:
        assert [n for n, _ in scales] == [r.budget_tokens for r in res.optima]


def test_a_failure_is_raised_for_the_chosen_projection_and_kept_as_its_error_otherwise(tables):
    optima = [dataclasses.replace(fit_ddo(t, OPTS), identifiability=None) for t in tables]  # no σ: robust fails
    kept = project_all(tables, TARGET, OPTS, optima=optima[::-1])
    assert kept.optima == tuple(optima)  # smallest budget first
    assert isinstance(kept.robust, CandidateError) and "no weight range" in kept.robust.error
    assert kept.failures() == {"robust": kept.robust.error}
    assert kept.record().to_json()["robust"] == {"error": kept.robust.error}
    with pytest.raises(ValueError, match=r"the robust projection to 1e\+09 tokens failed: no weight range"):
        project_all(tables, TARGET, OPTS, optima=optima, method="robust")
    with pytest.raises(ValueError, match="projection method must be one of"):
        project_all(tables, TARGET, OPTS, method="line")
    with pytest.raises(ValueError, match="plan_scales needs the per-budget optima"):
        Projections("geometric", kept.geometric, kept.joint).plan_scales()


def test_direct_adds_the_largest_budgets_law_at_the_target(tables):
    optima = [fit_ddo(t, OPTS) for t in tables]
    res = project_all(tables, TARGET, OPTS, optima=optima, direct=True)
    assert res.geometric == project(optima, TARGET, fit=optima[-1]) and res.geometric.direct_weights is not None
    assert project_all(tables, TARGET, OPTS, optima=optima).geometric.direct_weights is None

"""Joint fit over budgets: recovery of a known law, exact optimum at the target, order invariance,
the comparison with the geometric projection, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

from autoscale_data.solver import JointFit, Run, RunTable, fit_joint
from autoscale_data.solver.joint import compare_projections, weight_distance
from autoscale_data.solver.synthetic import synthetic_budget_runs

pytestmark = pytest.mark.timeout(120)

N0 = np.array([2e5, 5e4, 1e6, 1e5])
GAMMA = np.array([0.3, 0.8, 0.5, 1.2])
AMP = np.array([1.0, 0.5, 2.0, 0.3])
SCALE = np.full(4, 1e6)
BUDGETS = (4e6, 1.2e7)


def _true_allocation(n0, gamma, amp, scale, n, lo=0.0):
    """Independent optimum of Σ A_i ((N0_i + n_i)/s_i)^(-γ_i), Σ n_i = n, n_i >= lo·n (bisection on μ)."""
    def alloc(log_mu):
        free = scale * np.exp((np.log(amp * gamma / scale) - log_mu) / (gamma + 1)) - n0
        return np.maximum(free, lo * n)

    log_mu = brentq(lambda lm: alloc(lm).sum() - n, -400.0, 400.0, xtol=1e-14, maxiter=500)
    return alloc(log_mu)


def _runs(noise=0.0, seeds=1, budgets=BUDGETS, **kw):
    return synthetic_budget_runs(budgets, N0, GAMMA, AMP, scale=SCALE, noise=noise, seeds=seeds, **kw)


def _vec(d):
    return np.array([d[k] for k in sorted(d)])


def test_noise_free_runs_recover_the_law_and_the_true_optimum():
    fit = fit_joint(_runs(), objective="mean_loss", target_tokens=1e9)
    assert _vec(fit.n0) == pytest.approx(N0, rel=1e-6)
    assert _vec(fit.gamma) == pytest.approx(GAMMA, rel=1e-6)
    assert _vec(fit.amplitude) == pytest.approx(AMP, rel=1e-6)
    assert fit.floor == pytest.approx(2.0, rel=1e-9)
    assert fit.sse < 1e-20 and fit.aar < 1e-10 and fit.at_bound == {}
    assert fit.budgets == BUDGETS and [b["runs"] for b in fit.per_budget] == [9, 9]
    truth = _true_allocation(N0, GAMMA, AMP, SCALE, 1e9)
    assert _vec(fit.allocation_tokens) == pytest.approx(truth, rel=1e-6)
    assert sum(fit.weights.values()) == pytest.approx(1.0, abs=1e-12)
    assert fit.status == "optimal" and fit.kkt_residual < 1e-8
    # another budget, with a lower bound that binds for the small domains
    w = fit.weights_at(3e7)
    lo_truth = _true_allocation(N0, GAMMA, AMP, SCALE, 3e7) / 3e7
    assert _vec(w) == pytest.approx(lo_truth, abs=1e-7)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(2, 5))
def test_recovers_random_laws_from_two_budgets(seed, m):
    rng = np.random.default_rng(seed)
    n0, gamma = rng.uniform(0.02, 1.0, m) * 1e6, rng.uniform(0.2, 1.5, m)
    amp, scale = rng.uniform(0.2, 2.0, m), np.full(m, 1e6)
    tabs = synthetic_budget_runs((2e6, 8e6), n0, gamma, amp, scale=scale, floor=1.5)
    fit = fit_joint(tabs, objective="mean_loss", target_tokens=1e8)
    assert fit.sse < 1e-16
    assert _vec(fit.gamma) == pytest.approx(gamma, rel=1e-4)
    assert _vec(fit.n0) == pytest.approx(n0, rel=1e-4)
    # the fit's token scale is the base at the smallest budget; the amplitude follows it
    s_fit = _vec({d: t.scale_tokens for d, t in fit.law.items()})
    assert _vec(fit.amplitude) == pytest.approx(amp * (s_fit / scale) ** -gamma, rel=1e-4)
    truth = _true_allocation(n0, gamma, amp, scale, 1e8) / 1e8
    assert _vec(fit.weights) == pytest.approx(truth, abs=1e-6)


def test_small_noise_gives_close_parameters_and_weights():
    fit = fit_joint(_runs(noise=1e-3, seeds=3, multipliers=(3, 1.7, 1 / 1.7, 1 / 3)), objective="mean_loss",
                    target_tokens=1e9)
    assert _vec(fit.gamma) == pytest.approx(GAMMA, rel=0.05)
    truth = _true_allocation(N0, GAMMA, AMP, SCALE, 1e9) / 1e9
    assert weight_distance(fit.weights, dict(zip(sorted(fit.weights), truth, strict=True)))["max_abs"] < 0.02
    assert fit.per_budget[0]["sse"] > 0 and fit.n_points == 2 * 3 * 17


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_answer_does_not_depend_on_table_or_run_order(data):
    tabs = _runs(noise=1e-4, seeds=2)
    ref = fit_joint(tabs, objective="mean_loss")
    order = data.draw(st.permutations(range(len(tabs))))
    shuffled = [RunTable(data.draw(st.permutations(list(tabs[k].runs)))) for k in order]
    got = fit_joint(shuffled, objective="mean_loss")
    assert got.gamma == ref.gamma and got.n0 == ref.n0 and got.weights == ref.weights


def test_tables_may_list_their_domains_in_different_orders():
    tabs = _runs(noise=1e-3, seeds=2)
    flipped = RunTable([Run(r.run_id, dict(reversed(list(r.tokens.items()))), r.loss) for r in tabs[1].runs])
    assert flipped.train_domains != tabs[0].train_domains
    fit = fit_joint([tabs[0], flipped], objective="mean_loss")
    ref = fit_joint(tabs, objective="mean_loss")
    assert fit.domains == ref.domains and fit.gamma == ref.gamma and fit.weights == ref.weights


def test_default_target_is_the_largest_budget_and_bounds_apply():
    fit = fit_joint(_runs(), objective="mean_loss", min_weight=0.2, max_weight=0.3)
    assert fit.budget_tokens == BUDGETS[1]
    assert min(fit.weights.values()) >= 0.2 - 1e-12 and max(fit.weights.values()) <= 0.3 + 1e-12
    assert set(fit.bounds_hit.values()) == {"lower", "upper"} and fit.kkt_residual < 1e-8
    caps = {"d0": 1e6, "d1": 1e9, "d2": 1e9, "d3": 1e9}
    capped = fit_joint(_runs(), objective="mean_loss", token_caps=caps, target_tokens=1e8)
    assert capped.allocation_tokens["d0"] == pytest.approx(1e6) and capped.bounds_hit["d0"] == "upper"


def test_mean_ppl_is_normalised_by_one_constant_and_json_round_trips():
    import json

    # losses whose perplexity follows the law
    tabs = [RunTable([Run(r.run_id, r.tokens, {"all": np.log(r.loss["all"])}) for r in t.runs]) for t in _runs()]
    fit = fit_joint(tabs, objective="mean_ppl", target_tokens=1e8)
    base = tabs[0]["b0r0s0"]
    assert fit.normalizer == pytest.approx(np.exp(base.loss["all"]))
    assert _vec(fit.gamma) == pytest.approx(GAMMA, rel=1e-6)
    assert fit.floor == pytest.approx(2.0 / fit.normalizer, rel=1e-6)
    out = json.loads(json.dumps(fit.to_json()))
    assert out["method"] == "joint" and set(out["law"]) == {"d0", "d1", "d2", "d3"}
    assert out["weights"] == fit.weights and len(out["per_budget"]) == 2
    assert fit.predict(base.tokens) == pytest.approx(1.0, rel=1e-9)
    back = JointFit.from_json(out)
    assert back == fit and back.weights_at(3e8) == fit.weights_at(3e8)
    with pytest.raises(ValueError, match="'floor' is missing"):
        JointFit.from_json({k: v for k, v in out.items() if k != "floor"})
    with pytest.raises(ValueError, match="is missing"):  # another candidate's JSON is not a joint fit
        JointFit.from_json({"method": "robust", "weights": {}})


def test_compare_projections_reports_held_out_error_of_both_methods():
    tabs = _runs(budgets=(2e6, 6e6, 1.8e7), multipliers=(3, 1.7, 1 / 1.7, 1 / 3))
    out = compare_projections(tabs[:2], 1e9, heldout=tabs[2], objective="mean_loss", law="4p")
    held = out["heldout"]
    assert held["budget_tokens"] == pytest.approx(1.8e7)
    truth = _true_allocation(N0, GAMMA, AMP, SCALE, 1.8e7) / 1.8e7
    assert _vec(held["ddo_weights"]) == pytest.approx(truth, abs=1e-4)
    # the data follow the joint law exactly: its projection is exact, the geometric path is not
    assert held["joint"]["max_abs"] < 1e-4
    assert held["geometric"]["max_abs"] > 10 * held["joint"]["max_abs"]
    assert held["joint"]["total_variation"] == pytest.approx(held["joint"]["l1"] / 2)
    assert set(out["geometric"]["weights"]) == set(out["joint"]["weights"])
    assert out["joint"]["budget_tokens"] == 1e9


def test_bad_inputs_name_the_value():
    tabs = _runs()
    with pytest.raises(ValueError, match="sequence of RunTables"):
        fit_joint(tabs[0])
    with pytest.raises(ValueError, match=">= 2 budgets, got 1"):
        fit_joint(tabs[:1])
    with pytest.raises(ValueError, match=r"tables\[1\] must be a RunTable, got str"):
        fit_joint([tabs[0], "runs.csv"])
    with pytest.raises(ValueError, match="same budget"):
        fit_joint([tabs[0], RunTable([Run("x" + r.run_id, r.tokens, r.loss) for r in tabs[0].runs])])
    with pytest.raises(ValueError, match="target_tokens must be a positive number of tokens, got -5"):
        fit_joint(tabs, target_tokens=-5)
    with pytest.raises(ValueError, match="min_weight"):
        fit_joint(tabs, min_weight=0.3)
    other = RunTable([Run(r.run_id, {("e" if k == "d0" else k): v for k, v in r.tokens.items()}, r.loss)
                      for r in tabs[1].runs])
    with pytest.raises(ValueError, match=r"tables\[1\] has training domains"):
        fit_joint([tabs[0], other])
    bases = [RunTable([t.runs[0]]) for t in tabs]
    with pytest.raises(ValueError, match="13 parameters and needs more runs, got 2"):
        fit_joint(bases)
    with pytest.raises(ValueError, match="base_runs has 1 entries for 2 tables"):
        fit_joint(tabs, base_runs=["b0r0s0"])
    with pytest.raises(ValueError, match="domains differ"):
        weight_distance({"a": 1.0}, {"b": 1.0})


def test_projections_uses_the_chosen_one_and_keeps_the_other_failure():
    from autoscale_data.solver import project
    from autoscale_data.solver.projections import Projections
    from autoscale_data.solver.scores import CandidateError

    tabs = _runs()
    joint = fit_joint(tabs, objective="mean_loss", target_tokens=1e8)
    geo = project([(BUDGETS[0], joint.optimize_at(BUDGETS[0])), (BUDGETS[1], joint.optimize_at(BUDGETS[1]))], 1e8)
    both = Projections("joint", geo, joint).record().to_json()
    assert both["weights"] == joint.weights and both["t"] == geo.t
    assert both["disagreement"] == weight_distance(joint.weights, geo.weights)
    only = Projections("joint", CandidateError("path cannot reach the target"), joint).record().to_json()
    assert only["geometric"] == {"error": "path cannot reach the target"} and "disagreement" not in only
    with pytest.raises(ValueError, match="the geometric projection failed: path cannot"):
        Projections("geometric", CandidateError("path cannot reach the target"), joint).record().to_json()
    with pytest.raises(ValueError, match="projection method must be one of .* got 'line'"):
        Projections("line", geo, joint).record().to_json()

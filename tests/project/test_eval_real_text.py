"""The real-text evaluation's analysis: both projections' held-out-budget errors, on synthetic runs."""

from __future__ import annotations

import importlib.util

import pytest
from paths import BENCHMARKS

from autoscale_data.solver.synthetic import synthetic_budget_runs

pytestmark = pytest.mark.timeout(120)

_PATH = BENCHMARKS / "eval_real_text.py"


def _module():
    spec = importlib.util.spec_from_file_location("eval_real_text", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_projection_errors_and_table_report_both_projections() -> None:
    ev = _module()
    budgets = (20_000, 40_000, 80_000)
    tabs = synthetic_budget_runs(budgets, [2000, 500, 8000], [0.4, 0.9, 0.6], [1.0, 0.6, 1.5], scale=[5000] * 3,
                                 multipliers=(3, 1.7, 1 / 1.7, 1 / 3))
    fits, entry = ev.projection_errors(dict(zip(budgets, tabs, strict=True)), budgets,
                                       {"objective": "mean_loss", "min_weight": 0.02, "law": "4p"})
    assert set(fits) == set(budgets)
    # the runs follow the joint law exactly (and the 4-parameter DDO law at each budget): the joint
    # projection to N3 is DDO(N3); the geometric path is not
    assert entry["joint_projection_error_max"] < 1e-4 and entry["joint_fit_aar"] < 1e-10
    assert entry["projection_error_max"] > 10 * entry["joint_projection_error_max"]
    assert entry["projection_error_l1"] >= entry["projection_error_max"]
    assert sum(entry["joint_projected_n3"].values()) == pytest.approx(1.0)
    assert sum(entry["robust_projected_n3"].values()) == pytest.approx(1.0)
    assert entry["robust_projection_error_l1"] >= entry["robust_projection_error_max"] >= 0
    # no projection: N2's optimum against N3's, the baseline every projection must beat
    assert entry["n2_as_is_projected_n3"] == pytest.approx(fits[budgets[1]].weights)
    assert entry["n2_as_is_projection_error_max"] > 10 * entry["joint_projection_error_max"]
    entry |= {"heldout_aar": None, "tokens_saved": {b: {"signed_fraction": 0.1} for b in ("uniform", "natural",
                                                                                              "ddo_n2")}}
    results = {"domains": ["d0", "d1", "d2"], "budgets": list(budgets), "target": 160_000, "seeds": [0],
               "vocab": 4096, "wall_time_s": 60.0, "projection": "joint", "per_seed": {0: entry}}
    md = ev.markdown(results)
    assert "| joint projection from N1, N2 to 80,000 |" in md and "| geometric projection from N1, N2" in md
    assert "(b) joint projection error at N3: L1 distance of weights" in md
    assert "(b) geometric projection error at N3: max abs weight difference" in md
    assert "(b) robust projection error at N3: L1 distance of weights" in md
    assert "(b) no projection (N2 optimum as is) error at N3: L1 distance of weights" in md
    assert "AutoScale target mix from the joint projection" in md

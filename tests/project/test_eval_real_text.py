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


def test_the_plan_of_budgets_two_or_three() -> None:
    ev = _module()
    # the default: the runner's two budgets and the N3 check, as before
    assert ev.plan_budgets("98304,196608,393216") == ([98304, 196608], 393216)
    # three budgets: N0 = N1 / 2 below (the runner's extra_budget: half); N1,N2 alone skips the N3 check
    assert ev.plan_budgets("49152,98304", 3) == ([24576, 49152, 98304], None)
    assert ev.plan_budgets("49153,98304,196608", 3) == ([24576, 49153, 98304], 196608)


@pytest.mark.parametrize(("budgets", "ddo", "match"), [
    ("49152", 2, "N1,N2 or N1,N2,N3"), ("1,2,3,4", 2, "N1,N2 or N1,N2,N3"), ("98304,49152", 2, "increasing"),
    ("0,5", 2, "positive"), ("a,b", 2, "comma-separated integers"), ("", 2, "one integer or more"),
    ("1,4", 3, "N0 = N1 / 2"), ("100,200", 4, "--ddo-budgets 4"),
])
def test_bad_budget_plans_are_refused(budgets: str, ddo: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _module().plan_budgets(budgets, ddo)


def test_the_flags_and_the_runner_config_they_make(tmp_path) -> None:
    ev = _module()
    args = ev._parse(["--out", str(tmp_path), "--budgets", "49152,98304", "--ddo-budgets", "3", "--proxy-seeds", "0",
                      "--no-anytime"])
    assert (args.ddo_budgets, args.proxy_seeds, args.no_anytime) == (3, "0", True)
    default = ev._parse(["--out", str(tmp_path)])
    assert (default.ddo_budgets, default.proxy_seeds, default.no_anytime) == (2, None, False)
    with pytest.raises(SystemExit):
        ev._parse(["--out", str(tmp_path), "--ddo-budgets", "4"])
    stores = tmp_path / "stores"
    three = ev.runner_config(stores, [24576, 49152, 98304], 393216, [0, 1], 1e-3, (3.0, 1.7), proxy_seeds=[0])
    assert three.ddo.budgets == (24576, 49152, 98304) and three.ddo.largest == 98304
    assert tuple(three.seeds) == (0,) and tuple(three.target.seeds) == (0, 1)
    two = ev.runner_config(stores, [49152, 98304], 393216, [0, 1], 1e-3, (3.0, 1.7))
    assert two.ddo.budgets == (49152, 98304) and tuple(two.seeds) == (0, 1)


def test_the_table_without_an_n3_check_shows_the_target_runs_and_the_choice() -> None:
    ev = _module()
    losses = {"autoscale": {0: 4.70, 1: 4.72}, "ddo_n2": {0: 4.70, 1: 4.72}, "uniform": {0: 4.80, 1: 4.83},
              "natural": {0: 4.75, 1: 4.90}}
    versus = {b: ev.versus(losses["autoscale"], losses[b], b) for b in ("ddo_n2", "uniform", "natural")}
    assert versus["ddo_n2"]["same_runs"] and versus["uniform"]["verdict"] == "better"
    assert versus["uniform"]["differences"] == pytest.approx([-0.10, -0.11])
    assert versus["natural"]["verdict"] == "not_distinguishable" and versus["natural"]["method_wins"] == 2
    results = {"domains": ["books", "code", "tech"], "budgets": [49152, 98304], "ddo_budgets": [24576, 49152, 98304],
               "target": 393216, "seeds": [0, 1], "proxy_seeds": [0], "vocab": 2048, "wall_time_s": 60.0,
               "projection": "auto", "per_seed": {},
               "tokens_saved": {"0": {"uniform": {"signed_fraction": 0.1}}, "1": {"uniform": {"signed_fraction": None}}},
               "selection": {"chosen": "observed", "reason": "no candidate scored like with like"},
               "target_losses": losses, "versus": versus}
    md = ev.markdown(results)
    assert "budgets N0=24,576, N1=49,152, N2=98,304 (no N3 check)" in md and "(proxies: [0])" in md
    assert "chose **observed**: no candidate scored like with like" in md
    assert "| autoscale | 4.7000 | 4.7200 | 4.710 ± 0.014 |" in md
    assert "- AutoScale − ddo_n2 per seed: +0.0000, +0.0000; 95% CI [+0.0000, +0.0000]: the same runs" in md
    assert "AutoScale − uniform per seed: -0.1000, -0.1100" in md and ": better (wins on 2 of 2 seeds)" in md
    assert "| (c) tokens saved by AutoScale vs uniform at the target (per seed) | +10.0%, not reached |" in md
    assert "DDO weight at" not in md

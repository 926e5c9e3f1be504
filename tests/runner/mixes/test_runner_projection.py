"""The runner's projection choice (``ddo.projection``): both projections in fits/projection.json, the
chosen one sets the target mix and the mixture plan, the report and the dry run say which."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.mixes.fitting import FitsFolder, fit_all
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import ddo_proxy_specs
from autoscale_data.runner.records import RunResult
from autoscale_data.runner.reporting.report import projection_label, projection_sentence
from autoscale_data.runner.reporting.report_types import Report
from autoscale_data.runner.reporting.summary import format_summary
from autoscale_data.solver.joint import weight_distance
from autoscale_data.solver.select import backtest_margin

pytestmark = pytest.mark.timeout(120)

N0 = {"a": 2000.0, "b": 500.0, "c": 8000.0}
GAMMA = {"a": 0.4, "b": 0.9, "c": 0.6}
AMP = {"a": 1.0, "b": 0.6, "c": 1.5}


def _loss(tokens: dict[str, int]) -> float:
    return 2.0 + sum(AMP[d] * ((N0[d] + tokens[d]) / 1000.0) ** -GAMMA[d] for d in N0)


class _Ledger:
    """Every proxy finished, with the losses of a known law (the one interface fit_all reads)."""

    def __init__(self, specs: list[Any]) -> None:
        self._specs = {s.run_id: s for s in specs}

    def records(self) -> dict[str, Any]:
        return {}

    def result(self, run_id: str) -> RunResult:
        s = self._specs[run_id]
        loss = _loss(s.tokens)
        return RunResult(run_id=run_id, tokens=s.tokens, losses={d: loss for d in s.tokens})


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


def _fit(stores: Path, tmp_path: Path, projection: str | None,
         **ddo_extra: Any) -> tuple[FitsFolder, dict[str, Any], list[str]]:
    ddo = {"multipliers": [[3, 1.7], [3, 1.7]], **ddo_extra} | ({} if projection is None else {"projection": projection})
    cfg = config_from_dict(tiny_config(stores, ddo=ddo, target={"budget": 65536}))
    domains = inspect_domains(cfg)
    proxies = {n: ddo_proxy_specs(cfg, domains, n) for n in cfg.ddo.budgets}
    lines: list[str] = []
    fits = fit_all(cfg, domains, _Ledger([s for v in proxies.values() for s in v]), proxies, tmp_path / "fits",
                   log=lines.append)
    return fits, json.loads((tmp_path / "fits" / "projection.json").read_text()), lines


def test_default_is_auto_and_two_budgets_without_replicates_keep_ddo_n2_with_the_numbers(
        stores: Path, tmp_path: Path) -> None:
    fits, proj, lines = _fit(stores, tmp_path, None)
    assert config_from_dict(tiny_config(stores)).ddo.projection == "auto"
    sel = proj["selection"]
    assert proj["requested_method"] == "auto" and sel["rule"] == "gain"
    assert fits.method == proj["method"] == sel["chosen"] == "observed" and proj["observed"]["source"] == "ddo"
    assert "no replicate runs" in sel["reason"] and "best: " in sel["reason"]
    assert set(sel["predicted"]) == {"geometric", "joint", "robust"}
    for e in sel["predicted"].values():  # the evidence in numbers, though it cannot be vouched for
        assert e["gain"] is not None and e["noise"] is not None and e["replicate_sd"] is None
    assert any(line.startswith("ddo.projection auto chose observed") for line in lines)
    assert "`ddo.projection: auto` chose it" in projection_sentence(fits.projection)
    assert fits.plan is not None and fits.plan.metadata["chosen"] == "observed"


def test_observed_keeps_the_n2_optimum_as_is(stores: Path, tmp_path: Path) -> None:
    fits, proj, lines = _fit(stores, tmp_path, "observed")
    assert fits.method == proj["method"] == "observed" and proj["observed"]["source"] == "ddo"
    n2 = max(fits.ddo)
    assert proj["unbounded_weights"] == pytest.approx(fits.ddo[n2].weights, abs=1e-12)
    assert fits.plan.weights_for_budget(65536) == pytest.approx(fits.ddo[n2].weights, abs=1e-9)
    assert "not projected" in lines[-1] and projection_label(fits.projection) == "not projected: DDO(N2) as is"


@pytest.mark.parametrize("method", ["observed", "joint", "robust"])
def test_the_sentence_gives_the_distance_to_the_mix_it_names(stores: Path, tmp_path: Path, method: str) -> None:
    fits, proj, _ = _fit(stores, tmp_path, method)
    other = "joint" if method == "robust" else "geometric"  # the robust step's sentence already gives the geometric
    d = weight_distance(proj[method]["weights"], proj[other]["weights"])
    sentence = projection_sentence(fits.projection)
    assert (f"The {other} projection differs by total variation {d['total_variation']:.3f}"
            f" (max {d['max_abs']:.3f} per domain)") in sentence
    if method == "observed":  # not the joint-geometric disagreement
        assert f"{proj['disagreement']['total_variation']:.3f}" != f"{d['total_variation']:.3f}"


def test_geometric_sets_the_mix_and_projection_json_holds_all_three(stores: Path, tmp_path: Path) -> None:
    fits, proj, lines = _fit(stores, tmp_path, "geometric")
    assert fits.method == proj["method"] == "geometric"
    assert proj["weights"] == fits.weights
    assert proj["unbounded_weights"] == proj["geometric"]["weights"] and fits.projection.to_json() == proj
    assert min(fits.weights.values()) >= 0.05 - 1e-12  # tiny_config's ddo.min_weight holds at the target
    assert proj["joint"]["method"] == "joint" and proj["joint"]["sse"] < 1e-12  # the data follow the law
    assert set(proj["disagreement"]) == {"l1", "total_variation", "max_abs"}
    assert proj["t"] == proj["geometric"]["t"] and proj["budget_tokens"] == 65536
    assert proj["robust"]["method"] == "robust"  # reported beside, never used unless chosen
    assert proj["robust"]["plain_weights"] == pytest.approx(proj["geometric"]["weights"])
    assert any("robust projection (reported only" in line for line in lines)
    assert "geometric, t=" in lines[-1]
    assert "geometric" in projection_label(fits.projection) and "The joint projection differs" in projection_sentence(fits.projection)


def test_min_weight_holds_at_the_target_and_the_move_is_reported(stores: Path, tmp_path: Path) -> None:
    bound = 0.05
    fits, proj, lines = _fit(stores, tmp_path / "bounded", "geometric", min_weight=bound)
    low = min(proj["unbounded_weights"], key=proj["unbounded_weights"].get)
    assert min(fits.weights.values()) >= bound - 1e-12 and sum(fits.weights.values()) == pytest.approx(1)
    assert proj["weights"] == fits.weights and proj["unbounded_weights"] == proj["geometric"]["weights"]
    assert proj["geometric"]["weights"][low] < bound  # the projection itself left the bound
    assert set(proj["bounds_applied"]) >= {low} and proj["bounds_applied"][low][1] == pytest.approx(bound)
    assert any("left the weight bounds" in line and low in line for line in lines)
    others = [d for d in fits.weights if d not in proj["bounds_applied"]]
    if len(others) == 2:  # the untouched domains keep their ratio
        a, b = others
        assert fits.weights[a] / fits.weights[b] == pytest.approx(
            proj["unbounded_weights"][a] / proj["unbounded_weights"][b])
    report = Report(domains=list(fits.weights), projection=proj)
    assert "the target mix applies them" in format_summary(report)
    cfg = config_from_dict(tiny_config(stores, ddo={"min_weight": bound}))
    assert "bound the DDO optima and the target mix" in MixtureRunner(cfg, tmp_path / "o").describe()


def test_joint_sets_the_target_mix_and_the_plan(stores: Path, tmp_path: Path) -> None:
    fits, proj, lines = _fit(stores, tmp_path, "joint")
    assert fits.method == proj["method"] == "joint"
    assert fits.weights == proj["weights"]
    assert proj["weights"] == pytest.approx(proj["joint"]["weights"], abs=1e-15)  # no bound moved it (renormalised)
    assert proj["weights"] != proj["geometric"]["weights"]
    truth = _law_optimum(65536, 0.05)
    assert [proj["weights"][d] for d in N0] == pytest.approx(truth, abs=1e-6)
    plan = fits.plan
    end = plan.allocation_for_budget(65536)
    assert [end[d] / 65536 for d in N0] == pytest.approx([proj["weights"][d] for d in N0], abs=1e-9)  # anytime ends there
    assert plan.metadata["projection"] == "joint"
    assert "joint law" in lines[-1] and "joint law" in projection_label(fits.projection)
    report = Report(domains=list(N0), projection=proj)
    assert "AutoScale: projected: joint law" in format_summary(report)


def test_robust_sets_the_target_mix_and_the_plan(stores: Path, tmp_path: Path) -> None:
    fits, proj, lines = _fit(stores, tmp_path, "robust")
    assert fits.method == proj["method"] == "robust"
    assert proj["unbounded_weights"] == proj["robust"]["weights"] and fits.projection.to_json() == proj
    assert fits.weights == proj["weights"] and min(fits.weights.values()) >= 0.05 - 1e-12
    plan = fits.plan
    end = plan.allocation_for_budget(65536)
    assert [end[d] / 65536 for d in N0] == pytest.approx([proj["unbounded_weights"][d] for d in N0], abs=1e-9)
    assert plan.metadata["projection"] == "robust"
    assert any("robust projection (sets the target mix" in line for line in lines) and "robust, t=" in lines[-1]
    assert "projected: robust" in projection_label(fits.projection) and "The robust step moved" in projection_sentence(fits.projection)


def test_the_weights_plot_names_a_bootstrap_ci_only_when_one_ran(stores: Path, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoscale_data.runner.records import BootstrapUnavailable
    from autoscale_data.runner.reporting.plots import _plot_weights
    from autoscale_data.solver import BootstrapResult

    fits, proj, _ = _fit(stores, tmp_path, "geometric")
    ddo = {str(n): r for n, r in fits.ddo.items()}
    ran = {str(n): b for n, b in fits.bootstrap.items()}
    assert all(isinstance(b, BootstrapResult) for b in ran.values())
    failed = {n: BootstrapUnavailable(reason="too few runs") for n in ddo}
    for bootstrap, named in ((ran, True), ({}, False), (failed, False), ({**ran, min(ddo): failed[min(ddo)]}, False)):
        report = Report(domains=list(N0), projection=proj, ddo=ddo, bootstrap=bootstrap)
        title = _plot_weights(plt, report).axes[0].get_title()
        assert ("DDO optima (points, bootstrap CI)" in title) is named and ("bootstrap" in title) is named
        assert named or "DDO optima (points)" in title
    plt.close("all")


def test_fits_round_trip_through_json(stores: Path, tmp_path: Path) -> None:
    fits, proj, _ = _fit(stores, tmp_path, "joint")
    obj = json.loads(json.dumps(fits.to_json()))
    back = FitsFolder.from_json(obj)
    assert back.to_json() == obj and back.method == "joint" and back.weights == fits.weights == proj["weights"]
    # what is written comes back (a fit read back holds no raw samples: those fields are transient)
    assert {n: r.to_json() for n, r in back.ddo.items()} == {n: r.to_json() for n, r in fits.ddo.items()}
    assert {n: r.to_json() for n, r in back.bootstrap.items()} == {n: r.to_json() for n, r in fits.bootstrap.items()}
    assert back.projection == fits.projection
    assert sorted(back.ddo) == [4096, 8192]  # the budgets are ints again
    assert back.plan.weights_for_budget(65536) == pytest.approx(fits.plan.weights_for_budget(65536), abs=1e-12)
    fits_dir = json.loads((tmp_path / "fits" / "mixture_plan.json").read_text())
    assert back.plan.to_json() == fits_dir  # the plan as saved
    no_plan = FitsFolder.from_json({**obj, "plan": None})
    assert no_plan.plan is None and no_plan.to_json()["plan"] is None
    with pytest.raises(ValueError, match=r"key 'projection' is missing"):
        FitsFolder.from_json({k: v for k, v in obj.items() if k != "projection"})
    with pytest.raises(ValueError, match="'ddo.N1' is invalid: expected an integer key"):
        FitsFolder.from_json({**obj, "ddo": {"N1": {}}})
    with pytest.raises(ValueError, match="'projection.weights' is missing"):
        FitsFolder.from_json({**obj, "projection": {"method": "joint"}})


def _law_optimum(n: float, lo: float) -> np.ndarray:
    """Weights minimising the law at n tokens with weights >= lo (scipy, independent of the solver)."""
    from scipy.optimize import minimize

    doms = list(N0)

    def f(w: np.ndarray) -> float:
        return _loss({d: w[j] * n for j, d in enumerate(doms)})

    r = minimize(f, np.full(3, 1 / 3), method="SLSQP", bounds=[(lo, 1.0)] * 3,
                 constraints=({"type": "eq", "fun": lambda w: w.sum() - 1.0},), options={"ftol": 1e-15})
    return r.x


def test_bad_projection_is_named_and_the_dry_run_says_which(stores: Path) -> None:
    with pytest.raises(ValueError, match=r"ddo.projection = 'line' is invalid: expected one of "
                                         r"\('auto', 'observed', 'geometric', 'joint', 'robust'\)"):
        config_from_dict(tiny_config(stores, ddo={"projection": "line"}))
    for method in ("auto", "observed", "geometric", "joint", "robust"):
        runner = MixtureRunner(config_from_dict(tiny_config(stores, ddo={"projection": method})),
                               stores.parent / "out", progress=False)
        assert f"projection to the target: {method}" in runner.describe()


def test_report_says_which_projection_and_plots_its_curve(stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.reporting.plots import write_plots
    from autoscale_data.runner.reporting.report import _markdown

    for method in ("joint", "robust"):
        fits, proj, _ = _fit(stores, tmp_path / method, method)
        report = Report(name="t", domains=list(N0), ddo={str(n): r for n, r in fits.ddo.items()},
                        bootstrap={str(n): {"available": False, "reason": "one seed"} for n in fits.ddo},
                        projection=proj)
        md = _markdown(report)
        assert f"Target mix from the {method} projection" in md and "(geometric, not used)" in md
        if method == "joint":
            assert "(projected: joint law, AAR" in md and "differs by total variation" in md
        pytest.importorskip("matplotlib")
        assert "plots/weights.png" in write_plots(tmp_path / method, report)


class _SkewedLedger(_Ledger):
    """Validation domain 'a' depends on the training tokens of 'a' alone; the others follow the law."""

    def result(self, run_id: str) -> RunResult:
        out = super().result(run_id)
        return replace(out, losses={**out.losses, "a": 2.0 + ((500.0 + self._specs[run_id].tokens["a"]) / 1000.0) ** -1.0})


def test_objective_weights_set_the_fits_objective(stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.config.sections import DDOConfig

    with pytest.raises(ValueError, match="objective_weights"):
        DDOConfig(objective_weights={"a": -1.0})
    assert DDOConfig(objective_weights={"a": 1}).objective_weights == {"a": 1.0}
    weights = {}
    for name, ow in (("mean", None), ("a-heavy", {"a": 10.0, "b": 0.1, "c": 0.1})):
        ddo = {"multipliers": [[3, 1.7], [3, 1.7]]} | ({} if ow is None else {"objective_weights": ow})
        cfg = config_from_dict(tiny_config(stores, ddo=ddo, target={"budget": 65536}))
        domains = inspect_domains(cfg)
        proxies = {n: ddo_proxy_specs(cfg, domains, n) for n in cfg.ddo.budgets}
        fits = fit_all(cfg, domains, _SkewedLedger([s for v in proxies.values() for s in v]), proxies,
                       tmp_path / name, log=lambda _: None)
        weights[name] = fits.weights
    assert weights["a-heavy"]["a"] > weights["mean"]["a"] + 0.05


def test_the_weights_plot_skips_budgets_a_decreasing_path_cannot_reach() -> None:
    from autoscale_data.runner.reporting.plots import _reachable
    from autoscale_data.solver import project

    pairs = [(100.0, {"a": 60.0, "b": 40.0}), (200.0, {"a": 50.0, "b": 150.0})]  # a falls: no total below ~100
    grid = np.geomspace(50.0, 1e4, 20)
    kept, curve = _reachable(project, pairs, grid)
    assert kept is not None and 0 < len(kept) < len(grid) and len(curve) == len(kept) and kept[-1] == 1e4
    with pytest.raises(ValueError):
        project(pairs, float(grid[0]))
    assert _reachable(project, pairs, np.asarray([1.0, 2.0])) == (None, [])


def test_three_budgets_backtest_and_its_numbers_reach_projection_json_the_log_and_the_report(
        stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.reporting.report import _markdown

    fits, proj, lines = _fit(stores, tmp_path, None, budgets=[8192, 16384, 32768])
    assert sorted(fits.ddo) == [8192, 16384, 32768] and sorted(fits.bootstrap) == [8192, 16384, 32768]
    for n in (8192, 16384, 32768):  # one file of each kind per budget
        assert (tmp_path / "fits" / f"ddo_{n}.json").is_file() and (tmp_path / "fits" / f"bootstrap_{n}.json").is_file()
    sel = proj["selection"]
    assert sel["rule"] == "backtest" and sel["held_back_tokens"] == pytest.approx(32768, rel=0.05)
    assert set(sel["backtest"]) == {"geometric", "joint", "robust", "observed"}
    scored = {n: s for n, s in sel["backtest"].items() if s.get("objective") is not None}
    assert "observed" in scored and len(scored) >= 2
    assert sel["noise"] is not None and sel["noise_source"]
    assert fits.method == sel["chosen"] and fits.plan.metadata["budgets"] == [8192, 16384, 32768]
    assert sel["scoring"] == "law" and {s["score"] for s in scored.values()} == {"law"}  # one footing for all
    assert sel["law_noise"] is not None and sel["law_check"]["note"]  # DDO designs: the N2 law scores
    for n, s in scored.items():  # the gain compares like with like: the observed mix scored the same way
        if n != "observed":
            assert s["gain"] == pytest.approx(scored["observed"]["objective"] - s["objective"])
    assert sel["law_margin"] == pytest.approx(backtest_margin(sel["law_noise"], 6, two_runs=False))  # 3 x 2 routes
    if sel["chosen"] == "observed":  # the rule: a projection only when it wins by more than the margin
        assert all(s["gain"] <= sel["law_margin"] for n, s in scored.items() if n != "observed")
    elif not sel["law_check"]["passed"]:
        assert scored[sel["chosen"]]["gain"] > sel["law_margin"]
    assert any(line.strip().startswith("backtest at 32,") for line in lines)
    assert any(line.strip().startswith("observed: objective") for line in lines)
    report = Report(name="t", domains=list(N0), ddo={str(n): r for n, r in fits.ddo.items()},
                    bootstrap={str(n): {"available": False, "reason": "one seed"} for n in fits.ddo}, projection=proj)
    md = _markdown(report)
    assert "### Backtest at 32," in md and "| observed | " in md and f"Chosen: **{sel['chosen']}**" in md
    assert f"{scored['observed']['objective']:.4f}" in md and "- Noise: " in md
    assert f"| observed | {scored['observed']['score']}" in md
    summary = format_summary(report)
    assert "DDO optimum at each of the 3 budgets" in summary and "  backtest at 32," in summary


def test_two_budgets_report_the_predicted_gains_and_no_backtest(stores: Path, tmp_path: Path) -> None:
    from autoscale_data.runner.reporting.report import _markdown

    fits, proj, lines = _fit(stores, tmp_path, None)
    report = Report(name="t", domains=list(N0), ddo={str(n): r for n, r in fits.ddo.items()},
                    bootstrap={str(n): {"available": False, "reason": "one seed"} for n in fits.ddo}, projection=proj)
    md = _markdown(report)
    assert "Backtest" not in md and "backtest at" not in format_summary(report)
    assert not any(line.strip().startswith("backtest at") for line in lines)
    assert "### Predicted gain at the target (two budgets)" in md
    for name, e in proj["selection"]["predicted"].items():  # every projection's numbers, as projection.json has them
        assert f"| {name} | {e['gain']:+.4g} | {e['sd']:.3g} |" in md


def test_the_dry_run_prints_the_proxy_cost_of_two_and_three_budgets(stores: Path) -> None:
    from autoscale_data.runner.describe import proxy_costs

    for budgets, runs_three in (([4096, 8192], False), ([2048, 4096, 8192], True)):
        cfg = config_from_dict(tiny_config(stores, ddo={"budgets": budgets}))
        domains = inspect_domains(cfg)
        two, three = proxy_costs(cfg, domains)
        assert two.budgets == (4096, 8192) and three.budgets == (2048, 4096, 8192)
        assert two.tokens == sum(s.total_tokens for n in (4096, 8192) for s in ddo_proxy_specs(cfg, domains, n))
        assert three.tokens - two.tokens == sum(s.total_tokens for s in ddo_proxy_specs(cfg, domains, 2048))
        assert (two.runs, three.runs) == (14, 21) and two.target_tokens == three.target_tokens == 16384
        assert 1.0 < three.tokens / two.tokens <= 1.25  # N0 = N1 / 2 costs N0 / (N1 + N2) more, about 1/6 here
        text = MixtureRunner(cfg, stores.parent / "out", progress=False).describe()
        line = next(x for x in text.splitlines() if x.startswith("proxy cost against one target run (16,384 tokens, "))
        assert two.target_runs == pytest.approx(two.token_ratio)  # one model: FLOPs and tokens agree
        assert (f"two budgets [4,096, 8,192]: 14 runs, {two.tokens:,} tokens (x{two.token_ratio:.2f}), "
                f"{two.flops:.3g} FLOPs = {two.target_runs:.2f} target runs") in line
        assert f"3 budgets [2,048, 4,096, 8,192]: 21 runs, {three.tokens:,} tokens" in line
        assert f"{three.tokens / two.tokens:.2f}x the two-budget proxies" in line
        assert ("(this config), " in line) == runs_three and ("ddo.extra_budget: half" in line) != runs_three
        assert ("3 budgets: every candidate refitted without N2" in text) == runs_three

"""The published-runs evaluation's core (methods, metrics, tables) on a small synthetic table."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
from paths import BENCHMARKS, SHARED

pytestmark = pytest.mark.timeout(300)

_PATH = BENCHMARKS / "eval_published_runs.py"
_DATA = SHARED / "external_runs"

AMP = np.array([1.0, 0.6, 0.8])
N0 = np.array([2e6, 1e6, 5e5])
GAMMA = np.array([0.4, 0.7, 0.3])


def _module():
    spec = importlib.util.spec_from_file_location("eval_published_runs", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def _loss(w: np.ndarray, n: float) -> np.ndarray:
    return (AMP * ((N0 + w * n) / 1e7) ** (-GAMMA)).sum(axis=-1) + 1.5


def _case(ev, n_mix: int = 24):
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(3), size=n_mix)
    ids = [f"m{i:02d}" for i in range(n_mix)]
    fit = [ev.Budget(n, ids, w, _loss(w, n)) for n in (2e7, 3e7, 4e7, 6e7)]
    held = ev.Budget(1.6e8, ids, w, _loss(w, 1.6e8))
    return ev.Case("synthetic 2-6e7 -> 1.6e8", "budget", ("a", "b", "c"), fit, held, noise=1e-4,
                   natural=np.array([0.5, 0.3, 0.2]))


def test_methods_and_metrics_on_an_exact_law():
    ev = _module()
    case = _case(ev)
    res = ev.evaluate(case)
    rows = res["methods"]
    y = case.heldout.loss
    # the data follow the joint law exactly: it predicts the held-out budget and picks the best mixture
    assert rows["joint"]["mae"] < 1e-3 and rows["joint"]["rho"] > 0.99
    assert rows["joint"]["regret"] == 0.0 and rows["joint"]["rank"] == 1
    # the baseline's prediction is the loss at 6e7 as is: its MAE is the loss drop, its pick the best there
    drop = float(np.mean(_loss(case.fit[-1].weights, 6e7) - y))
    assert rows["best-observed"]["mae"] == pytest.approx(drop)
    assert rows["best-observed"]["recommended"] == case.heldout.ids[int(np.argmin(case.fit[-1].loss))]
    # weight-only methods are scored by the nearest available mixture
    for name in ("geometric", "joint-opt", "natural", "uniform"):
        assert rows[name]["scored_by"] == "nearest mixture" and "mae" not in rows[name]
        rec = case.heldout.ids.index(rows[name]["recommended"])
        assert rows[name]["regret"] == pytest.approx(y[rec] - y.min())
        assert rows[name]["rank"] == 1 + int(np.sum(y < y[rec]))
    u = rows["uniform"]
    assert u["distance_l1"] == pytest.approx(np.abs(case.heldout.weights - 1 / 3).sum(axis=1).min())
    assert rows["steps"]["rho"] > 0.9 and "mae" in rows["mixlaw+steps"]
    assert rows["regmix"]["scored_by"] == "lowest prediction"
    for row in rows.values():
        if "regret" in row:
            assert row["vs_baseline"] in ("better", "tie", "worse")
            assert row["tie_with_best"] == (row["regret"] <= case.noise)


def test_the_default_and_the_projections_are_the_products_one_call(tmp_path):
    from autoscale_data.solver import project_all

    ev = _module()
    case = _case(ev)
    res = ev.evaluate(case)
    p = project_all([b.table(case.domains) for b in case.fit], case.heldout.tokens)  # the product's defaults
    rows = res["methods"]
    assert res["product"] == {"status": "answered", "chosen": p.used}
    assert rows["default"]["chosen"] == p.used and rows["default"]["reason"] == p.selection.reason
    assert rows["default"]["weights"] == pytest.approx([p.weights[d] for d in case.domains], abs=0)
    assert rows["geometric"]["weights"] == pytest.approx([p.geometric.weights[d] for d in case.domains], abs=0)
    assert rows["robust"]["weights"] == pytest.approx([p.robust.weights[d] for d in case.domains], abs=0)
    summary = ev.summarise([res])
    assert summary["default"]["chosen"] == {p.used: {"points": 1, "mean_gain": pytest.approx(
        rows["best-observed"]["regret"] - rows["default"]["regret"])}}
    # the CLI on table windows: answered, or refused naming the file
    paths = []
    for k, b in enumerate(case.fit[:3]):
        b.table(case.domains).to_csv(tmp_path / f"b{k}.csv")
        paths.append(str(tmp_path / f"b{k}.csv"))
    cli = ev.run_cli([("three", paths), ("gone", [str(tmp_path / "missing.csv")])])
    assert cli[0]["status"] == "answered" and cli[0]["chosen"] in ("observed", "geometric", "joint", "robust")
    assert cli[1]["status"] == "refused" and "missing.csv" in cli[1]["reason"]
    assert "answered 1" in ev.format_cli(cli) and "refused 1, failed 0" in ev.format_cli(cli)


def test_step_law_recovers_a_power_law_in_steps():
    ev = _module()
    xs = np.array([1.0, 2.0, 3.0, 5.0])
    curves = {"p": 2.0 + 1.5 * xs ** -0.5, "q": 1.0 + 0.5 * xs ** -0.5}
    budgets = [ev.Budget(x, ["p", "q"], np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([curves["p"][k], curves["q"][k]]))
               for k, x in enumerate(xs)]
    pred = ev.step_law(budgets, 10.0)
    assert pred["p"] == pytest.approx(2.0 + 1.5 * 10 ** -0.5, abs=1e-4)
    assert pred["q"] == pytest.approx(1.0 + 0.5 * 10 ** -0.5, abs=1e-4)


def test_one_fitted_budget_marks_the_multi_budget_methods_not_applicable():
    ev = _module()
    case = _case(ev)
    case.fit = case.fit[-1:]
    rows = ev.evaluate(case)["methods"]
    for name in ("joint", "joint-opt", "geometric", "steps"):
        assert "n/a" in rows[name]
    assert "regret" in rows["mixlaw+steps"] and "regret" in rows["law@last"]


def test_summary_tables_and_results_file(tmp_path, capsys):
    ev = _module()
    doc = ev.run([_case(ev)], tmp_path)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"]["all"]["joint"]["points"] == 1
    assert saved["summary"]["all"]["best-observed"]["worse_than_baseline"] == 0
    assert doc["summary"]["budget"]["joint"]["mean_rho"] > 0.99
    out = capsys.readouterr().out
    assert "== budget ==" in out and "summary over all held-out points" in out and "joint" in out


def test_missing_data_is_a_clear_error(tmp_path, capsys):
    ev = _module()
    assert ev.main(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert "published runs not found" in capsys.readouterr().err


@pytest.mark.skipif(not (_DATA / "mixinglaws").is_dir(), reason="../shared/external_runs is absent")
def test_published_data_load():
    ev = _module()
    domains, curves, weights, natural = ev.load_mixinglaws(_DATA, "redpajama")
    assert len(domains) == 7 and {"70M", "410M"} <= set(curves)
    assert natural is not None and natural.sum() == pytest.approx(1.0)
    assert len(curves["410M"]) >= 20

"""The joint and per-budget laws fitted to runs of any mixtures (not DDO designs), their
identifiability statement, bad input, the weighted objective and the ``project`` CLI on such tables."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autoscale_data.cli import main
from autoscale_data.solver.allocate import allocate, multiplier_bounds
from autoscale_data.solver.design import run_objective
from autoscale_data.solver.joint import JointFit, fit_budget_law, fit_joint, per_budget_optima
from autoscale_data.solver.olmix import write_olmix
from autoscale_data.solver.runs import Run, RunTable

DOMAINS = ("web", "code", "books")
AMP = np.array([1.0, 0.6, 0.8])
N0 = np.array([2e6, 1e6, 5e5])
GAMMA = np.array([0.4, 0.7, 0.3])
FLOOR = 1.5
SCALE = 1e7


def true_loss(tokens: np.ndarray) -> float:
    return float(AMP @ ((N0 + tokens) / SCALE) ** (-GAMMA) + FLOOR)


def true_weights(budget: float) -> np.ndarray:
    s = np.full(3, SCALE)
    lo, hi = multiplier_bounds(s, budget, 0.0, 1.0, None)
    return allocate(AMP, N0 / SCALE, GAMMA, s, budget, lo, hi).x * s / budget


def random_tables(budgets=(3e7, 6e7, 1.2e8), n=30, noise=1e-4, seed=0, val=("v1",)) -> list[RunTable]:
    rng = np.random.default_rng(seed)
    tables = []
    for budget in budgets:
        runs = []
        for i, w in enumerate(rng.dirichlet(np.ones(3), size=n)):
            tok = w * budget
            base = true_loss(tok)
            runs.append(Run(f"r{i:03d}", dict(zip(DOMAINS, tok.tolist(), strict=True)),
                            {v: base + k * 0.1 + rng.normal(0, noise) for k, v in enumerate(val)}))
        tables.append(RunTable(runs))
    return tables


def test_recovers_known_law_from_random_mixtures_at_several_budgets():
    fit = fit_joint(random_tables(), target_tokens=1e9, objective="mean_loss")
    np.testing.assert_allclose([fit.weights[d] for d in DOMAINS], true_weights(1e9), atol=0.01)
    # the law itself is recovered: held-out budget (4x beyond the largest fitted one) and mixture
    tok = np.array([0.2, 0.5, 0.3]) * 5e8
    assert fit.predict(dict(zip(DOMAINS, tok, strict=True))) == pytest.approx(true_loss(tok), abs=2e-3)
    ident = fit.identifiability
    assert ident.identified and ident.noise_source == "residual"
    for j, d in enumerate(DOMAINS):
        lo, hi = ident.weight_range[d]
        assert lo - 0.01 <= true_weights(1e9)[j] <= hi + 0.01
    assert fit.budgets == (3e7, 6e7, 1.2e8)


def test_per_budget_law_recovers_the_optimum_at_its_budget():
    fit = fit_budget_law(random_tables(budgets=(6e7,), n=40)[0], objective="mean_loss")
    assert fit.budget_tokens == pytest.approx(6e7) and fit.budgets == (pytest.approx(6e7),)
    np.testing.assert_allclose([fit.weights[d] for d in DOMAINS], true_weights(6e7), atol=0.01)
    optima = per_budget_optima(random_tables(budgets=(1.2e8, 3e7), n=40), objective="mean_loss")
    assert [o.budget_tokens for o in optima] == [pytest.approx(3e7), pytest.approx(1.2e8)]


def test_joint_fit_round_trips_with_its_identifiability():
    fit = fit_joint(random_tables(), objective="mean_loss")
    back = JointFit.from_json(json.loads(json.dumps(fit.to_json())))
    assert back.identifiability == fit.identifiability and back.weights == fit.weights


def test_under_determined_table_is_not_identified():
    """'books' only ever gets 1e6 or 2e6 tokens: its three parameters (and the floor) see two values."""
    rng = np.random.default_rng(3)
    tables = []
    for budget in (3e7, 6e7):
        runs = []
        for i in range(25):
            books = 1e6 if i % 2 else 2e6
            share = rng.uniform(0.1, 0.9)
            tok = np.array([share * (budget - books), (1 - share) * (budget - books), books])
            runs.append(Run(f"r{i:02d}", dict(zip(DOMAINS, tok.tolist(), strict=True)),
                            {"v": true_loss(tok) + rng.normal(0, 1e-4)}))
        tables.append(RunTable(runs))
    fit = fit_joint(tables, target_tokens=3e8, objective="mean_loss")
    ident = fit.identifiability
    assert not ident.identified
    assert ident.undetermined_directions >= 1
    assert "NOT identified" in ident.describe()
    assert ident.spread > 0.01


def test_order_of_tables_and_runs_does_not_matter():
    tables = random_tables(n=20, seed=5)
    ref = fit_joint(tables, target_tokens=5e8, objective="mean_loss")
    rng = np.random.default_rng(0)
    for _ in range(3):
        shuffled = [RunTable([t.runs[i] for i in rng.permutation(len(t))]) for t in tables]
        shuffled = [shuffled[k] for k in rng.permutation(len(shuffled))]
        other = fit_joint(shuffled, target_tokens=5e8, objective="mean_loss")
        assert other.weights == ref.weights and other.sse == ref.sse
        assert other.identifiability == ref.identifiability


def test_one_budget_is_refused_by_the_joint_law():
    with pytest.raises(ValueError, match=">= 2 budgets"):
        fit_joint(random_tables(budgets=(3e7,)), objective="mean_loss")


def test_a_domain_whose_share_never_varies_is_refused():
    rng = np.random.default_rng(1)
    tables = []
    for budget in (3e7, 6e7):
        runs = []
        for i in range(20):
            s = rng.uniform(0.1, 0.7)
            tok = np.array([s, 0.8 - s, 0.2]) * budget
            runs.append(Run(f"r{i}", dict(zip(DOMAINS, tok.tolist(), strict=True)), {"v": true_loss(tok)}))
        tables.append(RunTable(runs))
    with pytest.raises(ValueError, match="'books' has the same share"):
        fit_joint(tables, objective="mean_loss")
    with pytest.raises(ValueError, match="'books' has the same share"):
        fit_budget_law(tables[0], objective="mean_loss")


def test_a_domain_without_tokens_and_an_empty_run_are_refused():
    tables = random_tables(n=15)
    zeroed = [RunTable([Run(r.run_id, {**r.tokens, "books": 0.0}, r.loss) for r in t]) for t in tables]
    with pytest.raises(ValueError, match="'books' has no tokens in any run"):
        fit_joint(zeroed, objective="mean_loss")
    empty = RunTable(list(tables[0].runs) + [Run("zero", dict.fromkeys(DOMAINS, 0.0), {"v1": 3.0})])
    with pytest.raises(ValueError, match=r"runs \['zero'\] have no training tokens"):
        fit_joint([empty, tables[1]], objective="mean_loss")


def test_too_few_runs_for_the_parameters():
    with pytest.raises(ValueError, match="needs more runs"):
        fit_joint(random_tables(n=4, budgets=(3e7, 6e7)), objective="mean_loss")


def test_nan_and_negative_tokens_are_refused_when_read(tmp_path):
    header = ["run", "tokens.web", "tokens.code", "loss.v"]
    with pytest.raises(ValueError, match="must be finite"):
        RunTable.from_rows(header, [{"run": "a", "tokens.web": "1e6", "tokens.code": "2e6", "loss.v": "nan"}])
    with pytest.raises(ValueError, match="negative"):
        RunTable.from_rows(header, [{"run": "a", "tokens.web": "-1e6", "tokens.code": "2e6", "loss.v": "3.0"}])
    with pytest.raises(ValueError, match="must be finite"):
        Run("a", {"web": float("nan"), "code": 1.0}, {"v": 3.0})


def test_weighted_objective():
    tables = random_tables(val=("v1", "v2"), n=25)
    y = run_objective(tables[0], "mean_loss", {"v1": 0.25, "v2": 0.75})
    loss = tables[0].loss_matrix()
    np.testing.assert_allclose(y, 0.25 * loss[:, 0] + 0.75 * loss[:, 1])
    ppl = run_objective(tables[0], "mean_ppl", {"v1": 2.0, "v2": 0.0})
    np.testing.assert_allclose(ppl, 2.0 * np.exp(loss[:, 0]))
    # one domain with weight 1 is that domain's mean: the same fit as val_domains=[...]
    a = fit_joint(tables, objective="mean_loss", objective_weights={"v2": 1.0})
    b = fit_joint(tables, objective="mean_loss", val_domains=["v2"])
    assert a.weights == b.weights
    # v2 = v1 + 0.1 for every run: any weighting gives the same optimum, shifted loss
    c = fit_joint(tables, objective="mean_loss", objective_weights={"v1": 0.5, "v2": 0.5})
    np.testing.assert_allclose(list(c.weights.values()), list(a.weights.values()), atol=2e-3)
    assert c.floor == pytest.approx(a.floor - 0.05, abs=0.02)
    for bad, msg in (({"v1": -1.0}, ">= 0"), ({"v1": 0.0}, "all zero"), ({"vx": 1.0}, "not in the runs"),
                     ({"v1": float("nan")}, ">= 0")):
        with pytest.raises(ValueError, match=msg):
            fit_joint(tables, objective="mean_loss", objective_weights=bad)
    with pytest.raises(ValueError, match="not both"):
        fit_joint(tables, objective_weights={"v1": 1.0}, val_domains=["v1"])


def test_project_cli_on_runs_of_any_mixtures(tmp_path, capsys):
    paths = []
    for t in random_tables(val=("v1", "v2"), n=25):
        path = tmp_path / f"runs_{len(paths)}.csv"
        t.to_csv(path)
        paths.append(str(path))
    args = ["project", "--runs", paths[2], "--runs", paths[0], "--runs", paths[1], "--method", "joint",
            "--target-tokens", "1e9", "--objective", "mean_loss", "--objective-weights", "v1=0.5,v2=0.5", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "joint" and sum(out["weights"].values()) == pytest.approx(1.0)
    np.testing.assert_allclose([out["weights"][d] for d in DOMAINS], true_weights(1e9), atol=0.01)
    assert out["joint"]["identifiability"]["identified"]
    assert "weights" in out["geometric"]  # through the per-budget laws' optima
    wfile = tmp_path / "w.json"
    wfile.write_text(json.dumps({"v1": 1.0}))
    assert main(args[:-3] + ["--objective-weights", str(wfile)]) == 0
    assert "joint law: Identified" in capsys.readouterr().out
    assert main(args[:-2] + ["v1", "--json"]) != 0
    assert "expected DOMAIN=WEIGHT, got 'v1'" in capsys.readouterr().err


def test_project_cli_on_olmix_pairs(tmp_path, capsys):
    args = ["project", "--method", "joint", "--target-tokens", "1e9", "--objective", "mean_loss", "--json"]
    for k, (t, budget) in enumerate(zip(random_tables(n=25), (3e7, 6e7, 1.2e8), strict=True)):
        r, m = tmp_path / f"ratios{k}.csv", tmp_path / f"metrics{k}.csv"
        write_olmix(t, r, m)
        args += ["--olmix", str(r), str(m), f"{budget:g}"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose([out["weights"][d] for d in DOMAINS], true_weights(1e9), atol=0.01)
    assert main(args[:-1] + ["lots"]) != 0
    assert "--olmix TOKENS 'lots' is invalid: expected a number of tokens" in capsys.readouterr().err


def test_ddo_cli_takes_objective_weights(tmp_path, capsys):
    from autoscale_data.solver.synthetic import synthetic_ddo_runs

    runs = synthetic_ddo_runs({"web": 1e6, "code": 1e6, "books": 1e6}, [1, 2, 3], [0.4, 0.6, 0.9])
    skewed = RunTable([Run(r.run_id, r.tokens, {"all": r.loss["all"], "web_only": 3.0 - 1e-7 * r.tokens["web"]})
                       for r in runs])
    skewed.to_csv(tmp_path / "runs.csv")
    base = ["ddo", str(tmp_path / "runs.csv"), "--objective", "mean_loss", "--json"]
    assert main(base + ["--objective-weights", "all=1"]) == 0
    only_all = json.loads(capsys.readouterr().out)["weights"]
    assert main(base + ["--objective-weights", "all=1,web_only=5"]) == 0
    heavy = json.loads(capsys.readouterr().out)["weights"]
    assert heavy["web"] > only_all["web"] + 0.05


def test_project_cli_robust_method(tmp_path, capsys):
    paths = []
    for k, t in enumerate(random_tables(n=25, budgets=(3e7, 1.2e8))):
        t.to_csv(tmp_path / f"r{k}.csv")
        paths += ["--runs", str(tmp_path / f"r{k}.csv")]
    args = ["project", *paths, "--target-tokens", "1e9", "--objective", "mean_loss", "--method", "robust"]
    assert main(args + ["--json", "--save-plan", str(tmp_path / "plan.json")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "robust" and out["weights"] == out["robust"]["weights"]
    assert out["robust"]["plain_weights"] == pytest.approx(out["geometric"]["weights"])
    assert set(out["robust"]["shrink"]) == set(DOMAINS)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan  # the plan runs through the largest budget's optimum and the robust target mix
    assert main(args) == 0
    assert "robust projection moves the geometric mix by total variation" in capsys.readouterr().out
    scales = tmp_path / "s.json"
    scales.write_text(json.dumps({"scales": [{"budget_tokens": 1, "weights": {"a": 1}}]}))
    assert main(["project", str(scales), "--target-tokens", "10", "--method", "robust"]) != 0
    assert "--method robust fits the runs themselves" in capsys.readouterr().err

"""The solver's input checks and its "can I trust it?" on a user's sweep (issue 37, items 3 and 4).

A user's sweep: a few random mixtures run once each at two budgets (one CSV per budget), three domains,
a ``loss.<domain>`` column per domain; the answer must say what the runs cannot tell.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from autoscale_data.cli import main
from autoscale_data.solver import MixturePlan, Run, RunTable, project_all
from autoscale_data.solver.trust import EDGE_FRACTION, GAMMA_RANGE, edge_check, parameter_check, seeds_needed

pytestmark = pytest.mark.timeout(300)

DOMS = ("web", "code", "books")


def _sweep(tmp_path, *, seed=1, noise=0.01, seeds=1, mixes=6, budgets=(2e6, 8e6), loss=None) -> list[str]:
    """One CSV per budget: ``mixes`` random mixtures, each run ``seeds`` times; returns the paths."""
    rng = np.random.default_rng(seed)
    shares = rng.dirichlet(np.ones(3), size=mixes)
    paths = []
    for k, n in enumerate(budgets):
        runs = []
        for i, w in enumerate(shares):
            tok = w * n
            for s in range(seeds):
                clean = (loss(w, n) if loss is not None else
                         {d: 2.0 + 1.5 * ((1e5 + tok[j]) / 1e6) ** -0.4 for j, d in enumerate(DOMS)})
                runs.append(Run(f"m{i}s{s}", dict(zip(DOMS, tok, strict=True)),
                                {d: v + noise * rng.standard_normal() for d, v in clean.items()}, seed=s))
        path = tmp_path / f"sweep{k}.csv"
        RunTable(runs).to_csv(path)
        paths.append(str(path))
    return paths


def _project(capsys, paths, *extra):
    rc = main(["project", *(a for p in paths for a in ("--runs", p)), "--target-tokens", "1e9", *extra])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# ------------------------------------------------------------------ 3. input checks
def test_token_columns_written_as_shares_are_refused_naming_file_and_column(tmp_path, capsys):
    path = tmp_path / "shares.csv"
    path.write_text("run,tokens.web,tokens.code,loss.web\nr0,0.6,0.4,3.1\nr1,0.3,0.7,3.3\n")
    with pytest.raises(ValueError, match=r"shares\.csv.*'tokens\.web'.*shares.*tokens") as err:
        RunTable.from_csv(path)
    assert "multiply" in str(err.value)  # how to fix it
    mixed = tmp_path / "mixed.csv"  # one column of shares beside token counts
    mixed.write_text("run,tokens.web,tokens.code,loss.web\nr0,600000,0.4,3.1\nr1,300000,0.7,3.3\n")
    with pytest.raises(ValueError, match=r"'tokens\.code'"):
        RunTable.from_csv(mixed)
    assert main(["project", "--runs", str(path), "--target-tokens", "1e9"]) == 2
    assert "tokens.web" in capsys.readouterr().err
    ok = tmp_path / "ok.csv"  # a domain left out of every run (all 0) is not a share column
    ok.write_text("run,tokens.web,tokens.code,loss.web\nr0,600000,0,3.1\nr1,300000,0,3.3\n")
    assert len(RunTable.from_csv(ok)) == 2


def test_a_loss_column_missing_from_one_budgets_file_is_named(tmp_path, capsys):
    paths = _sweep(tmp_path)
    table = RunTable.from_csv(paths[1])
    RunTable([Run(r.run_id, r.tokens, {d: v for d, v in r.loss.items() if d != "books"}) for r in table]).to_csv(paths[1])
    rc, _, err = _project(capsys, paths)
    assert rc == 2 and paths[1] in err and "loss.books" in err and "missing" in err
    with pytest.raises(ValueError, match=r"b\.csv: .*'loss\.books'.*missing"):
        project_all([RunTable.from_csv(p) for p in paths], 1e9, labels=["a.csv", "b.csv"])
    rc, out, err = _project(capsys, paths, "--objective-weights", "web=0.5,code=0.5", "--json")
    assert rc == 0, err  # the objective does not read 'books': the files agree on what it reads


def test_a_target_below_what_the_path_reaches_is_refused_not_nan(tmp_path, capsys):
    scales = {"scales": [{"budget_tokens": 1e6, "allocation_tokens": {"a": 5e5, "b": 3e5, "c": 2e5}},
                         {"budget_tokens": 4e6, "allocation_tokens": {"a": 5e5, "b": 2e6, "c": 1.5e6}}]}
    (tmp_path / "s.json").write_text(json.dumps(scales))
    rc = main(["project", str(tmp_path / "s.json"), "--target-tokens", "5000"])
    cap = capsys.readouterr()
    assert rc == 2 and "nan" not in cap.out.lower()
    assert "5000" in cap.err and "smallest" in cap.err and "5e+05" in cap.err
    plan = MixturePlan.from_scales(scales["scales"])
    assert plan.min_budget == pytest.approx(5e5)  # 'a' does not grow: the path never goes below its 5e5 tokens
    with pytest.raises(ValueError, match="below the smallest total"):
        plan.weights_for_budget(5000)
    w = plan.weights_for_budget(6e5)
    assert all(math.isfinite(v) for v in w.values()) and sum(w.values()) == pytest.approx(1.0)
    from autoscale_data.mixing.anytime import allocation_path

    _, targets = allocation_path(plan, ["a", "b", "c"], 4000, 1024)  # the anytime schedule starts at min_budget
    assert np.isfinite(targets).all() and targets[-1].sum() == pytest.approx(4000)
    # a path that grows in every domain runs backwards below the smallest budget, with a warning
    assert main(["project", str(tmp_path / "s.json"), "--target-tokens", "2e6"]) == 0
    capsys.readouterr()
    grows = {"scales": [{"budget_tokens": 1e6, "weights": {"a": 0.5, "b": 0.5}},
                        {"budget_tokens": 4e6, "weights": {"a": 0.4, "b": 0.6}}]}
    (tmp_path / "g.json").write_text(json.dumps(grows))
    assert main(["project", str(tmp_path / "g.json"), "--target-tokens", "5000", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert all(math.isfinite(v) for v in out["weights"].values()) and "extrapolated backwards" in cap.err


def test_a_target_below_the_smallest_budget_of_a_sweep_has_no_nan(tmp_path, capsys):
    paths = _sweep(tmp_path)
    rc = main(["project", *(a for p in paths for a in ("--runs", p)), "--target-tokens", "5000", "--json"])
    cap = capsys.readouterr()
    assert "nan" not in cap.out.lower()
    if rc == 0:
        assert all(math.isfinite(v) for v in json.loads(cap.out)["weights"].values())


def test_a_non_finite_number_in_the_answer_exits_non_zero(tmp_path, capsys, monkeypatch):
    import autoscale_data.commands.project as cmd
    from autoscale_data.solver import Projection

    (tmp_path / "g.json").write_text(json.dumps({"scales": [{"budget_tokens": 1e6, "weights": {"a": 0.5, "b": 0.5}},
                                                            {"budget_tokens": 4e6, "weights": {"a": 0.4, "b": 0.6}}]}))

    def broken(*_a, **_k):
        return Projection(weights={"a": float("nan"), "b": 0.5}, budget_tokens=1e9,
                          allocation_tokens={"a": float("nan"), "b": 5e8}, t=2.0, residual=0.0, warnings=[])

    monkeypatch.setattr(cmd, "project", broken)
    plan = tmp_path / "plan.json"
    assert main(["project", str(tmp_path / "g.json"), "--target-tokens", "1e9", "--save-plan", str(plan)]) != 0
    cap = capsys.readouterr()
    assert "non-finite" in cap.err and "weights.a" in cap.err and cap.out == "" and not plan.exists()


# ------------------------------------------------------------------ 4. trust
def test_one_seed_per_mix_says_the_choice_cannot_be_judged_and_how_many_seeds(tmp_path, capsys):
    paths = _sweep(tmp_path)
    rc, out, err = _project(capsys, paths)
    assert rc == 0, err
    assert "cannot be judged against noise" in out and "seeds per mix" in out
    rc, out, _ = _project(capsys, paths, "--json")
    noise = json.loads(out)["trust"]["noise"]
    assert noise["seeds"] == 1 and not noise["judged"] and noise["noise"] > 0 and "residual" in noise["noise_source"]
    assert isinstance(noise["seeds_needed"], int) and noise["seeds_needed"] >= 2
    assert noise["seeds_needed"] == seeds_needed(noise["noise"], noise["gap"])
    # replicates: the noise is measured, and the choice is judged against it
    rc, out, _ = _project(capsys, _sweep(tmp_path, seeds=3, noise=0.002), "--json")
    noise = json.loads(out)["trust"]["noise"]
    assert rc == 0 and noise["seeds"] == 3 and noise["noise_source"].startswith("replicates")
    assert noise["judged"] == (noise["seeds"] >= noise["seeds_needed"])


def test_seeds_needed_follows_twice_the_standard_error_of_a_difference():
    assert seeds_needed(0.01, 0.1) == 2  # far apart: the minimum to measure the noise
    assert seeds_needed(0.01, 0.01) == 8  # 2 (2 sigma / gap)^2
    assert seeds_needed(0.01, 0.0) is None and seeds_needed(None, 0.1) is None


def test_a_chosen_mix_on_the_edge_of_the_grid_is_flagged(tmp_path, capsys):
    def books_help(w, n):  # the more books the better: the best run has the largest books share run
        return {d: 3.0 - 0.5 * w[2] for d in DOMS}

    paths = _sweep(tmp_path, loss=books_help, noise=0.0)
    rc, out, _ = _project(capsys, paths, "--json")
    res = json.loads(out)
    assert rc == 0 and res["method"] == "observed"
    assert res["trust"]["edge"]["edges"]["books"] == "highest"
    rc, text, _ = _project(capsys, paths)
    assert "edge of the mixes run" in text and "books" in text
    tables = [RunTable.from_csv(p) for p in paths]
    inside = edge_check(tables, {"web": 0.34, "code": 0.33, "books": 0.33})
    lo, hi = inside.ranges["books"]
    assert lo < 0.33 < hi and "books" not in inside.edges
    out_of_grid = edge_check(tables, {"web": 0.0, "code": 1.0 - hi - 0.01, "books": hi + 0.01})
    assert out_of_grid.edges["books"] == "above" and "beyond" in out_of_grid.summary
    near = edge_check(tables, {"web": 0.5, "code": 0.5 - hi + EDGE_FRACTION * (hi - lo) / 2,
                               "books": hi - EDGE_FRACTION * (hi - lo) / 2})
    assert near.edges["books"] == "highest"


def test_implausible_parameters_of_the_joint_law_are_flagged(tmp_path, capsys):
    paths = _sweep(tmp_path, seed=0, noise=0.05)  # noisy single-seed sweep: a floor near -20 (as reported)
    tables = [RunTable.from_csv(p) for p in paths]
    res = project_all(tables, 1e9)
    assert res.joint.floor < 0
    assert res.trust is not None and res.trust.parameters is not None and res.trust.parameters.implausible
    rc, out, _ = _project(capsys, paths)
    assert rc == 0 and "implausible" in out and "floor" in out
    fit = res.joint
    steep = replace(fit, law={**fit.law, "web": replace(fit.law["web"], gamma=16.0)}, floor=-21.0)
    check = parameter_check(steep, tables)
    assert any("'web'" in x and "16" in x for x in check.implausible)
    assert any("floor" in x and "-21" in x for x in check.implausible)
    sane = replace(fit, law={d: replace(t, gamma=0.4) for d, t in fit.law.items()}, floor=1.0)
    assert parameter_check(sane, tables).implausible == []
    assert GAMMA_RANGE[0] < 0.4 <= GAMMA_RANGE[1]
    too_high = replace(sane, floor=float(min(min(r.loss.values()) for t in tables for r in t)) + 5)
    assert any("smallest observed" in x for x in parameter_check(too_high, tables).implausible)


def test_save_plan_records_the_method_reason_and_evidence(tmp_path, capsys):
    paths = _sweep(tmp_path)
    plan = tmp_path / "plan.json"
    rc, _, err = _project(capsys, paths, "--save-plan", str(plan), "--min-weight", "0.01")
    assert rc == 0, err
    meta = MixturePlan.load(plan).metadata
    assert meta["method"] in ("observed", "robust", "geometric", "joint") and meta["requested_method"] == "auto"
    assert meta["reason"] and meta["selection"]["chosen"] == meta["method"]
    assert meta["trust"]["noise"]["seeds"] == 1 and "seeds_needed" in meta["trust"]["noise"]
    assert meta["objective"] == "mean_loss" and meta["sources"] == paths and meta["target_tokens"] == 1e9
    scales = tmp_path / "g.json"
    scales.write_text(json.dumps({"scales": [{"budget_tokens": 1e6, "weights": {"a": 0.5, "b": 0.5}},
                                             {"budget_tokens": 4e6, "weights": {"a": 0.4, "b": 0.6}}]}))
    assert main(["project", str(scales), "--target-tokens", "1e9", "--save-plan", str(plan)]) == 0
    meta = MixturePlan.load(plan).metadata
    assert meta["method"] == "geometric" and "SCALES.json" in meta["reason"] and meta["sources"] == [str(scales)]


def test_ddo_on_a_sweep_points_to_project_runs(tmp_path, capsys):
    paths = _sweep(tmp_path)
    assert main(["ddo", paths[0]]) == 2
    err = capsys.readouterr().err
    assert "no base run" in err and "project --runs" in err

"""The default answer (``method="auto"``) on tables of the published runs' shapes, through the CLI, and its
recovery: pure noise gives the observed mix, a known law gives a projection; the left-out-domain rule."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.cli import main
from autoscale_data.solver import PROJECTION_CHOICES, Run, RunTable, project_all
from autoscale_data.solver.contrib import noise_estimate, observed_best, path_scales

pytestmark = pytest.mark.timeout(300)

DOMS7 = ("cc", "c4", "github", "arxiv", "books", "wiki", "se")
AMP7 = np.array([1.0, 0.9, 0.5, 0.4, 0.6, 0.5, 0.3])
N0_7 = np.array([4e8, 3e8, 1e8, 5e7, 2e8, 1e8, 5e7])
G7 = np.array([0.35, 0.3, 0.5, 0.45, 0.3, 0.4, 0.5])
STEP = 4096 * 256


def _law7(w: np.ndarray, n: float) -> float:
    return 1.8 + float(AMP7 @ ((N0_7 + w * n) / 1e9) ** -G7)


def _grid_mixes(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Mixtures on a 1/16 grid, some with zeros (as the published RedPajama design)."""
    out = []
    while len(out) < count:
        k = rng.multinomial(16, rng.dirichlet(np.full(7, 0.8)))
        if k.max() < 16 and not any((k == m).all() for m in out):
            out.append(k)
    return [m / 16 for m in out]


def _write_checkpoints(tmp_path, steps=(10_000, 12_000, 14_000), count=20, noise=0.002, extra=None) -> list[str]:
    """One CSV per checkpoint as a user writes the published runs: tokens = share x step x 4096 x 256 (the
    shares of run 'r999' sum to 1.02, as in the published table), ``loss.pile``."""
    rng = np.random.default_rng(0)
    mixes = _grid_mixes(rng, count)
    natural = np.array([0.67, 0.15, 0.045, 0.025, 0.045, 0.045, 0.03])  # sums to 1.01 + rounding: 1.02 below
    natural = natural * 1.02 / natural.sum()
    paths = []
    for step in steps:
        n = step * STEP
        lines = ["run," + ",".join(f"tokens.{d}" for d in DOMS7) + ",loss.pile"]
        for i, w in enumerate([*mixes, natural]):
            rid = "r999" if i == len(mixes) else f"r{i:03d}"
            y = _law7(w / w.sum(), n) + rng.normal(0, noise)
            lines.append(f"{rid}," + ",".join(repr(float(v * n)) for v in w) + f",{y!r}")
        for rid, w in (extra or {}).items():
            lines.append(f"{rid}," + ",".join(repr(float(v * n)) for v in w) + f",{_law7(w / w.sum(), n)!r}")
        path = tmp_path / f"{step // 1000}k.csv"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def _cli(capsys, paths, *extra: str) -> tuple[int, dict | None, str]:
    rc = main(["project", *(a for p in paths for a in ("--runs", p)), "--target-tokens", "3.1e10", *extra])
    cap = capsys.readouterr()
    return rc, (json.loads(cap.out) if rc == 0 and "--json" in extra else None), cap.err + cap.out


def test_seven_domains_twenty_grid_mixtures_at_three_budgets_answer_through_the_cli(tmp_path, capsys):
    paths = _write_checkpoints(tmp_path)
    rc, out, _ = _cli(capsys, paths, "--json")
    assert rc == 0 and out["requested_method"] == "auto" and out["method"] in PROJECTION_CHOICES[1:]
    assert out["selection"]["rule"] == "backtest" and out["selection"]["reason"]
    assert out["selection"]["held_back_tokens"] == pytest.approx(14_000 * STEP, rel=0.02)
    # 21 runs per budget are too few for a fit each (22 parameters): the optima come from one pooled law
    assert any("one law fitted to the runs of all budgets" in n for n in out["notes"])
    assert "10k.csv" in " ".join(out["notes"]) and "tables[" not in " ".join(out["notes"])
    for name in ("geometric", "robust", "joint", "observed"):  # the grid's zeros leave domains out: all answer
        assert sum(out[name]["weights"].values()) == pytest.approx(1.0), name
    assert sum(out["weights"].values()) == pytest.approx(1.0)
    rc, text_out, text = _cli(capsys, paths)
    assert rc == 0 and "chosen: " in text and "backtest at" in text
    rc, geo, _ = _cli(capsys, paths, "--method", "geometric", "--json")  # the paper's path stays available
    assert rc == 0 and geo["method"] == "geometric" and geo["weights"] == out["geometric"]["weights"]


def test_shares_far_from_one_warn_naming_the_file(tmp_path, capsys):
    far = {"r_far": np.full(7, 1.5 / 7)}  # shares summing to 1.5: not rounding
    paths = _write_checkpoints(tmp_path, extra=far)
    rc, _, text = _cli(capsys, paths, "--json")
    assert rc == 0
    warned = [line for line in text.splitlines() if "warning" in line]
    assert any("10k.csv: the tokens of run(s) 'r_far' (1.5x)" in line for line in warned)
    assert not any("r999" in line for line in warned)  # shares summing to 1.02 are rounding


def test_one_budget_answers_with_the_observed_mix_and_says_which_methods_need_two(tmp_path, capsys):
    paths = _write_checkpoints(tmp_path, steps=(10_000,))
    rc, out, _ = _cli(capsys, paths, "--json")
    assert rc == 0 and out["method"] == "observed" and out["selection"]["rule"] == "fallback"
    assert "two budgets or more" in out["selection"]["reason"]
    best = RunTable.from_csv(paths[0])
    assert out["observed"]["run_id"] == min(best.runs, key=lambda r: r.loss["pile"]).run_id
    rc, _, text = _cli(capsys, paths, "--method", "geometric")
    assert rc == 2 and "one budget" in text and "two budgets or more" in text


def test_errors_name_the_runs_file_not_its_index(tmp_path, capsys):
    paths = _write_checkpoints(tmp_path, count=9)  # 10 runs per budget: too few for a fit each
    rc, _, text = _cli(capsys, paths, "--method", "geometric")
    assert rc == 0  # pooled over the budgets instead
    rc, _, text = _cli(capsys, paths[:2], "--method", "joint")  # 20 runs for 22 parameters: refused
    assert rc == 2 and "needs more runs, got 20" in text and "tables[" not in text
    rc, _, text = _cli(capsys, paths[:1] + paths[:1], "--method", "joint")
    assert rc == 2 and "10k.csv and 10k.csv have the same budget" in text.replace(str(tmp_path) + "/", "")


def test_a_domain_zero_in_every_run_is_named(tmp_path, capsys):
    rng = np.random.default_rng(1)
    tables = []
    for n in (1e6, 2e6, 4e6):
        runs = []
        for i, w in enumerate(rng.dirichlet(np.ones(2), size=12)):
            runs.append(Run(f"r{i}", {"a": w[0] * n, "b": w[1] * n, "dead": 0.0}, {"v": 3 - w[0] * 0.1}))
        tables.append(RunTable(runs))
    res = project_all(tables, 1e8, labels=["x.csv", "y.csv", "z.csv"])
    assert res.used == "observed" and "'dead'" in res.selection.reason
    assert res.weights["dead"] == 0.0
    with pytest.raises(ValueError, match=r"the geometric projection to 1e\+08 tokens failed: x.csv .*'dead'"):
        project_all(tables, 1e8, method="geometric", labels=["x.csv", "y.csv", "z.csv"])


def test_left_out_domains_stay_out_or_keep_their_last_share():
    n1, n2 = 1e6, 4e6
    scales = [(n1, {"a": 0.6 * n1, "b": 0.4 * n1, "c": 0.0, "d": 0.0}),
              (n2, {"a": 0.5 * n2, "b": 0.3 * n2, "c": 0.0, "d": 0.2 * n2})]
    path, notes = path_scales(scales)
    w1 = {d: v / n1 for d, v in path[0][1].items()}
    w2 = {d: v / n2 for d, v in path[1][1].items()}
    assert w1["c"] == pytest.approx(1e-6, rel=1e-3) and w2["c"] == pytest.approx(1e-6, rel=1e-3)  # out at both
    assert w1["d"] == pytest.approx(w2["d"]) == pytest.approx(0.2, abs=1e-5)  # out at one: no trend
    assert w1["a"] / w1["b"] == pytest.approx(0.6 / 0.4) and w2["a"] / w2["b"] == pytest.approx(0.5 / 0.3)
    assert len(notes) == 2 and "every budget" in notes[0] and "1e+06 tokens only" in notes[1]
    # at the min_weight bound counts as out; nothing out: the optima come back as they are
    bounded, notes = path_scales([(n1, {"a": 0.95 * n1, "b": 0.05 * n1}), (n2, {"a": 0.8 * n2, "b": 0.2 * n2})],
                                 min_weight=0.05)
    assert bounded[0][1]["b"] / n1 == pytest.approx(0.2, abs=1e-9) and "1e+06 tokens only" in notes[0]
    same, notes = path_scales([(n1, {"a": 0.7 * n1, "b": 0.3 * n1}), (n2, {"a": 0.6 * n2, "b": 0.4 * n2})])
    assert same == [(n1, {"a": 0.7 * n1, "b": 0.3 * n1}), (n2, {"a": 0.6 * n2, "b": 0.4 * n2})] and notes == []


# ----------------------------------------------------------------------------------------- recovery
AMP3, N0_3, G3 = np.array([1.0, 0.8, 0.6]), np.array([5e7, 1e6, 2e5]), np.array([0.5, 0.3, 0.2])
GRID3 = [np.array(c) / 6 for c in itertools.product(range(7), repeat=3) if sum(c) == 6]
BUDGETS3 = (1e7, 2e7, 4e7, 8e7)


def _law3(w: np.ndarray, n: float) -> float:
    return 1.5 + float(AMP3 @ ((N0_3 + w * n) / 1e7) ** -G3)


def _tables3(noise: float, law: bool, seed: int = 0) -> list[RunTable]:
    rng = np.random.default_rng(seed)
    return [RunTable([Run(f"m{i:02d}", {d: float(v * n) for d, v in zip("abc", w, strict=True)},
                          {"v": (_law3(w, n) if law else 3.0) + float(rng.normal(0, noise))})
                      for i, w in enumerate(GRID3)]) for n in BUDGETS3]


def _law_optimum(n: float) -> np.ndarray:
    from scipy.optimize import minimize

    r = minimize(lambda w: _law3(w, n), np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
                 constraints=({"type": "eq", "fun": lambda w: w.sum() - 1},), options={"ftol": 1e-14})
    return r.x


def test_pure_noise_gives_the_observed_mix():
    for seed in (0, 1):
        tables = _tables3(0.01, law=False, seed=seed)
        res = project_all(tables, 1e9)
        assert res.used == "observed" and res.selection.rule == "backtest", res.selection.reason
        assert res.weights == observed_best(tables[-1], 1e9).weights
        noise, how = noise_estimate(tables)
        assert noise == pytest.approx(0.01, rel=0.5) and "own exponent" in how


def test_a_known_law_gives_the_projection_that_recovers_it():
    tables = _tables3(0.0, law=True)
    res = project_all(tables, 1e9)
    assert res.used != "observed" and "beats the best observed mix" in res.selection.reason
    truth = _law_optimum(1e9)
    got = np.array([res.weights[d] for d in "abc"])
    observed = np.array([res.observed.weights[d] for d in "abc"])
    assert np.abs(got - truth).sum() < 0.05 < np.abs(observed - truth).sum()
    assert _law3(got, 1e9) < _law3(observed, 1e9)


def test_olmix_ratios_far_from_one_warn_before_being_renormalised(tmp_path):
    from autoscale_data.solver import read_olmix

    (tmp_path / "ratios.csv").write_text("run,a,b\nr0,0.51,0.51\nr1,0.9,0.6\n")  # 1.02: rounding; 1.5: not
    (tmp_path / "metrics.csv").write_text("run,loss\nr0,3.0\nr1,3.1\n")
    with pytest.warns(UserWarning, match=r"run 'r1': weights sum to 1.5, not 1 .*renormalised") as caught:
        table = read_olmix(tmp_path / "ratios.csv", tmp_path / "metrics.csv", total_tokens=1e6)
    assert len(caught) == 1 and table["r1"].tokens == pytest.approx({"a": 6e5, "b": 4e5})


def test_held_shares_that_fill_a_budget_still_make_a_path():
    n1, n2 = 1e6, 4e6  # every domain out at one budget: the held shares (0.5 + 1e-6 + 0.5) fill the budget
    scales = [(n1, {"a": 0.0, "b": n1, "c": 0.0}), (n2, {"a": 0.5 * n2, "b": 0.0, "c": 0.5 * n2})]
    path, notes = path_scales(scales)
    for n, alloc in path:
        assert sum(alloc.values()) == pytest.approx(n, rel=1e-12)
    assert path[0][1]["a"] / n1 == pytest.approx(path[1][1]["a"] / n2) and len(notes) == 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.05, 0.3, 1.0, 2.5]), min_size=3, max_size=3),
                min_size=2, max_size=4),
       st.sampled_from([0.0, 0.02]))
def test_every_path_is_positive_sums_to_its_budgets_and_keeps_free_ratios(rows, min_weight):
    rows = [r if sum(r) > 0 else [1.0, 0.0, 0.0] for r in rows]
    scales = [(1e6 * 2 ** k, {d: v / sum(r) * 1e6 * 2 ** k for d, v in zip("abc", r, strict=True)})
              for k, r in enumerate(rows)]
    path, notes = path_scales(scales, min_weight)
    floor = max(min_weight, 1e-6)
    for (n, alloc), (_, orig) in zip(path, scales, strict=True):
        assert sum(alloc.values()) == pytest.approx(n, rel=1e-9) and min(alloc.values()) > 0
        free = [d for d in "abc" if all(s[1][d] / s[0] > floor * (1 + 1e-6) + 1e-12 for s in scales)]
        for x, y in itertools.combinations(free, 2):  # domains never left out keep their ratios
            assert alloc[x] / alloc[y] == pytest.approx(orig[x] / orig[y], rel=1e-9)


# ------------------------------------------------------------------ three DDO budgets: the law's backtest
N0_D, GAMMA_D, AMP_D, SCALE_D = np.array([2e6, 5e5, 8e6]), np.array([0.4, 0.9, 0.6]), np.array([1.0, 0.6, 1.5]), 1e6
MULT_D = (3.0, 1.7, 1 / 1.7, 1 / 3)
BUDGETS_D = (8e6, 16e6, 32e6)


def _law_d(w: np.ndarray, n: float) -> float:
    return 2.0 + float(np.sum(AMP_D * ((N0_D + w * n) / SCALE_D) ** -GAMMA_D))


def _optimum_d(n: float) -> np.ndarray:
    from scipy.optimize import minimize

    r = minimize(lambda w: _law_d(w, n), np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
                 constraints=({"type": "eq", "fun": lambda w: w.sum() - 1},), options={"ftol": 1e-14})
    return r.x


def _shares_of(c) -> np.ndarray:
    return np.array([c.weights[d] for d in ("d0", "d1", "d2")])


@pytest.mark.parametrize("seed", [0, 1])
def test_ddo_designs_whose_optimum_moves_get_the_projection_the_held_back_law_prefers(seed):
    from autoscale_data.solver.contrib import synthetic_budget_runs

    # the optimum moves from (0.51, 0.49, 0.00) at 8M to (0.42, 0.26, 0.32) at 32M; the design sits at 16M's
    tables = synthetic_budget_runs(BUDGETS_D, N0_D, GAMMA_D, AMP_D, scale=[SCALE_D] * 3, noise=0.0005,
                                   multipliers=MULT_D, seeds=2, base_weights=_optimum_d(16e6), rng_seed=seed)
    res = project_all(tables, 1.28e8)
    sel = res.selection
    assert sel.rule == "backtest" and res.used != "observed", sel.reason
    chosen = sel.backtest[res.used]
    assert chosen.score == "law" and sel.backtest["observed"].score == "law" and sel.scoring == "law"
    assert "scored by the DDO law fitted there" in sel.reason
    assert chosen.gain > 2 * sel.law_noise and sel.law_noise >= sel.noise  # the larger of the two noises
    assert "replicates" in sel.noise_source and "residual" in sel.law_noise_source + sel.noise_source
    assert _law_d(_shares_of(res.observed), 1.28e8) - _law_d(_shares_of(res.chosen), 1.28e8) > 0.002  # truly better
    assert sel.to_json()["backtest"][res.used]["law_objective"] == chosen.objective


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ddo_designs_whose_optimum_stays_keep_the_observed_mix_scored_by_the_law(seed):
    from autoscale_data.solver.contrib import synthetic_budget_runs

    amp, gamma = np.array([1.0, 0.6, 1.5]), 0.5  # no offset, one exponent: the optimum's shares never move
    w = amp ** (1 / (1 + gamma))
    tables = synthetic_budget_runs(BUDGETS_D, [1e3] * 3, [gamma] * 3, amp, scale=[SCALE_D] * 3, noise=0.002,
                                   multipliers=MULT_D, seeds=2, base_weights=w / w.sum(), rng_seed=seed)
    res = project_all(tables, 1.28e8)
    assert res.used == "observed" and res.selection.rule == "backtest", res.selection.reason
    assert {e.score for e in res.selection.backtest.values()} == {"law"}


def test_pure_noise_on_ddo_designs_keeps_the_observed_mix():
    from autoscale_data.solver.contrib import synthetic_budget_runs

    tables = synthetic_budget_runs(BUDGETS_D, N0_D, GAMMA_D, [0.0] * 3, scale=[SCALE_D] * 3, noise=0.0005,
                                   multipliers=MULT_D, seeds=2, base_weights=_optimum_d(16e6))
    res = project_all(tables, 1.28e8)
    assert res.used == "observed" and res.selection.rule == "backtest", res.selection.reason
    for name, e in res.selection.backtest.items():  # noise drives DDO's optima to the corners, outside the design
        if name == "observed" and e.objective is not None:  # its law value at the range's edge: a lower bound
            assert e.law_note.startswith("a lower bound") and e.score == "law"
        else:
            assert "outside the design's range" in e.law_note


def _relabel(table: RunTable, k: int, jitter: float) -> RunTable:
    """The runs of ``table`` with labels that name their allocation and shares moved by ``jitter`` (relative)."""
    runs = []
    for i, r in enumerate(table.runs):
        label = r.run_id.split("r", 1)[1].split("s")[0]  # b{k}r{i}s{s}: the allocation i
        tokens = {d: v * (1 + jitter * ((i + j) % 3 - 1)) for j, (d, v) in enumerate(r.tokens.items())}
        runs.append(Run(f"{k}-{r.run_id}", tokens, r.loss, seed=r.seed, label=f"alloc {label}"))
    return RunTable(runs)


def test_noise_estimate_matches_one_mixture_across_budgets_by_label_or_by_shares_within_rounding():
    from autoscale_data.solver.contrib import synthetic_budget_runs
    from autoscale_data.solver.select import mix_groups

    tables = synthetic_budget_runs(BUDGETS_D, N0_D, GAMMA_D, AMP_D, scale=[SCALE_D] * 3, noise=0.002,
                                   multipliers=MULT_D, base_weights=_optimum_d(16e6))
    rounded = [_relabel(t, k, 1e-9 * (k + 1)) for k, t in enumerate(tables)]  # whole-batch rounding: 9th decimal
    noise, how = noise_estimate(rounded)
    assert noise is not None and "13 mixture(s) run at all 3 budgets" in how
    unlabeled = [RunTable([Run(r.run_id, r.tokens, r.loss) for r in t.runs]) for t in rounded]
    assert noise_estimate(unlabeled) == (noise, how)  # shares within SHARE_TOL match without labels
    moved = [_relabel(t, k, 2e-4 * k) for k, t in enumerate(tables)]  # a sequence's rounding at a small budget
    assert "13 mixture(s) run at all 3 budgets" in noise_estimate(moved)[1]
    bare = [RunTable([Run(r.run_id, r.tokens, r.loss) for r in t.runs]) for t in moved]
    assert noise_estimate(bare) == (None, "no mixture was run at every budget")  # only labels can match these
    ids = mix_groups(moved)
    assert all((g == ids[0]).all() for g in ids) and len(set(ids[0].tolist())) == 13


def test_noise_estimate_pools_seeds_of_one_label_and_falls_back_to_the_smaller_budgets():
    from autoscale_data.solver.contrib import synthetic_budget_runs

    tables = synthetic_budget_runs(BUDGETS_D, N0_D, GAMMA_D, AMP_D, scale=[SCALE_D] * 3, noise=0.003,
                                   multipliers=MULT_D, seeds=3, base_weights=_optimum_d(16e6), rng_seed=4)
    seeds = [_relabel(t, k, 1e-9) for k, t in enumerate(tables)]  # seeds of one label: shares differ in rounding
    noise, how = noise_estimate(seeds)
    assert noise == pytest.approx(0.003, rel=0.3) and "13 mix(es) run more than once at the largest budget" in how
    assert "26 degrees of freedom" in how
    one_seed_last = seeds[:2] + [RunTable([r for r in seeds[2].runs if r.seed == 0])]
    noise, how = noise_estimate(one_seed_last)
    assert noise == pytest.approx(0.003, rel=0.3) and "at the smaller budgets (52 degrees of freedom)" in how


def test_backtest_margin_is_a_one_sided_test_over_the_projections() -> None:
    from scipy.stats import norm

    from autoscale_data.solver.select import backtest_margin

    assert backtest_margin(1.0, 1, two_runs=False) == pytest.approx(norm.ppf(0.975))  # 1.96
    assert backtest_margin(1.0, 3, two_runs=False) == pytest.approx(2.394, abs=1e-3)  # Bonferroni over three
    assert backtest_margin(0.01, 3, two_runs=True) == pytest.approx(0.01 * 2.394 * np.sqrt(2), rel=1e-3)
    assert backtest_margin(0.0, 3, two_runs=True) == 0.0
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="sd must be"):
            backtest_margin(bad, 3, two_runs=True)
    with pytest.raises(ValueError, match="candidates must be"):
        backtest_margin(1.0, 0, two_runs=True)

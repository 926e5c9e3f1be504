"""The selection rule's simulated error rates (benchmarks/sim_selection.py): designs shaped as the runner plans them,
laws whose optimum stays or moves, and the false-positive count of a fast subset."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from paths import BENCHMARKS
from scipy.stats import binom

from autoscale_data.solver.design import read_design

pytestmark = pytest.mark.timeout(300)


def _module():
    spec = importlib.util.spec_from_file_location("sim_selection", BENCHMARKS / "sim_selection.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


sim = _module()


@pytest.mark.parametrize("design", sim.QUICK, ids=lambda d: d.name)
def test_simulated_designs_have_the_runners_shape(design):
    law = sim.draw_law("moving", design.domains, np.random.default_rng(0), 3e6)
    tables = sim.simulate(design, law, 0.005, np.random.default_rng(1))
    per_way = len(sim.MULTIPLIERS[design.multipliers][0])
    batch = sim.planned_runs(design).batch_tokens
    assert len(tables) == design.budgets
    for table, budget in zip(tables, sim.BUDGETS[design.budgets], strict=True):
        assert len(table) == (1 + 2 * per_way * design.domains) * design.seeds  # 2m+1 or 4m+1 runs per seed
        totals = table.tokens_matrix().sum(axis=1)
        assert np.all(totals % batch == 0)  # whole global batches
        parsed = read_design(table)
        base_total = parsed.base_tokens.sum()
        assert budget - batch < base_total <= budget
        perturbed = parsed.domain_of_run >= 0
        assert np.all(totals[perturbed] != base_total)  # the others' tokens fixed: the totals differ
        assert len(parsed.base_runs) == design.seeds
        if design.seeds > 1:  # replicates: the same tokens, independent noise
            losses = table.loss_matrix()[parsed.base_runs, 0]
            assert np.ptp(losses) > 0


def test_null_laws_optimum_does_not_move_and_the_others_do():
    n2, target = 3e6, 4.8e7
    for i in range(6):
        for m in (3, 4):
            rng = np.random.default_rng([7, i, m])
            null = sim.draw_law("null", m, rng, n2, i)
            assert np.abs(null.optimum(n2) - null.optimum(target)).max() < 1e-6
            c = null.amplitude ** (1 / (1 + null.exponent[0]))  # the closed form: shares ∝ A_j^(1/(1+b))
            assert np.abs(null.optimum(target) - c / c.sum()).max() < 1e-6
            for kind in ("moving", "misfit"):
                law = sim.draw_law(kind, m, rng, n2, i)
                assert np.abs(law.optimum(n2) - law.optimum(target)).sum() > 1e-3
                assert law.at(law.optimum(n2), target) > law.at(law.optimum(target), target)


def test_law_and_design_refuse_bad_values():
    with pytest.raises(ValueError, match="design multipliers"):
        sim.Design("3m+1", 3, 3, 1)
    with pytest.raises(ValueError, match="law kind"):
        sim.draw_law("flat", 3, np.random.default_rng(0), 3e6)
    with pytest.raises(ValueError, match="noise"):
        sim.run(2, 2, quick=True, noise=0.0)


def _false_positives(designs: int, designs_other: int) -> tuple[int, list[dict]]:
    text, rows = sim.run(designs, designs_other, quick=True)
    assert text.count("| null |") == len(sim.QUICK) + 1 and "False positives" in text
    null = [r for r in rows if r["kind"] == "null"]
    assert null and all("error" not in r for r in null)
    assert all(r["shift"] < 1e-6 and abs(r["available"]) < 1e-9 for r in null)
    return sum(r["auto"] - r["regret"]["observed"] > sim.NOISE for r in null), rows


def test_fast_subset_has_no_false_positive():
    worse, rows = _false_positives(4, 2)
    assert worse == 0
    assert {r["kind"] for r in rows} == set(sim.KINDS)


# the full run's power on moving laws (docs/solver.md's table, seed 0, commit 76612bb): designs where auto beat
# DDO(N2) beyond the noise, of those where some projection truly does
MEASURED_POWER = (76, 133)


def _power(rows: list[dict]) -> tuple[int, int]:
    """Among the moving designs where some projection truly beats DDO(N2) at the target beyond the noise, how many
    ``auto`` beat it too, and how many there are."""
    moving = [r for r in rows if r["kind"] == "moving" and "error" not in r]
    gainable = [r for r in moving if any(r["regret"]["observed"] - v > sim.NOISE for k, v in r["regret"].items()
                                         if k != "observed")]
    return sum(r["regret"]["observed"] - r["auto"] > sim.NOISE for r in gainable), len(gainable)


@pytest.mark.slow
def test_quick_subset_has_no_false_positive_and_the_power_measured():
    worse, rows = _false_positives(16, 8)
    assert worse == 0
    won, gainable = _power(rows)
    # the subset's designs are drawn like the full run's: fewer wins than the 1% binomial quantile of the measured
    # rate would say the rule lost power
    floor = binom.ppf(0.01, gainable, MEASURED_POWER[0] / MEASURED_POWER[1])
    assert gainable >= 4 and won >= floor, (won, gainable, floor)


def test_the_table_is_written_with_the_command(tmp_path):
    out = tmp_path / "table.md"
    assert sim.main(["--quick", "--designs", "2", "--designs-other", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert "python benchmarks/sim_selection.py --quick" in text.splitlines()[0]
    assert text.count("| misfit |") == len(sim.QUICK) + 1

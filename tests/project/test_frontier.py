"""The cost–regret frontier benchmark: its designs, cost and Pareto front, and its quick subset on the
published runs (when ../shared/external_runs is present)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from paths import BENCHMARKS, SHARED

pytestmark = pytest.mark.timeout(300)

_DATA = SHARED / "external_runs"


@pytest.fixture(scope="module")
def fr():
    sys.path.insert(0, str(BENCHMARKS))  # it imports the published-runs evaluations' loaders and scoring
    return importlib.import_module("frontier")


def test_designs_end_at_k_with_the_two_and_three_budget_gaps(fr):
    steps = (3_000, 4_000, 6_000, 9_000, 10_000, 12_000, 14_000, 16_000, 20_000, 30_000)
    assert fr.window(steps, 10_000, 1) == (10_000,)
    assert fr.window(steps, 10_000, 2) == (3_000, 10_000)  # the earliest 2k-8k before: the widest window
    assert fr.window(steps, 4_000, 2) is None  # 3k is 1k before
    assert fr.window(steps, 16_000, 3) == (12_000, 14_000, 16_000)  # 5k, 4k, 3k gaps miss a checkpoint; 2k fits
    assert fr.window(steps, 14_000, 3) == (4_000, 9_000, 14_000)  # the largest equal gap that fits: 5k
    assert fr.window(steps, 30_000, 3) is None  # 20k and 10k: a 10k gap is beyond 5k
    assert fr.window(steps, 11_000, 1) is None
    with pytest.raises(ValueError, match="1, 2 or 3 checkpoints, got 4"):
        fr.window(steps, 30_000, 4)


def test_cost_is_mixtures_times_the_parameter_and_step_ratios(fr):
    assert fr.cost(20, "410M", 30_000, "410M") == pytest.approx(20.0)
    assert fr.cost(26, "70M", 10_000, "410M") == pytest.approx(26 * 70 / 410 / 3)
    assert fr.cost(20, "70M", 30_000, "160M") == pytest.approx(20 * 70 / 160)
    with pytest.raises(ValueError, match="mixtures=0"):
        fr.cost(0, "70M", 10_000, "410M")
    with pytest.raises(ValueError, match=r"sizes must be among .*got \['1B'\]"):
        fr.Subset(sizes=("1B",))  # 1B has too few runs for a design
    with pytest.raises(ValueError, match="datasets must be among"):
        fr.Subset(datasets=("regmix",))


def test_the_pareto_front_keeps_only_points_nothing_beats_on_both(fr):
    points = [(1.0, 0.02), (2.0, 0.0), (2.0, 0.01), (3.0, 0.0), (0.5, 0.05), (0.5, 0.05)]
    assert fr.pareto(points) == [True, True, False, False, True, True]


def _invariants(rows, target, sizes):
    ok = [r for r in rows if r["status"] == "answered"]
    assert ok, "no cell was answered"
    for r in ok:
        assert all(v >= 0 for v in r["regret"].values()), r
    # cost grows with the size and with the steps at equal mixtures and design
    for a in ok:
        for b in ok:
            if (a["dataset"], a["mixtures"], a["checkpoints"]) != (b["dataset"], b["mixtures"], b["checkpoints"]):
                continue
            if a["size"] == b["size"] and a["step"] < b["step"]:
                assert a["cost"][target] < b["cost"][target]
            if a["step"] == b["step"] and sizes[a["size"]] < sizes[b["size"]]:
                assert a["cost"][target] < b["cost"][target]
    # the frontier: no cell beats a frontier cell on both; every other cell is beaten by one
    for dataset in {r["dataset"] for r in ok}:
        group = [(r["cost"][target], r["regret"][target], r["frontier"]) for r in ok if r["dataset"] == dataset]
        for c, g, front in group:
            beaten = any(c2 <= c and g2 <= g and (c2 < c or g2 < g) for c2, g2, _ in group)
            assert beaten != front, (dataset, c, g, front)
    # choosing at the target itself (one checkpoint at its own size, 30k steps) has no regret there
    own = [r for r in ok if r["checkpoints"] == 1 and r["step"] == 30_000]
    assert own and all(r["regret"][r["size"]] == 0.0 and not r["worse"][r["size"]] for r in own)


@pytest.mark.skipif(not (_DATA / "mixinglaws").is_dir(), reason="../shared/external_runs is absent")
def test_quick_subset_on_the_published_runs(fr, tmp_path):
    doc = fr.run(_DATA, tmp_path, fr.QUICK)
    rows = doc["rows"]
    assert {r["dataset"] for r in rows} == {"pile5"} and {r["size"] for r in rows} == {"70M", "410M"}
    assert {r["checkpoints"] for r in rows} == {1, 2}
    _invariants(rows, doc["target"], fr.SIZES)
    assert (tmp_path / "frontier.png").stat().st_size > 0
    table = (tmp_path / "frontier.md").read_text(encoding="utf-8")
    assert fr.COST_FORMULA in table and "| 70M: 10k · 3k/10k | 26 |" in table  # designs that agree share a line
    assert json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["target"] == "410M"
    assert not list(tmp_path.glob(".*tmp*"))  # atomic writes leave no temporary file

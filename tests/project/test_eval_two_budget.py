"""The two-budget evaluation's windows, scoring and table on a small synthetic curve set."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from paths import BENCHMARKS

pytestmark = pytest.mark.timeout(300)


def _module():
    sys.path.insert(0, str(BENCHMARKS))  # it imports the published-runs evaluation's loaders
    spec = importlib.util.spec_from_file_location("eval_two_budget", BENCHMARKS / "eval_two_budget.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_windows_pair_checkpoints_2k_to_8k_apart_with_every_later_target():
    ev = _module()
    curves = {f"m{i}": {s: 3.0 for s in (2_000, 4_000, 6_000, 12_000, 14_000, 40_000)} for i in range(12)}
    curves["m0"][9_000] = 3.0  # one mixture only: below the 12 a checkpoint needs
    got = ev.windows(curves)
    assert got == [(2_000, 4_000, [6_000, 12_000, 14_000]), (2_000, 6_000, [12_000, 14_000]),
                   (4_000, 6_000, [12_000, 14_000]), (4_000, 12_000, [14_000]), (6_000, 12_000, [14_000])]
    # (6k, 14k) and (12k, 14k) have no later checkpoint; 40k is past the last step used


def test_a_window_is_scored_against_the_observed_mix_and_summarised():
    ev = _module()
    rng = np.random.default_rng(0)
    domains = ("a", "b", "c")
    mixes = {f"m{i:02d}": w for i, w in enumerate(rng.dirichlet(np.ones(3), size=16))}
    amp, n0, gamma = np.array([1.0, 0.6, 0.8]), np.array([2e9, 1e9, 5e8]), np.array([0.4, 0.7, 0.3])
    step_tokens = ev.TOKENS_PER_STEP

    def loss(w, step):
        return float((amp * ((n0 + w * step * step_tokens) / 1e10) ** -gamma).sum() + 1.5 + rng.normal(0, 0.002))

    curves = {m: {s: loss(w, s) for s in (10_000, 12_000, 14_000)} for m, w in mixes.items()}
    rows = ev.score_window("synthetic", "1M", domains, curves, mixes, (10_000, 12_000), [14_000], noise=0.002)
    assert len(rows) == 1 and rows[0]["status"] == "answered"
    r = rows[0]
    assert r["regret"] >= 0 and r["observed_regret"] >= 0 and r["old_rule"] in ("observed", "robust")
    assert set(r["predicted"]) == {"geometric", "joint", "robust"}
    if r["chosen"] == "observed":
        assert r["regret"] == r["observed_regret"]
    s = ev.summarise(rows)
    assert s["answered"] == 1 and s["default"]["mean_regret"] == pytest.approx(r["regret"])
    table = ev.format_table({"synthetic 1M": s})
    assert table.splitlines()[2].startswith("| synthetic 1M | 1 | ")


def test_three_checkpoint_windows_have_equal_gaps_in_10k_to_20k_and_target_30k():
    ev = _module()
    steps = (9_000, 10_000, 12_000, 13_000, 14_000, 16_000, 18_000, 20_000, 24_000, 30_000)
    curves = {f"m{i}": {s: 3.0 for s in steps} for i in range(12)}
    got = ev.windows3(curves)
    assert [w for w, _ in got] == [(10_000, 12_000, 14_000), (10_000, 13_000, 16_000), (10_000, 14_000, 18_000),
                                   (12_000, 14_000, 16_000), (12_000, 16_000, 20_000), (14_000, 16_000, 18_000),
                                   (16_000, 18_000, 20_000)]
    assert all(t == [30_000] for _, t in got)
    assert ev.windows3({m: {s: v for s, v in c.items() if s != 30_000} for m, c in curves.items()}) == []


def test_a_three_checkpoint_window_is_backtested_and_says_how_each_candidate_was_scored():
    ev = _module()
    rng = np.random.default_rng(1)
    domains = ("a", "b", "c")
    mixes = {f"m{i:02d}": w for i, w in enumerate(rng.dirichlet(np.ones(3), size=16))}
    curves = {m: {s: 3.0 + float(rng.normal(0, 0.002)) for s in (10_000, 12_000, 14_000, 30_000)} for m in mixes}
    rows = ev.score_window("synthetic", "1M", domains, curves, mixes, (10_000, 12_000, 14_000), [30_000], noise=0.002)
    assert len(rows) == 1 and rows[0]["status"] == "answered" and rows[0]["rule"] == "backtest"
    assert set(rows[0]["scores"]) == {"geometric", "joint", "robust", "observed"}  # runs of any mixtures: no DDO law
    assert "law" not in rows[0]["scores"].values()
    s = ev.summarise(rows)
    assert "old_rule" not in s and ev.format_table({"x": s}).splitlines()[2].endswith("| - | - | - |")

"""Baselines behind one interface."""

from __future__ import annotations

import numpy as np
import pytest

from autoscale_data.solver import PRESETS, Run, RunTable, baseline_weights
from autoscale_data.solver.contrib import fit_mixing_law, sample_mixtures

COUNTS = {"web": 8e9, "code": 1e9, "books": 1e9}


def test_simple_baselines():
    assert baseline_weights("uniform", domains=["a", "b"]) == {"a": 0.5, "b": 0.5}
    assert baseline_weights("natural", token_counts=COUNTS) == pytest.approx({"web": 0.8, "code": 0.1, "books": 0.1})
    t1 = baseline_weights("temperature", token_counts=COUNTS, temperature=1.0)
    assert t1 == pytest.approx(baseline_weights("natural", token_counts=COUNTS))
    hot = baseline_weights("temperature", token_counts=COUNTS, temperature=1e6)
    assert hot == pytest.approx({d: 1 / 3 for d in COUNTS}, abs=1e-5)
    t2 = baseline_weights("temperature", token_counts=COUNTS, temperature=2.0)
    assert t2["web"] == pytest.approx(np.sqrt(0.8) / (np.sqrt(0.8) + 2 * np.sqrt(0.1)))


def test_reference_and_llama_preset():
    doms = list(PRESETS["llama1"])
    w = baseline_weights("reference", domains=[d.lower() for d in doms], preset="llama1")
    assert w["commoncrawl"] == pytest.approx(0.67) and sum(w.values()) == pytest.approx(1.0)
    sub = baseline_weights("reference", domains=["web", "code"], preset="llama1",
                           mapping={"CommonCrawl": "web", "GitHub": "code"})
    assert sub["web"] == pytest.approx(0.67 / (0.67 + 0.045))
    assert baseline_weights("reference", domains=["a", "b"], weights={"a": 1, "b": 3}) == {"a": 0.25, "b": 0.75}
    with pytest.raises(ValueError, match="no weight for \\['web'\\]"):
        baseline_weights("reference", domains=["web"], preset="llama1")
    with pytest.raises(ValueError, match="unknown preset"):
        baseline_weights("reference", domains=["a"], preset="gopher")
    with pytest.raises(ValueError, match="exactly one"):
        baseline_weights("reference", domains=["a"])


def _mixture_runs(true_opt: np.ndarray, n: int = 40, seed: int = 0) -> RunTable:
    """Runs whose loss is a smooth bowl around ``true_opt`` (one validation domain)."""
    doms = ["a", "b", "c"]
    runs = []
    for i, mix in enumerate(sample_mixtures(doms, n, seed=seed)):
        w = np.array([mix[d] for d in doms])
        loss = 2.0 + 0.5 * np.exp(np.dot(w - true_opt, w - true_opt) * 3.0)
        runs.append(Run(f"m{i}", {d: 1e6 * v + 1.0 for d, v in mix.items()}, {"val": float(loss)}))
    return RunTable(runs)


def test_regmix_linear_moves_towards_the_better_region():
    opt = np.array([0.7, 0.2, 0.1])
    w = baseline_weights("regmix", runs=_mixture_runs(opt), model="linear", n_candidates=20000, top_k=50)
    assert sum(w.values()) == pytest.approx(1.0) and w["a"] > 0.45
    with pytest.raises(ValueError, match="lightgbm"):
        try:
            import lightgbm  # noqa: F401
            raise ValueError("lightgbm installed: nothing to check")
        except ImportError:
            baseline_weights("regmix", runs=_mixture_runs(opt), model="lightgbm")


def test_mixing_law_recovers_known_law_and_its_optimum():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(3), size=30)
    c, k, t = 1.5, 0.8, np.array([-1.0, 0.5, -2.0])
    y = c + k * np.exp(w @ t)
    fc, fk, ft = fit_mixing_law(w, y)
    # with sum(w) = 1 only c and k·exp(t_j) are identified (k·e^s·exp((t - s)·w) is the same law)
    assert fc == pytest.approx(c, rel=1e-4)
    assert fk * np.exp(ft) == pytest.approx(k * np.exp(t), rel=1e-4)
    runs = RunTable([Run(f"r{i}", dict(zip("abc", 1e6 * row, strict=False)), {"val": float(v)}) for i, (row, v) in enumerate(zip(w, y, strict=False))])
    best = baseline_weights("mixing_law", runs=runs)
    assert best["c"] == pytest.approx(1.0, abs=1e-6)  # exp(t·w) is minimised at the most negative t_j


def test_sample_mixtures_and_errors():
    mixes = sample_mixtures(["a", "b"], 5, min_weight=0.1, seed=3)
    assert all(min(m.values()) >= 0.1 - 1e-12 and sum(m.values()) == pytest.approx(1.0) for m in mixes)
    with pytest.raises(ValueError, match="min_weight"):
        sample_mixtures(["a", "b"], 5, min_weight=0.6)
    with pytest.raises(ValueError, match="unknown baseline"):
        baseline_weights("doremi", domains=["a"])
    with pytest.raises(ValueError, match="token_counts"):
        baseline_weights("natural")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        baseline_weights("temperature", token_counts=COUNTS, temperature=0.0)
    with pytest.raises(ValueError, match="needs runs"):
        baseline_weights("regmix", domains=["a"])
    with pytest.raises(ValueError, match="needs >= 5 runs"):
        baseline_weights("mixing_law", runs=_mixture_runs(np.array([0.3, 0.3, 0.4]), n=4))

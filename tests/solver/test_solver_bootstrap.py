"""Bootstrap CIs, the honest 'indistinguishable from base' verdict, held-out-scale check."""

from __future__ import annotations

import numpy as np
import pytest

from autoscale_data.solver import bootstrap_ddo
from autoscale_data.solver.contrib import bootstrap_projection, heldout_scale_check
from autoscale_data.solver.synthetic import synthetic_ddo_runs

BASE = {"web": 1e6, "code": 1e6, "books": 1e6}


@pytest.mark.timeout(60)
def test_strong_contrast_is_distinguishable_and_cis_cover_truth():
    a, b = [0.5, 2.0, 4.0], [0.3, 0.8, 1.5]
    runs = synthetic_ddo_runs(BASE, a, b, seeds=3, noise=0.002, multipliers=(3, 1 / 3, 2))
    clean = bootstrap_ddo(synthetic_ddo_runs(BASE, a, b, seeds=2, multipliers=(3, 1 / 3, 2)),
                          n_boot=50, objective="mean_loss", noise_std=1e-9)
    res = bootstrap_ddo(runs, n_boot=300, objective="mean_loss", seed=1)
    assert res.method == "seeds" and res.n_failed == 0
    assert res.distinguishable_from_base
    for d in BASE:
        assert res.ci_low[d] <= res.ci_high[d]
        # the noiseless optimum lies inside the CI (with a little slack for percentile CIs)
        assert res.ci_low[d] - 0.02 <= clean.point.weights[d] <= res.ci_high[d] + 0.02
    assert "distinguishable" in res.summary and set(res.to_json()) >= {"ci_low", "contains_base"}


@pytest.mark.timeout(60)
def test_weak_contrast_under_noise_is_reported_indistinguishable():
    # equal laws: the true optimum is the uniform base; seed noise only
    runs = synthetic_ddo_runs(BASE, [2.0] * 3, [0.5] * 3, seeds=3, noise=0.01, rng_seed=4)
    res = bootstrap_ddo(runs, n_boot=300, objective="mean_loss", seed=2)
    assert not res.distinguishable_from_base
    assert "NOT distinguishable" in res.summary
    assert sum(res.contains_base.values()) >= 2


def test_single_seed_paper_design_gives_the_range_over_exact_fits_without_noise():
    runs = synthetic_ddo_runs(BASE, [1, 2, 3], [0.5, 0.5, 0.5])
    res = bootstrap_ddo(runs, n_boot=10)
    ident = res.point.identifiability
    assert res.method == "consistent_fits" and not res.distinguishable_from_base
    assert res.samples.shape == (ident.combinations, 3)
    for d, (lo, hi) in ident.weight_range.items():
        assert res.ci_low[d] == lo and res.ci_high[d] == hi
    assert "no estimate of noise" in res.summary
    res = bootstrap_ddo(runs, n_boot=40, noise_std=0.01, objective="mean_loss")
    assert res.method == "parametric" and res.noise_std == 0.01 and res.samples.shape[1] == 3
    with pytest.raises(ValueError, match="replicate runs"):
        bootstrap_ddo(runs, n_boot=10, method="seeds")


def test_residual_bootstrap_with_spare_points():
    runs = synthetic_ddo_runs(BASE, [1, 2, 3], [0.5, 0.7, 0.9], noise=0.003, multipliers=(3, 1 / 3, 2, 0.5))
    res = bootstrap_ddo(runs, n_boot=60, objective="mean_loss")
    assert res.method == "residuals" and len(res.samples) == 60


@pytest.mark.parametrize("kw, match", [({"level": 1.5}, "level"), ({"n_boot": 1}, "n_boot"),
                                       ({"method": "jackknife"}, "method"), ({"noise_std": -1.0}, "noise_std")])
def test_bad_options(kw, match):
    runs = synthetic_ddo_runs(BASE, [1, 2, 3], [0.5, 0.5, 0.5], seeds=2, noise=0.01)
    with pytest.raises(ValueError, match=match):
        bootstrap_ddo(runs, **kw)


def _pure_power_law_scale(n, beta, gamma, doms):
    from scipy.optimize import brentq

    f = lambda lm: np.sum(np.exp((np.log(beta * gamma) - lm) / (gamma + 1))) - n  # noqa: E731
    lm = brentq(f, -300, 300, xtol=1e-15)
    return n, dict(zip(doms, np.exp((np.log(beta * gamma) - lm) / (gamma + 1)), strict=False))


def test_heldout_scale_check_is_exact_on_pure_power_laws_and_detects_errors():
    doms = ["x", "y", "z"]
    beta, gamma = np.array([1.0, 3.0, 0.5]), np.array([0.2, 0.9, 0.5])
    s1, s2, s3 = (_pure_power_law_scale(n, beta, gamma, doms) for n in (1e6, 4e6, 5e7))
    chk = heldout_scale_check(s1, s2, s3)
    assert chk.max_abs_error < 1e-8 and chk.total_variation < 1e-8
    wrong = (s3[0], {d: v * (3.0 if d == "z" else 1.0) for d, v in s3[1].items()})
    assert heldout_scale_check(s1, s2, wrong).max_abs_error > 0.01


@pytest.mark.timeout(60)
def test_projection_bootstrap():
    a, b = [0.5, 2.0, 4.0], [0.3, 0.8, 1.5]
    small = bootstrap_ddo(synthetic_ddo_runs(BASE, a, b, seeds=3, noise=0.002), n_boot=100, objective="mean_loss", min_weight=0.02)
    big = {d: 3 * v for d, v in BASE.items()}
    large = bootstrap_ddo(synthetic_ddo_runs(big, np.array(a) / 3, b, seeds=3, noise=0.002, rng_seed=1),
                          n_boot=100, objective="mean_loss", seed=1, min_weight=0.02)
    pb = bootstrap_projection(small, large, 3e8)
    assert len(pb.samples) + pb.n_failed == 100
    assert pytest.approx(1.0) == sum(pb.weights.values())
    for d in BASE:
        assert pb.ci_low[d] <= pb.ci_high[d]

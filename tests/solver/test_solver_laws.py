"""Power-law fits: recovery from noiseless data, graceful degradation with noise, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import least_squares

from autoscale_data.solver.contrib import fit_power_law, fit_power_law_batch, power_law

X7 = np.array([0.2, 1 / 3, 0.5, 1.0, 2.0, 3.0, 5.0])


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.3, 8.0), b=st.floats(0.1, 2.0), c=st.floats(-1.0, 3.0))
def test_recovers_known_parameters_from_noiseless_data(a, b, c):
    f = fit_power_law(X7, power_law(X7, a, b, c))
    assert f.a == pytest.approx(a, rel=1e-4)
    assert f.b == pytest.approx(b, rel=1e-4)
    assert f.c == pytest.approx(c, rel=1e-4, abs=1e-6)
    assert f.aar < 1e-9 and f.dof == 4 and f.at_bound == ()


def test_recovers_a_near_degenerate_law():
    # A large shift with a small exponent: the multi-start alone stopped in a local minimum (SSE 1.5e-10);
    # the profile over b finds the valley.
    f = fit_power_law(X7, power_law(X7, 6.0, 0.34375, 0.0))
    assert f.a == pytest.approx(6.0, rel=1e-4)


def test_four_parameter_law_recovers_amplitude():
    y = power_law(X7, 2.0, 0.7, 1.5, amplitude=0.3)
    f = fit_power_law(X7, y, law="4p")
    assert (f.a, f.b, f.c, f.amplitude) == pytest.approx((2.0, 0.7, 1.5, 0.3), rel=1e-5)


def test_one_percent_noise_degrades_gracefully():
    rng = np.random.default_rng(0)
    a, b, c = 1.5, 0.8, 1.0
    x = np.repeat(X7, 3)  # three seeds per multiplier
    clean = power_law(x, a, b, c)
    errs = []
    for _ in range(20):
        y = clean * (1 + 0.01 * rng.standard_normal(x.size))
        f = fit_power_law(x, y)
        grid = np.linspace(0.2, 5, 50)
        errs.append(np.max(np.abs(f.predict(grid) / power_law(grid, a, b, c) - 1)))
        assert f.aar < 0.02  # residuals at the noise level
    # the fitted curve stays within a few noise standard deviations of the truth
    assert np.median(errs) < 0.01 and max(errs) < 0.03


def test_three_points_interpolate_exactly():
    x = np.array([1 / 3, 1.0, 3.0])
    y = power_law(x, 2.0, 0.5, 0.3)
    f = fit_power_law(x, y)
    assert f.dof == 0 and np.allclose(f.predict(x), y, atol=1e-10)


def test_increasing_data_gives_a_flat_fit_at_a_bound():
    f = fit_power_law([1 / 3, 1.0, 3.0], [1.00, 1.01, 1.02])
    # b >= 0 forbids an increasing law: the best fit is flat (zero marginal effect), and says so
    assert abs(f.predict(3.0) - f.predict(1 / 3)) < 1e-6
    assert f.predict(1.0) == pytest.approx(1.01, abs=1e-6)
    assert set(f.at_bound) & {"b=0", "a=max", "b=max"}


def test_matches_scipy_least_squares_on_noisy_data():
    rng = np.random.default_rng(3)
    x = np.repeat(X7, 2)
    y = power_law(x, 3.0, 0.6, 0.5) + 0.002 * rng.standard_normal(x.size)
    f = fit_power_law(x, y)
    best = min(
        (least_squares(lambda p: power_law(x, p[0], p[1], p[2]) - y, p0,
                       bounds=([-0.2 + 1e-9, 0, -np.inf], [1e4, 20, np.inf]), xtol=1e-15, ftol=1e-15)
         for p0 in ([1, 1, 0], [3, 0.5, 0.5], [10, 2, 0.5], [0.5, 0.2, 0.0])),
        key=lambda s: s.cost,
    )
    assert f.sse <= 2 * best.cost * (1 + 1e-6) + 1e-30


def test_batch_matches_single_and_weights_drop_points():
    rng = np.random.default_rng(1)
    y = power_law(X7, 1.0, 0.5, 0.2) + 1e-3 * rng.standard_normal((4, X7.size))
    out = fit_power_law_batch(X7, y, n_starts=6)
    for i in range(4):
        f = fit_power_law(X7, y[i])
        assert out["sse"][i] == pytest.approx(f.sse, rel=1e-3, abs=1e-14)
    w = np.ones(X7.size)
    w[0] = 0.0
    yy = y[0].copy()
    yy[0] = 99.0  # ignored: weight 0
    fw = fit_power_law(X7, yy, weights=w)
    f_drop = fit_power_law(X7[1:], y[0][1:])
    assert fw.predict(1.0) == pytest.approx(f_drop.predict(1.0), rel=1e-6)


@pytest.mark.parametrize(
    "x, y, kw, match",
    [
        ([1.0, 1.0, 3.0], [1.0, 1.0, 0.9], {}, "at least 3 distinct"),
        ([0.5, 1.0, 3.0], [1.0, 0.9, 0.8], {"law": "4p"}, "at least 4 distinct"),
        ([0.5, 1.0, 3.0], [1.0, float("nan"), 0.8], {}, "finite"),
        ([-0.5, 1.0, 3.0], [1.0, 0.9, 0.8], {}, "multipliers must be finite and >= 0"),
        ([0.5, 1.0, 3.0], [1.0, 0.9], {}, "same length"),
        ([0.5, 1.0, 3.0], [1.0, 0.9, 0.8], {"law": "5p"}, "law must be"),
    ],
)
def test_bad_inputs(x, y, kw, match):
    with pytest.raises(ValueError, match=match):
        fit_power_law(x, y, **kw)

"""DDO and the projection in effective tokens: a hand-computed case, the raw-token answer when nothing
repeats (hypothesis), an independent optimiser where a domain repeats, the cap, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from autoscale_data.solver import fit_ddo
from autoscale_data.solver.allocate import allocate
from autoscale_data.solver.effective import (
    EffectiveOptimum,
    EffectiveProjection,
    allocate_effective,
    effective_table,
    optimize_effective,
    project_effective,
    raw_slope,
)
from autoscale_data.solver.repetition import effective_tokens, raw_tokens
from autoscale_data.solver.synthetic import synthetic_ddo_runs

HUGE = 1e15


def test_hand_computed_optimum_with_one_repeated_domain() -> None:
    # L = 1/e1 + 1/e2, U1 = 1 (R* = 1: raw(e) = 1 - ln(2 - e) past one epoch, raw'(e) = 1 / (2 - e)), U2 huge.
    # KKT: 1/e1^2 = lam / (2 - e1) and 1/e2^2 = lam. At e1 = 1.5: lam = (1/2.25) / 2 = 2/9, e2 = 3/sqrt(2);
    # so the raw budget 1 + ln 2 + 3/sqrt(2) must give exactly that.
    budget = 1 + math.log(2) + 3 / math.sqrt(2)
    sol = allocate_effective([1, 1], [0, 0], [1, 1], [1, 1], [1, HUGE], budget, [0, 0], [budget, budget], r_star=1.0)
    assert sol.effective == pytest.approx([1.5, 3 / math.sqrt(2)], rel=1e-9)
    assert sol.raw == pytest.approx([1 + math.log(2), 3 / math.sqrt(2)], rel=1e-9)
    assert sol.raw.sum() == pytest.approx(budget, rel=1e-12) and sol.lam == pytest.approx(2 / 9, rel=1e-9)
    assert not sol.degenerate and not sol.at_lower.any() and not sol.at_upper.any()
    # without repetition the two equal laws split the budget evenly; repeating domain 1 costs raw tokens
    fresh = allocate_effective([1, 1], [0, 0], [1, 1], [1, 1], [HUGE, HUGE], budget, [0, 0], [budget, budget])
    assert fresh.raw == pytest.approx([budget / 2, budget / 2]) and sol.effective[0] < sol.effective[1]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), wmin=st.sampled_from([0.0, 0.02]), wmax=st.sampled_from([1.0, 0.6]))
def test_equals_the_raw_token_optimum_when_nothing_repeats(seed: int, wmin: float, wmax: float) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 6))
    beta, a, b = rng.uniform(0.2, 3, m), rng.uniform(0.0, 3, m), rng.uniform(0.05, 1.5, m)
    base = rng.uniform(0.5, 3, m) * 1e6
    n = float(base.sum() * rng.uniform(0.5, 4))
    lo_w, hi_w = wmin * n, min(wmax * n, n)
    lo, hi = np.full(m, lo_w) / base, np.full(m, hi_w) / base
    if lo_w * m > n or hi_w * m < n:
        return
    ref = allocate(beta, a, b, base, n, lo, hi)
    sol = allocate_effective(beta, a, b, base, np.full(m, HUGE), n, lo * base, hi * base)
    assert sol.x == pytest.approx(ref.x, rel=1e-6, abs=1e-9)
    assert sol.raw.sum() == pytest.approx(n, rel=1e-10)


def test_matches_an_independent_optimiser_when_domains_repeat() -> None:
    beta, a, b = np.array([1.0, 0.6, 1.4]), np.array([0.2, 0.5, 0.1]), np.array([0.7, 0.4, 0.9])
    base, unique = np.array([2e5, 3e5, 1e5]), np.array([5e4, 2e6, 3e4])
    n, hi = 1.2e6, np.array([1.2e6, 1.2e6, 3e4 * 16])
    sol = allocate_effective(beta, a, b, base, unique, n, np.zeros(3), hi)

    def loss(e: np.ndarray) -> float:
        return float(np.sum(beta * (e / base + a) ** -b))

    scale = 1e5  # SLSQP on effective tokens in units of 1e5
    cons = {"type": "eq", "fun": lambda z: float(np.sum(raw_tokens(z * scale, unique))) / n - 1.0}
    ref = minimize(lambda z: loss(z * scale), np.full(3, n / 3 / scale), method="SLSQP", constraints=(cons,),
                   bounds=[(1e-3, float(effective_tokens(h, u)) / scale * (1 - 1e-9))
                           for h, u in zip(hi, unique, strict=True)], options={"ftol": 1e-15, "maxiter": 2000})
    assert loss(sol.effective) <= loss(ref.x * scale) + 1e-12
    assert sol.effective == pytest.approx(ref.x * scale, rel=1e-4)
    assert sol.raw[2] / unique[2] > 1 and sol.raw.sum() == pytest.approx(n, rel=1e-12)
    # the KKT condition holds in every domain that is not at a bound
    worth = beta * b * (sol.effective / base + a) ** (-b - 1) / base
    assert worth / raw_slope(sol.effective, unique) == pytest.approx(np.full(3, sol.lam), rel=1e-7)


def test_bounds_and_bad_input() -> None:
    sol = allocate_effective([1, 1], [0, 0], [1, 1], [1, 1], [1, HUGE], 10.0, [0, 0], [2.0, 10.0], r_star=1.0)
    assert sol.at_upper[0] and sol.raw == pytest.approx([2.0, 8.0])
    for args in (([1], [0], [1], [1], [1], 10.0, [0], [5.0]),  # the upper bound cannot meet the budget
                 ([1, 1], [0, 0], [1, 1], [1, 1], [1, 1], -1.0, [0, 0], [1, 1]),
                 ([1, 1], [0, 0], [1], [1, 1], [1, 1], 1.0, [0, 0], [1, 1]),
                 ([1, 1], [0, 0], [1, 1], [0, 1], [1, 1], 1.0, [0, 0], [1, 1])):
        with pytest.raises(ValueError):
            allocate_effective(*args)


def test_a_fit_on_effective_tokens_gives_todays_answer_when_nothing_repeats() -> None:
    base = {"web": 1e6, "code": 1e6, "books": 2e6}
    runs = synthetic_ddo_runs(base, [0.8, 1.6, 2.4], [0.3, 0.5, 0.8], multipliers=(3, 1 / 3, 2), noise=0.001)
    today = fit_ddo(runs, objective="mean_loss", min_weight=0.02)
    unique = dict.fromkeys(base, HUGE)
    fit = fit_ddo(effective_table(runs, unique), objective="mean_loss", min_weight=0.02)
    opt = optimize_effective(fit, unique)
    assert opt.budget_tokens == pytest.approx(today.budget_tokens)
    assert opt.weights == pytest.approx(today.weights, abs=1e-6)
    assert EffectiveOptimum.from_json(opt.to_json()) == opt
    # code drawn from 1e5 unique tokens: its runs repeat it, the law reads them as the fresh data they are worth
    small = dict(unique, code=1e5)
    eff = effective_table(runs, small)
    assert all(r.tokens["code"] == pytest.approx(effective_tokens(o.tokens["code"], 1e5)) for r, o in zip(eff, runs,
                                                                                                   strict=True))
    repeated = optimize_effective(fit_ddo(eff, objective="mean_loss", min_weight=0.02), small,
                                  raw_caps={d: u * 16 for d, u in small.items()})
    assert sum(repeated.allocation_tokens.values()) == pytest.approx(today.budget_tokens, rel=1e-9)
    with pytest.raises(ValueError, match="missing"):
        effective_table(runs, {"web": 1.0})


def test_hand_computed_projection_in_effective_tokens() -> None:
    # a path giving both domains half the effective budget; domain a has 1 unique token (R* = 1): at E = 3 it
    # takes 1.5 effective = 1 + ln 2 raw tokens, so the raw budget 1 + ln 2 + 1.5 is spent at E = 3
    target = 1 + math.log(2) + 1.5
    proj = project_effective(lambda e: {"a": e / 2, "b": e / 2}, target, {"a": 1.0, "b": HUGE},
                             {"a": 16.0, "b": HUGE}, r_star=1.0)
    assert proj.effective_budget == pytest.approx(3.0, rel=1e-10)
    assert proj.allocation_tokens == pytest.approx({"a": 1 + math.log(2), "b": 1.5}, rel=1e-10)
    assert proj.weights["a"] == pytest.approx((1 + math.log(2)) / target) and proj.raw_law_weights == {"a": .5, "b": .5}
    assert proj.epochs["a"] == pytest.approx(1 + math.log(2)) and not proj.capped
    assert EffectiveProjection.from_json(proj.to_json()) == proj


def test_a_capped_domain_is_held_and_flagged() -> None:
    # a's cap: 2 raw tokens (2 epochs of 1); the rest goes to b, the effective budget grows past the raw one
    proj = project_effective(lambda e: {"a": e / 2, "b": e / 2}, 20.0, {"a": 1.0, "b": HUGE}, {"a": 2.0, "b": HUGE},
                             r_star=1.0)
    assert proj.capped == ["a"] and proj.allocation_tokens == pytest.approx({"a": 2.0, "b": 18.0})
    assert proj.effective_budget == pytest.approx(36.0) and proj.warnings
    with pytest.raises(ValueError, match="cannot spend"):
        project_effective(lambda e: {"a": e}, 20.0, {"a": 1.0}, {"a": 2.0})
    with pytest.raises(ValueError, match="missing"):
        project_effective(lambda e: {"a": e}, 20.0, {}, {"a": 2.0})


@settings(max_examples=60, deadline=None)
@given(shares=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=5), growth=st.floats(0.0, 0.5),
       target=st.floats(1e3, 1e9))
def test_projection_equals_the_raw_one_when_nothing_repeats(shares: list[float], growth: float, target: float) -> None:
    s = np.asarray(shares) / sum(shares)

    def path(e: float) -> dict[str, float]:  # shares drifting with the budget, as a Theorem-1 path does
        w = s * np.power(e / 1e3, growth * np.arange(len(s)) / len(s))
        return {f"d{i}": float(v) for i, v in enumerate(e * w / w.sum())}

    names = [f"d{i}" for i in range(len(s))]
    proj = project_effective(path, target, dict.fromkeys(names, HUGE), dict.fromkeys(names, HUGE))
    raw = path(target)
    assert proj.effective_budget == pytest.approx(target, rel=1e-9)
    assert proj.weights == pytest.approx({d: v / target for d, v in raw.items()}, rel=1e-7)
    assert proj.weights == pytest.approx(proj.raw_law_weights, rel=1e-7)

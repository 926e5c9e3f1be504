"""The GPU session's plan: sized to the time it has, proxies >= 10M tokens, and its dry run (no GPU)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import BENCHMARKS

pytestmark = pytest.mark.timeout(120)


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # a dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


plan_mod = _module("gpu_plan")


def test_design_runs_of_the_identifying_design() -> None:
    assert plan_mod.design_runs(3) == 13 and plan_mod.design_runs(4) == 17
    with pytest.raises(ValueError, match="2 domains"):
        plan_mod.design_runs(1)


def test_a_fast_gpu_gets_a_larger_target_and_every_plan_keeps_its_proxies_large() -> None:
    slow = plan_mod.plan_session(2.5e6, 465)
    fast = plan_mod.plan_session(4e6, 465)
    assert slow.fits and fast.fits and fast.ratio > slow.ratio >= 2
    for plan in (slow, fast):
        assert plan.n1 >= 10_000_000 and plan.n2 >= 1.5 * plan.n1 - 128 * 256 and plan.target > plan.n2
        assert plan.n1 % (128 * 256) == 0 and plan.target % (128 * 256) == 0  # whole global batches
        assert plan.proxy_runs == 26 and plan.target_runs == 8  # 13 a budget; 4 methods x 2 seeds
        assert plan.estimate_s <= 465
        assert plan.total_tokens == 13 * sum(plan.proxy_budgets) + 8 * plan.target
        assert plan.proxy_budgets[-2:] == (plan.n1, plan.n2) and len(plan.proxy_budgets) in (2, 3)


def test_three_budgets_when_they_fit_at_the_largest_ratio_else_two() -> None:
    roomy = plan_mod.plan_session(8e6, 600)
    assert roomy.fits and roomy.proxy_budgets[0] >= 10_000_000 and len(roomy.proxy_budgets) == 3
    assert roomy.proxy_runs == 39 and roomy.ratio == pytest.approx(8, rel=0.01)
    for small, large in zip(roomy.proxy_budgets, roomy.proxy_budgets[1:], strict=False):
        assert large == pytest.approx(1.5 * small, abs=128 * 256)  # each budget 1.5 x the one before
    tight = plan_mod.plan_session(2.5e6, 600)
    assert tight.fits and len(tight.proxy_budgets) == 2  # a third budget would cost the target its size
    assert len(plan_mod.plan_session(2.5e6, 600, budget_counts=(3,)).proxy_budgets) == 3
    with pytest.raises(ValueError, match="budget counts"):
        plan_mod.plan_session(2.5e6, 600, budget_counts=(1,))


def test_too_slow_a_gpu_is_told_so_with_the_smallest_plan() -> None:
    plan = plan_mod.plan_session(0.8e6, 465)
    assert not plan.fits and plan.ratio == pytest.approx(2, rel=0.01) and plan.estimate_s > 465
    assert "does NOT fit" in plan.describe()
    with pytest.raises(ValueError, match="ratios"):
        plan_mod.plan_session(1e6, 100, ratios=(1,))
    with pytest.raises(ValueError, match="throughput"):
        plan_mod.plan_session(0, 100)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(1e5, 1e8), seconds=st.floats(60, 3600))
def test_a_plan_that_fits_fits_and_uses_most_of_the_time(rate: float, seconds: float) -> None:
    plan = plan_mod.plan_session(rate, seconds)
    assert plan.proxy_budgets[0] >= 10_000_000 and plan.target > plan.n2 > plan.n1
    if plan.fits:
        assert plan.estimate_s <= seconds
        if plan.proxy_budgets[0] > 10_000_000 + 2 * 128 * 256:  # not at the floor: time was the limit
            assert plan.estimate_s >= 0.9 * seconds


def test_the_session_dry_run_prints_the_plan_without_a_gpu() -> None:
    out = subprocess.run([sys.executable, str(BENCHMARKS / "gpu_session.py"), "--dry-run", "--tokens-per-s", "3e6",
                          "--deadline", "540"], capture_output=True, text=True, check=True).stdout
    text = out.strip().splitlines()
    plan = json.loads("\n".join(text[:-1]))
    assert plan["fits"] and plan["seeds"] == 2 and plan["n1"] >= 10_000_000
    assert plan["seconds"] == pytest.approx(540 - 45 - 30)
    assert text[-1].startswith("proxies 13 at each of")

"""Size the real-text AutoScale experiment of a GPU session to the time it has (pure; tested on the CPU).

The experiment: proxies at two or three budgets, each 1.5 times the one before (the smallest at least
``min_proxy_tokens``), with the identifying design ``[[3, 1.7], [3, 1.7]]`` (4 m + 1 runs a budget for m
domains, one seed), then targets at ``ratio x N2`` (N2 the largest proxy budget) for AutoScale,
uniform, natural and DDO(N2), each with ``seeds`` seeds. Its GPU time is its tokens over the measured
aggregate throughput plus each run's fixed cost (start, model build, evaluation) shared by the runs
that train at once. :func:`plan_session` picks the largest target ratio (then the largest proxies) that
fits the seconds given, with proxies of at least ``min_proxy_tokens``; when nothing fits it says so
with the smallest plan's estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TARGET_METHODS", "SessionPlan", "design_runs", "plan_session"]

#: The target runs of one seed: AutoScale and the three baselines.
TARGET_METHODS = ("autoscale", "uniform", "natural", "ddo_n2")


def design_runs(domains: int, multipliers_per_side: int = 2) -> int:
    """Proxy runs a budget: the base mix plus each domain up and down by each multiplier."""
    if domains < 2 or multipliers_per_side < 1:
        raise ValueError(f"a design needs >= 2 domains and >= 1 multiplier a side, got {domains}, {multipliers_per_side}")
    return 1 + 2 * multipliers_per_side * domains


@dataclass(frozen=True)
class SessionPlan:
    """Budgets (tokens, whole global batches), seeds and the time estimate of one session's experiment."""

    n1: int
    n2: int
    target: int
    proxy_budgets: tuple[int, ...]
    seeds: int
    proxy_runs: int
    target_runs: int
    total_tokens: int
    estimate_s: float
    seconds: float
    tokens_per_s: float
    fits: bool

    @property
    def ratio(self) -> float:
        """Target tokens over N2."""
        return self.target / self.n2

    def describe(self) -> str:
        verdict = "fits" if self.fits else "does NOT fit"
        sizes = " / ".join(f"{n / 1e6:.1f}M" for n in self.proxy_budgets)
        return (f"proxies {self.proxy_runs // len(self.proxy_budgets)} at each of {sizes} tokens, targets "
                f"{self.target_runs} x {self.target / 1e6:.1f}M ({self.ratio:.1f} x N2; {self.seeds} seeds of "
                f"{', '.join(TARGET_METHODS)}): {self.total_tokens / 1e9:.2f}B tokens, about {self.estimate_s:.0f} s at "
                f"{self.tokens_per_s / 1e6:.2f}M tokens/s: {verdict} in {self.seconds:.0f} s")


def _round(tokens: float, step_tokens: int) -> int:
    return max(1, math.floor(tokens / step_tokens)) * step_tokens


def plan_session(tokens_per_s: float, seconds: float, *, domains: int = 3, step_tokens: int = 128 * 256,
                 seeds: int = 2, min_proxy_tokens: int = 10_000_000, ratios: tuple[float, ...] = (8, 6, 4, 3, 2),
                 run_overhead_s: float = 20.0, parallel: int = 4, budget_counts: tuple[int, ...] = (3, 2)
                 ) -> SessionPlan:
    """The largest experiment that fits ``seconds`` at ``tokens_per_s`` (the aggregate of the GPU's runs).

    Tries each target ratio of ``ratios`` (largest first), and for each the proxy budget counts of
    ``budget_counts`` in turn, with the smallest budget as large as the time allows (at least
    ``min_proxy_tokens``); returns the first that fits, else the smallest plan (``fits`` False).
    ``n1`` and ``n2`` are the two largest proxy budgets (the ones a projection starts from).

    Args:
        tokens_per_s: measured training throughput of the GPU, all its runs together.
        seconds: the time the experiment may take.
        domains: domains of the corpus (sets the design's runs).
        step_tokens: tokens of one global batch (budgets are whole batches).
        seeds: target seeds (each of the four methods trains one target a seed).
        min_proxy_tokens: the smallest N1.
        ratios: target / N2 ratios to try.
        run_overhead_s: one run's fixed time (process start, model build, evaluation).
        parallel: runs training at once (the overhead is shared among them).
        budget_counts: proxy budgets to try for each ratio, in order (each 2 or more).

    Raises:
        ValueError: a non-positive throughput, time, seed count, a ratio <= 1 or a budget count < 2.
    """
    if tokens_per_s <= 0 or seconds <= 0 or seeds < 1 or parallel < 1:
        raise ValueError(f"throughput {tokens_per_s}, seconds {seconds}, seeds {seeds} and parallel {parallel} "
                         f"must be > 0")
    if not ratios or min(ratios) <= 1:
        raise ValueError(f"target ratios {ratios} must be > 1 (the target is larger than N2)")
    if not budget_counts or min(budget_counts) < 2:
        raise ValueError(f"proxy budget counts {budget_counts} must each be >= 2 (a projection needs two budgets)")
    target_runs = len(TARGET_METHODS) * seeds
    smallest: SessionPlan | None = None
    for ratio in sorted(ratios, reverse=True):
        for count in budget_counts:
            plan = _plan(tokens_per_s, seconds, domains, step_tokens, seeds, min_proxy_tokens, ratio, run_overhead_s,
                         parallel, count, target_runs)
            if plan.fits:
                return plan
            smallest = plan
    assert smallest is not None
    return smallest


def _plan(tokens_per_s: float, seconds: float, domains: int, step_tokens: int, seeds: int, min_proxy_tokens: int,
          ratio: float, run_overhead_s: float, parallel: int, count: int, target_runs: int) -> SessionPlan:
    """The plan of ``count`` proxy budgets (each 1.5 x the one before) and targets at ``ratio`` x the largest."""
    proxy_runs = count * design_runs(domains)
    overhead = (proxy_runs + target_runs) * run_overhead_s / parallel
    growth = [1.5**k for k in range(count)]
    per_n0 = design_runs(domains) * sum(growth) + target_runs * growth[-1] * ratio  # tokens per token of N0
    n0 = _round(max(min_proxy_tokens, tokens_per_s * (seconds - overhead) / per_n0), step_tokens)
    if n0 < min_proxy_tokens:
        n0 += step_tokens * math.ceil((min_proxy_tokens - n0) / step_tokens)
    budgets = [n0]
    for _ in range(count - 1):
        budgets.append(_round(1.5 * budgets[-1], step_tokens))
    target = _round(ratio * budgets[-1], step_tokens)
    total = design_runs(domains) * sum(budgets) + target_runs * target
    estimate = total / tokens_per_s + overhead
    return SessionPlan(n1=budgets[-2], n2=budgets[-1], target=target, proxy_budgets=tuple(budgets), seeds=seeds,
                       proxy_runs=proxy_runs, target_runs=target_runs, total_tokens=total, estimate_s=estimate,
                       seconds=seconds, tokens_per_s=tokens_per_s, fits=estimate <= seconds)

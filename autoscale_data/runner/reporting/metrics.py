"""Numbers the report computes from run results: seed averages, tokens saved, and paired comparisons.

Each function takes the runs' records (:class:`~autoscale_data.runner.records.RunResult`, its
:class:`~autoscale_data.runner.records.EvalPoint` curve) and returns the report's own record
(:mod:`.report_types`), so every number of the report leads back to the runs it came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ..records import EvalPoint, RunResult
from .report_types import Curve, CurveComparison, CurvePoint, MeanStd, TokensSaved, Verdict

__all__ = [
    "compare_curves",
    "mean_curve",
    "mean_std",
    "paired_verdict",
    "tokens_saved",
    "tokens_saved_per_seed",
    "tokens_to_reach",
]


def mean_curve(curves: Sequence[Sequence[EvalPoint]], key: str) -> Curve:
    """Mean and std over seeds of objective ``key`` at each evaluation point shared by all curves (std 0 with
    one seed)."""
    if not curves:
        return Curve(tokens=[], mean=[], std=[], n=0)
    tokens = sorted(set.intersection(*({int(p.tokens) for p in c} for c in curves)))
    values = np.array([[next(p.value(key) for p in c if int(p.tokens) == t) for t in tokens] for c in curves])
    std = values.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(tokens))
    return Curve(tokens=[float(t) for t in tokens], mean=values.mean(axis=0).tolist(), std=std.tolist(),
                 n=len(curves))


def tokens_to_reach(tokens: Sequence[float], values: Sequence[float],
                    level: float) -> tuple[float | None, str]:
    """Tokens at which a loss curve first reaches ``level`` (linear interpolation in log-tokens).

    Returns:
        ``(tokens, status)``: status ``"reached"``, ``"at_first_eval"`` (already at or below the
        level at the first evaluation: the tokens returned are an upper bound) or ``"not_reached"``
        (tokens ``None``).
    """
    t = np.asarray(tokens, dtype=float)
    y = np.asarray(values, dtype=float)
    if t.size == 0:
        return None, "not_reached"
    if y[0] <= level:
        return float(t[0]), "at_first_eval"
    for i in range(1, t.size):
        if y[i] <= level:
            frac = (y[i - 1] - level) / (y[i - 1] - y[i])
            log_t = math.log(t[i - 1]) + frac * (math.log(t[i]) - math.log(t[i - 1]))
            return float(math.exp(log_t)), "reached"
    return None, "not_reached"


def tokens_saved(autoscale: Curve, baseline: Curve) -> TokensSaved:
    """How many fewer tokens the AutoScale curve needs to reach the baseline's final value.

    When AutoScale reaches the baseline's final value at ``T`` tokens and the baseline trained ``T_b``, the
    saving is ``1 - T / T_b``. When it never does, the saving is ``None`` ("not reached"), and the opposite
    comparison is given instead: ``baseline_saved_fraction`` is how many fewer tokens the baseline needed to
    reach AutoScale's final value (the ``saved_fraction`` the baseline would claim; a negative result for
    AutoScale). ``signed_fraction`` puts both on one axis: the saving when AutoScale reaches the baseline,
    minus ``baseline_saved_fraction`` when it does not (``None`` when neither curve reaches the other's final
    value).
    """
    ta, ya = list(autoscale.tokens), list(autoscale.mean)
    tb, yb = list(baseline.tokens), list(baseline.mean)
    if not ta or not tb:
        return TokensSaved(status="no_data")
    level = yb[-1]
    reach, status = tokens_to_reach(ta, ya, level)
    found = TokensSaved(status=status, baseline_final=level, baseline_tokens=tb[-1], autoscale_final=ya[-1],
                        autoscale_tokens=ta[-1], tokens_to_baseline_final=reach)
    if reach is not None:
        saved = 1.0 - reach / tb[-1]
        return replace(found, saved_fraction=saved, signed_fraction=saved)
    back, back_status = tokens_to_reach(tb, yb, ya[-1])
    claimed = None if back is None else 1.0 - back / ta[-1]
    return replace(found, baseline_tokens_to_autoscale_final=back, baseline_saved_fraction=claimed,
                   baseline_status=back_status, signed_fraction=None if claimed is None else -claimed)


def tokens_saved_per_seed(autoscale: Sequence[RunResult], baseline: Sequence[RunResult],
                          key: str) -> dict[str, TokensSaved]:
    """:func:`tokens_saved` seed by seed (seeds present in both), keyed by seed."""
    ref = {r.seed: r.curve for r in autoscale}
    oth = {r.seed: r.curve for r in baseline}
    return {str(s): tokens_saved(mean_curve([ref[s]], key), mean_curve([oth[s]], key))
            for s in sorted(set(ref) & set(oth))}


def mean_std(values: Sequence[float]) -> MeanStd:
    """Mean, std (ddof 1; 0 for a single value) and count of values over seeds."""
    v = np.asarray(values, dtype=float)
    return MeanStd(mean=float(v.mean()), std=float(v.std(ddof=1)) if v.size > 1 else 0.0, n=int(v.size))


def compare_curves(reference: Sequence[RunResult], other: Sequence[RunResult], key: str) -> CurveComparison:
    """``other`` against ``reference`` at every evaluation point, paired by seed.

    Both arguments hold one run per seed. Only seeds present in both, and evaluation points (tokens) present
    in all their curves, are compared. Each point holds ``reference``, ``other`` and ``difference`` (``other -
    reference``, per seed) over the seeds and, when the curves record them, ``reference_shares`` /
    ``other_shares``: the seed-mean share of each domain in the training tokens seen so far.
    """
    ref = {r.seed: r.curve for r in reference}
    oth = {r.seed: r.curve for r in other}
    seeds = sorted(set(ref) & set(oth))
    if not seeds:
        return CurveComparison(seeds=[], points=[])
    curves = [ref[s] for s in seeds] + [oth[s] for s in seeds]
    tokens = sorted(set.intersection(*({int(p.tokens) for p in c} for c in curves)))

    def at(curve: Sequence[EvalPoint], t: int) -> EvalPoint:
        return next(p for p in curve if int(p.tokens) == t)

    def shares(runs: list[Sequence[EvalPoint]], t: int) -> dict[str, float] | None:
        seen = [at(c, t).domain_tokens for c in runs]
        if any(not s for s in seen):
            return None
        return {d: float(np.mean([s[d] / sum(s.values()) for s in seen])) for d in seen[0]}

    points = []
    for t in tokens:
        a = [at(ref[s], t).value(key) for s in seeds]
        b = [at(oth[s], t).value(key) for s in seeds]
        points.append(CurvePoint(tokens=float(t), reference=mean_std(a), other=mean_std(b),
                                 difference=mean_std([y - x for x, y in zip(a, b, strict=True)]),
                                 reference_shares=shares([ref[s] for s in seeds], t),
                                 other_shares=shares([oth[s] for s in seeds], t)))
    return CurveComparison(seeds=seeds, points=points)


def paired_verdict(method: str, mine: Mapping[int, float], baseline: str, theirs: Mapping[int, float],
                   level: float = 0.95) -> Verdict:
    """Whether mix ``method`` beats mix ``baseline`` beyond seed noise, on a final value paired by seed.

    ``mine`` and ``theirs`` map a seed to the value (lower is better); only seeds present in both count. The
    per-seed differences ``method - baseline`` (negative: the method is better) get a two-sided Student-t
    interval at ``level``. The verdict is ``"better"`` or ``"worse"`` when the interval leaves out 0,
    ``"not_distinguishable"`` when it holds 0, and ``"cannot_judge"`` with fewer than two paired seeds (one
    seed carries no estimate of the noise); the interval is ``None`` then. ``method_wins`` counts the seeds
    on which the method's value is lower. Any comparison of two mixes can call it.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level!r} is invalid: expected a probability in (0, 1)")
    seeds = sorted(set(mine) & set(theirs))
    diffs = [float(mine[s]) - float(theirs[s]) for s in seeds]
    common = {"method": method, "baseline": baseline, "seeds": seeds, "level": level,
              "method_wins": sum(d < 0 for d in diffs)}
    if not diffs:
        return Verdict(**common, verdict="cannot_judge", difference=MeanStd(mean=0.0, std=0.0, n=0))
    stats = mean_std(diffs)
    if len(diffs) < 2:
        return Verdict(**common, verdict="cannot_judge", difference=stats)
    from scipy import stats as st

    half = float(st.t.ppf(0.5 + level / 2, len(diffs) - 1)) * stats.std / math.sqrt(len(diffs))
    low, high = stats.mean - half, stats.mean + half
    verdict = "better" if high < 0 else "worse" if low > 0 else "not_distinguishable"
    return Verdict(**common, verdict=verdict, difference=stats, ci_low=low, ci_high=high)

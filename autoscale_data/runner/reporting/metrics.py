"""Numbers the report computes from curves: seed averages, tokens saved, and paired curve comparisons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "compare_curves",
    "mean_curve",
    "mean_std",
    "paired_verdict",
    "tokens_saved",
    "tokens_saved_per_seed",
    "tokens_to_reach",
]


def mean_curve(curves: Sequence[Sequence[Mapping[str, Any]]], key: str) -> dict[str, list[float]]:
    """Mean and std over seeds of ``key`` at each evaluation point shared by all curves.

    Returns:
        ``{"tokens": [...], "mean": [...], "std": [...], "n": seeds}`` (std 0 with one seed).
    """
    if not curves:
        return {"tokens": [], "mean": [], "std": [], "n": 0}
    common = set.intersection(*({int(p["tokens"]) for p in c} for c in curves))
    tokens = sorted(common)
    values = np.array([[next(float(p[key]) for p in c if int(p["tokens"]) == t) for t in tokens] for c in curves])
    std = values.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(tokens))
    return {"tokens": [float(t) for t in tokens], "mean": values.mean(axis=0).tolist(), "std": std.tolist(),
            "n": len(curves)}


def tokens_to_reach(tokens: Sequence[float], values: Sequence[float], level: float) -> tuple[float | None, str]:
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


def tokens_saved(autoscale: Mapping[str, Sequence[float]], baseline: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """How many fewer tokens the AutoScale curve needs to reach the baseline's final loss.

    Both arguments are ``{"tokens": [...], "mean": [...]}`` curves. When AutoScale reaches the
    baseline's final value at ``T`` tokens and the baseline trained ``T_b``, the saving is
    ``1 - T / T_b``. When it never does, the saving is reported as ``None`` ("not reached"), and the
    opposite comparison is given instead: ``baseline_saved_fraction`` is how many fewer tokens the
    baseline needed to reach AutoScale's final value (the ``saved_fraction`` the baseline would
    claim; a negative result for AutoScale). ``signed_fraction`` puts both on one axis: the saving
    when AutoScale reaches the baseline, minus ``baseline_saved_fraction`` when it does not (``None``
    when neither curve reaches the other's final value).
    """
    ta, ya = list(autoscale["tokens"]), list(autoscale["mean"])
    tb, yb = list(baseline["tokens"]), list(baseline["mean"])
    if not ta or not tb:
        return {"status": "no_data", "saved_fraction": None}
    level = yb[-1]
    reach, status = tokens_to_reach(ta, ya, level)
    out: dict[str, Any] = {"baseline_final": level, "baseline_tokens": tb[-1], "autoscale_final": ya[-1],
                           "autoscale_tokens": ta[-1], "status": status, "tokens_to_baseline_final": reach,
                           "saved_fraction": None if reach is None else 1.0 - reach / tb[-1]}
    if reach is None:
        back, back_status = tokens_to_reach(tb, yb, ya[-1])
        out["baseline_tokens_to_autoscale_final"] = back
        out["baseline_saved_fraction"] = None if back is None else 1.0 - back / ta[-1]
        out["baseline_status"] = back_status
    out["signed_fraction"] = out["saved_fraction"] if reach is not None else \
        (None if out["baseline_saved_fraction"] is None else -out["baseline_saved_fraction"])
    return out


def tokens_saved_per_seed(autoscale: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]],
                          key: str) -> dict[str, dict[str, Any]]:
    """:func:`tokens_saved` seed by seed (runs ``{"seed", "curve"}``; seeds present in both), keyed by seed."""
    ref = {int(r["seed"]): r["curve"] for r in autoscale}
    oth = {int(r["seed"]): r["curve"] for r in baseline}
    return {str(s): tokens_saved(mean_curve([ref[s]], key), mean_curve([oth[s]], key))
            for s in sorted(set(ref) & set(oth))}


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "std", "n"}`` of values over seeds (std with ddof 1; 0 for a single value)."""
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0, "n": int(v.size)}


def compare_curves(reference: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]],
                   key: str) -> dict[str, Any]:
    """``other`` against ``reference`` at every evaluation point, paired by seed.

    Both arguments are lists of run results (``{"seed", "curve"}``), one per seed. Only seeds
    present in both, and evaluation points (tokens) present in all their curves, are compared.

    Returns:
        ``{"seeds": [...], "points": [...]}``; each point holds ``tokens``, ``reference``, ``other``
        and ``difference`` (``other - reference``, per seed) as ``{"mean", "std", "n"}`` (std over
        seeds, ddof 1; 0 with one seed) and, when the curves record them, ``reference_shares`` /
        ``other_shares``: the seed-mean share of each domain in the training tokens seen so far.
    """
    ref = {int(r["seed"]): r["curve"] for r in reference}
    oth = {int(r["seed"]): r["curve"] for r in other}
    seeds = sorted(set(ref) & set(oth))
    if not seeds:
        return {"seeds": [], "points": []}
    curves = [ref[s] for s in seeds] + [oth[s] for s in seeds]
    tokens = sorted(set.intersection(*({int(p["tokens"]) for p in c} for c in curves)))

    def at(curve: Sequence[Mapping[str, Any]], t: int) -> Mapping[str, Any]:
        return next(p for p in curve if int(p["tokens"]) == t)

    def shares(runs: list[Sequence[Mapping[str, Any]]], t: int) -> dict[str, float] | None:
        seen = [at(c, t).get("domain_tokens") for c in runs]
        if any(not s for s in seen):
            return None
        return {d: float(np.mean([s[d] / sum(s.values()) for s in seen])) for d in seen[0]}

    points = []
    for t in tokens:
        a = [float(at(ref[s], t)[key]) for s in seeds]
        b = [float(at(oth[s], t)[key]) for s in seeds]
        point: dict[str, Any] = {"tokens": float(t), "reference": mean_std(a), "other": mean_std(b),
                                 "difference": mean_std([y - x for x, y in zip(a, b, strict=True)])}
        for name, runs in (("reference_shares", [ref[s] for s in seeds]), ("other_shares", [oth[s] for s in seeds])):
            found = shares(runs, t)
            if found is not None:
                point[name] = found
        points.append(point)
    return {"seeds": seeds, "points": points}


def paired_verdict(method: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]], key: str,
                   level: float = 0.95) -> dict[str, Any]:
    """Whether ``method`` beats ``baseline`` beyond seed noise, on the final objective paired by seed.

    Both arguments are lists of run results (``{"seed", key}``); only seeds present in both count. The
    per-seed differences ``method - baseline`` (negative: the method is better) get a two-sided
    Student-t interval at ``level``. The verdict is ``"better"`` or ``"worse"`` when the interval leaves
    out 0, ``"not_distinguishable"`` when it holds 0, and ``"cannot_judge"`` with fewer than two paired
    seeds (one seed carries no estimate of the noise). Any comparison of two mixes can call it.

    Returns:
        ``{"verdict", "seeds", "level", "difference": {"mean", "std", "n"}, "ci_low", "ci_high",
        "method_wins"}``: the interval is ``None`` with fewer than two seeds; ``method_wins`` counts the
        seeds on which the method's value is lower.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level!r} is invalid: expected a probability in (0, 1)")
    mine = {int(r["seed"]): float(r[key]) for r in method}
    theirs = {int(r["seed"]): float(r[key]) for r in baseline}
    seeds = sorted(set(mine) & set(theirs))
    diffs = [mine[s] - theirs[s] for s in seeds]
    out: dict[str, Any] = {"seeds": seeds, "level": level, "method_wins": sum(d < 0 for d in diffs),
                           "ci_low": None, "ci_high": None}
    if not diffs:
        return {**out, "verdict": "cannot_judge", "difference": {"mean": 0.0, "std": 0.0, "n": 0}}
    stats = mean_std(diffs)
    out["difference"] = stats
    if len(diffs) < 2:
        return {**out, "verdict": "cannot_judge"}
    from scipy import stats as st

    half = float(st.t.ppf(0.5 + level / 2, len(diffs) - 1)) * stats["std"] / math.sqrt(len(diffs))
    low, high = stats["mean"] - half, stats["mean"] + half
    verdict = "better" if high < 0 else "worse" if low > 0 else "not_distinguishable"
    return {**out, "verdict": verdict, "ci_low": low, "ci_high": high}

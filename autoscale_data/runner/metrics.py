"""Numbers the report computes from curves: seed averages and tokens saved."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["mean_curve", "tokens_saved", "tokens_to_reach"]


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
    claim; a negative result for AutoScale).
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
    return out

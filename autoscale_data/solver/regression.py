"""Regression baselines fitted on runs with varied mixtures at one budget.

* RegMix-style: sample Dirichlet mixtures (:func:`sample_mixtures`) for the proxy runs; regress the
  objective on the run weights (a linear model, or LightGBM when installed and asked for); score
  many random candidate mixtures with the model and average the best ``top_k`` of them.
* Data mixing law: per validation domain ``L_i(w) = c_i + k_i exp(Σ_j t_ij w_j)`` fitted by least
  squares, then the objective built from the ``L_i`` minimised over the simplex (SLSQP, multi-start).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import least_squares, minimize

from .runs import RunTable
from .vocabulary import AUTO, DEFAULT_OBJECTIVE, MEAN_LOSS, OBJECTIVES, check_name

__all__ = ["LIGHTGBM", "LINEAR", "REGRESSORS", "fit_mixing_law", "mixing_law_weights", "regmix_weights",
           "sample_mixtures"]


def sample_mixtures(domains: Sequence[str], n: int, *, alpha: float | Sequence[float] = 1.0,
                    seed: int = 0, min_weight: float = 0.0) -> list[dict[str, float]]:
    """``n`` Dirichlet(alpha) mixtures over ``domains`` (mixed with ``min_weight`` floor).

    Raises:
        ValueError: n < 1, alpha <= 0, min_weight outside [0, 1/m).
    """
    m = len(domains)
    if m < 1 or n < 1:
        raise ValueError(f"need >= 1 domain and n >= 1, got {m} domains and n={n}")
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (m,))
    if np.any(~(a > 0)):
        raise ValueError(f"alpha must be > 0, got {a.tolist()}")
    if not (0 <= min_weight < 1.0 / m):
        raise ValueError(f"min_weight must be in [0, 1/{m}), got {min_weight}")
    w = np.random.default_rng(seed).dirichlet(a, size=n)
    w = min_weight + (1 - m * min_weight) * w
    return [dict(zip(domains, row.tolist(), strict=False)) for row in w]

REGRESSORS = ("linear", "lightgbm", AUTO)
"""RegMix's regressor of the objective on the mixture: least squares, LightGBM, or LightGBM when
importable."""
LINEAR, LIGHTGBM = REGRESSORS[:2]


def _xy(runs: RunTable, objective: str) -> tuple[np.ndarray, np.ndarray]:
    tok = runs.tokens_matrix()
    tot = tok.sum(axis=1, keepdims=True)
    if np.any(tot <= 0):
        raise ValueError("a run has no training tokens")
    loss = runs.loss_matrix()
    check_name("objective", objective, OBJECTIVES)
    y = loss.mean(axis=1) if objective == MEAN_LOSS else np.exp(loss).mean(axis=1)
    return tok / tot, y


def regmix_weights(runs: RunTable, *, objective: str = DEFAULT_OBJECTIVE, model: str = AUTO,
                   n_candidates: int = 100_000, top_k: int = 100, alpha: float = 1.0,
                   seed: int = 0) -> dict[str, float]:
    """RegMix-style weights: regression of the objective on the mixture, then a simplex search.

    Args:
        runs: runs with different mixtures (their weights are tokens / run total).
        objective: ``mean_loss`` or ``mean_ppl`` (unnormalised) over validation domains.
        model: ``"linear"`` (least squares on the weights), ``"lightgbm"`` (needs the optional
            ``lightgbm`` package) or ``"auto"`` (LightGBM when importable).
        n_candidates: random Dirichlet(alpha) candidate mixtures scored by the model.
        top_k: the answer is the mean of the best ``top_k`` candidates.
        alpha: Dirichlet concentration of the candidates; seed: RNG seed.

    Raises:
        ValueError: fewer runs than domains (linear model), bad options, lightgbm missing.
    """
    w, y = _xy(runs, objective)
    n, m = w.shape
    if n_candidates < 1 or not (1 <= top_k <= n_candidates):
        raise ValueError(f"need n_candidates >= top_k >= 1, got {n_candidates}, {top_k}")
    if model == AUTO:
        try:
            import lightgbm  # noqa: F401

            model = LIGHTGBM
        except ImportError:
            model = LINEAR
    rng = np.random.default_rng(seed)
    cand = np.vstack([rng.dirichlet(np.full(m, float(alpha)), size=n_candidates), w])
    if model == LINEAR:
        if n < m:
            raise ValueError(f"the linear model needs at least {m} runs (one per domain), got {n}")
        coef, *_ = np.linalg.lstsq(w, y, rcond=None)
        pred = cand @ coef
    elif model == LIGHTGBM:
        try:
            import lightgbm
        except ImportError:
            raise ValueError("model='lightgbm' needs the optional package: pip install lightgbm") from None
        reg = lightgbm.LGBMRegressor(n_estimators=200, learning_rate=0.05, num_leaves=15,
                                     min_child_samples=max(2, n // 10), random_state=seed, verbose=-1)
        reg.fit(w, y)
        pred = reg.predict(cand)
    else:
        raise ValueError(f"model must be 'linear', 'lightgbm' or 'auto', got {model!r}")
    best = np.argsort(pred)[:top_k]
    out = cand[best].mean(axis=0)
    out = out / out.sum()
    return dict(zip(runs.train_domains, out.tolist(), strict=False))


def fit_mixing_law(w: np.ndarray, y: np.ndarray, *, n_starts: int = 4,
                   seed: int = 0) -> tuple[float, float, np.ndarray]:
    """Fit ``y ≈ c + k exp(t · w)`` by least squares; returns ``(c, k, t)``.

    Raises:
        ValueError: fewer runs than the ``m + 2`` parameters.
    """
    n, m = w.shape
    if n < m + 2:
        raise ValueError(f"the mixing law needs >= {m + 2} runs for {m} domains, got {n}")
    rng = np.random.default_rng(seed)
    span = float(np.ptp(y)) or 1.0
    best = None
    for s in range(n_starts):
        c0 = float(y.min()) - span * (0.1 * 3.0 ** s)
        z = np.log(y - c0)
        feats = np.hstack([np.ones((n, 1)), w])
        coef, *_ = np.linalg.lstsq(feats, z, rcond=None)
        p0 = np.concatenate([[c0, np.exp(coef[0])], coef[1:] + 0.01 * rng.standard_normal(m)])

        def resid(p):
            return p[0] + p[1] * np.exp(np.clip(w @ p[2:], -50, 50)) - y

        sol = least_squares(resid, p0, method="lm", xtol=1e-12, ftol=1e-12)
        if best is None or sol.cost < best.cost:
            best = sol
    p = best.x
    return float(p[0]), float(p[1]), p[2:].copy()


def mixing_law_weights(runs: RunTable, *, objective: str = DEFAULT_OBJECTIVE, n_starts: int = 16,
                       seed: int = 0) -> dict[str, float]:
    """Data-mixing-law weights: fit ``L_i(w) = c_i + k_i exp(Σ_j t_ij w_j)`` per validation domain and
    minimise the mean of ``L_i`` (``mean_loss``) or of ``exp(L_i)`` (``mean_ppl``) over the simplex.

    Raises:
        ValueError: too few runs (``m + 2`` needed), bad objective.
    """
    check_name("objective", objective, OBJECTIVES)
    w, _ = _xy(runs, MEAN_LOSS)
    loss = runs.loss_matrix()
    laws = [fit_mixing_law(w, loss[:, i], seed=seed + i) for i in range(loss.shape[1])]
    cs = np.array([c for c, _, _ in laws])
    ks = np.array([k for _, k, _ in laws])
    ts = np.array([t for _, _, t in laws])  # (val, m)

    def f(v: np.ndarray) -> float:
        li = cs + ks * np.exp(np.clip(ts @ v, -50, 50))
        return float(np.mean(li if objective == MEAN_LOSS else np.exp(li)))

    m = w.shape[1]
    rng = np.random.default_rng(seed)
    starts = np.vstack([np.full(m, 1.0 / m), w, rng.dirichlet(np.ones(m), size=n_starts)])
    cons = ({"type": "eq", "fun": lambda v: v.sum() - 1.0, "jac": lambda v: np.ones_like(v)},)
    best_v, best_f = None, np.inf
    for s in starts:
        r = minimize(f, s, method="SLSQP", bounds=[(0.0, 1.0)] * m, constraints=cons,
                     options={"ftol": 1e-12, "maxiter": 500})
        v = np.clip(r.x, 0.0, None)
        v = v / v.sum()
        fv = f(v)
        if fv < best_f:
            best_v, best_f = v, fv
    return dict(zip(runs.train_domains, best_v.tolist(), strict=False))

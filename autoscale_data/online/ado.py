"""ADO: adaptive data optimisation by per-domain scaling laws fitted online (Jiang et al., ICLR 2025).

ADO is the online twin of AutoScale: no proxy runs, each domain's training loss is fitted, during
the run, against the sequences of that domain seen so far, to a power law
``L_k(n) = A_k (n + a_k)^(-b_k) + c_k`` (the solver's 4-parameter law,
:func:`~autoscale_data.solver.laws.fit_power_law_batch`), and the mix follows the law's derivative.
At update ``t`` (the policy of the public ``ado.py``)::

    slope_k = max(b_k, 0.05) (L_k(n_k) - c_k) / (n_k + a_k)        (= -dL_k/dn_k)
    rho_k  ∝ slope_k  mu_k  h_k^(1/2),  then every rho_k >= min_prob (clipped, renormalised)
    p      = 0.9 p_avg + 0.1 rho,       p_avg <- (1 - 1/(t+1)) p_avg + rho / (t+1)

with ``mu`` the prior (the natural distribution) and ``h`` an exponential average (decay 0.9) of the
realised per-domain shares of each window. Before the first fit the weights are the prior. The
window means of ``k`` steps stand in for the public code's smoothed per-step losses; the fits use
the points after ``warmup`` updates and are redone every ``refit_every`` updates. Differences from
the public code: ``n_k`` is the domain's own sequences (its default uses the total steps for every
domain), and ``t`` counts updates rather than steps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_int, check_number
from ..solver.contrib import fit_power_law_batch
from ..solver.vocabulary import LAW_4P
from .controller import Window, check_proposal, check_state

__all__ = ["ADO"]

_MIN_EXPONENT = 0.05  # the public code's lower bound of the fitted exponent in the slope


class ADO:
    """The ADO mixing controller.

    Args:
        prior: ``mu``, the natural distribution (e.g. each domain's share of the tokens; default
            uniform); also the weights until the first fit.
        warmup: updates whose points the fits leave out (the first, steepest part of training).
        fit_after: the first update that fits the laws (at least ``warmup + 4``: the law has 4
            parameters).
        refit_every: updates between fits.
        min_prob: the smallest weight of a domain.
        history_decay: decay of the average ``h`` of the realised shares.
        grid: the fit's start grid, ``"coarse"`` (fast) or ``"fine"``.
    """

    name = "ado"

    def __init__(self, domain_names: Sequence[str], prior: Mapping[str, float] | None = None, *,
                 warmup: int = 2, fit_after: int | None = None, refit_every: int = 1, min_prob: float = 0.01,
                 history_decay: float = 0.9, grid: str = "coarse") -> None:
        self.domain_names = tuple(domain_names)
        k = len(self.domain_names)
        if k < 1:
            raise ValueError("ADO needs at least one domain")
        check_int("warmup", warmup, minimum=0)
        fit_after = warmup + 4 if fit_after is None else fit_after
        check_int("fit_after", fit_after, minimum=warmup + 4)
        check_int("refit_every", refit_every)
        check_number("min_prob", min_prob, positive=False)
        if not 0 <= min_prob < 1.0 / k:
            raise ValueError(f"min_prob must be in [0, 1/{k}), got {min_prob!r}")
        if not (isinstance(history_decay, (int, float)) and 0 <= history_decay < 1):
            raise ValueError(f"history_decay must be in [0, 1), got {history_decay!r}")
        if grid not in ("coarse", "fine"):
            raise ValueError(f"grid must be 'coarse' or 'fine', got {grid!r}")
        self.warmup, self.fit_after, self.refit_every = int(warmup), int(fit_after), int(refit_every)
        self.min_prob, self.history_decay, self.grid = float(min_prob), float(history_decay), grid
        self.prior = np.full(k, 1.0 / k) if prior is None else check_proposal(0, prior, self.domain_names)
        self.p = self.prior.copy()
        self.p_avg = self.prior.copy()
        self.history = self.prior.copy()
        self.t = 0
        self.last_seen = np.zeros(k, dtype=np.int64)
        self.xs: list[list[int]] = []  # per update: sequences seen per domain
        self.ys: list[list[float]] = []  # per update: window mean loss per domain (NaN if absent)
        self.params: np.ndarray | None = None  # [K, 4]: A, a, b, c

    def initial_weights(self) -> dict[str, float]:
        return dict(zip(self.domain_names, self.prior.tolist(), strict=True))

    # ------------------------------------------------------------------ policy
    def update(self, window: Window) -> dict[str, float]:
        self.t += 1
        drawn = window.seen - self.last_seen
        if drawn.sum() > 0:
            self.history = self.history_decay * self.history + (1 - self.history_decay) * drawn / drawn.sum()
        self.last_seen = window.seen.copy()
        self.xs.append(window.seen.tolist())
        self.ys.append(window.means.tolist())
        if self.t >= self.fit_after and (self.t - self.fit_after) % self.refit_every == 0:
            fitted = self.fit()
            if fitted is not None:
                self.params = fitted
        if self.params is None:
            return dict(zip(self.domain_names, self.p.tolist(), strict=True))
        rho = self.target(window.seen)
        self.p = 0.9 * self.p_avg + 0.1 * rho
        self.p_avg = (1 - 1 / (self.t + 1)) * self.p_avg + rho / (self.t + 1)
        self.p = self.p / self.p.sum()
        return dict(zip(self.domain_names, self.p.tolist(), strict=True))

    def target(self, seen: np.ndarray) -> np.ndarray:
        """``rho``: the prior times the laws' slopes at ``seen`` times ``h^(1/2)``, clipped at
        ``min_prob``."""
        if self.params is None:
            raise ValueError("ADO has no fitted laws yet")
        amp, a, b, c = self.params.T
        n = np.maximum(np.asarray(seen, dtype=np.float64), 1.0)
        z = np.maximum(n + a, 1e-12)
        reducible = amp * np.power(z, -b)  # L(n) - c
        slope = np.maximum(b, _MIN_EXPONENT) * reducible / z
        rho = slope * self.prior * np.sqrt(self.history)
        if not np.all(np.isfinite(rho)) or rho.sum() <= 0:
            rho = self.prior.copy()
        rho = rho / rho.sum()
        rho = np.maximum(rho, self.min_prob)
        return rho / rho.sum()

    def fit(self) -> np.ndarray | None:
        """Each domain's law ``[A, a, b, c]`` from the points after ``warmup`` (None if any domain cannot be
        fitted)."""
        xs = np.asarray(self.xs[self.warmup:], dtype=np.float64)
        ys = np.asarray(self.ys[self.warmup:], dtype=np.float64)
        out = np.empty((len(self.domain_names), 4))
        for k in range(len(self.domain_names)):
            ok = np.isfinite(ys[:, k]) & (xs[:, k] > 0)
            x, y = xs[ok, k], ys[ok, k]
            if np.unique(x).size < 4:
                return None
            try:
                f = fit_power_law_batch(x, y, law=LAW_4P, grid=self.grid)
            except ValueError:
                return None
            out[k] = [f["amplitude"][0], f["a"][0], f["b"][0], f["c"][0]]
        return out if np.all(np.isfinite(out)) else None

    # ------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"controller": self.name, "domains": list(self.domain_names), "t": self.t,
                "prior": self.prior.tolist(), "p": self.p.tolist(), "p_avg": self.p_avg.tolist(),
                "history": self.history.tolist(), "last_seen": self.last_seen.tolist(),
                "xs": [list(r) for r in self.xs], "ys": [_json_floats(r) for r in self.ys],
                "params": None if self.params is None else self.params.tolist(),
                "settings": {"warmup": self.warmup, "fit_after": self.fit_after,
                             "refit_every": self.refit_every,
                             "min_prob": self.min_prob, "history_decay": self.history_decay,
                             "grid": self.grid}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_state(state, self.name, self.domain_names)
        settings = dict(state["settings"])
        self.warmup, self.fit_after = int(settings["warmup"]), int(settings["fit_after"])
        self.refit_every, self.min_prob = int(settings["refit_every"]), float(settings["min_prob"])
        self.history_decay, self.grid = float(settings["history_decay"]), str(settings["grid"])
        self.t = int(state["t"])
        self.prior, self.p, self.p_avg, self.history = (np.asarray(state[key], dtype=np.float64)
                                                        for key in ("prior", "p", "p_avg", "history"))
        self.last_seen = np.asarray(state["last_seen"], dtype=np.int64)
        self.xs = [[int(v) for v in r] for r in state["xs"]]
        self.ys = [[float("nan") if v is None else float(v) for v in r] for r in state["ys"]]
        self.params = None if state["params"] is None else np.asarray(state["params"], dtype=np.float64)


def _json_floats(row: Sequence[float]) -> list[float | None]:
    """Floats for JSON: NaN (a domain absent from a window) as None."""
    return [None if v != v else float(v) for v in row]

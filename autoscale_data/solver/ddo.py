"""DDO (Direct Data Optimization) at one budget: fit per-domain laws, then optimise the mix exactly.

For each training domain j, the runs that change only j's tokens (plus the base runs, x = 1) give
points ``(x, y)`` of the objective y against j's multiplier x; ``L_j(x) = (x + a_j)^(-b_j) + c_j``
is fitted to them (see :mod:`.laws`). The mix minimises ``Σ_j (x_j + a_j)^(-b_j)`` subject to
``Σ_j x_j base_j = N`` and bounds (see :mod:`.allocate`); weights are ``w_j = x_j base_j / N``.

``fit="default"`` fits each law by bounded multi-start least squares and, where several fits tie
(exact fits of too few points), takes the one with the highest floor (see :mod:`.laws`);
``fit="paper"`` reproduces the authors' notebook (unbounded ``curve_fit`` from a = b = c = 1).
Either way the result carries :class:`~.identify.Identifiability`: whether the data determine the
weights, and their range over every fit consistent with the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._options import build_options
from .._records import Record, omitted
from .allocate import allocate, kkt_violation, multiplier_bounds
from .design import DDODesign, read_design, run_objective
from .identify import Identifiability, identify
from .laws import PowerLawFit, fit_power_law_batch, fit_power_law_paper, local_fits
from .runs import RunTable
from .vocabulary import (
    DEFAULT_LAW,
    DEFAULT_OBJECTIVE,
    LAW_3P,
    LAWS,
    MEAN_PPL,
    OBJECTIVES,
    check_name,
    law_parameters,
)

__all__ = ["FIT_MODES", "DDOOptions", "DDOResult", "fit_ddo", "token_caps_array"]

FIT_MODES = ("default", "paper")
"""How each domain's law is fitted: ours (bounded, multi-start, fixed tie rule) or the authors'."""


@dataclass(frozen=True)
class DDOOptions:
    """Settings of :func:`fit_ddo` (and of the bootstrap's refits).

    Attributes:
        objective: ``"mean_loss"`` (default: mean loss in nats, the library's, the CLI's and the runner's
            default, see docs/solver.md "Objective") or ``"mean_ppl"`` (mean over validation domains of
            exp(loss), divided by the base runs' value; the authors' code).
        min_weight, max_weight: bounds on every weight.
        token_caps: tokens available per training domain (times ``max_epochs``, default 1).
        law: ``"3p"`` (paper) or ``"4p"`` (adds an amplitude; needs 4 distinct multipliers).
        max_epochs: epoch cap applied to ``token_caps`` (number or per domain).
        base_run: id of a base run, when the design is ambiguous.
        budget_tokens: optimise at this budget instead of the base run's total.
        val_domains: validation domains in the objective (default all).
        fit: ``"default"`` or ``"paper"`` (see the module doc; ``"paper"`` needs ``law="3p"``).
        profile_level: profile level of the fits counted as consistent with the data (identifiability).
        weight_tol: largest weight movement over those fits that still counts as identified.
    """

    objective: str = DEFAULT_OBJECTIVE
    min_weight: float = 0.0
    max_weight: float = 1.0
    token_caps: Mapping[str, float] | None = None
    law: str = DEFAULT_LAW
    max_epochs: float | Mapping[str, float] | None = None
    base_run: str | None = None
    budget_tokens: float | None = None
    val_domains: Sequence[str] | None = None
    fit: str = "default"
    profile_level: float = 0.95
    weight_tol: float = 0.01

    def __post_init__(self) -> None:
        check_name("objective", self.objective, OBJECTIVES)
        check_name("law", self.law, LAWS)
        check_name("fit", self.fit, FIT_MODES)
        if self.fit == "paper" and self.law != LAW_3P:
            raise ValueError(f"fit='paper' is the authors' 3-parameter fit; got law={self.law!r}")
        if not (0.0 <= self.min_weight < 1.0) or not (0.0 < self.max_weight <= 1.0):
            raise ValueError(f"weight bounds must satisfy 0 <= min_weight < 1 and 0 < max_weight <= 1, "
                             f"got {self.min_weight} and {self.max_weight}")
        if self.budget_tokens is not None and not (np.isfinite(self.budget_tokens)
                                                   and self.budget_tokens > 0):
            raise ValueError(f"budget_tokens must be > 0, got {self.budget_tokens}")
        if not (0.0 < self.profile_level < 1.0):
            raise ValueError(f"profile_level must be in (0, 1), got {self.profile_level}")
        if not (self.weight_tol >= 0.0):
            raise ValueError(f"weight_tol must be >= 0, got {self.weight_tol}")


def token_caps_array(domains: Sequence[str], token_caps: Mapping[str, float] | None,
                     max_epochs: float | Mapping[str, float] | None = None) -> np.ndarray | None:
    """Per-domain token caps (tokens available × epoch cap) in ``domains`` order, or None.

    Raises:
        ValueError: caps for unknown domains, missing domains, negative values.
    """
    if token_caps is None:
        return None
    unknown = sorted(set(token_caps) - set(domains))
    missing = sorted(set(domains) - set(token_caps))
    if unknown or missing:
        raise ValueError(f"token_caps domains do not match: missing {missing}, unknown {unknown}")
    caps = np.array([float(token_caps[d]) for d in domains])
    if np.any(np.isnan(caps)) or np.any(caps < 0):
        raise ValueError(f"token_caps must be >= 0, got {dict(zip(domains, caps.tolist(), strict=False))}")
    if max_epochs is None:
        ep = np.ones(len(domains))
    elif isinstance(max_epochs, Mapping):
        bad = sorted(set(max_epochs) - set(domains))
        if bad:
            raise ValueError(f"max_epochs has unknown domains {bad}")
        ep = np.array([float(max_epochs.get(d, 1.0)) for d in domains])
    else:
        ep = np.full(len(domains), float(max_epochs))
    if np.any(~(ep > 0)):
        raise ValueError(f"max_epochs must be > 0, got {ep.tolist()}")
    return caps * ep


@dataclass(frozen=True)
class DDOResult(Record):
    """The optimal mix at one budget and everything needed to judge it.

    A record (:mod:`autoscale_data._records`): its JSON (the CLI's ``--json`` object, the runner's
    ``fits/ddo_<N>.json``) has one key per field. ``fit`` is made from ``diagnostics``;
    ``min_weight``, ``max_weight`` and ``token_caps`` are written where they are not their defaults
    (files written before they were stated read as the defaults).

    Attributes:
        weights: optimal weight per domain (sums to 1), in the domains' order.
        budget_tokens: the budget N (the base run's total tokens unless overridden).
        allocation_tokens: ``weights × N``.
        multipliers: optimal multiplier of the base allocation per domain.
        base_tokens: the base allocation.
        diagnostics: fitted law per domain, with its points and residuals (also :attr:`fits`).
        aar: mean absolute relative error of all fitted points.
        loo_aar: leave-one-out AAR (None when some domain has no spare point).
        pinned: domains at a bound (lower or upper) at the optimum.
        bounds_hit: ``{domain: "lower" | "upper"}`` for the pinned domains.
        status: ``"optimal"`` or ``"degenerate"`` (flat laws had to absorb budget; not unique).
        kkt_residual: largest relative KKT violation at the answer (0 = exact).
        objective, law: settings used.
        predicted_change: fitted change of the objective from the base mix to the optimum.
        base_runs: ids of the base runs.
        fit_mode: how the laws were fitted (``"default"`` or ``"paper"``: :attr:`DDOOptions.fit`).
        identifiability: whether the data determine the weights, and their range.
        min_weight, max_weight, token_caps: the bounds of the optimisation (:meth:`optimize_at` keeps them).
        fit: each domain's law parameters ``a``, ``b``, ``c`` (and ``amplitude`` for the 4-parameter law).
    """

    weights: dict[str, float]
    budget_tokens: float
    allocation_tokens: dict[str, float]
    multipliers: dict[str, float]
    base_tokens: dict[str, float]
    diagnostics: dict[str, PowerLawFit]
    aar: float
    loo_aar: float | None
    pinned: list[str]
    bounds_hit: dict[str, str]
    status: str
    kkt_residual: float
    objective: str
    law: str
    predicted_change: float
    base_runs: list[str]
    fit_mode: str = "default"
    identifiability: Identifiability | None = None
    min_weight: float = omitted(default=0.0)
    max_weight: float = omitted(default=1.0)
    token_caps: dict[str, float] | None = omitted(default=None)
    fit: dict[str, dict[str, float]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fit", {d: f.parameters for d, f in self.diagnostics.items()})

    @property
    def domains(self) -> tuple[str, ...]:
        """Training domains (the order of :attr:`weights`)."""
        return tuple(self.weights)

    @property
    def fits(self) -> dict[str, PowerLawFit]:
        """Fitted law per domain (:attr:`diagnostics`)."""
        return self.diagnostics

    def optimize_at(self, budget_tokens: float) -> dict[str, float]:
        """Optimal allocation (tokens) of the fitted law at another budget (the 'direct route').

        Weight bounds apply relative to the new budget; token caps are absolute.
        """
        base = np.array([self.base_tokens[d] for d in self.domains])
        caps = None if self.token_caps is None else np.array([self.token_caps[d] for d in self.domains])
        lo, hi = multiplier_bounds(base, float(budget_tokens), self.min_weight, self.max_weight, caps,
                                   self.domains)
        p = _params(self.fits, self.domains)
        x = allocate(p[0], p[1], p[2], base, float(budget_tokens), lo, hi).x
        return {d: float(v) for d, v in zip(self.domains, x * base, strict=False)}


def _params(fits: Mapping[str, PowerLawFit], domains: Sequence[str]) -> tuple[np.ndarray, ...]:
    beta = np.array([fits[d].amplitude for d in domains])
    return beta, np.array([fits[d].a for d in domains]), np.array([fits[d].b for d in domains])


def objective_values(table: RunTable, design: DDODesign, objective: str,
                     val_domains: Sequence[str] | None = None) -> np.ndarray:
    """Per-run objective y as fitted: ``mean_ppl`` is divided by the base runs' mean."""
    raw = run_objective(table, objective, val_domains)
    if objective == MEAN_PPL:
        raw = raw / raw[design.base_runs].mean()
    return raw


def _loo_aar(design: DDODesign, y: np.ndarray, law: str, fits: Mapping[str, PowerLawFit]) -> float | None:
    k = law_parameters(law)
    errs = []
    for j in range(len(design.domains)):
        idx = design.domain_points(j)
        x = design.multiplier[idx]
        masks = np.ones((idx.size, idx.size)) - np.eye(idx.size)
        if any(np.unique(x[row > 0]).size < k for row in masks):
            return None
        f = fits[design.domains[j]]
        init = {"a": f.a, "b": f.b, "c": f.c, "amplitude": f.amplitude}
        out = fit_power_law_batch(x, np.broadcast_to(y[idx], masks.shape), masks, law=law, n_starts=3,
                                  init=init, grid="coarse")
        pred = out["amplitude"] * np.power(x + out["a"], -out["b"]) + out["c"]
        errs.append(np.abs(pred - y[idx]) / np.maximum(np.abs(y[idx]), 1e-300))
    return float(np.concatenate(errs).mean())


def fit_ddo(runs: RunTable, options: DDOOptions | None = None, **settings: Any) -> DDOResult:
    """Fit DDO's per-domain laws to the runs of one budget and return the optimal mix.

    Args:
        runs: base run(s) and one-domain perturbations (every seed is used).
        options: a :class:`DDOOptions`; its fields may also be given (or overridden) as keywords,
            e.g. ``fit_ddo(runs, objective="mean_loss", min_weight=0.02)``.

    Raises:
        ValueError: bad design (see :func:`read_design`), too few multipliers for the law,
            infeasible bounds, or bad option values.
    """
    o = build_options(DDOOptions, options, settings, caller="fit_ddo")
    design = read_design(runs, o.base_run)
    domains = design.domains
    y = objective_values(runs, design, o.objective, o.val_domains)
    fits, local = _domain_fits(design, y, o)
    base = design.base_tokens
    n = design.budget_tokens if o.budget_tokens is None else float(o.budget_tokens)
    caps = token_caps_array(domains, o.token_caps, o.max_epochs)
    lo, hi = multiplier_bounds(base, n, o.min_weight, o.max_weight, caps, domains)
    beta, a, b = _params(fits, domains)
    sol = allocate(beta, a, b, base, n, lo, hi)
    x = sol.x
    alloc = x * base
    bounds_hit = {d: ("lower" if sol.at_lower[j] else "upper")
                  for j, d in enumerate(domains) if sol.at_lower[j] or sol.at_upper[j]}
    change = float(sum(fits[d].predict(x[j]) - fits[d].predict(1.0) for j, d in enumerate(domains)))
    all_y = np.concatenate([np.asarray(f.y) for f in fits.values()])
    all_r = np.concatenate([np.asarray(f.residuals) for f in fits.values()])
    ident = identify(fits, lambda amp, aa, bb: allocate(amp, aa, bb, base, n, lo, hi).x * base / n,
                     at=dict(zip(domains, x.tolist(), strict=True)), candidates=local, level=o.profile_level,
                     weight_tol=o.weight_tol)
    return DDOResult(
        weights={d: float(v) for d, v in zip(domains, alloc / n, strict=False)}, budget_tokens=n,
        allocation_tokens={d: float(v) for d, v in zip(domains, alloc, strict=False)},
        multipliers={d: float(v) for d, v in zip(domains, x, strict=False)},
        base_tokens={d: float(v) for d, v in zip(domains, base, strict=False)}, diagnostics=fits,
        aar=float(np.mean(np.abs(all_r) / np.maximum(np.abs(all_y), 1e-300))),
        loo_aar=_loo_aar(design, y, o.law, fits),
        pinned=list(bounds_hit), bounds_hit=bounds_hit,
        status="degenerate" if bool(sol.degenerate) else "optimal",
        kkt_residual=kkt_violation(beta, a, b, base, x, lo, hi), objective=o.objective, law=o.law,
        predicted_change=change, base_runs=[design.run_ids[i] for i in design.base_runs],
        min_weight=float(o.min_weight), max_weight=float(o.max_weight),
        token_caps=None if caps is None else {d: float(c) for d, c in zip(domains, caps, strict=False)},
        fit_mode=o.fit, identifiability=ident)


def _domain_fits(design: DDODesign, y: np.ndarray,
                 o: DDOOptions) -> tuple[dict[str, PowerLawFit], dict[str, list[PowerLawFit]]]:
    """Each domain's law (``o.fit``) and its local fits over the shift grid, the domain named in an error."""
    fits: dict[str, PowerLawFit] = {}
    local: dict[str, list[PowerLawFit]] = {}
    for j, d in enumerate(design.domains):
        idx = design.domain_points(j)
        try:
            local[d] = local_fits(design.multiplier[idx], y[idx], law=o.law)
            fits[d] = fit_power_law_paper(design.multiplier[idx], y[idx]) if o.fit == "paper" else local[d][0]
        except ValueError as exc:
            raise ValueError(f"domain {d!r}: {exc}") from None
    return fits, local

"""One loss law fitted jointly to the DDO runs of several budgets, optimised exactly at any budget.

The paper's law ``L(w; N) = Σ_i (N0_i + w_i N)^(-γ_i) + ℓ`` holds at every budget with the same
per-domain parameters. Written in tokens ``n_i = w_i N`` and with a per-domain amplitude (the
``β_i`` of Theorem 1; without it the law's scale would be tied to the unit of tokens)::

    L(n) = Σ_i A_i ((N0_i + n_i) / s_i)^(-γ_i) + ℓ

``s_i`` is a fixed token scale (domain i's base tokens at the smallest budget), ``N0_i >= 0`` the
"equivalent data" in tokens, ``γ_i in [0, B_MAX]``, ``A_i >= 0``, and one floor ``ℓ`` (per-domain
floors only enter through their sum, so the data cannot tell them apart). Every run at every budget
is a data point: its tokens per domain come from the run table, its value is the objective. The
per-budget DDO fits use 3 points per domain and budget; here all budgets constrain the same
exponents, which is what makes the projection robust to one noisy budget.

The objective is ``mean_loss`` or ``mean_ppl``; ``mean_ppl`` is divided by one constant for all
budgets (the base runs' mean at the smallest budget) so that the budgets stay comparable.

The fit is bounded least squares (``scipy.optimize.least_squares``) from a few deterministic
starts: per domain, the best points of a grid over ``(N0_i, γ_i)`` for the perturbation effects
(each run's difference from its budget's base runs depends on that domain's law only, with the
amplitude in closed form), then amplitudes and floor by bounded linear least squares. (Starts from
each budget's own DDO fit were tried too: on random synthetic laws they never gave a lower SSE and
took ten times as long.) The best SSE wins; near-ties are broken by the parameters, so the answer
never depends on the order of starts, tables or runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import least_squares, lsq_linear
from scipy.stats import chi2

from .._options import build_options
from .._records import Record
from .allocate import Allocation, allocate, kkt_violation, multiplier_bounds
from .allocation_path import project
from .ddo import DDOOptions, DDOResult, fit_ddo, token_caps_array
from .design import DDODesign, read_design, run_objective
from .identify import JointIdentifiability
from .laws import B_MAX, SHIFT_RANGE
from .runs import RunTable
from .vocabulary import GEOMETRIC, JOINT, MEAN_PPL

__all__ = [
    "DomainLaw",
    "JointFit",
    "compare_projections",
    "fit_budget_law",
    "fit_joint",
    "joint_options",
    "per_budget_optima",
    "weight_distance",
]

_GRID_A = np.geomspace(1e-3, 1e3, 31)
_GRID_G = np.concatenate([[0.0], np.geomspace(0.02, 16.0, 30)])
_GRID_STARTS = 3  # best grid points per domain that seed a joint start
_SWEEPS = 3  # backfitting sweeps of the starts for runs of any mixtures
_TIE_RTOL = 1e-9
_MAX_NFEV = 400  # per start: on data far from the law the fit crawls along a flat valley


@dataclass(frozen=True)
class _Data:
    domains: tuple[str, ...]
    budgets: np.ndarray  # (K,) increasing
    scale: np.ndarray  # (m,) token scale s
    u: np.ndarray  # (R, m) tokens / s
    y: np.ndarray  # (R,) objective / normaliser
    budget_of_run: np.ndarray  # (R,) index into budgets
    designs: tuple[DDODesign, ...] | None  # per budget, in run-id order; None: runs of any mixtures
    tables: tuple[RunTable, ...]  # per budget, runs sorted by id
    normalizer: float


def _checked_tables(tables: Sequence[RunTable], base_runs: Sequence[str | None] | None,
                    min_tables: int) -> list[str | None]:
    """The base run of each table (None: found), after checking the tables are ``min_tables`` or more of one
    set of training domains."""
    if isinstance(tables, RunTable) or not isinstance(tables, Sequence):
        raise ValueError("tables must be a sequence of RunTables (one per budget), got "
                         f"{type(tables).__name__}")
    if len(tables) < min_tables:
        raise ValueError(f"a joint fit needs the runs of >= {min_tables} budgets, got {len(tables)} "
                         "table(s); with one budget use fit_budget_law")
    for k, t in enumerate(tables):
        if not isinstance(t, RunTable):
            raise ValueError(f"tables[{k}] must be a RunTable, got {type(t).__name__}")
    bases = [None] * len(tables) if base_runs is None else list(base_runs)
    if len(bases) != len(tables):
        raise ValueError(f"base_runs has {len(bases)} entries for {len(tables)} tables")
    for k, t in enumerate(tables):
        if set(t.train_domains) != set(tables[0].train_domains):
            raise ValueError(f"tables[{k}] has training domains {sorted(t.train_domains)}, "
                             f"tables[0] has {sorted(tables[0].train_domains)}")
    return bases


def _gather(tables: Sequence[RunTable], objective: str,
            val_domains: Sequence[str] | Mapping[str, float] | None,
            base_runs: Sequence[str | None] | None, min_tables: int = 2) -> _Data:
    bases = _checked_tables(tables, base_runs, min_tables)
    domains = tables[0].train_domains
    sorted_tables = [RunTable(sorted(t.runs, key=lambda r: r.run_id)) for t in tables]
    designs: list[DDODesign] | None = []
    for k, (t, b) in enumerate(zip(sorted_tables, bases, strict=True)):
        try:
            designs.append(read_design(t, b))
        except ValueError as exc:
            if b is not None or len(domains) < 2:
                raise ValueError(f"tables[{k}]: {exc}") from None
            designs = None  # not a DDO design: runs of any mixtures
            break
    if designs is not None:
        budgets = np.array([d.budget_tokens for d in designs])
    else:
        budgets = np.array([_any_budget(t, k) for k, t in enumerate(sorted_tables)])
    order = np.argsort(budgets, kind="stable")
    for k0, k1 in zip(order[:-1], order[1:], strict=True):
        if np.isclose(budgets[k0], budgets[k1], rtol=1e-9, atol=0.0):
            raise ValueError(f"tables[{k0}] and tables[{k1}] have the same budget ({budgets[k0]:g} tokens); "
                             "a joint fit needs one table per budget")
    tabs = tuple(sorted_tables[k] for k in order)
    raw = [run_objective(t, objective, val_domains) for t in tabs]
    toks = [t.tokens_matrix()[:, [t.train_domains.index(d) for d in domains]] for t in tabs]
    if designs is not None:
        designs = tuple(designs[k] for k in order)
        norm = float(raw[0][designs[0].base_runs].mean()) if objective == MEAN_PPL else 1.0
        first = designs[0]
        scale = np.array([first.base_tokens[first.domains.index(d)] for d in domains])
    else:
        _check_varied(domains, toks)
        norm = float(raw[0].mean()) if objective == MEAN_PPL else 1.0
        scale = toks[0].mean(axis=0)
        everywhere = np.concatenate(toks).mean(axis=0)
        scale = np.where(scale > 0, scale, everywhere)
    u = np.concatenate(toks) / scale
    return _Data(domains=domains, budgets=budgets[order], scale=scale, u=u, y=np.concatenate(raw) / norm,
                 budget_of_run=np.concatenate([np.full(len(t), k) for k, t in enumerate(tabs)]),
                 designs=designs, tables=tabs, normalizer=norm)


def _any_budget(table: RunTable, k: int) -> float:
    """The budget of a table of runs of any mixtures: the median of the runs' total tokens."""
    tot = table.tokens_matrix().sum(axis=1)
    empty = [r.run_id for r, n in zip(table.runs, tot, strict=True) if not n > 0]
    if empty:
        raise ValueError(f"tables[{k}]: runs {empty} have no training tokens")
    return float(np.median(tot))


def _check_varied(domains: Sequence[str], toks: Sequence[np.ndarray]) -> None:
    """Every domain's share must vary between the runs of at least one budget, and be trained somewhere."""
    for j, d in enumerate(domains):
        if not any(t[:, j].max() > 0 for t in toks):
            raise ValueError(f"domain {d!r} has no tokens in any run: its law cannot be fitted; drop the "
                             "domain")
        shares = [t[:, j] / t.sum(axis=1) for t in toks]
        if all(np.ptp(w) <= 1e-9 for w in shares):
            raise ValueError(
                f"domain {d!r} has the same share ({shares[0][0]:.6g}) in every run of every budget: the "
                "runs do not vary it, so its effect cannot be told apart from the budget's; add runs that "
                "change its share")


def _bounds(data: _Data) -> tuple[np.ndarray, np.ndarray]:
    m = len(data.domains)
    umin, umax = data.u.min(axis=0), data.u.max(axis=0)
    a_lo = np.maximum(0.0, SHIFT_RANGE[0] * umax - umin)  # as for one domain's law (.laws)
    a_hi = SHIFT_RANGE[1] * umax
    lo = np.concatenate([np.zeros(m), a_lo, np.zeros(m), [-np.inf]])
    hi = np.concatenate([np.full(m, np.inf), a_hi, np.full(m, B_MAX), [np.inf]])
    return lo, hi


def _model(p: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Predictions (R,) and Jacobian (R, 3m+1) for p = [A, a, γ, ℓ]."""
    m = u.shape[1]
    amp, a, g = p[:m], p[m:2 * m], p[2 * m:3 * m]
    z = u + a
    logz = np.log(z)
    phi = np.exp(-g * logz)
    jac = np.concatenate([phi, -amp * g * phi / z, -amp * phi * logz, np.ones((u.shape[0], 1))], axis=1)
    return phi @ amp + p[-1], jac


def _linear_part(data: _Data, a: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The full parameter vector with amplitudes (>= 0) and floor solved by linear least squares."""
    phi = np.power(data.u + a, -g)
    design = np.concatenate([phi, np.ones((phi.shape[0], 1))], axis=1)
    m = len(a)
    lin = lsq_linear(design, data.y, bounds=(np.r_[np.zeros(m), -np.inf], np.full(m + 1, np.inf)),
                     method="bvls").x
    return np.concatenate([lin[:m], a, g, lin[m:]])


def _grid_starts_any(data: _Data) -> list[tuple[np.ndarray, np.ndarray]]:
    """Starts for runs of any mixtures, by backfitting: the objective centred per budget is fitted one
    term at a time (each domain's best (a, γ) grid point, amplitude in closed form, given the other
    terms), for a few sweeps; the best grid points of the last sweep and two generic starts seed the fit."""
    m = len(data.domains)
    lo, hi = _bounds(data)
    masks = [data.budget_of_run == k for k in range(len(data.budgets))]

    def centred(v: np.ndarray) -> np.ndarray:
        v = v.copy()
        for mk in masks:
            v[..., mk] -= v[..., mk].mean(axis=-1, keepdims=True)
        return v

    yc = centred(data.y)
    grids = []
    for j in range(m):
        a_grid = np.clip(_GRID_A * max(float(np.mean(data.u[:, j])), 1e-12), lo[m + j], hi[m + j])
        ag, gg = (v.ravel() for v in np.meshgrid(a_grid, _GRID_G, indexing="ij"))
        phi = centred(np.power(data.u[None, :, j] + ag[:, None], -gg[:, None]))
        grids.append((ag, gg, phi, (phi * phi).sum(axis=1)))
    terms = np.zeros((m, yc.size))
    picks = np.zeros((_GRID_STARTS, 2, m))
    for _ in range(_SWEEPS):
        for j, (ag, gg, phi, den) in enumerate(grids):
            target = yc - terms.sum(axis=0) + terms[j]
            amp = np.where(den > 0, np.maximum((phi @ target) / np.where(den > 0, den, 1.0), 0.0), 0.0)
            sse = ((target[None] - amp[:, None] * phi) ** 2).sum(axis=1)
            best = np.argsort(sse, kind="stable")[:_GRID_STARTS]
            terms[j] = amp[best[0]] * phi[best[0]]
            picks[:, 0, j], picks[:, 1, j] = ag[best], gg[best]
    mean_u = np.maximum(data.u.mean(axis=0), 1e-12)
    generic = [(np.clip(mean_u, lo[m:2 * m], hi[m:2 * m]), np.full(m, gam)) for gam in (0.3, 1.0)]
    return [(picks[r, 0], picks[r, 1]) for r in range(_GRID_STARTS)] + generic


def _grid_starts(data: _Data) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per domain, the best (a, γ) grid points for the effects of perturbing that domain alone."""
    if data.designs is None:
        return _grid_starts_any(data)
    m = len(data.domains)
    lo, hi = _bounds(data)
    ybase = {k: float(data.y[data.budget_of_run == k][d.base_runs].mean())
             for k, d in enumerate(data.designs)}
    offsets = np.cumsum([0] + [len(t) for t in data.tables])
    picks = np.zeros((_GRID_STARTS, 2, m))
    for j in range(m):
        rows, ub, dy = [], [], []
        for k, d in enumerate(data.designs):
            jd = d.domains.index(data.domains[j])  # a table may list its domains in another order
            for i in np.flatnonzero(d.domain_of_run == jd):
                rows.append(offsets[k] + i)
                ub.append(d.base_tokens[jd] / data.scale[j])
                dy.append(data.y[offsets[k] + i] - ybase[k])
        a_grid = np.clip(_GRID_A * np.median(data.u[:, j]), lo[m + j], hi[m + j])
        ag, gg = (v.ravel() for v in np.meshgrid(a_grid, _GRID_G, indexing="ij"))
        if not rows:
            picks[:, 0, j], picks[:, 1, j] = np.median(a_grid), 0.5
            continue
        u_run = data.u[np.array(rows), j]
        df = np.power(u_run[None] + ag[:, None], -gg[:, None]) - np.power(np.array(ub)[None] + ag[:, None],
                                                                        -gg[:, None])
        dy_ = np.array(dy)
        den = (df * df).sum(axis=1)
        amp = np.where(den > 0, np.maximum((df @ dy_) / np.where(den > 0, den, 1.0), 0.0), 0.0)
        sse = ((dy_[None] - amp[:, None] * df) ** 2).sum(axis=1)
        best = np.argsort(sse, kind="stable")[:_GRID_STARTS]
        best = np.pad(best, (0, _GRID_STARTS - best.size), mode="edge")
        picks[:, 0, j], picks[:, 1, j] = ag[best], gg[best]
    return [(picks[r, 0], picks[r, 1]) for r in range(_GRID_STARTS)]


def _solve(data: _Data, starts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, int]:
    lo, hi = _bounds(data)
    m = len(data.domains)
    cands = []
    for a, g in starts:
        p0 = _linear_part(data, np.clip(a, lo[m:2 * m], hi[m:2 * m]), np.clip(g, 0.0, B_MAX))
        p0 = np.clip(p0, lo, hi)
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                sol = least_squares(lambda p: _model(p, data.u)[0] - data.y, p0,
                                    jac=lambda p: _model(p, data.u)[1], bounds=(lo, hi), method="trf",
                                    x_scale="jac", ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=_MAX_NFEV)
        except ValueError:  # residuals not finite at this start: the others remain
            continue
        if np.isfinite(sol.cost):
            cands.append((2.0 * float(sol.cost), sol.x))
    if not cands:
        raise ValueError("the joint fit failed from every start (non-finite residuals)")
    best = min(s for s, _ in cands)
    ties = [(s, p) for s, p in cands if s <= best * (1 + _TIE_RTOL) + 1e-300]
    key = min(ties, key=lambda c: tuple(float(f"{v:.8g}") for v in c[1][m:3 * m]))
    return key[1], len(cands)


@dataclass(frozen=True)
class DomainLaw(Record):
    """One domain's term of the joint law, ``amplitude · (tokens / scale_tokens + n0 /
    scale_tokens)^(-gamma)``.

    Attributes:
        n0: "equivalent data" (tokens, >= 0).
        gamma: exponent.
        amplitude: amplitude (objective units at ``scale_tokens``).
        scale_tokens: the token scale ``s_i`` of the term.
    """

    n0: float
    gamma: float
    amplitude: float
    scale_tokens: float


@dataclass(frozen=True)
class JointFit(Record):
    """The joint law over all budgets and its optimum at a target budget.

    Attributes:
        weights, allocation_tokens: the fitted law's exact optimum at ``budget_tokens``.
        budget_tokens: the target budget ``weights`` are optimal for (lets a fit be a scale of
            :func:`~.projection.project`).
        budgets: the budgets fitted (base totals), increasing.
        law: each domain's term, in the domains' order (that of the first table).
        floor: the common floor ``ℓ``.
        objective: ``"mean_loss"`` or ``"mean_ppl"``; ``normalizer``: the constant the objective is divided
            by.
        per_budget: per budget, ``{"budget_tokens", "runs", "sse", "aar"}``.
        sse, aar: over all runs; ``n_points``, ``n_params``: runs and fitted parameters.
        at_bound: per domain, the parameters that ended at a bound (``"gamma=0"``, ``"gamma=max"``,
            ``"n0=min"``, ``"n0=max"``, ``"amplitude=0"``).
        starts: starts that converged.
        bounds_hit: ``{domain: "lower" | "upper"}`` at the optimum.
        status: ``"optimal"`` or ``"degenerate"`` (flat laws absorb budget; not unique).
        kkt_residual: largest relative KKT violation at the optimum (0 = exact).
        min_weight, max_weight, token_caps: the bounds of the optimisation.
        identifiability: the range of the optimum over the fits consistent with the data
            (see :func:`fit_joint`), or None.
        method: which candidate this is: ``"joint"``.
    """

    weights: dict[str, float]
    budget_tokens: float
    allocation_tokens: dict[str, float]
    budgets: tuple[float, ...]
    law: dict[str, DomainLaw]
    floor: float
    objective: str
    normalizer: float
    per_budget: tuple[dict[str, float], ...]
    sse: float
    aar: float
    n_points: int
    n_params: int
    at_bound: dict[str, list[str]]
    starts: int
    bounds_hit: dict[str, str]
    status: str
    kkt_residual: float
    min_weight: float = 0.0
    max_weight: float = 1.0
    token_caps: dict[str, float] | None = None
    identifiability: JointIdentifiability | None = None
    method: str = field(init=False, default=JOINT)

    @property
    def domains(self) -> tuple[str, ...]:
        """Training domains (the order of :attr:`law`)."""
        return tuple(self.law)

    @property
    def n0(self) -> dict[str, float]:
        """Each domain's "equivalent data" (tokens)."""
        return {d: t.n0 for d, t in self.law.items()}

    @property
    def gamma(self) -> dict[str, float]:
        """Each domain's exponent."""
        return {d: t.gamma for d, t in self.law.items()}

    @property
    def amplitude(self) -> dict[str, float]:
        """Each domain's amplitude."""
        return {d: t.amplitude for d, t in self.law.items()}

    def predict(self, tokens: Mapping[str, float]) -> float:
        """The fitted objective for a run with ``tokens`` per domain (``mean_ppl``: divided by
        ``normalizer``)."""
        missing = sorted(set(self.domains) - set(tokens))
        if missing:
            raise ValueError(f"tokens lack domains {missing}")
        amp, a, g, s = _law_arrays(self.law)
        u = np.array([float(tokens[d]) for d in self.domains]) / s
        return float(amp @ np.power(u + a, -g) + self.floor)

    def optimize_at(self, budget_tokens: float) -> dict[str, float]:
        """The law's optimal allocation (tokens) at ``budget_tokens``, with this fit's bounds."""
        sol, _, _, s = _allocation(self.law, budget_tokens, self.min_weight, self.max_weight, self.token_caps)
        return {d: float(v) for d, v in zip(self.domains, sol.x * s, strict=True)}

    def weights_at(self, budget_tokens: float) -> dict[str, float]:
        """The law's optimal weights at ``budget_tokens``."""
        n = float(budget_tokens)
        return {d: v / n for d, v in self.optimize_at(n).items()}

    def path_scales(self, first_budget: float) -> list[tuple[float, dict[str, float]]]:
        """The law's optima at ``first_budget`` and at the target: a :class:`~.plan.MixturePlan`
        built on them (``MixturePlan.from_scales``) runs through both exactly."""
        return [(float(first_budget), self.optimize_at(first_budget)),
                (self.budget_tokens, dict(self.allocation_tokens))]


def _law_arrays(law: Mapping[str, DomainLaw]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(amplitude, n0 / scale, gamma, scale)`` in the domains' order."""
    s = np.array([t.scale_tokens for t in law.values()])
    return (np.array([t.amplitude for t in law.values()]), np.array([t.n0 for t in law.values()]) / s,
            np.array([t.gamma for t in law.values()]), s)


def _allocation(law: Mapping[str, DomainLaw], budget_tokens: float, min_weight: float, max_weight: float,
                token_caps: Mapping[str, float] | None,
                ) -> tuple[Allocation, np.ndarray, np.ndarray, np.ndarray]:
    """The law's optimum at ``budget_tokens`` within the bounds, its multiplier bounds and the token
    scales."""
    amp, a, g, s = _law_arrays(law)
    caps = None if token_caps is None else np.array([token_caps[d] for d in law])
    lo, hi = multiplier_bounds(s, float(budget_tokens), min_weight, max_weight, caps, tuple(law))
    return allocate(amp, a, g, s, float(budget_tokens), lo, hi), lo, hi, s


def _at_bound(p: np.ndarray, lo: np.ndarray, hi: np.ndarray, domains: Sequence[str]) -> dict[str, list[str]]:
    m = len(domains)
    out = {}
    for j, d in enumerate(domains):
        flags = [name for name, hit in (
            ("amplitude=0", p[j] <= 1e-12),
            ("n0=min", p[m + j] <= lo[m + j] * (1 + 1e-6) + 1e-12),
            ("n0=max", p[m + j] >= hi[m + j] * (1 - 1e-6)),
            ("gamma=0", p[2 * m + j] <= 1e-8),
            ("gamma=max", p[2 * m + j] >= B_MAX * (1 - 1e-8)),
        ) if hit]
        if flags:
            out[d] = flags
    return out


def joint_options(options: DDOOptions | None, settings: Mapping[str, Any], *, caller: str) -> DDOOptions:
    """The :class:`~.ddo.DDOOptions` of a joint fit: ``options`` with ``settings`` applied.

    ``level`` is accepted as the older name of ``profile_level``.

    Raises:
        TypeError: an unknown setting, or both ``level`` and ``profile_level``.
        ValueError: from :class:`~.ddo.DDOOptions`.
    """
    if "level" in settings:
        if "profile_level" in settings:
            raise TypeError(f"{caller}() got both level and profile_level (the same setting)")
        settings = {("profile_level" if k == "level" else k): v for k, v in settings.items()}
    return build_options(DDOOptions, options, settings, caller=caller)


def fit_joint(tables: Sequence[RunTable], options: DDOOptions | None = None, *,
              target_tokens: float | None = None,
              base_runs: Sequence[str | None] | None = None,
              objective_weights: Mapping[str, float] | None = None,
              **settings: Any) -> JointFit:
    """Fit one law to the runs of two or more budgets and optimise it at ``target_tokens``.

    The tables may be DDO designs (2m+1, 4m+1, ...) or runs of any mixtures (random, a grid, an
    Olmix or RegMix swarm, a previous sweep). A table that is not a DDO design is read as runs of
    any mixtures: its budget is the median of its runs' total tokens, each domain's token scale is
    its mean tokens at the smallest budget, and every domain's share must vary between the runs of
    at least one budget.

    Args:
        tables: one run table per budget (any order; budgets must differ).
        options: a :class:`~autoscale_data.solver.ddo.DDOOptions`, as for
            :func:`~autoscale_data.solver.ddo.fit_ddo`; its fields may also be given (or overridden)
            as keywords, e.g. ``fit_joint(tables, objective="mean_loss", min_weight=0.01)``. Used here:
            ``objective`` (see the module docstring), ``min_weight``, ``max_weight``, ``token_caps``,
            ``max_epochs`` (bounds of the optimisation), ``val_domains`` (validation domains in the
            objective, default all; a mapping weights them), ``profile_level`` (also as ``level``) and
            ``weight_tol`` (the identifiability statement's profile level and the largest weight
            movement that still counts as identified, see :func:`_identify_joint`); ``law``, ``fit``,
            ``base_run`` and ``budget_tokens`` concern per-budget DDO fits only.
        target_tokens: the budget to optimise at (default: the largest fitted budget).
        base_runs: per table, the id of a base run when its design is ambiguous (or None).
        objective_weights: ``{validation domain: weight}``: the objective is the weighted sum of
            the domains' losses (``mean_loss``) or perplexities (``mean_ppl``) instead of the mean.

    Returns:
        The :class:`JointFit` (with ``identifiability``).

    Raises:
        ValueError: fewer than 2 tables, equal budgets, mismatched domains, a domain whose share no
            run varies, a run without tokens, fewer runs than parameters + 1, bad objective
            weights, bounds or target.
    """
    o = joint_options(options, settings, caller="fit_joint")
    data = _gather(tables, o.objective, _objective_columns(o.val_domains, objective_weights), base_runs)
    return _fit(data, target_tokens, o)


def fit_budget_law(table: RunTable, options: DDOOptions | None = None, *,
                   objective_weights: Mapping[str, float] | None = None, **settings: Any) -> JointFit:
    """The same law fitted to the runs of one budget (any mixtures) and optimised at that budget.

    The per-budget counterpart of :func:`fit_joint` for tables that are not DDO designs (the
    geometric projection runs through such per-budget optima). Arguments as for :func:`fit_joint`.

    Raises:
        ValueError: as for :func:`fit_joint` (one table; its runs must vary every domain's share).
    """
    o = joint_options(options, settings, caller="fit_budget_law")
    if not isinstance(table, RunTable):
        raise ValueError(f"table must be a RunTable, got {type(table).__name__}")
    data = _gather([table], o.objective, _objective_columns(o.val_domains, objective_weights), None,
                   min_tables=1)
    return _fit(data, None, o)


def per_budget_optima(tables: Sequence[RunTable], options: DDOOptions | None = None,
                      **settings: Any) -> list[DDOResult | JointFit]:
    """Each table's optimum at its own budget, smallest budget first: DDO for a DDO design, the
    per-budget law (:func:`fit_budget_law`) for runs of any mixtures. The geometric projection
    (:func:`~.projection.project`) runs through them.

    Args:
        tables: one run table per budget.
        options: a :class:`~autoscale_data.solver.ddo.DDOOptions` (or its fields as keywords), as for
            :func:`~autoscale_data.solver.ddo.fit_ddo`; ``val_domains`` may be a mapping for a
            weighted objective.

    Raises:
        ValueError: as for :func:`~.ddo.fit_ddo` and :func:`fit_budget_law`.
    """
    o = joint_options(options, settings, caller="per_budget_optima")
    out: list[DDOResult | JointFit] = []
    for k, t in enumerate(tables):
        try:
            read_design(t)
        except ValueError:
            try:
                out.append(fit_budget_law(t, o))
            except ValueError as exc:
                raise ValueError(f"tables[{k}] (runs of any mixtures): {exc}") from None
        else:
            out.append(fit_ddo(t, o))
    return sorted(out, key=lambda r: r.budget_tokens)


def _objective_columns(val_domains: Sequence[str] | None,
                       objective_weights: Mapping[str, float] | None) -> Sequence[str] | Mapping[str, float] | None:
    if objective_weights is None:
        return val_domains
    if val_domains is not None:
        raise ValueError("give val_domains or objective_weights, not both")
    if not isinstance(objective_weights, Mapping) or not objective_weights:
        raise ValueError("objective_weights must be a non-empty mapping domain -> weight, got "
                         f"{objective_weights!r}")
    return dict(objective_weights)


def _check_fit(data: _Data, target_tokens: float | None, n_params: int) -> float:
    """The target (the largest budget by default), once the runs are more than the law's parameters."""
    if data.y.size <= n_params:
        raise ValueError(f"a fit of the law for {len(data.domains)} domains has {n_params} parameters and "
                         f"needs more runs, got {data.y.size}")
    target = float(data.budgets[-1]) if target_tokens is None else target_tokens
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not (np.isfinite(target)
                                                                                and target > 0):
        raise ValueError(f"target_tokens must be a positive number of tokens, got {target_tokens!r}")
    return target


def _fit(data: _Data, target_tokens: float | None, o: DDOOptions) -> JointFit:
    m = len(data.domains)
    n_params = 3 * m + 1
    target = _check_fit(data, target_tokens, n_params)
    caps = token_caps_array(data.domains, o.token_caps, o.max_epochs)
    # fail early on bad bounds
    multiplier_bounds(data.scale, float(target), o.min_weight, o.max_weight, caps, data.domains)
    p, n_ok = _solve(data, _grid_starts(data))
    lo, hi = _bounds(data)
    pred = _model(p, data.u)[0]
    res = data.y - pred
    rel = np.abs(res) / np.maximum(np.abs(data.y), 1e-300)
    per_budget = tuple({"budget_tokens": float(n), "runs": int(np.sum(data.budget_of_run == k)),
                        "sse": float(np.sum(res[data.budget_of_run == k] ** 2)),
                        "aar": float(rel[data.budget_of_run == k].mean())}
                       for k, n in enumerate(data.budgets))
    s = data.scale
    law = {d: DomainLaw(n0=float(p[m + j] * s[j]), gamma=float(p[2 * m + j]), amplitude=float(p[j]),
                        scale_tokens=float(s[j])) for j, d in enumerate(data.domains)}
    token_caps = None if caps is None else {d: float(c) for d, c in zip(data.domains, caps, strict=True)}
    bounds = (float(o.min_weight), float(o.max_weight), token_caps)
    sol, lo_x, hi_x, _ = _allocation(law, target, *bounds)
    amp, a, g, _ = _law_arrays(law)
    ident = _identify_joint(data, p, lo_x, hi_x, target=float(target), level=o.profile_level,
                            weight_tol=o.weight_tol)
    per_budget_ranges = {}
    for n in data.budgets:  # the same statement at each fitted budget (for the robust projection)
        _, lo_n, hi_n, _ = _allocation(law, float(n), *bounds)
        at_n = _identify_joint(data, p, lo_n, hi_n, level=o.profile_level, weight_tol=o.weight_tol,
                               target=float(n))
        per_budget_ranges[f"{float(n):.17g}"] = at_n.weight_range
    alloc = sol.x * s
    return JointFit(
        weights={d: float(v / target) for d, v in zip(data.domains, alloc, strict=True)},
        budget_tokens=float(target),
        allocation_tokens={d: float(v) for d, v in zip(data.domains, alloc, strict=True)},
        budgets=tuple(float(n) for n in data.budgets), law=law, floor=float(p[-1]), objective=o.objective,
        normalizer=data.normalizer, per_budget=per_budget, sse=float(np.sum(res ** 2)), aar=float(rel.mean()),
        n_points=int(data.y.size), n_params=n_params, at_bound=_at_bound(p, lo, hi, data.domains),
        starts=n_ok,
        bounds_hit={d: ("lower" if sol.at_lower[j] else "upper") for j, d in enumerate(data.domains)
                    if sol.at_lower[j] or sol.at_upper[j]},
        status="degenerate" if bool(sol.degenerate) else "optimal",
        kkt_residual=kkt_violation(amp, a, g, s, sol.x, lo_x, hi_x),
        min_weight=bounds[0], max_weight=bounds[1], token_caps=token_caps,
        identifiability=replace(ident, per_budget=per_budget_ranges),
    )


def _pure_error(data: _Data) -> tuple[float, int]:
    """Sum of squares and degrees of freedom of runs repeated at the same tokens and budget (seeds)."""
    keys = [(int(k), *np.round(np.log(np.maximum(row, 1e-300)) * 1e6).astype(np.int64).tolist())
            for k, row in zip(data.budget_of_run, data.u, strict=True)]
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    ss, dof = 0.0, 0
    for idx in groups.values():
        if len(idx) > 1:
            v = data.y[idx]
            ss += float(((v - v.mean()) ** 2).sum())
            dof += len(idx) - 1
    return ss, dof


def _noise_variance(data: _Data, res: np.ndarray, n_par: int) -> tuple[float, str]:
    """``s²`` of :func:`_identify_joint` and its source: the replicates' pure error, else the residual's."""
    n_pts = data.y.size
    ss_pe, dof_pe = _pure_error(data)
    if dof_pe > 0:
        s2, source = ss_pe / dof_pe, "replicates"
    elif n_pts > n_par:
        s2, source = float(res @ res) / (n_pts - n_par), "residual"
    else:
        s2, source = 0.0, "none"
    return max(s2, 1e-12 * float(data.y @ data.y) / n_pts), source


def _consistent_fits(ps: np.ndarray, grad: np.ndarray, inv: np.ndarray, null: np.ndarray,
                     radius: float) -> list[np.ndarray]:
    """The (scaled) parameters ``ps``, the two fits at ``radius`` that move each weight most (``grad``: the
    weights' gradients, ``inv``: the pseudo-inverse of JᵀJ) and ``ps`` moved by its size along each ``null``
    direction."""
    cands = [ps]
    for g in grad:
        cg = inv @ g
        var = float(g @ cg)
        if var > 0:
            step = radius * cg / np.sqrt(var)
            cands += [ps + step, ps - step]
    size = max(float(np.linalg.norm(ps)), 1e-12)
    for v in null:
        cands += [ps + size * v, ps - size * v]
    return cands


def _identify_joint(data: _Data, p: np.ndarray, lo_x: np.ndarray, hi_x: np.ndarray, *, target: float,
                   level: float = 0.95, weight_tol: float = 0.01) -> JointIdentifiability:
    """Range of the law's optimum over the fits consistent with the runs (any design).

    The consistent fits are those whose SSE stays within ``s² · χ²₁(level)`` of the best one (``s²``:
    pure error of repeated runs when there are some, else ``SSE / (runs - parameters)``), in the
    linearised (Gauss-Newton) form: for each domain the two fits of that region that move its optimal
    weight most are found from the weight's gradient, and every parameter combination the runs do not
    determine (a null direction of the Jacobian) is moved by the parameters' own size. The optimum is
    then computed exactly at each of those fits (at ``target``);
    ``weight_range`` is the span per domain. Identified:
    spare points, no undetermined direction, and no weight moves by more than ``weight_tol``.
    """
    m = len(data.domains)
    lo, hi = _bounds(data)
    pred, jac = _model(p, data.u)
    res = data.y - pred
    n_pts, n_par = jac.shape
    s2, source = _noise_variance(data, res, n_par)
    d = np.sqrt((jac * jac).sum(axis=0))
    d = np.where(d > 0, d, 1.0)
    js = jac / d
    ev, vec = np.linalg.eigh(js.T @ js)
    null = ev <= 1e-10 * max(float(ev.max()), 1e-300)
    inv = (vec[:, ~null] / ev[~null]) @ vec[:, ~null].T
    ps = p * d
    s = data.scale

    def weights_of(params_s: np.ndarray) -> np.ndarray:
        q = np.clip(params_s / d, lo, hi)
        sol = allocate(q[:, :m], q[:, m:2 * m], q[:, 2 * m:3 * m], s, target, lo_x, hi_x)
        return sol.x * s / target

    h = 1e-6 * np.maximum(np.abs(ps), 1e-3 * max(float(np.abs(ps).max()), 1e-12))
    fd = np.concatenate([ps[None] + np.diag(h), ps[None] - np.diag(h)])
    wfd = weights_of(fd)
    grad = ((wfd[:n_par] - wfd[n_par:]) / (2 * h[:, None])).T  # (m, P) in scaled coordinates
    cands = _consistent_fits(ps, grad, inv, vec[:, null].T, np.sqrt(s2 * float(chi2.ppf(level, 1))))
    w = weights_of(np.array(cands))
    wlo, whi = w.min(axis=0), w.max(axis=0)
    spread = float(np.max(whi - wlo))
    n_null = int(null.sum())
    return JointIdentifiability(
        identified=bool(n_pts > n_par and n_null == 0 and spread <= weight_tol),
        weight_range={dm: (float(a), float(b)) for dm, a, b in zip(data.domains, wlo, whi, strict=True)},
        spread=spread, undetermined_directions=n_null, points=int(n_pts), parameters=int(n_par),
        noise_variance=float(s2), noise_source=source, level=float(level), weight_tol=float(weight_tol),
        fits_evaluated=len(cands))


def weight_distance(weights: Mapping[str, float], reference: Mapping[str, float]) -> dict[str, float]:
    """``{"l1", "total_variation", "max_abs"}`` distances between two mixes over the same domains.

    Raises:
        ValueError: the domains differ.
    """
    if set(weights) != set(reference):
        raise ValueError(f"domains differ: {sorted(weights)} vs {sorted(reference)}")
    diff = np.array([float(weights[d]) - float(reference[d]) for d in reference])
    l1 = float(np.abs(diff).sum())
    return {"l1": l1, "total_variation": 0.5 * l1, "max_abs": float(np.abs(diff).max())}


def compare_projections(tables: Sequence[RunTable], target_tokens: float, options: DDOOptions | None = None,
                        *,
                        heldout: RunTable | DDOResult | None = None, ddo: Sequence[DDOResult] | None = None,
                        **settings: Any) -> dict[str, Any]:
    """The geometric (Theorem-1 path through the DDO optima) and the joint projection at a target.

    Args:
        tables: the DDO runs, one table per budget (two or more).
        options: a :class:`~autoscale_data.solver.ddo.DDOOptions` (or its fields as keywords) for the
            per-budget DDO fits and the joint fit, as in :func:`~autoscale_data.solver.ddo.fit_ddo`
            (``law`` for the per-budget fits only).
        heldout: the runs (or the DDO result) at a further budget that neither projection sees;
            each projection's error against DDO there is reported.
        ddo: the DDO results of ``tables`` when already fitted (else fitted with the options).

    Returns:
        ``{"target_tokens", "geometric": {"weights", "warnings"}, "joint": JointFit.to_json()}``, plus
        ``"heldout": {"budget_tokens", "ddo_weights", "geometric": {...}, "joint": {...}}`` with
        each method's weights at the held-out budget and their :func:`weight_distance` to DDO there.

    Raises:
        ValueError: as for :func:`fit_joint` and :func:`~autoscale_data.solver.allocation_path.project`.
    """
    o = joint_options(options, settings, caller="compare_projections")
    if ddo is None:
        ddo = [fit_ddo(t, o) for t in tables]
    elif len(ddo) != len(tables):
        raise ValueError(f"ddo has {len(ddo)} results for {len(tables)} tables")
    scales = sorted(ddo, key=lambda r: r.budget_tokens)
    geo = project(scales, target_tokens, token_caps=o.token_caps, max_epochs=o.max_epochs)
    joint = fit_joint(tables, o, target_tokens=target_tokens)
    out: dict[str, Any] = {"target_tokens": float(target_tokens), "budgets": list(joint.budgets),
                           GEOMETRIC: {"weights": dict(geo.weights), "warnings": list(geo.warnings)},
                           JOINT: joint.to_json()}
    if heldout is not None:
        ref = heldout if isinstance(heldout, DDOResult) else fit_ddo(heldout, o)
        n3 = ref.budget_tokens
        g3 = project(scales, n3, token_caps=o.token_caps, max_epochs=o.max_epochs).weights
        j3 = joint.weights_at(n3)
        out["heldout"] = {"budget_tokens": n3, "ddo_weights": dict(ref.weights),
                          GEOMETRIC: {"weights": dict(g3), **weight_distance(g3, ref.weights)},
                          JOINT: {"weights": j3, **weight_distance(j3, ref.weights)}}
    return out

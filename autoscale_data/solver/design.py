"""The DDO experimental design: planning the 2m+1 perturbed runs and reading them back.

A DDO design has one *base* allocation and, for each training domain j, runs that change only
domain j's tokens (the other domains keep their base tokens, so the run total changes). Runs at the
same allocation (different seeds) are replicates: all of them are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .runs import RunTable
from .vocabulary import MEAN_PPL, OBJECTIVES, check_name

__all__ = ["DDODesign", "ddo_runs_plan", "objective_weight", "read_design", "run_objective"]

_RTOL = 1e-6


def ddo_runs_plan(base_tokens: Mapping[str, float],
                  multipliers: Sequence[float] = (3.0, 1 / 3)) -> list[dict[str, float]]:
    """The allocations of a DDO design: the base, then each domain times each multiplier.

    Args:
        base_tokens: tokens per domain of the base run (all > 0).
        multipliers: factors applied to one domain at a time (none may be 1 or <= 0).

    Returns:
        ``1 + m·len(multipliers)`` dicts ``{domain: tokens}``; entry 0 is the base.

    Raises:
        ValueError: empty/non-positive base tokens, bad multipliers.
    """
    if not base_tokens:
        raise ValueError("base_tokens is empty")
    base = {}
    for d, v in base_tokens.items():
        v = float(v)
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"base_tokens[{d!r}] must be > 0, got {v}")
        base[str(d)] = v
    mults = [float(r) for r in multipliers]
    if not mults:
        raise ValueError("multipliers is empty")
    for r in mults:
        if not (np.isfinite(r) and r > 0) or abs(r - 1.0) < 1e-12:
            raise ValueError(f"multipliers must be > 0 and != 1, got {r}")
    if len(set(mults)) != len(mults):
        raise ValueError(f"multipliers must be distinct, got {mults}")
    return [dict(base)] + [{**base, d: base[d] * r} for d in base for r in mults]


def run_objective(table: RunTable, objective: str,
                  val_domains: Sequence[str] | Mapping[str, float] | None = None) -> np.ndarray:
    """Per-run raw objective: mean over validation domains of exp(loss) (``mean_ppl``) or of loss.

    ``val_domains`` may be a mapping ``{domain: weight}``: the objective is then the weighted sum
    ``Σ_d weight_d · f(loss_d)`` (``f`` = exp or identity; weights used as given, not normalised), as
    the Data Mixing Laws and RegMix papers define their targets.
    The ``mean_ppl`` value is later divided by the base runs' mean (see :class:`DDODesign`).

    Raises:
        ValueError: unknown objective, unknown or no validation domains, negative / non-finite
            weights or weights that are all zero.
    """
    check_name("objective", objective, OBJECTIVES)
    weighted = isinstance(val_domains, Mapping)
    cols = list(table.val_domains) if val_domains is None else list(val_domains)
    missing = [d for d in cols if d not in table.val_domains]
    if missing or not cols:
        raise ValueError(f"validation domains {missing or cols} not in the runs ({list(table.val_domains)})")
    idx = [table.val_domains.index(d) for d in cols]
    loss = table.loss_matrix()[:, idx]
    vals = np.exp(loss) if objective == MEAN_PPL else loss
    if not weighted:
        return vals.mean(axis=1)
    wts = np.array([objective_weight(d, val_domains[d]) for d in cols])
    if not wts.sum() > 0:
        raise ValueError(f"objective weights are all zero: {dict(val_domains)}")
    return vals @ wts


def objective_weight(domain: str, value: object) -> float:
    """One objective weight, validated (finite, >= 0)."""
    try:
        w = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"objective weight of {domain!r} must be a number, got {value!r}") from None
    if not (np.isfinite(w) and w >= 0):
        raise ValueError(f"objective weight of {domain!r} must be finite and >= 0, got {value!r}")
    return w


@dataclass(frozen=True)
class DDODesign:
    """Runs of one DDO design, resolved.

    Attributes:
        domains: training domains, in table order.
        base_tokens: base allocation, shape ``(m,)``.
        base_runs: indices (into the table) of the runs at the base allocation.
        point_of_run: design-point id per run (runs sharing an allocation share it).
        domain_of_run: perturbed domain index per run, -1 for base runs.
        multiplier: multiplier of the perturbed domain per run (1 for base runs).
        run_ids: run ids in table order.
    """

    domains: tuple[str, ...]
    base_tokens: np.ndarray
    base_runs: np.ndarray
    point_of_run: np.ndarray
    domain_of_run: np.ndarray
    multiplier: np.ndarray
    run_ids: tuple[str, ...]

    @property
    def budget_tokens(self) -> float:
        """Total tokens of the base allocation: the budget of the DDO result."""
        return float(self.base_tokens.sum())

    def domain_points(self, j: int) -> np.ndarray:
        """Indices of the runs fitted for domain ``j`` (base runs and runs perturbing ``j``), in a
        canonical order (by run id) so that fits do not depend on the order of the table."""
        idx = np.concatenate([self.base_runs, np.flatnonzero(self.domain_of_run == j)])
        return idx[np.argsort([self.run_ids[i] for i in idx], kind="stable")]


def _same(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.isclose(u, v, rtol=_RTOL, atol=0.0)


def _base_point(pts: np.ndarray, point_of_run: np.ndarray, ids: tuple[str, ...], base_run: str | None) -> int:
    """The allocation of ``base_run``, else the one allocation that differs from every other in one domain at
    most."""
    if base_run is not None:
        if base_run not in ids:
            raise ValueError(f"base_run {base_run!r} is not a run id")
        return int(point_of_run[ids.index(base_run)])
    ndiff = (~_same(pts[:, None, :], pts[None, :, :])).sum(axis=2)
    cands = [p for p in range(len(pts)) if np.all(ndiff[p] <= 1)]
    if not cands:
        raise ValueError("no base run: no allocation differs from every other one in a single domain "
                         f"({len(pts)} distinct allocations among runs {list(ids)})")
    if len(cands) > 1:
        names = [[ids[i] for i in np.flatnonzero(point_of_run == p)] for p in cands]
        raise ValueError(f"several candidate base allocations (runs {names}); pass base_run=")
    return cands[0]


def read_design(table: RunTable, base_run: str | None = None) -> DDODesign:
    """Group runs into allocations, find the base and each run's perturbed domain.

    The base is the allocation from which every other allocation differs in exactly one domain.

    Args:
        base_run: id of a run at the base allocation, when the design is ambiguous.

    Raises:
        ValueError: fewer than 2 domains; no base (or several) can be identified; a run differs
            from the base in more than one domain; a base domain has zero tokens.
    """
    domains = table.train_domains
    if len(domains) < 2:
        raise ValueError(f"DDO needs at least 2 training domains, got {list(domains)}")
    tok = table.tokens_matrix()
    ids = tuple(r.run_id for r in table.runs)
    same_run = _same(tok[:, None, :], tok[None, :, :]).all(axis=2)
    first = np.argmax(same_run, axis=1)  # first run at the same allocation
    reps, point_of_run = np.unique(first, return_inverse=True)
    pts = tok[reps]
    base_p = _base_point(pts, point_of_run, ids, base_run)
    base = pts[base_p]
    zero = [domains[j] for j in np.flatnonzero(base <= 0)]
    if zero:
        raise ValueError(f"base run has zero tokens for {zero}; multipliers are undefined")
    dom = np.full(len(ids), -1, dtype=np.int64)
    mult = np.ones(len(ids))
    for i, row in enumerate(tok):
        diff = np.flatnonzero(~_same(row, base))
        if diff.size > 1:
            raise ValueError(f"run {ids[i]!r} differs from the base run in {[domains[j] for j in diff]}; "
                             "DDO runs change one domain's tokens at a time")
        if diff.size == 1:
            j = int(diff[0])
            # rounded so that a change of token unit cannot move a multiplier by an ulp
            dom[i], mult[i] = j, float(f"{row[j] / base[j]:.12g}")
    return DDODesign(
        domains=domains, base_tokens=base.copy(), base_runs=np.flatnonzero(point_of_run == base_p),
        point_of_run=point_of_run, domain_of_run=dom, multiplier=mult, run_ids=ids,
    )

"""How much better one mix is predicted to be than another at a target, and how sure the fit is of it.

With runs at two budgets nothing is left to backtest a projection on, so the evidence for following it
must come from the fit itself. The law fitted jointly to the runs of both budgets
(:func:`~.joint.fit_joint`, ``L(n) = Σ_i A_i (n_i / s_i + a_i)^-γ_i + ℓ``) predicts the objective of any
allocation at the target; the predicted gain of a candidate over the observed mix is

    g = L(observed) - L(candidate)        (> 0: the candidate is predicted better)

and its standard deviation follows from the fit by the delta method: with ``J`` the Jacobian of the
fitted values over the free parameters (those not at a bound) and ``σ² = SSE / (n - p)`` the
residual variance, ``Var g = σ² ∇gᵀ (JᵀJ)⁻¹ ∇g``. Directions the runs do not determine (singular values
of the column-scaled ``J`` below ``1e-10`` of the largest) make the variance infinite when ``∇g`` has
a component along them: a gain that rests on what the runs cannot tell is not evidence. ``σ`` is also
the noise of one run as the law sees it (misfit included: an upper bound of the seed noise).

The delta method assumes the law is right, and on published two-checkpoint windows it is not: the
predicted gains were 3-10 times the real differences and a rule on ``g > 2 sd`` alone lost beyond
noise at 30 of 1,278 windows (docs/solver.md). Whether the law is right can only be judged against
the runs' own noise, which needs replicates (runs of one allocation with other seeds, e.g. the base
run twice at each budget): their pure error ``SS_pe`` on ``ν_pe`` degrees of freedom gives the noise
of one run, ``replicate_sd = sqrt(SS_pe / ν_pe)``, to hold the law's residual ``σ`` against (and the
lack-of-fit test ``F = ((SSE - SS_pe) / (n - p - ν_pe)) / (SS_pe / ν_pe)``, whose p-value is reported:
the joint fit's optimiser rarely reaches the pure-error level exactly, so the rule in :mod:`.select`
reads the ratio ``σ / replicate_sd``, not the test).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import f as f_dist

from .._records import Record, fields_from_json, fields_to_json, omitted, transient
from .ddo import DDOOptions
from .joint import JointFit, _gather, _law_arrays, _model, _pure_error
from .runs import RunTable

__all__ = ["GainEstimate", "GainLaw", "predicted_gain", "predicted_gains", "predicted_values"]

# a singular value below this fraction of the largest is a direction the runs do not fix
_SINGULAR_RTOL = 1e-10
# a gradient component along such a direction above this (relative) makes the variance infinite
_NULL_ATOL = 1e-8


@dataclass(frozen=True)
class GainEstimate(Record):
    """The joint law's predicted gain of a candidate over a reference mix at one budget.

    A record (``Selection.predicted``): its JSON holds ``gain``, ``sd``, ``z`` and ``noise`` with ``null``
    where not finite (JSON has no infinity: ``sd`` null is a gain the runs do not determine), ``determined``,
    the replicates' and the law's numbers, and ``trust`` where the trust checks flag the projection; files of
    the first two-budget rule hold only the first five.

    Attributes:
        gain: ``L(reference) - L(candidate)`` in objective units (> 0: the candidate is predicted better).
        sd: the standard deviation of ``gain`` from the fit (``inf``: the runs do not determine it).
        z: ``gain / sd``: 0 when ``sd`` is infinite or the gain is not finite, ``±inf`` when ``sd`` is 0.
        noise: the standard deviation of one run: the replicates' pure error where there are
            replicates, else the residual under the law (objective units).
        determined: whether ``sd`` is finite.
        free_parameters: parameters of the law not at a bound; points: runs fitted (in memory only).
        replicate_dof: degrees of freedom of the replicates' pure error (0: no replicates).
        replicate_sd: the replicates' standard deviation (None: no replicates); residual_sd: the law's ``σ``.
        lack_of_fit_p: p-value of the lack-of-fit test against the replicates (None: none to test against).
        trust: why the trust checks flag the projection (two budgets; empty: they do not).
    """

    gain: float
    sd: float
    z: float = field(init=False, default=0.0)
    noise: float
    determined: bool = field(init=False, default=False)
    free_parameters: int = transient(default=0)
    points: int = transient(default=0)
    replicate_dof: int = 0
    replicate_sd: float | None = None
    residual_sd: float | None = None
    lack_of_fit_p: float | None = None
    trust: str = omitted(default="")

    def __post_init__(self) -> None:
        finite = np.isfinite(self.sd) and np.isfinite(self.gain)
        z = 0.0 if not finite else self.gain / self.sd if self.sd > 0 else \
            float(np.sign(self.gain)) * float("inf") if self.gain else 0.0
        object.__setattr__(self, "z", float(z))
        object.__setattr__(self, "determined", bool(np.isfinite(self.sd)))

    def to_json(self) -> dict[str, Any]:
        """The codec's object with ``gain``, ``sd``, ``z`` and ``noise`` null where not finite."""
        nullable = ("gain", "sd", "z", "noise")
        return {k: None if k in nullable and not np.isfinite(v) else v
                for k, v in fields_to_json(self).items()}

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> GainEstimate:
        """Read :meth:`to_json`'s object: a null ``sd`` is infinite, a null ``gain`` or ``noise`` not a
        number."""
        if not isinstance(data, Mapping) or "gain" not in data:
            raise ValueError(f"key {path + '.gain' if path else 'gain'!r} is missing")
        missing = {"gain": float("nan"), "sd": float("inf"), "noise": float("nan")}
        return cls(**fields_from_json(cls, {**data, **{k: v for k, v in missing.items()
                                                       if data.get(k) is None}}, path))


def _free(fit: JointFit, m: int) -> np.ndarray:
    """Mask of the law's parameters ``[A, a, γ, ℓ]`` not at a bound."""
    free = np.ones(3 * m + 1, dtype=bool)
    for j, d in enumerate(fit.domains):
        flags = fit.at_bound.get(d, [])
        free[j] &= "amplitude=0" not in flags
        free[m + j] &= not ({"n0=min", "n0=max"} & set(flags))
        free[2 * m + j] &= not ({"gamma=0", "gamma=max"} & set(flags))
    return free


@dataclass
class GainLaw:
    """What every gain under one joint fit shares: the runs' noise, the free parameters, the Jacobian and its
    SVD."""

    fit: JointFit
    p: np.ndarray
    s: np.ndarray
    free: np.ndarray
    jac: np.ndarray
    residual: float  # the law's σ
    noise: float  # of one run: σ, or the replicates' sd where larger
    replicate: float | None
    dof_pe: int
    lack_of_fit_p: float | None

    @classmethod
    def of(cls, fit: JointFit, tables: Sequence[RunTable], options: DDOOptions | None) -> GainLaw:
        o = options or DDOOptions()
        data = _gather(tables, o.objective, o.val_domains, None)
        if data.domains != fit.domains or data.y.size != fit.n_points:
            raise ValueError(f"the tables ({data.y.size} runs of {data.domains}) are not those of the joint "
                             f"fit ({fit.n_points} runs of {fit.domains})")
        amp, a, g, s = _law_arrays(fit.law)
        p = np.concatenate([amp, a, g, [fit.floor]])
        free = _free(fit, len(fit.domains))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a wild law: inf, judged below
            jac = _model(p, data.u)[1][:, free]
        dof = data.y.size - int(free.sum())
        residual = float(np.sqrt(fit.sse / dof)) if dof > 0 else float("inf")
        ss_pe, dof_pe = _pure_error(data)
        lof_p, noise = None, residual
        replicate = float(np.sqrt(ss_pe / dof_pe)) if dof_pe > 0 else None
        if dof_pe > 0 and dof > dof_pe:
            lof_ss, lof_dof = max(fit.sse - ss_pe, 0.0), dof - dof_pe
            if ss_pe > 0:
                lof_p = float(f_dist.sf((lof_ss / lof_dof) / (ss_pe / dof_pe), lof_dof, dof_pe))
            else:  # replicates that agree exactly: the law must fit exactly too
                lof_p = 1.0 if lof_ss <= 1e-12 * max(float(np.sum(data.y ** 2)), 1e-300) else 0.0
            noise = max(noise, replicate)
        return cls(fit, p, s, free, jac, residual, noise, replicate, dof_pe, lof_p)

    @functools.cached_property
    def svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The column scales of the Jacobian and the SVD (singular values, right vectors) of the scaled
        one."""
        scale = np.linalg.norm(self.jac, axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        _, sv, vt = np.linalg.svd(self.jac / scale, full_matrices=False)
        return scale, sv, vt

    def sd(self, gain: float, grad: np.ndarray) -> float:
        """The delta method's sd of a gain with gradient ``grad`` (module doc); inf where the runs do not fix
        it."""
        if not (np.isfinite(self.residual) and np.isfinite(gain) and np.all(np.isfinite(self.jac))
                and np.all(np.isfinite(grad))):
            return float("inf")
        scale, sv, vt = self.svd
        proj = vt @ (grad / scale)
        null = sv < _SINGULAR_RTOL * sv.max() if sv.size else np.zeros(0, dtype=bool)
        if np.any(np.abs(proj[null]) > _NULL_ATOL * max(float(np.linalg.norm(grad / scale)), 1e-300)):
            return float("inf")
        with np.errstate(over="ignore"):
            return float(self.residual * np.sqrt(np.sum((proj[~null] / sv[~null]) ** 2)))

    def covariance(self, grads: np.ndarray) -> np.ndarray | None:
        """``σ² G (JᵀJ)⁻¹ Gᵀ`` for the rows of ``grads`` (gradients over the free parameters): the delta
        method's covariance of the law's values there; None where a row has a component along a direction the
        runs do not determine (module doc)."""
        if not (np.isfinite(self.residual) and np.all(np.isfinite(self.jac)) and np.all(np.isfinite(grads))):
            return None
        scale, sv, vt = self.svd
        proj = (grads / scale) @ vt.T
        null = sv < _SINGULAR_RTOL * sv.max() if sv.size else np.zeros(0, dtype=bool)
        size = np.maximum(np.linalg.norm(grads / scale, axis=1, keepdims=True), 1e-300)
        if np.any(np.abs(proj[:, null]) > _NULL_ATOL * size):
            return None
        a = proj[:, ~null] / sv[~null]
        return self.residual ** 2 * (a @ a.T)

    def gain(self, reference: Mapping[str, float], candidate: Mapping[str, float]) -> GainEstimate:
        fit, norm = self.fit, self.fit.normalizer
        for name, alloc in (("reference", reference), ("candidate", candidate)):
            missing = sorted(set(fit.domains) - set(alloc))
            if missing:
                raise ValueError(f"the {name} allocation lacks domains {missing}")
        u = np.array([[float(alloc[d]) for d in fit.domains] for alloc in (reference, candidate)]) / self.s
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            values, grads = _model(self.p, u)
        gain = float(values[0] - values[1])
        sd = self.sd(gain, (grads[0] - grads[1])[self.free])
        return GainEstimate(gain=gain * norm, sd=sd * norm, noise=self.noise * norm,
                            free_parameters=int(self.free.sum()), points=int(fit.n_points),
                            replicate_dof=int(self.dof_pe),
                            replicate_sd=None if self.replicate is None else self.replicate * norm,
                            residual_sd=self.residual * norm, lack_of_fit_p=self.lack_of_fit_p)


def predicted_gain(fit: JointFit, tables: Sequence[RunTable], reference: Mapping[str, float],
                   candidate: Mapping[str, float], options: DDOOptions | None = None) -> GainEstimate:
    """The predicted gain of ``candidate`` over ``reference`` (token allocations) under ``fit`` (module doc).

    Args:
        fit: the joint law fitted to ``tables`` (:func:`~.joint.fit_joint`).
        tables: the runs it was fitted to (to rebuild the Jacobian), with the same ``options``.
        reference, candidate: ``{domain: tokens}`` at the target budget.
        options: the :class:`~.ddo.DDOOptions` of the fit (objective and validation domains).

    Raises:
        ValueError: an allocation lacks a domain of the fit, or the tables are not the fit's.
    """
    return GainLaw.of(fit, tables, options).gain(reference, candidate)


def predicted_values(fit: JointFit, tables: Sequence[RunTable], tokens: np.ndarray,
                     options: DDOOptions | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """The law's objective for runs with ``tokens`` (rows in ``fit.domains`` order) and the delta method's
    covariance of those values over the fit to ``tables`` (objective units; None where they rest on what the
    runs do not determine).

    Raises:
        ValueError: the tables are not the fit's, or ``tokens`` has not one column per domain.
    """
    law = GainLaw.of(fit, tables, options)
    tokens = np.atleast_2d(np.asarray(tokens, dtype=np.float64))
    if tokens.shape[1] != len(fit.domains):
        raise ValueError(f"tokens needs {len(fit.domains)} columns ({fit.domains}), got {tokens.shape[1]}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        values, grads = _model(law.p, tokens / law.s)
    cov = law.covariance(grads[:, law.free])
    norm = fit.normalizer
    return values * norm, None if cov is None else cov * norm ** 2


def predicted_gains(fit: JointFit, tables: Sequence[RunTable], reference: Mapping[str, float],
                    candidates: Mapping[str, Mapping[str, float]],
                    options: DDOOptions | None = None) -> dict[str, GainEstimate | str]:
    """:func:`predicted_gain` of each of ``candidates`` (``{name: allocation}``), the fit's Jacobian and its
    SVD computed once; a candidate's error as its text."""
    try:
        law = GainLaw.of(fit, tables, options)
    except ValueError as exc:
        return {name: str(exc) for name in candidates}
    out: dict[str, GainEstimate | str] = {}
    for name, alloc in candidates.items():
        try:
            out[name] = law.gain(reference, alloc)
        except ValueError as exc:
            out[name] = str(exc)
    return out

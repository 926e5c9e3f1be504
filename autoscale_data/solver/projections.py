"""The one entry point for the answer at a target budget: every candidate computed, one chosen.

:func:`project_all` computes, from the runs of one budget or more, the geometric projection (the
Theorem-1 path through each budget's optimum, :func:`~.projection.project`), the joint one (the
optimum of one law fitted to the runs of every budget, :func:`~.joint.fit_joint`), the robust one
(the path with each share trend shrunk by its uncertainty, :func:`~.robust.robust_project`) and the
observed candidate (the largest budget's best mix as is, :func:`~.select.observed_best`). ``method``
says which sets the mix; ``"auto"`` (the default) chooses from evidence in the runs (:mod:`.select`).
The others are reported beside it (or their error, a :class:`~.scores.CandidateError`).

Tables that are not enough for a fit per budget (runs of any mixtures, fewer than ``3m + 2`` per
budget) get their per-budget optima from the one law fitted to the runs of all budgets; optima that
leave a domain out are made into a path by :func:`~.left_out.path_scales`.
:meth:`Projections.plan_scales` gives the scales a :class:`~.plan.MixturePlan` of the chosen answer is
fitted on. The runner (``fits/projection.json``), ``autoscale-data project`` and the published-runs
evaluation (``benchmarks/eval_published_runs.py``) all go through here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._records import Record, omitted
from .allocation_path import Projection, project
from .backtest import choose_by_backtest, untrusted
from .ddo import DDOOptions, DDOResult
from .design import read_design
from .gain import GainEstimate, predicted_gains
from .joint import JointFit, fit_joint, joint_options, per_budget_optima, weight_distance
from .left_out import path_scales
from .robust import RobustProjection, log_share_sd, robust_project
from .runs import RunTable, check_same_columns
from .scores import CandidateError, Selection
from .select import Observed, choose, computed_projections, observed_best, table_budget
from .trust import Trust, assess
from .vocabulary import (
    AUTO,
    DEFAULT_PROJECTION,
    GEOMETRIC,
    JOINT,
    OBSERVED,
    PROJECTION_CHOICES,
    PROJECTIONS,
    ROBUST,
    check_name,
)

__all__ = ["Candidates", "Projections", "ProjectionsRecord", "project_all"]


@dataclass(frozen=True)
class Projections:
    """The candidates at one target and the one that sets the mix.

    Attributes:
        method: what was asked for, one of :data:`~.vocabulary.PROJECTION_CHOICES` (``"auto"``: chosen, see
            ``selection``).
        geometric: the :class:`~.projection.Projection`, or its :class:`~.scores.CandidateError`.
        joint: the :class:`~.joint.JointFit`, or its error.
        robust: the :class:`~.robust.RobustProjection`, its error, or None (not computed).
        optima: each budget's optimum the geometric and robust paths run through (DDO results or
            per-budget laws), smallest budget first; empty when not given.
        observed: the :class:`~.select.Observed` candidate, its error, or None.
        selection: why ``method="auto"`` chose what it chose (None for another method).
        path: the optima as the paths use them (left-out domains treated, :mod:`.left_out`).
        notes: what was done to the input to answer (pooled optima, left-out domains), in words.
        trust: what the runs say about the answer (noise, edge of the grid, the joint law's parameters:
            :mod:`.trust`); None when not assessed.

    Raises:
        ValueError: ``method`` unknown, or the candidate used was not computed or failed.
    """

    method: str
    geometric: Projection | CandidateError
    joint: JointFit | CandidateError
    robust: RobustProjection | CandidateError | None = None
    optima: tuple[DDOResult | JointFit, ...] = ()
    observed: Observed | CandidateError | None = None
    selection: Selection | None = None
    path: tuple[tuple[float, dict[str, float]], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    trust: Trust | None = None

    def __post_init__(self) -> None:
        check_name("projection method", self.method, PROJECTION_CHOICES)
        if self.method == AUTO and self.selection is None:
            raise ValueError("method 'auto' needs the selection that chose the answer")
        chosen = getattr(self, self.used)
        if chosen is None:
            raise ValueError(f"the {self.used} projection was not computed")
        if isinstance(chosen, CandidateError):
            raise ValueError(f"the {self.used} projection failed: {chosen.error}")

    @property
    def used(self) -> str:
        """The candidate that sets the mix (``selection.chosen`` for ``"auto"``)."""
        return self.selection.chosen if self.method == AUTO and self.selection is not None else self.method

    @property
    def chosen(self) -> Projection | JointFit | RobustProjection | Observed:
        """The candidate used."""
        return getattr(self, self.used)

    @property
    def weights(self) -> dict[str, float]:
        """The chosen candidate's weights at the target."""
        return dict(self.chosen.weights)

    @property
    def budget_tokens(self) -> float:
        """The target budget."""
        return float(self.chosen.budget_tokens)

    def failures(self) -> dict[str, str]:
        """``{name: error text}`` of the candidates that failed (never the one used)."""
        return {name: p.error for name in _CANDIDATES if isinstance(p := getattr(self, name), CandidateError)}

    def plan_scales(self, first_budget: float | None = None) -> list[tuple[float, dict[str, float]]]:
        """The scales of the chosen answer's :class:`~.plan.MixturePlan` (``MixturePlan.from_scales``).

        geometric: the per-budget optima; joint: the joint law's optima at ``first_budget`` (default
        the smallest budget's optimum's) and at the target; robust: the largest budget's optimum and
        the robust allocation at the target (the shrunk path runs through both); observed: its mix at
        the budget it was observed at and at the target (constant weights).

        Raises:
            ValueError: no ``optima`` (and, for the joint projection, no ``first_budget``).
        """
        def pair(r: Any) -> tuple[float, dict[str, float]]:
            return float(r.budget_tokens), dict(r.allocation_tokens)

        used = self.used
        if used == OBSERVED:
            obs: Any = self.observed
            start = obs.source_budget if abs(obs.source_budget - obs.budget_tokens) > 1e-9 * obs.budget_tokens \
                else obs.budget_tokens / 2
            return [(start, {d: w * start for d, w in obs.weights.items()}), pair(obs)]
        if not self.optima and not (used == JOINT and first_budget is not None):
            raise ValueError("plan_scales needs the per-budget optima (Projections.optima is empty)")
        path = list(self.path) or [pair(r) for r in self.optima]
        if used == JOINT:
            joint: Any = self.joint  # a JointFit: __post_init__ refused its error
            return joint.path_scales(self.optima[0].budget_tokens if first_budget is None else first_budget)
        if used == ROBUST:
            return [path[-1], pair(self.robust)]
        return path

    def record(self) -> ProjectionsRecord:
        """The answer as written (``autoscale-data project --json``, the runner's ``fits/projection.json``;
        the fields: :class:`ProjectionsRecord`)."""
        chosen = self.chosen
        geometric, joint = self.geometric, self.joint
        path = geometric if isinstance(geometric, Projection) else None
        both = isinstance(geometric, Projection) and isinstance(joint, JointFit)
        return ProjectionsRecord(
            method=self.used, requested_method=self.method, weights=dict(chosen.weights),
            budget_tokens=chosen.budget_tokens, allocation_tokens=dict(chosen.allocation_tokens),
            warnings=list(getattr(chosen, "warnings", [])), geometric=geometric, joint=joint,
            robust=self.robust,
            observed=self.observed,
            selection=self.selection, notes=list(self.notes),
            trust=self.trust, t=None if path is None else path.t,
            residual=None if path is None else path.residual,
            disagreement=weight_distance(joint.weights, geometric.weights) if both else None)  # type: ignore[union-attr]


@dataclass(frozen=True)
class ProjectionsRecord(Record):
    """The candidates at one target and the one used, as written (:meth:`Projections.record`).

    A record (:mod:`autoscale_data._records`): its JSON has one key per field; a candidate that was not
    computed, and ``t``, ``residual`` and ``disagreement`` where they do not exist, are left out. Files of
    earlier versions lack keys: ``method`` then reads as ``"geometric"``.
    """

    weights: dict[str, float]
    """The used candidate's mix at the target."""
    budget_tokens: float
    """The target budget."""
    method: str = GEOMETRIC
    """The candidate used."""
    requested_method: str | None = None
    """What was asked for (``"auto"``: chosen, see :attr:`selection`)."""
    allocation_tokens: dict[str, float] = field(default_factory=dict)
    """The used candidate's tokens per domain."""
    warnings: list[str] = field(default_factory=list)
    """The used candidate's warnings."""
    geometric: Projection | CandidateError | None = omitted(default=None)
    """The Theorem-1 path through the per-budget optima."""
    joint: JointFit | CandidateError | None = omitted(default=None)
    """One law fitted to the runs of every budget."""
    robust: RobustProjection | CandidateError | None = omitted(default=None)
    """The geometric path with each trend shrunk by its uncertainty."""
    observed: Observed | CandidateError | None = omitted(default=None)
    """The largest budget's best mix as is."""
    selection: Selection | None = None
    """``method="auto"``: what was chosen and why; None otherwise."""
    notes: list[str] = field(default_factory=list)
    """What was done to the input to answer, in words."""
    trust: Trust | None = omitted(default=None)
    """What the runs say about the answer (files written before it lack it)."""
    t: float | None = omitted(default=None)
    """The geometric path's parameter at the target (when it exists)."""
    residual: float | None = omitted(default=None)
    """The geometric path's residual (when it exists)."""
    disagreement: dict[str, float] | None = omitted(default=None)
    """Distance between the joint and the geometric weights (when both exist)."""

    def computed(self, name: str) -> Any:
        """Candidate ``name``'s record (``geometric``, ``joint``, ``robust``, ``observed``); None when it was
        not computed or failed."""
        if name not in _CANDIDATES:
            raise ValueError(f"projection candidate {name!r} is invalid: expected one of {_CANDIDATES}")
        part = getattr(self, name)
        return None if isinstance(part, CandidateError) else part

    def failure(self, name: str) -> str | None:
        """Why candidate ``name`` failed; None when it did not (or was not computed)."""
        part = getattr(self, name) if name in _CANDIDATES else None
        return part.error if isinstance(part, CandidateError) else None


_CANDIDATES = (GEOMETRIC, JOINT, ROBUST, OBSERVED)


@dataclass(frozen=True)
class Candidates:
    """Every candidate at one target (:func:`_candidates`), each computed or why it failed; ``optima``,
    ``path`` and ``notes`` as in :class:`Projections`, ``pooled``: the optima are the joint law's,
    ``fallback``: why no projection could be computed."""

    geometric: Projection | CandidateError
    joint: JointFit | CandidateError
    robust: RobustProjection | CandidateError
    observed: Observed | CandidateError
    optima: tuple[DDOResult | JointFit, ...] = ()
    path: tuple[tuple[float, dict[str, float]], ...] = ()
    notes: tuple[str, ...] = ()
    pooled: bool = False
    fallback: str = ""

    def named(self) -> dict[str, Any]:
        """``{name: candidate or CandidateError}`` (:data:`_CANDIDATES`)."""
        return {n: getattr(self, n) for n in _CANDIDATES}


def _at_budget(joint: JointFit, n: float) -> JointFit:
    """The pooled law's optimum at one fitted budget, as a per-budget optimum (with its weight range
    there)."""
    alloc = joint.optimize_at(n)
    ident = None if joint.identifiability is None else joint.identifiability.at_budget(n)
    return replace(joint, budget_tokens=float(n), allocation_tokens=alloc, bounds_hit={},
                   weights={d: v / float(n) for d, v in alloc.items()}, identifiability=ident)


def _is_design(table: RunTable) -> bool:
    try:
        read_design(table)
    except ValueError:
        return False
    return True


def _candidates(tables: Sequence[RunTable], target: float, o: DDOOptions, method: str,
                optima: Sequence[DDOResult | JointFit] | None, direct: bool) -> Candidates:
    """Every candidate at ``target`` from ``tables`` (smallest budget first); errors as
    :class:`CandidateError` except the requested method's, which is raised."""
    def attempt(name: str, compute: Callable[[], Any]) -> Any:
        try:
            return compute()
        except ValueError as exc:
            if name == method:
                raise ValueError(f"the {name} projection to {target:g} tokens failed: {exc}") from None
            return CandidateError(str(exc))

    few = "" if len(tables) >= 2 else ("one budget: the geometric, joint and robust projections need runs at "
                                       "two budgets or more")

    def unavailable() -> Any:  # the error of a candidate that cannot be computed (``scales``: set below)
        raise ValueError(few or (scales if isinstance(scales, str) else "no per-budget optima"))

    if few and method in PROJECTIONS:
        raise ValueError(f"the {method} projection to {target:g} tokens failed: {few}")

    joint = attempt(JOINT, unavailable if few else lambda: fit_joint(tables, o, target_tokens=target))
    scales, pooled = _optima(tables, o, optima, few, joint, method, target)
    notes = [pooled] if pooled else []
    path: list[tuple[float, dict[str, float]]] = []
    if isinstance(scales, list) and len(scales) >= 2:
        path, left = path_scales(scales, o.min_weight)
        notes.extend(left)
    caps, epochs = o.token_caps, o.max_epochs
    geometric = attempt(GEOMETRIC, unavailable if not path else lambda: project(
        path, target, token_caps=caps, max_epochs=epochs, fit=scales[-1] if direct else None))
    robust = attempt(ROBUST, unavailable if not path else lambda: robust_project(
        path, target, [log_share_sd(scales[0]), log_share_sd(scales[-1])], token_caps=caps,
        max_epochs=epochs))
    last_opt = scales[-1] if isinstance(scales, list) and scales and _is_design(tables[-1]) else None
    observed = attempt(OBSERVED, lambda: observed_best(tables[-1], target, objective=o.objective,
                                                         val_domains=o.val_domains, optimum=last_opt))
    return Candidates(geometric, joint, robust, observed,
                      optima=tuple(scales) if isinstance(scales, list) else (),
                      path=tuple(path), notes=tuple(notes), pooled=bool(pooled),
                      fallback=few or (scales if isinstance(scales, str) else ""))


def _optima(tables: Sequence[RunTable], o: DDOOptions, optima: Sequence[DDOResult | JointFit] | None,
            few: str,
            joint: JointFit | CandidateError, method: str, target: float) -> tuple[list[Any] | str, str]:
    """The per-budget optima the paths run through, or why there are none, and the note saying they are the
    pooled law's ("": they are not); the failure of a path ``method`` asked for is raised."""
    if optima is not None:
        return sorted(optima, key=lambda r: r.budget_tokens), ""
    if few and not _is_design(tables[-1]):
        return few, ""  # one table of any mixtures: its best run is the answer, no fit needed
    try:
        return per_budget_optima(tables, o), ""
    except ValueError as exc:
        if isinstance(joint, JointFit):
            return [_at_budget(joint, n) for n in joint.budgets], (
                f"a fit per budget is not possible ({exc}); the per-budget optima are those of one law "
                "fitted to the runs of all budgets")
        if method in PROJECTIONS and method != JOINT:
            raise ValueError(f"the {method} projection to {target:g} tokens failed: {exc}") from None
        return str(exc), ""


def _predicted(tables: Sequence[RunTable], c: Candidates,
               o: DDOOptions) -> dict[str, GainEstimate | CandidateError]:
    """Each two-budget projection's predicted gain over the observed mix under the joint law (:mod:`.gain`),
    or why it could not be predicted."""
    joint, observed, named = c.joint, c.observed, c.named()
    if isinstance(joint, CandidateError):
        return {n: CandidateError(f"no joint law ({joint.error})") for n in PROJECTIONS}
    if isinstance(observed, CandidateError):
        return {n: CandidateError(f"no observed mix ({observed.error})") for n in PROJECTIONS}
    missing = {n: CandidateError(f"no {n} projection ({p.error})") for n in PROJECTIONS
               if isinstance(p := named[n], CandidateError)}
    gains = predicted_gains(joint, tables, observed.allocation_tokens,
                            {n: named[n].allocation_tokens for n in PROJECTIONS if n not in missing}, o)
    return {n: missing[n] if n in missing else gains[n] for n in PROJECTIONS}


def _select(tables: Sequence[RunTable], c: Candidates, o: DDOOptions, names: Sequence[str]) -> Selection:
    """``method="auto"``'s choice among the candidates ``c`` (:mod:`.select`, :mod:`.backtest`; its reason
    names the tables by ``names``): with three budgets or more, every candidate again from all budgets but the
    largest (the backtest) and the joint law's predicted gains; with two, the predicted gains alone."""
    flags = untrusted(tables, c.named(), pooled=c.pooled, val_domains=o.val_domains)
    projections = computed_projections(c.named())
    if len(tables) < 3 or not projections:
        predicted = _predicted(tables, c, o) if len(tables) == 2 else None
        selection = choose(c.named(), fallback=c.fallback, predicted=predicted, flags=flags)
    else:
        optima = c.optima if not c.pooled else ()
        sub = _candidates(tables[:-1], table_budget(tables[-1]), o, AUTO,
                          list(optima[:-1]) if optima else None, False)
        held_fit = optima[-1] if optima and isinstance(optima[-1],
                                                       DDOResult) and _is_design(tables[-1]) else None
        selection = choose_by_backtest(tables, c.named(), sub.named(), projections,
                                       options=o, held_fit=held_fit,
                                       predicted=_predicted(tables, c, o), flags=flags)
    return replace(selection, reason=_label(selection.reason, names))


def _label(text: str, labels: Sequence[str]) -> str:
    """``tables[k]`` in an error replaced by the k-th label (e.g. the user's file)."""
    return re.sub(r"tables\[(\d+)\]", lambda m: labels[int(m.group(1))] if int(m.group(1)) < len(labels)
                  else m.group(0), text)


def project_all(tables: Sequence[RunTable], target_tokens: float, options: DDOOptions | None = None, *,
                method: str = DEFAULT_PROJECTION, optima: Sequence[DDOResult | JointFit] | None = None,
                direct: bool = False, labels: Sequence[str] | None = None, **settings: Any) -> Projections:
    """Every candidate answer at ``target_tokens`` from the runs, and the one that sets the mix.

    Args:
        tables: one run table per budget (DDO designs or runs of any mixtures; any order). One table
            is enough for the observed candidate; the projections need two budgets or more.
        options: a :class:`~.ddo.DDOOptions` (or its fields as keywords, as for
            :func:`~.ddo.fit_ddo`): the settings of the per-budget fits and of the joint fit; its
            ``token_caps`` and ``max_epochs`` also bound the projections.
        method: what sets the mix (:data:`~.vocabulary.PROJECTION_CHOICES`): ``"auto"`` (default) chooses from
            the runs (:mod:`.select`); a projection or ``"observed"`` is used as asked, and its failure is
            raised. The other candidates' errors are kept (:class:`~.scores.CandidateError`).
        optima: each table's optimum when already fitted (else :func:`~.joint.per_budget_optima`,
            or the pooled law's optima when the tables are too small for a fit each).
        direct: also optimise the largest budget's fitted law at the target (the geometric
            projection's ``direct_weights`` and ``disagreement``).
        labels: a name per table (e.g. its file) for the error messages, in the order of ``tables``.

    Raises:
        ValueError: ``method`` unknown; no tables; the chosen method failed (naming it, the target
            and the table by its label).
    """
    check_name("projection method", method, PROJECTION_CHOICES)
    tables = list(tables)
    if not tables:
        raise ValueError("project_all needs the runs of one budget or more, got no tables")
    names = [f"tables[{k}]" for k in range(len(tables))] if labels is None else [str(x) for x in labels]
    if len(names) != len(tables):
        raise ValueError(f"labels has {len(names)} entries for {len(tables)} tables")
    o = joint_options(options, settings, caller="project_all")
    check_same_columns(tables, names, o.val_domains)
    order = sorted(range(len(tables)), key=lambda k: table_budget(tables[k]))
    tables, names = [tables[k] for k in order], [names[k] for k in order]
    target = float(target_tokens)
    try:
        c = _candidates(tables, target, o, method, optima, direct)
        selection = None if method != AUTO else _select(tables, c, o, names)
        out = Projections(method=method, **c.named(), optima=c.optima, selection=selection, path=c.path,
                          notes=tuple(_label(n, names) for n in c.notes))
        joint_used = out.used == JOINT or (c.pooled and out.used in (GEOMETRIC, ROBUST))
        return replace(out, trust=assess(tables, out.weights, out.joint, objective=o.objective,
                                         val_domains=o.val_domains, joint_used=joint_used))
    except ValueError as exc:
        raise ValueError(_label(str(exc), names)) from None

"""The one entry point for the projections to a target budget: all three computed, one chosen.

:func:`project_all` computes, from the runs of two or more budgets, the geometric projection (the
Theorem-1 path through each budget's optimum, :func:`~.projection.project`), the joint one (the
optimum of one law fitted to the runs of every budget, :func:`~.joint.fit_joint`) and the robust
one (the path with each share trend shrunk by its uncertainty, :func:`~.robust.robust_project`).
``method`` says which one sets the mix; the others are reported beside it (or the text of their
error). :meth:`Projections.plan_scales` gives the scales a :class:`~.plan.MixturePlan` of the chosen
projection is fitted on. The runner (``fits/projection.json``) and ``autoscale-data project`` both
go through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .ddo import DDOOptions, DDOResult
from .joint import PROJECTIONS, JointFit, fit_joint, joint_options, per_budget_optima, weight_distance
from .projection import Projection, project
from .robust import RobustProjection, log_share_sd, robust_project
from .runs import RunTable

__all__ = ["Projections", "project_all"]


@dataclass(frozen=True)
class Projections:
    """The three projections to one target and the one that sets the mix.

    Attributes:
        method: the projection used, one of :data:`~.joint.PROJECTIONS`.
        geometric: the :class:`~.projection.Projection`, or the text of its error.
        joint: the :class:`~.joint.JointFit`, or the text of its error.
        robust: the :class:`~.robust.RobustProjection`, the text of its error, or None (not computed).
        optima: each budget's optimum the geometric and robust paths run through (DDO results or
            per-budget laws), smallest budget first; empty when not given.

    Raises:
        ValueError: ``method`` unknown, or the projection used was not computed or failed.
    """

    method: str
    geometric: Projection | str
    joint: JointFit | str
    robust: RobustProjection | str | None = None
    optima: tuple[DDOResult | JointFit, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in PROJECTIONS:
            raise ValueError(f"projection method must be one of {PROJECTIONS}, got {self.method!r}")
        chosen = getattr(self, self.method)
        if chosen is None:
            raise ValueError(f"the {self.method} projection was not computed")
        if isinstance(chosen, str):
            raise ValueError(f"the {self.method} projection failed: {chosen}")

    @property
    def chosen(self) -> Projection | JointFit | RobustProjection:
        """The projection used."""
        return getattr(self, self.method)

    @property
    def weights(self) -> dict[str, float]:
        """The chosen projection's weights at the target."""
        return dict(self.chosen.weights)

    @property
    def budget_tokens(self) -> float:
        """The target budget."""
        return float(self.chosen.budget_tokens)

    def failures(self) -> dict[str, str]:
        """``{name: error text}`` of the projections that failed (never the one used)."""
        return {name: p for name in PROJECTIONS if isinstance(p := getattr(self, name), str)}

    def plan_scales(self, first_budget: float | None = None) -> list[tuple[float, dict[str, float]]]:
        """The scales of the chosen projection's :class:`~.plan.MixturePlan` (``MixturePlan.from_scales``).

        geometric: the per-budget optima; joint: the joint law's optima at ``first_budget`` (default
        the smallest budget's optimum's) and at the target; robust: the largest budget's optimum and
        the robust allocation at the target (the shrunk path runs through both).

        Raises:
            ValueError: no ``optima`` (and, for the joint projection, no ``first_budget``).
        """
        def pair(r: Any) -> tuple[float, dict[str, float]]:
            return float(r.budget_tokens), dict(r.allocation_tokens)

        if not self.optima and not (self.method == "joint" and first_budget is not None):
            raise ValueError("plan_scales needs the per-budget optima (Projections.optima is empty)")
        if self.method == "joint":
            joint: Any = self.joint  # a JointFit: __post_init__ refused its error text
            return joint.path_scales(self.optima[0].budget_tokens if first_budget is None else first_budget)
        if self.method == "robust":
            return [pair(self.optima[-1]), pair(self.robust)]
        return [pair(r) for r in self.optima]

    def to_json(self) -> dict[str, Any]:
        """All three projections and which one is used.

        Returns:
            Top-level ``method``, ``weights``, ``budget_tokens``, ``allocation_tokens`` and ``warnings`` of
            the projection used (plus the geometric path's ``t`` and ``residual`` when it exists);
            ``geometric``, ``joint`` and (when computed) ``robust`` in full (``{"error": ...}`` for a
            failed one) and ``disagreement`` (:func:`~.joint.weight_distance` between the joint and the
            geometric weights) when both exist.
        """
        parts = {name: ({"error": p} if isinstance(p, str) else p.to_json())
                 for name, p in (("geometric", self.geometric), ("joint", self.joint), ("robust", self.robust))
                 if p is not None}
        chosen = parts[self.method]
        out: dict[str, Any] = {"method": self.method, "weights": chosen["weights"],
                               "budget_tokens": chosen["budget_tokens"],
                               "allocation_tokens": chosen["allocation_tokens"],
                               "warnings": list(chosen.get("warnings", [])), **parts}
        if "t" in parts["geometric"]:
            out.update(t=parts["geometric"]["t"], residual=parts["geometric"]["residual"])
        if "error" not in parts["geometric"] and "error" not in parts["joint"]:
            out["disagreement"] = weight_distance(parts["joint"]["weights"], parts["geometric"]["weights"])
        return out


def project_all(
    tables: Sequence[RunTable],
    target_tokens: float,
    options: DDOOptions | None = None,
    *,
    method: str = "geometric",
    optima: Sequence[DDOResult | JointFit] | None = None,
    direct: bool = False,
    **settings: Any,
) -> Projections:
    """The geometric, joint and robust projections of the runs to ``target_tokens``.

    Args:
        tables: one run table per budget (two or more; DDO designs or runs of any mixtures).
        target_tokens: the target budget.
        options: a :class:`~.ddo.DDOOptions` (or its fields as keywords, as for
            :func:`~.ddo.fit_ddo`): the settings of the per-budget fits and of the joint fit; its
            ``token_caps`` and ``max_epochs`` also bound the projections.
        method: the projection that sets the mix (:data:`~.joint.PROJECTIONS`); its failure is raised,
            the others' errors are kept as text.
        optima: each table's optimum when already fitted (else :func:`~.joint.per_budget_optima`);
            the geometric path runs through all of them, the robust one through the smallest and the
            largest budget's.
        direct: also optimise the largest budget's fitted law at the target (the geometric
            projection's ``direct_weights`` and ``disagreement``).

    Returns:
        The :class:`Projections`.

    Raises:
        ValueError: ``method`` unknown; a per-budget fit failed (when ``optima`` is not given); the
            chosen projection failed (naming it and the target).
    """
    if method not in PROJECTIONS:
        raise ValueError(f"projection method must be one of {PROJECTIONS}, got {method!r}")
    o = joint_options(options, settings, caller="project_all")
    scales = per_budget_optima(tables, o) if optima is None else sorted(optima, key=lambda r: r.budget_tokens)
    caps, epochs = o.token_caps, o.max_epochs

    def attempt(name: str, compute: Callable[[], Any]) -> Any:
        try:
            return compute()
        except ValueError as exc:
            if name == method:
                raise ValueError(f"the {name} projection to {target_tokens:g} tokens failed: {exc}") from None
            return str(exc)

    geometric = attempt("geometric", lambda: project(scales, target_tokens, token_caps=caps, max_epochs=epochs,
                                                     fit=scales[-1] if direct and scales else None))
    joint = attempt("joint", lambda: fit_joint(tables, o, target_tokens=target_tokens))
    robust = attempt("robust", lambda: robust_project(scales, target_tokens,
                                                      [log_share_sd(scales[0]), log_share_sd(scales[-1])],
                                                      token_caps=caps, max_epochs=epochs))
    return Projections(method=method, geometric=geometric, joint=joint, robust=robust, optima=tuple(scales))

"""Can I trust it? What the runs say about the answer of :func:`~.projections.project_all`, in words and
numbers.

Three checks, each a record with a one-line ``summary``, gathered in :class:`Trust` (``Projections.trust``,
``trust`` in ``autoscale-data project --json`` and ``fits/projection.json``, the ``trust:`` lines of the CLI):

* **noise** (:func:`noise_check`): whether the choice can be judged against the noise of one run. The
  gap is the objective difference between the two best mixes at the largest budget (the mean over a
  mix's seeds). The noise of one run comes from replicates there, else from the runs' spread: the
  median residual of a power law in the budget through the mixtures run at three budgets or more
  (:func:`~.select.noise_estimate`), else the joint law's residual (an upper bound: it also holds the
  law's misfit). Two mixes are told apart when the gap exceeds twice the standard error of their
  difference, ``2 σ √(2/n)`` with ``n`` seeds each, so ``n = 2 (2σ/gap)²`` seeds per mix are needed
  (:func:`seeds_needed`, at least 2 to measure the noise at all). Without replicates the choice is
  never judged, whatever the estimate.
* **edge of the grid** (:func:`edge_check`): a share of the chosen mix within ``EDGE_FRACTION`` of the
  range of that domain's shares over every run (all budgets) from its lowest or highest value, or
  outside it. Per-domain ranges (a bounding box, not the convex hull): cheap, and the question a user
  can act on ("run mixes with more books").
* **fitted parameters** (:func:`parameter_check`) of the joint law: exponents outside
  ``GAMMA_RANGE`` (data exponents of language-model losses are about 0.05-0.7: Kaplan et al. 0.095,
  Hoffmann et al. 0.28; beyond 3 a domain's effect vanishes within a doubling of its tokens, and near 0
  the term is a flat log law that trades off with the floor) and a floor below 0 (a loss or
  perplexity is positive) or not below the smallest objective observed (a floor is what no amount of
  data gets under).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._records import Record
from .design import run_objective
from .joint import JointFit
from .runs import RunTable
from .select import _shares, noise_estimate, table_budget
from .vocabulary import DEFAULT_OBJECTIVE

__all__ = [
    "EDGE_FRACTION",
    "GAMMA_RANGE",
    "SEED_Z",
    "EdgeCheck",
    "NoiseCheck",
    "ParameterCheck",
    "PlanEvidence",
    "Trust",
    "assess",
    "edge_check",
    "noise_check",
    "parameter_check",
    "run_noise",
    "seeds_needed",
]

SEED_Z = 2.0  # two mixes are told apart when their gap exceeds this many standard errors of the difference
# a share within this fraction of the domain's range from its lowest/highest run is on the edge
EDGE_FRACTION = 0.05
GAMMA_RANGE = (0.01, 3.0)  # plausible exponents of the joint law (module doc)

ValDomains = Sequence[str] | Mapping[str, float] | None


@dataclass(frozen=True)
class NoiseCheck(Record):
    """Whether the choice can be judged against the noise of one run (module doc).

    Attributes:
        seeds: runs of each of the two best mixes at the largest budget (the fewer; 1: no replicates).
        noise: standard deviation of one run's objective, or None (no estimate); noise_source: how found.
        gap: objective difference between the two best mixes at the largest budget (None: one mix).
        seeds_needed: seeds per mix that would tell them apart (None: no noise estimate, or a tie).
        judged: replicates, and ``seeds >= seeds_needed``.
        summary: the verdict in words.
    """

    seeds: int
    noise: float | None
    noise_source: str
    gap: float | None
    seeds_needed: int | None
    judged: bool
    summary: str


@dataclass(frozen=True)
class EdgeCheck(Record):
    """Where the chosen mix lies in the grid of mixes run.

    Attributes:
        edges: ``{domain: "lowest" | "highest" | "below" | "above"}`` for the shares at (or beyond) the
            edge of that domain's shares over every run; empty when the mix lies inside.
        ranges: ``{domain: [lowest, highest]}`` share over every run of every budget.
        summary: in words.
    """

    edges: dict[str, str]
    ranges: dict[str, list[float]]
    summary: str


@dataclass(frozen=True)
class ParameterCheck(Record):
    """The joint law's fitted parameters outside a plausible range (module doc).

    Attributes:
        implausible: one line per parameter out of range (empty: all plausible).
        summary: in words.
    """

    implausible: list[str]
    summary: str


@dataclass(frozen=True)
class Trust(Record):
    """The three checks of the module doc on one answer.

    Attributes:
        noise: :class:`NoiseCheck`; edge: :class:`EdgeCheck`; parameters: :class:`ParameterCheck` of the
            joint law (None when it was not fitted).
    """

    noise: NoiseCheck
    edge: EdgeCheck
    parameters: ParameterCheck | None = None

    def messages(self) -> list[str]:
        """One line per check that has something to say (the CLI's ``trust:`` lines)."""
        out = [self.noise.summary]
        if self.edge.edges:
            out.append(self.edge.summary)
        if self.parameters is not None and self.parameters.implausible:
            out.append(self.parameters.summary)
        return out


@dataclass(frozen=True)
class PlanEvidence(Record):
    """What a saved :class:`~.plan.MixturePlan` was chosen by: its ``metadata`` (``autoscale-data project
    --save-plan``).

    Attributes:
        method: the candidate that set the mix; requested_method: what was asked for.
        reason: why it was used (the selection's reason, or that it was asked for).
        target_tokens: the target budget; budgets: those of the runs (or scales), smallest first.
        sources: the files read.
        objective: the objective of the fits (None for SCALES.json: no fit).
        selection: ``Selection.to_json()`` (``method="auto"``) or None.
        trust: the :class:`Trust` of the answer (None for SCALES.json: no runs to judge by).
        notes: what was done to the input to answer.
    """

    method: str
    requested_method: str
    reason: str
    target_tokens: float
    budgets: list[float]
    sources: list[str]
    objective: str | None = None
    selection: dict[str, Any] | None = None
    trust: Trust | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, projections: Any, tables: Sequence[RunTable], *, objective: str,
           sources: Sequence[str]) -> PlanEvidence:
        """The evidence of :func:`~.projections.project_all`'s answer ``projections`` from ``tables``."""
        selection = projections.selection
        return cls(method=projections.used, requested_method=projections.method,
                   reason=selection.reason if selection is not None
                   else f"method {projections.method!r} as asked",
                   target_tokens=projections.budget_tokens, budgets=sorted(table_budget(t) for t in tables),
                   sources=[str(x) for x in sources], objective=objective,
                   selection=None if selection is None else selection.to_json(), trust=projections.trust,
                   notes=list(projections.notes))


def seeds_needed(noise: float | None, gap: float | None) -> int | None:
    """Seeds per mix for a gap to exceed ``SEED_Z`` standard errors of a difference: ``2 (SEED_Z σ / gap)²``,
    at least 2.

    None without a noise estimate or a positive gap.
    """
    if noise is None or gap is None or not gap > 0 or not math.isfinite(noise):
        return None
    return max(2, math.ceil(2.0 * (SEED_Z * noise / gap) ** 2 - 1e-9))


def _mixes(table: RunTable, objective: str, val_domains: ValDomains) -> list[list[float]]:
    """The objective values of each mix of ``table`` (runs at the same shares), best mix (lowest mean)
    first."""
    groups: dict[tuple[float, ...], list[float]] = {}
    for row, v in zip(np.round(_shares(table), 9), run_objective(table, objective, val_domains), strict=True):
        groups.setdefault(tuple(row.tolist()), []).append(float(v))
    return sorted(groups.values(), key=lambda g: float(np.mean(g)))


def run_noise(tables: Sequence[RunTable], joint: JointFit | str | None, *, objective: str = DEFAULT_OBJECTIVE,
              val_domains: ValDomains = None) -> tuple[float | None, str]:
    """The noise of one run (:func:`~.select.noise_estimate`), else the joint law's residual where it has
    degrees of freedom left (an upper bound: it also holds the law's misfit); ``(None, why)`` without
    either."""
    noise, source = noise_estimate(tables, objective=objective, val_domains=val_domains)
    if noise is None and isinstance(joint, JointFit) and joint.n_points > joint.n_params:
        noise = float(np.sqrt(joint.sse / (joint.n_points - joint.n_params))) * joint.normalizer
        source = f"the joint law's residual, an upper bound of the noise ({source})"
    return noise, source


def noise_check(tables: Sequence[RunTable], joint: JointFit | str | None = None, *,
                objective: str = DEFAULT_OBJECTIVE, val_domains: ValDomains = None) -> NoiseCheck:
    """The noise check of the module doc (``tables`` smallest budget first; ``joint`` for the residual
    fallback)."""
    last = tables[-1]
    mixes = _mixes(last, objective, val_domains)
    best = mixes[:2]
    seeds = min(len(g) for g in best)
    gap = float(np.mean(best[1]) - np.mean(best[0])) if len(best) == 2 else None
    noise, source = run_noise(tables, joint, objective=objective, val_domains=val_domains)
    need = seeds_needed(noise, gap)
    replicated = any(len(g) > 1 for g in mixes)
    judged = bool(seeds > 1 and need is not None and seeds >= need)
    at = f"at {table_budget(last):.4g} tokens"
    rule = "n = 2 (2 sigma / gap)^2: the gap beyond twice the standard error of a difference"
    if gap is None:
        text = f"one mix {at}: nothing to choose between"
    elif noise is None:
        text = (f"one run per mix and no noise estimate from the runs ({source}): the choice cannot be "
                "judged against noise; run the best two mixes with 3 seeds or more to measure it")
    elif seeds == 1:
        need_text = (f"about {need} seeds per mix would tell them apart ({rule})" if need is not None
                     else "they tie: no number of seeds tells them apart")
        once = "one run per mix (no replicates)" if not replicated else "the two best mixes were run once each"
        text = (f"{once}: the choice cannot be judged against noise. Noise of one run "
                f"~{noise:.3g} ({source}); the two best mixes {at} differ by {gap:.3g}: {need_text}")
    elif judged:
        text = (f"{seeds} seeds per mix: the two best mixes {at} differ by {gap:.3g}, beyond twice the "
                f"standard error of their difference ({SEED_Z * noise * math.sqrt(2 / seeds):.3g}; noise of "
                f"one run {noise:.3g}, {source})")
    else:
        need_text = f"about {need} seeds per mix would" if need is not None else "no number of seeds would"
        text = (f"{seeds} seed(s) per mix: the two best mixes {at} differ by {gap:.3g}, within twice the "
                f"standard error of their difference ({SEED_Z * noise * math.sqrt(2 / seeds):.3g}; noise of "
                f"one run {noise:.3g}, {source}): the choice cannot be judged against noise; {need_text} "
                "tell them apart")
    return NoiseCheck(seeds=int(seeds), noise=noise, noise_source=source, gap=gap, seeds_needed=need,
                      judged=judged,
                      summary=text)


def edge_check(tables: Sequence[RunTable], weights: Mapping[str, float]) -> EdgeCheck:
    """The edge check of the module doc: ``weights`` against every run's shares over ``tables``."""
    domains = tables[0].train_domains
    shares = np.concatenate([_shares(t)[:, [t.train_domains.index(d) for d in domains]] for t in tables])
    lo, hi = shares.min(axis=0), shares.max(axis=0)
    edges: dict[str, str] = {}
    said = []
    for j, d in enumerate(domains):
        w, span = float(weights.get(d, 0.0)), float(hi[j] - lo[j])
        if span <= 1e-9:
            continue  # the runs do not vary it: no grid to be on the edge of
        tol = EDGE_FRACTION * span
        where = ("below" if w < lo[j] - 1e-9 else "above" if w > hi[j] + 1e-9
                 else "lowest" if w <= lo[j] + tol else "highest" if w >= hi[j] - tol else "")
        if where:
            edges[d] = where
            end = lo[j] if where in ("below", "lowest") else hi[j]
            said.append(f"{d} {w:.3g} is {'beyond' if where in ('below', 'above') else 'at'} the "
                        f"{'lowest' if where in ('below', 'lowest') else 'highest'} share run ({end:.3g})")
    ranges = {d: [float(lo[j]), float(hi[j])] for j, d in enumerate(domains)}
    if not edges:
        return EdgeCheck({}, ranges, "the chosen mix lies inside the shares run for every domain")
    more = [d for d, e in edges.items() if e in ("highest", "above") and hi[domains.index(d)] < 1.0 - 1e-9]
    less = [d for d, e in edges.items() if e in ("lowest", "below") and lo[domains.index(d)] > 1e-9]
    act = "; ".join(filter(None, [f"more {', '.join(more)}" if more else "",
                                  f"less {', '.join(less)}" if less else ""]))
    return EdgeCheck(edges, ranges, "the chosen mix is on the edge of the mixes run: " + "; ".join(said)
                     + ": the best mix may lie beyond the grid" + (f" (run mixes with {act})" if act else ""))


def parameter_check(joint: JointFit, tables: Sequence[RunTable], *, val_domains: ValDomains = None,
                    used: bool = False) -> ParameterCheck:
    """The parameter check of the module doc on a joint fit to ``tables`` (``used``: it sets the mix)."""
    bad = []
    lo, hi = GAMMA_RANGE
    for d in joint.domains:
        g, amp = joint.gamma[d], joint.amplitude[d]
        if g > hi:
            bad.append(f"exponent of {d!r} {g:.3g} > {hi:g} (its effect would vanish within a doubling of "
                       "its tokens)")
        elif 0 < g < lo and amp > 0:
            bad.append(f"exponent of {d!r} {g:.3g} < {lo:g} (a flat log law that trades off with the floor)")
    floor = joint.floor * joint.normalizer
    smallest = min(float(run_objective(t, joint.objective, val_domains).min()) for t in tables)
    if floor < 0:
        bad.append(f"floor {floor:.4g} < 0 (a loss or perplexity is positive)")
    elif floor >= smallest:
        bad.append(f"floor {floor:.4g} is not below the smallest observed objective {smallest:.4g}")
    if not bad:
        return ParameterCheck([], "the joint law's parameters are in their plausible ranges")
    role = "it sets the mix: do not trust it" if used else "treat its projection as unreliable"
    return ParameterCheck(bad, f"the joint law's parameters are implausible: {'; '.join(bad)}; {role} "
                               f"(plausible: exponents in ({lo:g}, {hi:g}], a floor >= 0 and below every "
                               "observed objective)")


def assess(tables: Sequence[RunTable], weights: Mapping[str, float], joint: JointFit | str | None, *,
           objective: str = DEFAULT_OBJECTIVE, val_domains: ValDomains = None,
           joint_used: bool = False) -> Trust:
    """The :class:`Trust` of the answer ``weights`` from ``tables`` (smallest budget first)."""
    params = None if not isinstance(joint, JointFit) else parameter_check(joint, tables,
                                                                          val_domains=val_domains,
                                                                         used=joint_used)
    return Trust(noise=noise_check(tables, joint, objective=objective, val_domains=val_domains),
                 edge=edge_check(tables, weights), parameters=params)

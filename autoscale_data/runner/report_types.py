"""The report's declared shape: :class:`Report` and its parts, each with ``to_json`` / ``from_json``.

``Report.to_json()`` is exactly the content of ``OUT/report.json`` (keys, nesting and values as the
runner has always written them), and ``Report.from_json`` reads such a file back, older ones
included: keys that later versions added are optional and take their empty value. A missing or
badly typed key raises ``ValueError`` naming its path (``targets.autoscale.losses``).

The parts the fits write (``ddo_<N>.json``, ``bootstrap_<N>.json``, ``projection.json``,
``target_mixes.json``) are carried as the fits wrote them: their shape belongs to the fitting code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..solver.vocabulary import DEFAULT_OBJECTIVE, objective_key
from . import layout

__all__ = [
    "AnytimeComparison",
    "Comparison",
    "Curve",
    "CurveComparison",
    "CurvePoint",
    "ExtensionResult",
    "FailedRun",
    "MeanStd",
    "MethodCost",
    "MethodRow",
    "MixResult",
    "ReferenceLoss",
    "Report",
    "TargetResult",
    "Throughput",
    "TokensSaved",
    "TrainCurve",
    "Verdict",
    "VersusUniform",
]

_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "number": ((int, float), "a number"),
    "int": ((int,), "an integer"),
    "str": ((str,), "a string"),
    "bool": ((bool,), "true or false"),
    "list": ((list, tuple), "a list"),
    "map": ((Mapping,), "an object"),
}


def _check(value: Any, kind: str, path: str) -> Any:
    types, expected = _KINDS[kind]
    bad_bool = isinstance(value, bool) and kind in ("number", "int")
    if bad_bool or not isinstance(value, types):
        raise ValueError(f"report key {path!r} = {value!r} is invalid: expected {expected}")
    return value


class _Reader:
    """One JSON object of the report, read key by key; errors name the key's path in the report."""

    def __init__(self, obj: Any, path: str) -> None:
        if not isinstance(obj, Mapping):
            where = f"report key {path!r}" if path else "the report"
            raise ValueError(f"{where} = {obj!r} is invalid: expected an object")
        self.obj, self.path = obj, path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def req(self, key: str, kind: str | None = None) -> Any:
        """The value at ``key``; ``ValueError`` when it is missing (or not of ``kind``)."""
        if key not in self.obj:
            raise ValueError(f"report key {self.at(key)!r} is missing")
        value = self.obj[key]
        return value if kind is None else _check(value, kind, self.at(key))

    def opt(self, key: str, kind: str | None = None, default: Any = None) -> Any:
        """The value at ``key``, ``default`` when it is missing or null."""
        value = self.obj.get(key)
        if value is None:
            return default
        return value if kind is None else _check(value, kind, self.at(key))

    def sub(self, key: str) -> _Reader:
        return _Reader(self.req(key), self.at(key))

    def items(self, key: str | None = None) -> list[tuple[str, Any, str]]:
        """``(name, value, path)`` of every entry of the object at ``key`` (this object when ``None``)."""
        reader = self if key is None else self.sub(key)
        return [(str(k), v, reader.at(str(k))) for k, v in reader.obj.items()]


def _numbers(value: Any, path: str, *, nullable: bool = False) -> list[Any]:
    _check(value, "list", path)
    for k, v in enumerate(value):
        if not (nullable and v is None):
            _check(v, "number", f"{path}[{k}]")
    return list(value)


def _shares(value: Any, path: str) -> dict[str, float] | None:
    if value is None:
        return None
    return {k: _check(v, "number", f"{path}.{k}") for k, v in _Reader(value, path).obj.items()}


# ------------------------------------------------------------------------------------------ parts
@dataclass(frozen=True)
class MeanStd:
    """A value over seeds: ``{"mean", "std", "n"}`` (:func:`~autoscale_data.runner.metrics.mean_std`)."""

    mean: float
    """Mean over the seeds."""
    std: float
    """Standard deviation over the seeds (ddof 1; 0 with one seed)."""
    n: int
    """Number of seeds."""

    def to_json(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "n": self.n}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> MeanStd:
        r = _Reader(obj, path)
        return cls(mean=r.req("mean", "number"), std=r.req("std", "number"), n=r.req("n", "int"))


def _mean_stds(obj: Any, path: str) -> dict[str, MeanStd]:
    return {k: MeanStd.from_json(v, p) for k, v, p in _Reader(obj, path).items()}


@dataclass(frozen=True)
class MixResult:
    """One mix at one budget, seed-averaged: a row of a proxy table (``proxies[scale][label]``)."""

    losses: dict[str, MeanStd]
    """Final validation loss per domain."""
    objective_value: MeanStd
    """Final value of the objective; in JSON under the objective's key (``mean_loss`` or ``mean_ppl``)."""
    tokens: int
    """Training tokens of the run (the first seed's ``total_tokens``)."""
    seeds: list[int]
    """Training seeds averaged over, in the order of the runs."""

    def to_json(self, key: str) -> dict[str, Any]:
        """The JSON object; ``key`` is the objective's key (:func:`~.wording.objective_key`)."""
        return {"losses": {d: ms.to_json() for d, ms in self.losses.items()}, key: self.objective_value.to_json(),
                "tokens": self.tokens, "seeds": list(self.seeds)}

    @classmethod
    def from_json(cls, obj: Any, key: str, path: str = "") -> MixResult:
        return cls(**_mix_fields(_Reader(obj, path), key))


def _mix_fields(r: _Reader, key: str) -> dict[str, Any]:
    return {"losses": _mean_stds(r.req("losses"), r.at("losses")),
            "objective_value": MeanStd.from_json(r.req(key), r.at(key)),
            "tokens": r.req("tokens", "number"), "seeds": list(r.req("seeds", "list"))}


@dataclass(frozen=True)
class Curve:
    """The seed-mean validation curve of a target mix (:func:`~autoscale_data.runner.metrics.mean_curve`)."""

    tokens: list[float]
    """Training tokens at each evaluation point shared by all seeds."""
    mean: list[float]
    """Mean over seeds of the objective at each point."""
    std: list[float]
    """Standard deviation over seeds at each point (0 with one seed)."""
    n: int
    """Number of seeds."""

    def to_json(self) -> dict[str, Any]:
        return {"tokens": list(self.tokens), "mean": list(self.mean), "std": list(self.std), "n": self.n}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> Curve:
        r = _Reader(obj, path)
        return cls(tokens=_numbers(r.req("tokens"), r.at("tokens")), mean=_numbers(r.req("mean"), r.at("mean")),
                   std=_numbers(r.req("std"), r.at("std")), n=r.req("n", "int"))


@dataclass(frozen=True)
class TrainCurve:
    """Seed-mean per-domain training loss at each evaluation point of a target mix.

    In JSON ``{"tokens": [...], domain: [...]}``, or ``{}`` for runs that did not record it.
    """

    tokens: list[float] = field(default_factory=list)
    """Training tokens at each evaluation point (empty: not recorded)."""
    losses: dict[str, list[float | None]] = field(default_factory=dict)
    """Per domain, the training loss since the previous point (``None`` where no seed saw the domain)."""

    def to_json(self) -> dict[str, Any]:
        if not self.tokens and not self.losses:
            return {}
        return {"tokens": list(self.tokens), **{d: list(v) for d, v in self.losses.items()}}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> TrainCurve:
        r = _Reader(obj, path)
        if not r.obj:
            return cls()
        return cls(tokens=_numbers(r.req("tokens"), r.at("tokens")),
                   losses={d: _numbers(v, p, nullable=True) for d, v, p in r.items() if d != "tokens"})


@dataclass(frozen=True)
class TargetResult(MixResult):
    """One target mix at the target budget, seed-averaged (``targets[label]``)."""

    weights: dict[str, float] = field(default_factory=dict)
    """The mix trained (the first seed's weights)."""
    curve: Curve = field(default_factory=lambda: Curve([], [], [], 0))
    """Seed-mean validation curve of the objective."""
    train_curve: TrainCurve = field(default_factory=TrainCurve)
    """Seed-mean per-domain training loss along the run (empty for runs that did not record it)."""

    def to_json(self, key: str) -> dict[str, Any]:
        return {"losses": {d: ms.to_json() for d, ms in self.losses.items()}, key: self.objective_value.to_json(),
                "tokens": self.tokens, "weights": dict(self.weights), "seeds": list(self.seeds),
                "curve": self.curve.to_json(), "train_curve": self.train_curve.to_json()}

    @classmethod
    def from_json(cls, obj: Any, key: str, path: str = "") -> TargetResult:
        r = _Reader(obj, path)
        weights = {d: _check(w, "number", p) for d, w, p in r.items("weights")}
        train = r.opt("train_curve", default={})
        return cls(**_mix_fields(r, key), weights=weights, curve=Curve.from_json(r.req("curve"), r.at("curve")),
                   train_curve=TrainCurve.from_json(train, r.at("train_curve")))


@dataclass(frozen=True)
class CurvePoint:
    """Two mixes at one evaluation point, paired by seed (:func:`~autoscale_data.runner.metrics.compare_curves`)."""

    tokens: float
    """Training tokens at this point."""
    reference: MeanStd
    """The reference mix's objective (the fixed AutoScale mix, or uniform)."""
    other: MeanStd
    """The other mix's objective."""
    difference: MeanStd
    """``other - reference`` per seed (negative: the other mix is better)."""
    reference_shares: dict[str, float] | None = None
    """Seed-mean share of each domain in the reference's training tokens so far (when recorded)."""
    other_shares: dict[str, float] | None = None
    """The same for the other mix."""
    plan_shares: dict[str, float] | None = None
    """The mixture plan's optimum for these tokens (anytime comparison, past the plan's first budget)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens": self.tokens, "reference": self.reference.to_json(),
                               "other": self.other.to_json(), "difference": self.difference.to_json()}
        for name in ("reference_shares", "other_shares", "plan_shares"):
            if getattr(self, name) is not None:
                out[name] = dict(getattr(self, name))
        return out

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> CurvePoint:
        r = _Reader(obj, path)
        return cls(tokens=r.req("tokens", "number"),
                   **{k: MeanStd.from_json(r.req(k), r.at(k)) for k in ("reference", "other", "difference")},
                   **{k: _shares(r.opt(k), r.at(k)) for k in ("reference_shares", "other_shares", "plan_shares")})


def _points(value: Any, path: str) -> list[CurvePoint]:
    _check(value, "list", path)
    return [CurvePoint.from_json(p, f"{path}[{k}]") for k, p in enumerate(value)]


@dataclass(frozen=True)
class CurveComparison:
    """One mix against another at every shared evaluation point, paired by seed."""

    seeds: list[int]
    """Seeds present in both mixes."""
    points: list[CurvePoint]
    """One entry per evaluation point present in every compared curve."""

    def to_json(self) -> dict[str, Any]:
        return {"seeds": list(self.seeds), "points": [p.to_json() for p in self.points]}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> CurveComparison:
        r = _Reader(obj, path)
        return cls(seeds=list(r.req("seeds", "list")), points=_points(r.req("points"), r.at("points")))


@dataclass(frozen=True)
class VersusUniform:
    """A target mix minus uniform, paired by seed (``vs_uniform[label]``)."""

    curve: CurveComparison
    """Along the run, at every shared evaluation point."""
    final: dict[str, MeanStd]
    """At the end, per domain and under the objective's key."""

    def to_json(self) -> dict[str, Any]:
        return {"curve": self.curve.to_json(), "final": {k: v.to_json() for k, v in self.final.items()}}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> VersusUniform:
        r = _Reader(obj, path)
        return cls(curve=CurveComparison.from_json(r.req("curve"), r.at("curve")),
                   final=_mean_stds(r.req("final"), r.at("final")))


@dataclass(frozen=True)
class AnytimeComparison:
    """The anytime schedule against the fixed AutoScale mix (``anytime_vs_fixed``), or why it is missing."""

    available: bool
    """Whether there are points to compare."""
    reason: str | None = None
    """Why it is not available (``None`` when it is)."""
    objective: str | None = None
    """The objective's key compared (present once both mixes have finished runs)."""
    seeds: list[int] | None = None
    """Seeds with both an ``autoscale`` and an ``autoscale_anytime`` run (``None``: not compared)."""
    points: list[CurvePoint] | None = None
    """Reference = fixed, other = anytime, at every shared evaluation point (``None``: not compared)."""
    plan_decreasing: list[str] | None = None
    """Domains whose DDO allocation decreases from N1 to N2 (the plan's monotone envelope applies)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"available": self.available}
        if self.objective is not None:
            out["objective"] = self.objective
        if self.points is not None:
            out.update({"seeds": list(self.seeds or []), "points": [p.to_json() for p in self.points]})
        if self.plan_decreasing is not None:
            out["plan_decreasing"] = list(self.plan_decreasing)
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> AnytimeComparison:
        r = _Reader(obj, path)
        available = r.req("available", "bool")
        compared = available or "points" in r.obj
        return cls(available=available, reason=r.opt("reason", "str"), objective=r.opt("objective", "str"),
                   seeds=list(r.req("seeds", "list")) if compared else None,
                   points=_points(r.req("points"), r.at("points")) if compared else None,
                   plan_decreasing=None if r.opt("plan_decreasing") is None
                   else list(r.req("plan_decreasing", "list")))


@dataclass(frozen=True)
class TokensSaved:
    """How many fewer tokens AutoScale needed to reach a baseline's final value (:func:`~.metrics.tokens_saved`).

    Which keys the JSON holds follows from ``status``: ``no_data`` only ``status`` and
    ``saved_fraction``; ``not_reached`` adds the reverse comparison (``baseline_*``).
    """

    status: str
    """``reached``, ``at_first_eval`` (an upper bound on the tokens), ``not_reached`` or ``no_data``."""
    saved_fraction: float | None = None
    """``1 - T / T_b``: AutoScale reached the baseline's final value at ``T`` of the baseline's ``T_b`` tokens."""
    baseline_final: float | None = None
    """The baseline's final value."""
    baseline_tokens: float | None = None
    """The baseline's tokens at its final evaluation."""
    autoscale_final: float | None = None
    """AutoScale's final value."""
    autoscale_tokens: float | None = None
    """AutoScale's tokens at its final evaluation."""
    tokens_to_baseline_final: float | None = None
    """Tokens AutoScale needed to reach the baseline's final value (``None``: not reached)."""
    signed_fraction: float | None = None
    """The saving, or minus ``baseline_saved_fraction`` when not reached (``None``: neither reached)."""
    baseline_tokens_to_autoscale_final: float | None = None
    """When not reached: tokens the baseline needed to reach AutoScale's final value."""
    baseline_saved_fraction: float | None = None
    """When not reached: the saving the baseline would claim against AutoScale."""
    baseline_status: str | None = None
    """When not reached: the status of that reverse comparison."""

    def to_json(self) -> dict[str, Any]:
        if self.status == "no_data":
            return {"status": self.status, "saved_fraction": self.saved_fraction}
        out: dict[str, Any] = {"baseline_final": self.baseline_final, "baseline_tokens": self.baseline_tokens,
                               "autoscale_final": self.autoscale_final, "autoscale_tokens": self.autoscale_tokens,
                               "status": self.status, "tokens_to_baseline_final": self.tokens_to_baseline_final,
                               "saved_fraction": self.saved_fraction}
        if self.status == "not_reached":
            out.update({"baseline_tokens_to_autoscale_final": self.baseline_tokens_to_autoscale_final,
                        "baseline_saved_fraction": self.baseline_saved_fraction,
                        "baseline_status": self.baseline_status})
        out["signed_fraction"] = self.signed_fraction
        return out

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> TokensSaved:
        r = _Reader(obj, path)
        numbers = ("saved_fraction", "baseline_final", "baseline_tokens", "autoscale_final", "autoscale_tokens",
                   "tokens_to_baseline_final", "signed_fraction", "baseline_tokens_to_autoscale_final",
                   "baseline_saved_fraction")
        return cls(status=r.req("status", "str"), baseline_status=r.opt("baseline_status", "str"),
                   **{k: r.opt(k, "number") for k in numbers})


@dataclass(frozen=True)
class Verdict:
    """One mix against another beyond seed noise, paired by seed (:func:`~.metrics.paired_verdict`).

    The report gives one per target comparison (``verdicts[baseline]``, AutoScale against that
    baseline) and states it before any percentage; :func:`~.wording.comparison_verdict` words it.
    """

    method: str
    """The mix judged (``autoscale``)."""
    baseline: str
    """The mix it is compared with."""
    verdict: str
    """``better``, ``worse``, ``not_distinguishable`` or ``cannot_judge`` (fewer than two paired seeds)."""
    difference: MeanStd
    """``method - baseline`` of the final objective over the paired seeds (negative: the method is better)."""
    seeds: list[int] = field(default_factory=list)
    """The paired seeds."""
    level: float = 0.95
    """Confidence level of the interval."""
    ci_low: float | None = None
    """Lower end of the Student-t interval of the mean difference (``None`` with one seed)."""
    ci_high: float | None = None
    """Upper end of that interval."""
    method_wins: int = 0
    """Seeds on which the method's final value is lower than the baseline's."""

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "baseline": self.baseline, "verdict": self.verdict,
                "difference": self.difference.to_json(), "seeds": list(self.seeds), "level": self.level,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "method_wins": self.method_wins}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> Verdict:
        r = _Reader(obj, path)
        return cls(method=r.req("method", "str"), baseline=r.req("baseline", "str"), verdict=r.req("verdict", "str"),
                   difference=MeanStd.from_json(r.req("difference"), r.at("difference")),
                   seeds=list(r.req("seeds", "list")), level=r.req("level", "number"),
                   ci_low=r.opt("ci_low", "number"), ci_high=r.opt("ci_high", "number"),
                   method_wins=r.req("method_wins", "int"))


@dataclass(frozen=True)
class ReferenceLoss:
    """One domain's reference losses on the held-out tokens the runner scores (:mod:`~.reference`)."""

    unigram: float
    """Entropy of the held-out tokens' own frequencies (nats/token): the best context-free predictor's loss."""
    uniform: float
    """``ln(vocab_size)``: a uniform guess's loss."""
    tokens: int
    """Held-out tokens counted (the positions a causal model predicts; every token for a masked LM)."""
    scored_tokens: float
    """Tokens one evaluation scores: ``tokens`` for a causal model; for a masked LM the expected masked
    share of them times ``eval.mlm_passes``."""

    def to_json(self) -> dict[str, Any]:
        return {"unigram": self.unigram, "uniform": self.uniform, "tokens": self.tokens,
                "scored_tokens": self.scored_tokens}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> ReferenceLoss:
        r = _Reader(obj, path)
        return cls(unigram=r.req("unigram", "number"), uniform=r.req("uniform", "number"),
                   tokens=r.req("tokens", "int"), scored_tokens=r.req("scored_tokens", "number"))


@dataclass(frozen=True)
class FailedRun:
    """A run that failed and is left out of the fits."""

    run_id: str
    """The run's id (its folder under ``OUT/runs``)."""
    name: str
    """``kind@scale label sSEED``."""
    reason: str
    """The failure's reason, from its ``failure.json``."""

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "reason": self.reason}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> FailedRun:
        r = _Reader(obj, path)
        return cls(run_id=r.req("run_id", "str"), name=r.req("name", "str"), reason=r.req("reason", "str"))


@dataclass(frozen=True)
class ExtensionResult:
    """A finished target run extended to a larger budget (``autoscale-data extend``)."""

    run_id: str
    """The extension's id (its folder under ``OUT/runs``)."""
    label: str
    """The target mix it continues (its parent's label)."""
    seed: int
    """The parent's seed."""
    parent: str
    """The run it continues (a target run, or an earlier extension)."""
    parent_tokens: int
    """Tokens the parent had trained."""
    tokens: int
    """Tokens trained at its end, the parent's included."""
    objective_value: float
    """The objective at its end."""
    parent_value: float | None
    """The parent's objective at the parent's end (``None`` when the parent is not in the folder)."""
    lr: str
    """The learning-rate schedule of the new steps (``rewarm_decay`` or ``constant``)."""

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "label": self.label, "seed": self.seed, "parent": self.parent,
                "parent_tokens": self.parent_tokens, "tokens": self.tokens, "objective_value": self.objective_value,
                "parent_value": self.parent_value, "lr": self.lr}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> ExtensionResult:
        r = _Reader(obj, path)
        return cls(run_id=r.req("run_id", "str"), label=r.req("label", "str"), seed=r.req("seed", "int"),
                   parent=r.req("parent", "str"), parent_tokens=r.req("parent_tokens", "int"),
                   tokens=r.req("tokens", "int"), objective_value=r.req("objective_value", "number"),
                   parent_value=r.opt("parent_value", "number"), lr=r.req("lr", "str"))


@dataclass(frozen=True)
class Throughput:
    """Training speed over the finished runs of the current plan."""

    runs: int = 0
    """Finished runs."""
    tokens_per_s_median: float | None = None
    """Median training tokens per second (``None`` without runs)."""
    data_wait_fraction_median: float | None = None
    """Median share of step time spent waiting for data."""
    data_wait_fraction_max: float | None = None
    """Largest share of step time spent waiting for data."""
    devices: list[str] = field(default_factory=list)
    """Devices the runs trained on, sorted."""
    train_hours: float = 0.0
    """Training wall time summed over the runs, in hours."""

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "tokens_per_s_median": self.tokens_per_s_median,
                "data_wait_fraction_median": self.data_wait_fraction_median,
                "data_wait_fraction_max": self.data_wait_fraction_max, "devices": list(self.devices),
                "train_hours": self.train_hours}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> Throughput:
        r = _Reader(obj, path)
        return cls(runs=r.req("runs", "int"), tokens_per_s_median=r.opt("tokens_per_s_median", "number"),
                   data_wait_fraction_median=r.opt("data_wait_fraction_median", "number"),
                   data_wait_fraction_max=r.opt("data_wait_fraction_max", "number"),
                   devices=list(r.req("devices", "list")), train_hours=r.req("train_hours", "number"))


def _fit_files(value: Any, path: str) -> dict[str, dict[str, Any]]:
    return {k: dict(_Reader(v, p).obj) for k, v, p in _Reader(value, path).items()}


# ------------------------------------------------------------------------------ methods compared
@dataclass(frozen=True)
class MethodCost:
    """What choosing a mix cost: the runs it needed before its targets (``fits/methods.json``)."""

    runs: int
    """Runs trained to choose the mix (0: known from the stores)."""
    tokens: int
    """Their training tokens."""
    wall_s: float
    """Their training and evaluation time, summed over runs (as if one after another)."""
    tokens_ratio: float | None
    """``tokens`` over one target run's tokens."""
    wall_ratio: float | None
    """``wall_s`` over one target run's (the median of the finished target runs; ``None`` before any)."""

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "tokens": self.tokens, "wall_s": self.wall_s, "tokens_ratio": self.tokens_ratio,
                "wall_ratio": self.wall_ratio}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> MethodCost:
        r = _Reader(obj, path)
        return cls(runs=r.req("runs", "int"), tokens=r.req("tokens", "int"), wall_s=r.req("wall_s", "number"),
                   tokens_ratio=r.opt("tokens_ratio", "number"), wall_ratio=r.opt("wall_ratio", "number"))


@dataclass(frozen=True)
class MethodRow:
    """One mixing method in the comparison (a row of the paper's table for the user's runs)."""

    source: str
    """Where the mix comes from (the method and its paper)."""
    weights: dict[str, float] | None
    """The target mix (``None``: the method was skipped)."""
    cost: MethodCost
    """What choosing the mix cost."""
    objective_value: MeanStd | None = None
    """Final objective over the target seeds (``None``: no finished target run)."""
    per_seed: dict[str, float] = field(default_factory=dict)
    """Final objective per target seed (seed as a string)."""
    losses: dict[str, MeanStd] = field(default_factory=dict)
    """Final validation loss per domain."""
    worst_domain: str | None = None
    """The domain with the highest mean final loss."""
    vs_uniform: dict[str, Any] | None = None
    """:func:`~autoscale_data.runner.metrics.paired_verdict` of this mix against uniform, paired by seed, with
    ``per_seed`` differences (``None`` for uniform itself or without uniform runs)."""
    skipped: str | None = None
    """Why the method trained no target (``None`` when it did)."""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "weights": self.weights, "cost": self.cost.to_json(),
                "objective_value": None if self.objective_value is None else self.objective_value.to_json(),
                "per_seed": dict(self.per_seed), "losses": {d: m.to_json() for d, m in self.losses.items()},
                "worst_domain": self.worst_domain, "vs_uniform": self.vs_uniform, "skipped": self.skipped}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> MethodRow:
        r = _Reader(obj, path)
        value = r.opt("objective_value")
        return cls(source=r.req("source", "str"), weights=_shares(r.opt("weights"), r.at("weights")),
                   cost=MethodCost.from_json(r.req("cost"), r.at("cost")),
                   objective_value=None if value is None else MeanStd.from_json(value, r.at("objective_value")),
                   per_seed={k: _check(v, "number", f"{r.at('per_seed')}.{k}")
                             for k, v in _Reader(r.req("per_seed"), r.at("per_seed")).obj.items()},
                   losses=_mean_stds(r.req("losses"), r.at("losses")), worst_domain=r.opt("worst_domain", "str"),
                   vs_uniform=None if r.opt("vs_uniform") is None else dict(r.req("vs_uniform", "map")),
                   skipped=r.opt("skipped", "str"))


@dataclass(frozen=True)
class Comparison:
    """Every mixing method of the plan side by side: results, tokens saved by AutoScale, and costs."""

    target_tokens: int
    """Tokens of one target run."""
    target_wall_s: float | None
    """Median wall time of the finished target runs (``None`` before any)."""
    rows: dict[str, MethodRow] = field(default_factory=dict)
    """Method (target mix label) -> its row, in plan order."""

    def to_json(self) -> dict[str, Any]:
        return {"target_tokens": self.target_tokens, "target_wall_s": self.target_wall_s,
                "rows": {k: v.to_json() for k, v in self.rows.items()}}

    @classmethod
    def from_json(cls, obj: Any, path: str = "") -> Comparison:
        r = _Reader(obj, path)
        return cls(target_tokens=r.req("target_tokens", "int"), target_wall_s=r.opt("target_wall_s", "number"),
                   rows={k: MethodRow.from_json(v, p) for k, v, p in r.items("rows")})


# ------------------------------------------------------------------------------------------ report
@dataclass(frozen=True)
class Report:
    """The experiment's results, as :func:`~autoscale_data.runner.report.build_report` collects them.

    ``to_json()`` is the content of ``OUT/report.json``; :meth:`load` reads that file back.
    """

    out_dir: str = ""
    """The output folder, resolved."""
    name: str | None = None
    """The experiment's name (config ``name``)."""
    objective: str = DEFAULT_OBJECTIVE
    """The DDO objective (config ``ddo.objective``); :attr:`objective_key` names its JSON key."""
    domains: list[str] = field(default_factory=list)
    """Domain names, in the stores' order."""
    failed_runs: list[FailedRun] = field(default_factory=list)
    """Runs that failed (left out of the fits)."""
    stale_runs: int = 0
    """Runs in the folder that belong to an earlier config (not reported)."""
    target_budget: int | None = None
    """The target budget in tokens (config ``target.budget``)."""
    proxies: dict[str, dict[str, MixResult]] = field(default_factory=dict)
    """DDO proxies: budget (a string, ascending) -> run label -> seed-averaged result."""
    ddo: dict[str, dict[str, Any]] = field(default_factory=dict)
    """DDO fit per budget, as ``fits/ddo_<N>.json`` holds it (weights, allocation_tokens, status, aar …)."""
    bootstrap: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Bootstrap per budget, as ``fits/bootstrap_<N>.json`` holds it (available, ci_low, ci_high, method …)."""
    projection: dict[str, Any] | None = None
    """The projection to the target budget, as ``fits/projection.json`` holds it (``None`` before the fits)."""
    target_mixes: dict[str, dict[str, float]] | None = None
    """Target mix label -> weights, as ``fits/target_mixes.json`` holds them (``None`` before the fits)."""
    targets: dict[str, TargetResult] = field(default_factory=dict)
    """Finished target mixes by label (sorted)."""
    missing_targets: list[str] = field(default_factory=list)
    """Target mixes of the plan without a finished run."""
    anytime_vs_fixed: AnytimeComparison | None = None
    """The anytime schedule against the fixed AutoScale mix (``None`` when not asked for)."""
    vs_uniform: dict[str, VersusUniform] = field(default_factory=dict)
    """Each target mix minus uniform, paired by seed (empty without uniform runs)."""
    tokens_saved: dict[str, TokensSaved] = field(default_factory=dict)
    """Baseline label -> tokens AutoScale saved, on the seed-mean curves."""
    tokens_saved_per_seed: dict[str, dict[str, TokensSaved]] = field(default_factory=dict)
    """Baseline label -> seed (a string) -> tokens saved on that seed's own pair of curves."""
    throughput: Throughput = field(default_factory=Throughput)
    """Training speed of the finished runs."""
    extensions: list[ExtensionResult] = field(default_factory=list)
    """Target runs extended to larger budgets (``autoscale-data extend``), by label, seed and budget."""
    comparison: Comparison | None = None
    """Every mixing method side by side with its cost (``None`` for a folder without ``fits/methods.json``)."""
    plots: list[str] | None = None
    """Plot files written, relative to the output folder (``None`` until :func:`write_report` draws them)."""
    repetition: dict[str, Any] | None = None
    """Each target mix's epochs and effective tokens per domain and the supply flags, as
    ``fits/repetition.json`` holds them (``None`` before the fits)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """Baseline label -> AutoScale against it beyond seed noise (paired by seed); stated before tokens saved."""
    reference_losses: dict[str, ReferenceLoss] = field(default_factory=dict)
    """Domain -> the held-out data's unigram and uniform-guess losses (empty for folders of older versions)."""
    not_beating_unigram: dict[str, list[str]] = field(default_factory=dict)
    """Target mix -> domains whose final validation loss is not below the domain's unigram loss."""

    @property
    def objective_key(self) -> str:
        """The key that holds the objective in the mix results: ``"mean_ppl"`` or ``"mean_loss"``."""
        return objective_key(self.objective)

    def to_json(self) -> dict[str, Any]:
        """The JSON content of ``report.json``."""
        key = self.objective_key
        out: dict[str, Any] = {
            "out_dir": self.out_dir, "name": self.name, "objective": self.objective, "domains": list(self.domains),
            "failed_runs": [f.to_json() for f in self.failed_runs], "stale_runs": self.stale_runs,
            "target_budget": self.target_budget,
            "proxies": {s: {label: m.to_json(key) for label, m in rows.items()} for s, rows in self.proxies.items()},
            "ddo": {s: dict(f) for s, f in self.ddo.items()},
            "bootstrap": {s: dict(b) for s, b in self.bootstrap.items()},
            "projection": self.projection, "target_mixes": self.target_mixes,
            "targets": {label: t.to_json(key) for label, t in self.targets.items()},
            "missing_targets": list(self.missing_targets),
            "anytime_vs_fixed": None if self.anytime_vs_fixed is None else self.anytime_vs_fixed.to_json(),
            "vs_uniform": {label: v.to_json() for label, v in self.vs_uniform.items()},
            "tokens_saved": {label: s.to_json() for label, s in self.tokens_saved.items()},
            "tokens_saved_per_seed": {label: {seed: s.to_json() for seed, s in per.items()}
                                      for label, per in self.tokens_saved_per_seed.items()},
            "throughput": self.throughput.to_json(), "extensions": [e.to_json() for e in self.extensions]}
        if self.comparison is not None:
            out["comparison"] = self.comparison.to_json()
        if self.plots is not None:
            out["plots"] = list(self.plots)
        if self.repetition is not None:
            out["repetition"] = self.repetition
        out["verdicts"] = {label: v.to_json() for label, v in self.verdicts.items()}
        out["reference_losses"] = {d: ref.to_json() for d, ref in self.reference_losses.items()}
        out["not_beating_unigram"] = {label: list(ds) for label, ds in self.not_beating_unigram.items()}
        return out

    @classmethod
    def from_json(cls, obj: Any) -> Report:
        """Read :meth:`to_json`'s content (a parsed ``report.json``).

        Raises:
            ValueError: a key is missing or of the wrong type; the message names its path.
        """
        r = _Reader(obj, "")
        objective = r.req("objective", "str")
        key = objective_key(objective)
        proxies = {scale: {label: MixResult.from_json(m, key, p) for label, m, p in _Reader(rows, ps).items()}
                   for scale, rows, ps in sorted(r.items("proxies"), key=lambda kv: _budget(kv[0], kv[2]))}
        anytime = r.opt("anytime_vs_fixed")
        mixes = r.opt("target_mixes", "map")
        failed = r.req("failed_runs", "list")
        return cls(
            out_dir=r.req("out_dir", "str"), name=r.opt("name", "str"), objective=objective,
            domains=[_check(d, "str", f"domains[{k}]") for k, d in enumerate(r.req("domains", "list"))],
            failed_runs=[FailedRun.from_json(f, f"failed_runs[{k}]") for k, f in enumerate(failed)],
            stale_runs=r.opt("stale_runs", "int", 0), target_budget=r.opt("target_budget", "number"),
            proxies=proxies, ddo=_fit_files(r.req("ddo"), "ddo"), bootstrap=_fit_files(r.req("bootstrap"), "bootstrap"),
            projection=None if r.opt("projection") is None else dict(r.sub("projection").obj),
            target_mixes=None if mixes is None else {m: dict(_Reader(w, p).obj) for m, w, p in r.items("target_mixes")},
            targets={label: TargetResult.from_json(t, key, p) for label, t, p in r.items("targets")},
            missing_targets=list(r.req("missing_targets", "list")),
            anytime_vs_fixed=None if anytime is None else AnytimeComparison.from_json(anytime, "anytime_vs_fixed"),
            vs_uniform={label: VersusUniform.from_json(v, p) for label, v, p in
                        (r.items("vs_uniform") if r.opt("vs_uniform") is not None else [])},
            tokens_saved={label: TokensSaved.from_json(s, p) for label, s, p in r.items("tokens_saved")},
            tokens_saved_per_seed={label: {seed: TokensSaved.from_json(s, sp) for seed, s, sp in _Reader(per, p).items()}
                                   for label, per, p in (r.items("tokens_saved_per_seed")
                                                         if r.opt("tokens_saved_per_seed") is not None else [])},
            throughput=Throughput.from_json(r.req("throughput"), "throughput"),
            extensions=[ExtensionResult.from_json(e, f"extensions[{k}]")
                        for k, e in enumerate(r.opt("extensions", "list", []))],
            comparison=None if r.opt("comparison") is None else Comparison.from_json(r.req("comparison"), "comparison"),
            plots=None if r.opt("plots") is None else [str(p) for p in r.req("plots", "list")],
            repetition=None if r.opt("repetition") is None else dict(r.sub("repetition").obj),
            verdicts={label: Verdict.from_json(v, p) for label, v, p in
                      (r.items("verdicts") if r.opt("verdicts") is not None else [])},
            reference_losses={d: ReferenceLoss.from_json(v, p) for d, v, p in
                              (r.items("reference_losses") if r.opt("reference_losses") is not None else [])},
            not_beating_unigram={label: list(_check(v, "list", p)) for label, v, p in
                                 (r.items("not_beating_unigram") if r.opt("not_beating_unigram") is not None
                                  else [])})

    @classmethod
    def load(cls, out_dir: str | os.PathLike[str]) -> Report:
        """Read ``OUT/report.json`` (written by :func:`~autoscale_data.runner.report.write_report`).

        Raises:
            FileNotFoundError: the folder has no report yet.
            ValueError: the file is not JSON, or a key is missing or of the wrong type.
        """
        path = Path(out_dir) / layout.REPORT_JSON
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"{os.fspath(path)!r} does not exist: run `autoscale-data report` first") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{os.fspath(path)!r} is not valid JSON: {e}") from None
        try:
            return cls.from_json(obj)
        except ValueError as e:
            raise ValueError(f"{os.fspath(path)!r}: {e}") from None


def _budget(scale: str, path: str) -> int:
    try:
        return int(scale)
    except ValueError:
        raise ValueError(f"report key {path!r} is invalid: expected a budget in tokens (an integer)") from None

"""Online-mixing target runs (``target.baselines: [ado, odm]``): their spec and the per-step hook of training.

An online run is a target run whose stream follows a controller
(:class:`~autoscale_data.dataset.online.OnlineMixture`): it starts at the controller's initial
weights (ADO: the natural mix, its prior; ODM: uniform) and every ``every`` optimizer steps the
controller sees the all-reduced per-domain training losses and decides a later segment.

- :class:`OnlineConfig`: the controller and its settings (JSON, validated).
- :func:`online_target_spec`: the target :class:`OnlineRunSpec` (a :class:`RunSpec` that carries
  the controller config in ``online``; its run id hashes it).
- :class:`OnlineStepHook` (:func:`online_hook`): what the training loop calls: ``on_tokens`` with
  each micro-step's per-token losses, ``on_step`` after each optimizer step. Its state is part of
  the dataset's state (the segment log, the controller, the loss window), which the runner's
  checkpoints already hold, so a run killed and resumed continues exactly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .._checks import check_int
from ..dataset.online import OnlineMixture
from ..online import ADO, ODM
from .plan import DomainInfo, RunSpec, id_payload, target_spec

__all__ = ["ONLINE_METHODS", "OnlineConfig", "OnlineRunSpec", "OnlineStepHook", "online_hook", "online_target_spec"]

ONLINE_METHODS = ("ado", "odm")
_OPTIONS = {"ado": ("warmup", "fit_after", "refit_every", "min_prob", "history_decay", "grid"),
            "odm": ("reward_scale",)}


@dataclass(frozen=True)
class OnlineConfig:
    """An online-mixing target run's controller.

    Args:
        method: ``"ado"`` or ``"odm"``.
        every: optimizer steps per segment (between controller updates).
        lookahead: segments decided ahead (default: ``OnlineMixture``'s, from ``prefetch_steps``).
        options: the controller's keyword settings (ADO: ``warmup``, ``fit_after``, ``refit_every``,
            ``min_prob``, ``history_decay``, ``grid``; ODM: ``reward_scale``).
    """

    method: str
    every: int = 10
    lookahead: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in ONLINE_METHODS:
            raise ValueError(f"online method must be one of {list(ONLINE_METHODS)}, got {self.method!r}")
        check_int("online.every", self.every)
        check_int("online.lookahead", self.lookahead, allow_none=True)
        unknown = sorted(set(self.options) - set(_OPTIONS[self.method]))
        if unknown:
            raise ValueError(f"unknown {self.method} option(s) {unknown}; known: {list(_OPTIONS[self.method])}")
        object.__setattr__(self, "options", dict(self.options))

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "every": self.every, "lookahead": self.lookahead,
                "options": dict(sorted(self.options.items()))}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OnlineConfig:
        return cls(obj["method"], int(obj.get("every", 10)), obj.get("lookahead"), dict(obj.get("options") or {}))

    def controller(self, names: list[str], natural: Mapping[str, float]) -> Any:
        """A fresh controller over ``names`` (ADO's prior: ``natural``)."""
        if self.method == "ado":
            return ADO(names, {n: float(natural[n]) for n in names}, **self.options)
        return ODM(names, **self.options)

    def initial_weights(self, names: list[str], natural: Mapping[str, float]) -> dict[str, float]:
        return self.controller(names, natural).initial_weights()


@dataclass(frozen=True)
class OnlineRunSpec(RunSpec):
    """A target :class:`RunSpec` whose stream follows a controller: ``online`` is its :class:`OnlineConfig` JSON."""

    online: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "online": dict(self.online)}


def online_target_spec(config: Any, domains: DomainInfo, online: OnlineConfig, seed: int) -> OnlineRunSpec:
    """The target run of ``online.method`` at ``config.target.budget``: sequences at the initial weights,
    the run id hashing the controller config too (so an ADO run never shares an id with a fixed one)."""
    names = list(domains.names)
    base = target_spec(config, domains, online.method, online.initial_weights(names, domains.natural_weights()),
                       seed)
    payload = {**id_payload(base.settings, base.sequences, base.seed, base.eval_points), "online": online.to_json()}
    run_id = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    fields = {k: v for k, v in asdict(base).items() if k != "run_id"}
    return OnlineRunSpec(run_id=run_id, **fields, online=online.to_json())


class OnlineStepHook:
    """The training loop's side of an online run.

    Args:
        dataset: the run's ``ScaleAwareMixtureDataset`` (fresh: before its state is loaded on a resume).
        online: the run's :class:`OnlineConfig`.
        natural: the natural mix (ADO's prior).
        global_batch_size: sequences per optimizer step, all ranks and micro-steps together.
        group: the process group of the update's all-reduce (default: the world).
    """

    def __init__(self, dataset: Any, online: OnlineConfig, natural: Mapping[str, float], global_batch_size: int,
                 group: Any = None) -> None:
        names = list(dataset.domain_names)
        self.group = group
        self.mixture = OnlineMixture(dataset, online.controller(names, natural), every=online.every,
                                     sequences_per_step=global_batch_size, lookahead=online.lookahead)

    def on_tokens(self, token_losses: Any, domain: Any, mask: Any = None) -> None:
        """Every micro-step: its per-token losses (``[B, T]``, any device), domain ids and optional mask."""
        self.mixture.meter.update(token_losses.detach(), domain, mask=mask)

    def on_step(self, done: int) -> dict[str, float] | None:
        """After optimizer step ``done`` (1-based), on every rank: the update when it is due."""
        if self.mixture.due(done):
            return self.mixture.update(done, group=self.group)
        return None

    def summary(self) -> dict[str, Any]:
        """For the run's result: the controller, the segments decided and their weights."""
        log = self.mixture.segment_log()
        return {"controller": self.mixture.config["controller"], "every": self.mixture.every,
                "lookahead": self.mixture.lookahead, "starts": log["starts"], "weights": log["weights"]}


def online_hook(dataset: Any, spec: RunSpec, natural: Mapping[str, float], global_batch_size: int,
                group: Any = None) -> OnlineStepHook | None:
    """The hook of an :class:`OnlineRunSpec` (``None`` for any other run)."""
    online = getattr(spec, "online", None)
    if not online:
        return None
    return OnlineStepHook(dataset, OnlineConfig.from_json(online), natural, global_batch_size, group)

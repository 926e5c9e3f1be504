"""Online-mixing target runs (``target.baselines: [ado, odm]``): a mixing method and a step hook.

An online run is a target run whose stream follows a controller
(:class:`~autoscale_data.dataset.online.OnlineMixture`) through the runner's two general mechanisms: the
mixing method :class:`OnlineMethod` (no runs before its targets; its own target specs,
:func:`online_target_spec`, whose ``hook`` is an :class:`OnlineHookSpec`, so the controller enters the run id)
and the step hook :class:`OnlineMixingHook`. How it trains and resumes: docs/runner.md, "Other mixing
methods".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._records import fields_to_json
from .. import registry
from ..planning.data import DomainInfo
from ..planning.specs import RunSpec, target_spec
from ..training.hooks import HookBatch, HookContext
from .methods import MethodContext, MixingMethod, TargetChoice

__all__ = ["OnlineHookSpec", "OnlineMethod", "OnlineMixingHook", "make_controller", "online_hook_config",
           "online_target_spec"]


@dataclass(frozen=True)
class OnlineHookSpec(registry.HookSpec):
    """The config of an online run's step hook (kind ``ado`` or ``odm``), from the ``online:`` section."""

    every: int
    """Optimizer steps between two updates of the mix."""
    lookahead: int | None = None
    """Segments decided ahead (``None``: the dataset's default)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The controller's settings."""


def make_controller(kind: str, names: Sequence[str], natural: Mapping[str, float],
                    options: Mapping[str, Any]) -> Any:
    """A fresh controller ``kind`` (``"ado"``: prior ``natural``; ``"odm"``) over ``names`` with ``options``.

    Raises:
        ValueError: an unknown kind, or a setting the controller refuses (it names the value).
    """
    from ...online import ADO, ODM

    if kind == registry.ADO:
        return ADO(list(names), {n: float(natural[n]) for n in names}, **dict(options))
    if kind == registry.ODM:
        return ODM(list(names), **dict(options))
    raise ValueError(f"online controller {kind!r} is unknown: expected one of "
                     f"{list(registry.names(registry.ONLINE))}")


def online_hook_config(config: Any, method: str) -> OnlineHookSpec:
    """The step-hook config of an online target run of ``method`` under ``config``'s ``online:`` section."""
    from ..config.method_sections import OnlineMixingConfig

    s = config.online or OnlineMixingConfig()
    return OnlineHookSpec(kind=method, every=int(s.every), lookahead=s.lookahead, options=s.options(method))


def online_target_spec(config: Any, domains: DomainInfo, method: str, seed: int) -> RunSpec:
    """The target run of ``method`` (``"ado"`` / ``"odm"``) at ``seed``: sequences at the controller's
    initial weights, its hook config (and so the controller's settings) in the run id."""
    hook = online_hook_config(config, method)
    initial = make_controller(method, domains.names, domains.natural_weights(),
                              hook.options).initial_weights()
    return target_spec(config, domains, method, initial, seed, hook=hook)


class OnlineMethod(MixingMethod):
    """``ado`` / ``odm``: one online-mixing target run per target seed; no runs before them."""

    def check(self, ctx: MethodContext) -> None:
        hook = online_hook_config(ctx.config, self.name)
        try:
            make_controller(self.name, ctx.domains.names, ctx.domains.natural_weights(), hook.options)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"config online.{self.name} = {hook.options!r} does not make a {self.name} "
                             f"controller over the stores' domains {list(ctx.domains.names)}: "
                             f"{exc}") from None

    def choose(self, ctx: MethodContext) -> TargetChoice:
        specs = tuple(online_target_spec(ctx.config, ctx.domains, self.name, seed)
                      for seed in ctx.config.target.seeds)
        return TargetChoice(specs=specs, details={
            "online": fields_to_json(specs[0].hook, skip=("kind",)), "initial_weights": specs[0].weights,
            "note": "chosen during each target run: the realised mix is in its result.json "
                    "(step_hook.realised)"})


class OnlineMixingHook:
    """The trainer's side of an online run (the step-hook protocol of
    :mod:`autoscale_data.runner.training.hooks`)."""

    spec = OnlineHookSpec

    def __init__(self, hook: OnlineHookSpec) -> None:
        self.kind, self.every, self.options = hook.kind, int(hook.every), dict(hook.options)
        self.lookahead = None if hook.lookahead is None else int(hook.lookahead)
        self.mixture: Any = None
        self.names: tuple[str, ...] = ()

    def bind(self, ctx: HookContext) -> None:
        """Put the run's dataset in online mode (fresh: before any state is loaded into it)."""
        from ...dataset import OnlineMixture

        self.names = tuple(ctx.names)
        controller = make_controller(self.kind, self.names, ctx.domains.natural_weights(), self.options)
        self.mixture = OnlineMixture(ctx.dataset, controller, every=self.every,
                                     sequences_per_step=ctx.config.global_batch_size,
                                     lookahead=self.lookahead)

    def loss(self, batch: HookBatch) -> None:
        """The model's own loss is trained (``None``)."""
        return None

    def observe_losses(self, losses: Any, domain: Any, mask: Any) -> None:
        """Every micro-batch: the trainer's per-token losses (``[B, T]``), each sequence's domain, the
        mask."""
        self.mixture.meter.update(losses, domain, mask=mask)

    def after_step(self, step: int) -> None:
        """After optimizer step ``step``: the controller's update when it is due (on every rank)."""
        if self.mixture.due(step):
            self.mixture.update(step)

    def state_dict(self) -> dict[str, Any]:
        """The updates made (the controller itself is in the dataset's state of the same checkpoint)."""
        return {"kind": self.kind, "updates": int(self.mixture.updates)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Check the kind; the dataset's state (loaded next by the trainer) restores the controller."""
        if state.get("kind") != self.kind:
            raise ValueError(f"the checkpoint's step hook is {state.get('kind')!r}, this run's is "
                             f"{self.kind!r}")

    def summary(self) -> dict[str, Any]:
        """The controller, its updates, every decided segment (first stream position and weights) and the
        realised mix (each domain's share of the sequences decided)."""
        log = self.mixture.segment_log()
        totals = [sum(col) for col in zip(*log["counts"],
                                          strict=True)] if log["counts"] else [0] * len(self.names)
        whole = sum(totals) or 1
        return {"kind": self.kind, "controller": self.mixture.config["controller"], "every": self.every,
                "lookahead": self.mixture.lookahead, "updates": int(self.mixture.updates),
                "starts": log["starts"], "weights": log["weights"],
                "realised": {d: n / whole for d, n in zip(self.names, totals, strict=True)}}


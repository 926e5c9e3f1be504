"""The target mixing methods: how each target mix is chosen, what runs that needs, and its cost.

:class:`~autoscale_data.runner.pipeline.MixtureRunner` iterates :func:`selected_methods` (AutoScale, then
every name of ``target.baselines``) instead of naming the methods one by one. A method subclasses
:class:`MixingMethod` (its hooks: ``check``, ``selection_stages``, ``cost_runs``, ``choose``) and its
:class:`~autoscale_data.runner.registry.MethodDeclaration` names the class. The runs it trains before its
targets are ordinary :class:`~autoscale_data.runner.planning.specs.RunSpec` s, planned, trained, resumed and
counted through the same ledger and executors as the DDO proxies. ``fits/methods.json`` holds one
:class:`MethodRecord` per method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._records import Record, omitted, required
from .. import registry
from ..config import RunnerConfig
from ..config.sections import WSD
from ..planning.data import DomainInfo, batch_sequences
from ..planning.estimate import format_flops, run_flops, run_tokens
from ..planning.specs import (
    RunSpec,
    method_spec,
    proxy_config,
    recorded_anytime_spec,
    target_run_flops,
    target_spec,
)

__all__ = [
    "Anytime",
    "AutoScale",
    "DDON2",
    "DoReMi",
    "FixedMix",
    "MethodContext",
    "MethodRecord",
    "MixingLaw",
    "MixingMethod",
    "RegMix",
    "TargetChoice",
    "choose_all",
    "cost_lines",
    "mixing_method",
    "selected_methods",
    "selection_stages",
]


@dataclass(frozen=True)
class MethodContext:
    """What a method may read: the config, the stores, the output folder, the DDO proxy specs per budget,
    and, once trained, the ledger and the AutoScale fits (``None`` before)."""

    config: RunnerConfig
    domains: DomainInfo
    out: Path
    proxies: Mapping[int, Sequence[RunSpec]]
    ledger: Any = None
    fits: Any = None
    log: Callable[[str], None] = print

    @property
    def all_proxies(self) -> list[RunSpec]:
        return [s for specs in self.proxies.values() for s in specs]

    @property
    def n2_proxies(self) -> list[RunSpec]:
        return list(self.proxies.get(self.config.ddo.largest, []))

    def proxy_runs(self, budgets: Sequence[int] | None = None) -> list[RunSpec]:
        """What the DDO runs at ``budgets`` (default: all) take to train: those runs and, with ``ddo.schedule:
        wsd``, the trunk stretches they branch from."""
        chosen = [s for n, specs in self.proxies.items() if budgets is None or n in budgets for s in specs]
        if self.config.ddo.schedule != WSD:
            return chosen
        from ..planning.wsd import with_trunks, wsd_plan

        return with_trunks(chosen, wsd_plan(self.config, self.domains).trunks)


@dataclass(frozen=True)
class TargetChoice:
    """A method's target: ``weights`` (fixed-schedule runs at every target seed), its own ``specs``, or
    ``skipped`` (why nothing is trained). ``details``: what it found (into ``fits/methods.json``)."""

    weights: dict[str, float] | None = None
    specs: tuple[RunSpec, ...] = ()
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.weights is not None) + bool(self.specs) + (self.skipped is not None) != 1:
            raise ValueError("a TargetChoice holds exactly one of weights, specs or skipped")


@dataclass(frozen=True)
class MethodRecord(Record):
    """One method in ``fits/methods.json`` (``{name: record}``)."""

    name: str
    source: str
    weights: dict[str, float] | None = required()
    selection_run_ids: list[str]
    cost_run_ids: list[str]
    cost_tokens: int
    skipped: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    cost_flops: float | None = omitted(default=None)
    """The cost runs' training FLOPs (``None`` in a folder written before FLOPs were recorded)."""
    target_flops: float | None = omitted(default=None)
    """One target run's training FLOPs, the unit of the cost (``None`` as ``cost_flops``)."""


class MixingMethod:
    """One way of choosing a target mix (see the module docstring); subclasses override what they need.

    Built from its :class:`~autoscale_data.runner.registry.MethodDeclaration`: ``name``, ``source`` and
    ``order`` (its place in the plan) are the declaration's; ``after_runs`` is ``False`` for a mix known
    before any run (from the stores: uniform, natural, reference)."""

    def __init__(self, declaration: registry.MethodDeclaration) -> None:
        self.declaration = declaration
        self.name, self.source, self.order = declaration.name, declaration.source, declaration.order
        self.after_runs = declaration.runs != registry.STORES

    def check(self, ctx: MethodContext) -> None:
        """Raise ``ValueError`` for input this method cannot use, before anything trains."""

    def selection_stages(self, ctx: MethodContext) -> list[list[RunSpec]]:
        """Extra runs to train before the targets, stage by stage: a stage starts when the one before has
        finished (DoReMi's proxy reads its reference's final model); none by default."""
        return []

    def cost_runs(self, ctx: MethodContext) -> list[RunSpec]:
        """The runs whose training is the cost of choosing this mix (the report sets their tokens and wall
        time against one target run); its selection runs by default."""
        return [s for stage in self.selection_stages(ctx) for s in stage]

    def choose(self, ctx: MethodContext) -> TargetChoice:
        """From the finished runs and the fits: weights, its own target specs, or skipped with the reason."""
        raise NotImplementedError


class AutoScale(MixingMethod):
    """AutoScale: the DDO optima at N1 and N2, projected to the target budget."""

    def cost_runs(self, ctx: MethodContext) -> list[RunSpec]:
        return ctx.proxy_runs()

    def choose(self, ctx: MethodContext) -> TargetChoice:
        return TargetChoice(weights=ctx.fits.weights, details={"projection": ctx.fits.method})


class DDON2(MixingMethod):
    """The DDO optimum at N2, used as is."""

    def cost_runs(self, ctx: MethodContext) -> list[RunSpec]:
        return ctx.proxy_runs([ctx.config.ddo.largest])

    def choose(self, ctx: MethodContext) -> TargetChoice:
        return TargetChoice(weights=dict(ctx.fits.ddo[ctx.config.ddo.largest].weights))


def _reference_mix(domains: DomainInfo, spec: str | Mapping[str, float], mapping: Mapping[str, str] | None,
                   where: str) -> dict[str, float]:
    """``uniform``, ``natural``, a preset name or explicit weights over the stores' domains."""
    from ...solver import natural_weights, reference_weights, uniform_weights

    try:
        if spec == "uniform":
            return uniform_weights(domains.names)
        if spec == "natural":
            return natural_weights(domains.train_tokens)
        if isinstance(spec, str):
            return reference_weights(domains.names, preset=spec, mapping=mapping)
        unknown = sorted(set(spec) - set(domains.names))
        if unknown:
            raise ValueError(f"names unknown domains {unknown}")
        return reference_weights(domains.names, weights=spec)
    except ValueError as exc:
        raise ValueError(f"config {where} = {spec!r} does not fit the stores' domains {list(domains.names)}: "
                         f"{exc}") from None


class FixedMix(MixingMethod):
    """A mix known from the stores: ``uniform``, ``natural`` or ``reference``
    (``target.reference_weights``)."""

    def check(self, ctx: MethodContext) -> None:
        self.mix(ctx)

    def mix(self, ctx: MethodContext) -> dict[str, float]:
        from ...solver import natural_weights, uniform_weights

        d = ctx.domains
        if self.name == registry.UNIFORM:
            return uniform_weights(d.names)
        if self.name == registry.NATURAL:
            return natural_weights(d.train_tokens)
        target = ctx.config.target
        if isinstance(target.reference_weights, Mapping):
            from ...solver import reference_weights

            return reference_weights(d.names, weights=target.reference_weights)  # an explicit mix
        return _reference_mix(d, target.reference_weights or "uniform", target.reference_mapping,
                              "target.reference_weights")

    def choose(self, ctx: MethodContext) -> TargetChoice:
        return TargetChoice(weights=self.mix(ctx))


class Anytime(MixingMethod):
    """AutoScale's mixture plan, followed along the target run (schedule ``anytime``)."""

    def cost_runs(self, ctx: MethodContext) -> list[RunSpec]:
        return ctx.proxy_runs()

    def choose(self, ctx: MethodContext) -> TargetChoice:
        if ctx.fits.plan is None:
            return TargetChoice(skipped="no mixture plan could be fitted (see fits/mixture_plan_error.json)")
        specs = [target_spec(ctx.config, ctx.domains, self.name, None, seed, plan=ctx.fits.plan)
                 for seed in ctx.config.target.seeds]
        # a run of a folder planned before its plan named the tokenizer by fingerprint
        if ctx.ledger is not None:
            known = ctx.ledger.records()
            specs = [s if s.run_id in known else recorded_anytime_spec(s, ctx.ledger.specs()) for s in specs]
        return TargetChoice(specs=tuple(specs))


class _Regression(MixingMethod):
    """RegMix and the data mixing law: one regression fitted on the DDO proxies at N2 and/or a swarm."""

    def settings(self, ctx: MethodContext) -> Any:
        from ..config.method_sections import RegMixConfig

        return ctx.config.regmix or RegMixConfig()

    def needed(self, m: int) -> int:
        return m

    def swarm(self, ctx: MethodContext) -> list[RunSpec]:
        from ...solver.contrib import sample_mixtures

        sw = self.settings(ctx).swarm
        if sw is None:
            return []
        # its own preset, else ddo.proxy_model, else the target's
        config = proxy_config(ctx.config, ctx.domains)
        if sw.preset is not None or sw.overrides:
            config = dataclasses.replace(config, model=config.model.another(sw.preset or config.model.preset,
                                                                            sw.overrides))
        mixes = sample_mixtures(list(ctx.domains.names), sw.runs, alpha=sw.alpha, seed=sw.seed)
        return [method_spec(config, ctx.domains, registry.SWARM, sw.budget, f"swarm {k + 1}", w,
                            ctx.config.seeds[0])
                for k, w in enumerate(mixes)]

    def fit_runs(self, ctx: MethodContext) -> list[RunSpec]:
        return (ctx.n2_proxies if self.settings(ctx).fits_on_proxies else []) + self.swarm(ctx)

    def cost_runs(self, ctx: MethodContext) -> list[RunSpec]:
        swarm = self.swarm(ctx)
        return (ctx.proxy_runs([ctx.config.ddo.largest]) if self.settings(ctx).fits_on_proxies
                else []) + swarm

    def check(self, ctx: MethodContext) -> None:
        runs = self.fit_runs(ctx)
        mixes = {tuple(sorted(s.sequences.items())) for s in runs}
        need = self.needed(len(ctx.domains.names))
        if len(mixes) < need:
            cfg = self.settings(ctx)
            what = (f"{len(ctx.n2_proxies)} DDO proxies at "
                    "N2" if cfg.fits_on_proxies else "no DDO proxies") + (
                f" and a swarm of {cfg.swarm.runs}" if cfg.swarm else "")
            raise ValueError(f"target.baselines {self.name!r} needs runs of at least {need} distinct "
                             f"mixtures for {len(ctx.domains.names)} domains, the plan has {len(mixes)} "
                             f"({what}): raise regmix.swarm.runs or set regmix.use_proxies: true")

    def selection_stages(self, ctx: MethodContext) -> list[list[RunSpec]]:
        swarm = self.swarm(ctx)
        return [swarm] if swarm else []

    def table(self, ctx: MethodContext) -> Any:
        from ...solver import Run, RunTable

        runs, missing = [], []
        for spec in self.fit_runs(ctx):
            result = ctx.ledger.result(spec.run_id)
            if result is None:
                missing.append(spec.name)
                continue
            runs.append(Run(spec.run_id, tokens={d: float(v) for d, v in result.tokens.items()},
                            loss=dict(result.losses), seed=spec.seed, label=spec.label))
        if missing:
            ctx.log(f"{self.name}: {len(missing)} of its runs did not finish and are left out: "
                    f"{', '.join(missing)}")
        return RunTable(runs)

    def choose(self, ctx: MethodContext) -> TargetChoice:
        try:
            table = self.table(ctx)
            weights = self.fit(ctx, table)
        except ValueError as exc:
            return TargetChoice(skipped=f"the {self.name} fit failed: {exc}")
        return TargetChoice(weights=weights, details={"runs": len(table)})

    def fit(self, ctx: MethodContext, table: Any) -> dict[str, float]:
        raise NotImplementedError


class RegMix(_Regression):
    """RegMix: a regression of the objective on the mixture, its best candidates averaged."""

    def fit(self, ctx: MethodContext, table: Any) -> dict[str, float]:
        from ...solver.contrib import regmix_weights

        cfg = self.settings(ctx)
        return regmix_weights(table, objective=ctx.config.ddo.objective, model=cfg.model,
                              n_candidates=cfg.candidates, top_k=cfg.top_k, seed=ctx.config.seeds[0])


class MixingLaw(_Regression):
    """The data mixing law, fitted per domain and minimised."""

    def needed(self, m: int) -> int:
        return m + 2

    def fit(self, ctx: MethodContext, table: Any) -> dict[str, float]:
        from ...solver.contrib import mixing_law_weights

        return mixing_law_weights(table, objective=ctx.config.ddo.objective, seed=ctx.config.seeds[0])


class DoReMi(MixingMethod):
    """DoReMi: a reference run, then a Group-DRO proxy run against it; the proxy's average weights."""

    def settings(self, ctx: MethodContext) -> Any:
        from ..config.method_sections import DoReMiConfig

        return ctx.config.doremi or DoReMiConfig()

    def reference(self, ctx: MethodContext) -> dict[str, float]:
        cfg = self.settings(ctx)
        return _reference_mix(ctx.domains, cfg.reference, cfg.reference_mapping, "doremi.reference")

    def check(self, ctx: MethodContext) -> None:
        self.selection_stages(ctx)

    def selection_stages(self, ctx: MethodContext) -> list[list[RunSpec]]:
        cfg = self.settings(ctx)
        budget = cfg.budget or ctx.config.ddo.largest
        seed = ctx.config.seeds[0] if cfg.seed is None else cfg.seed
        mix = self.reference(ctx)
        config = proxy_config(ctx.config, ctx.domains)  # both runs train the proxy model (ddo.proxy_model)
        ref = method_spec(config, ctx.domains, registry.DOREMI_REFERENCE, budget, "doremi reference", mix,
                          seed)
        from .doremi_hook import DoReMiHookSpec

        hook = DoReMiHookSpec(kind=str(self.declaration.hook_kind), reference_run=ref.run_id,
                              step_size=cfg.step_size,
                              smoothing=cfg.smoothing, initial=ref.weights)
        proxy = method_spec(config, ctx.domains, registry.DOREMI_PROXY, budget, "doremi proxy", mix, seed,
                            hook=hook)
        return [[ref], [proxy]]

    def choose(self, ctx: MethodContext) -> TargetChoice:
        proxy = self.selection_stages(ctx)[-1][0]
        result = ctx.ledger.result(proxy.run_id)
        if result is None or result.step_hook is None:
            return TargetChoice(skipped=f"the DoReMi proxy {proxy.run_id} did not finish")
        hook = result.step_hook
        if not hook.get("finite", True):
            return TargetChoice(skipped="the DoReMi weights are not finite")
        return TargetChoice(weights=dict(hook["average_weights"]),
                            details={"final_weights": hook["weights"], "scores": hook["scores"],
                                     "updates": hook["updates"], "proxy_run": proxy.run_id})


def mixing_method(name: str) -> MixingMethod:
    """The method registered as ``name``, built from its declaration.

    Raises:
        ValueError: no method of that name is registered.
    """
    decl = registry.declaration(name)
    method: MixingMethod = registry.load(decl.implementation)(decl)
    return method


def selected_methods(config: RunnerConfig) -> list[MixingMethod]:
    """AutoScale and every method of ``target.baselines``, in plan order.

    Raises:
        ValueError: a baseline no method is registered for.
    """
    names = [registry.AUTOSCALE, *config.target.baselines]
    unknown = [n for n in names if n not in registry.MIXING_METHODS]
    if unknown:
        raise ValueError(f"target.baselines names {unknown}, for which no mixing method is registered "
                         f"(known: {sorted(registry.MIXING_METHODS)})")
    return sorted((mixing_method(n) for n in names), key=lambda m: (m.order, names.index(m.name)))


def selection_stages(methods: Sequence[MixingMethod], ctx: MethodContext) -> list[list[RunSpec]]:
    """The methods' extra runs merged stage by stage (a run two methods share is listed once)."""
    stages: list[dict[str, RunSpec]] = []
    for m in methods:
        for k, stage in enumerate(m.selection_stages(ctx)):
            while len(stages) <= k:
                stages.append({})
            stages[k].update({s.run_id: s for s in stage})
    return [list(st.values()) for st in stages]


def choose_all(methods: Sequence[MixingMethod], ctx: MethodContext) -> tuple[dict[str, dict[str, float]],
                                                                            list[RunSpec],
                                                                             list[MethodRecord]]:
    """Every method's target: the mixes (``fits/target_mixes.json``), the target runs in plan order and
    the records (``fits/methods.json``). A skipped method trains nothing (its reason is logged)."""
    mixes: dict[str, dict[str, float]] = {}
    targets: list[RunSpec] = []
    records = []
    target_flops = target_run_flops(ctx.config, ctx.domains)
    for m in methods:
        choice = m.choose(ctx)
        if choice.skipped is not None:
            ctx.log(f"{m.name} is not trained: {choice.skipped}")
        elif choice.specs:
            mixes[m.name] = choice.specs[0].weights  # the final mix (the specs follow their own schedule)
            targets += choice.specs
        else:
            assert choice.weights is not None
            mixes[m.name] = dict(choice.weights)
            targets += [target_spec(ctx.config, ctx.domains, m.name, choice.weights, seed)
                        for seed in ctx.config.target.seeds]
        cost = {s.run_id: s for s in m.cost_runs(ctx)}
        records.append(MethodRecord(
            name=m.name, source=m.source, weights=mixes.get(m.name),
            selection_run_ids=[s.run_id for stage in m.selection_stages(ctx) for s in stage],
            cost_run_ids=list(cost), cost_tokens=sum(run_tokens(s) for s in cost.values()),
            skipped=choice.skipped,
            details=choice.details, cost_flops=sum(run_flops(s) for s in cost.values()),
            target_flops=target_flops))
    return mixes, targets, records


def cost_lines(methods: Sequence[MixingMethod], ctx: MethodContext) -> list[str]:
    """The dry run's estimate of what choosing each mix costs: the runs it needs before its targets, their
    tokens and training FLOPs (6 N D plus attention, each run at its own model), and those FLOPs in target
    runs."""
    config = ctx.config
    per_target = batch_sequences(config, config.target.budget) * config.seq_len
    target_flops = target_run_flops(config, ctx.domains)
    lines = ["cost of choosing each mix (the runs it needs before its targets, their tokens and training "
             f"FLOPs; x = target runs of {per_target:,} tokens and {format_flops(target_flops)}, by FLOPs):"]
    for m in methods:
        cost = {s.run_id: s for s in m.cost_runs(ctx)}
        tokens = sum(run_tokens(s) for s in cost.values())
        flops = sum(run_flops(s) for s in cost.values())
        lines.append(f"  {m.name:18} {len(cost):4} runs {tokens:>16,} tokens {flops:>10.3g} FLOPs  "
                     f"x{flops / target_flops:.2f}")
    return lines

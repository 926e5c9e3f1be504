"""The plan as data: every training run, its tokens per domain, seed, role and content-hash id.

A run's id hashes everything that determines its result (model fields, optimiser, batch shape,
sequence counts per domain, seed, the stores' data fingerprints, evaluation settings, backend and
precision) and nothing else, so changing one part of a config changes only the affected ids, and
two roles that need the very same run (say, a reference mix equal to uniform) share one training.

A target run may follow the anytime schedule (``schedule="anytime"``: the dataset's cumulative
per-domain counts track a :class:`~autoscale_data.solver.MixturePlan`'s optimal-allocation path);
its spec then carries the plan, and the schedule and the plan's JSON enter the id. A fixed-schedule
run's id hashes neither, so it does not depend on the option. The runner's plan names its tokenizer by
its fingerprint; before 2026-11-28 it named it as the stores did (a path), and
:func:`recorded_anytime_spec` finds such a run in a kept folder, wherever it lies now.

Token counts are whole sequences, and every run's total is a whole number of global batches, so
the trainer consumes exactly the planned data. For a DDO perturbation the perturbed domain's count
is rounded to the nearest value that keeps the total a multiple of the global batch (the fit uses
the tokens actually trained, so this rounding changes the effective multiplier, never the fit).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._records import Record, omitted
from ..._runner_names import LR_SCHEDULES, REWARM_DECAY
from ...mixing import SCHEDULES, allowed_draws
from ...solver import MixturePlan
from .. import registry
from ..config import RunnerConfig, config_to_dict
from ..config.sections import field_error
from ..registry import HookSpec
from .data import DomainInfo, batch_sequences, ddo_base_counts, mix_counts
from .settings import TrainingSettings

__all__ = [
    "ExtensionSpec",
    "LRSchedule",
    "MULTIPLIER_TOLERANCE",
    "RunSpec",
    "SCHEDULES",
    "WSDSpec",
    "WSD_ROLES",
    "ddo_base_counts",
    "ddo_proxy_specs",
    "describe_runs",
    "design_rounding",
    "extension_spec",
    "faithful_budget",
    "id_payload",
    "method_spec",
    "proxy_config",
    "proxy_dataset_options",
    "recorded_anytime_spec",
    "run_fingerprint",
    "schedule_counts",
    "supply_problems",
    "target_run_flops",
    "target_spec",
]


@dataclass(frozen=True)
class LRSchedule(Record):
    """The learning rate of an extension's new steps (:mod:`~autoscale_data.runner.training.extension`)."""

    schedule: str = REWARM_DECAY
    """``rewarm_decay`` (re-warm-up from ``optimizer.min_lr_ratio``, then decay to it) or ``constant``."""
    warmup_fraction: float | None = None
    """The share of the new steps that re-warm (``None``: ``optimizer.warmup_fraction``, :meth:`resolved`)."""
    peak_ratio: float = 1.0
    """The peak as a multiple of ``optimizer.lr``."""

    def __post_init__(self) -> None:
        if self.schedule not in LR_SCHEDULES:
            raise ValueError(f"extension lr schedule {self.schedule!r} is invalid: expected one of "
                             f"{LR_SCHEDULES}")
        wf = self.warmup_fraction
        if wf is not None and not (isinstance(wf, (int, float)) and 0.0 <= float(wf) < 1.0):
            raise ValueError(f"extension warmup_fraction {wf!r} is invalid: expected a number in [0, 1)")
        pr = self.peak_ratio
        if not (isinstance(pr, (int, float)) and math.isfinite(pr) and 0.0 < float(pr) <= 10.0):
            raise ValueError(f"extension peak_ratio {pr!r} is invalid: expected a number in (0, 10]")

    def resolved(self, default_warmup: float) -> LRSchedule:
        """The schedule with the warm-up resolved (what an extension's spec holds and its id hashes)."""
        wf = default_warmup if self.warmup_fraction is None else self.warmup_fraction
        return LRSchedule(self.schedule, float(wf), float(self.peak_ratio))


@dataclass(frozen=True)
class ExtensionSpec(Record):
    """What an extension run continues (:attr:`RunSpec.extension`; see :func:`extension_spec`)."""

    parent: str
    """The finished run it continues (its run id)."""
    parent_sequences: int
    """Sequences the parent trained: the new run's first steps come after them."""
    mix: str
    """How the mix goes on after the parent's end: ``same``, ``plan`` or ``anytime``."""
    weights: dict[str, float] | None
    """The mix of the new sequences (a fixed schedule; ``None`` for ``anytime``, which follows the plan)."""
    lr: LRSchedule
    """The learning-rate schedule of the new steps, its warm-up resolved (:meth:`LRSchedule.resolved`)."""


#: :attr:`WSDSpec.role` values: a stretch of a mix's constant-LR trunk, or a budget's decay branch.
WSD_ROLES = ("trunk", "branch")


@dataclass(frozen=True)
class WSDSpec(Record):
    """What a run of the ``ddo.schedule: wsd`` design is (:attr:`RunSpec.wsd`; :mod:`.wsd`): its learning rate
    is a function of the global step (the trunk's steps before it included)."""

    role: str
    """``trunk``: a stretch of the mix's trunk (warm-up, then the peak; it keeps its final checkpoint for the
    next stretch and the branches); ``branch``: a budget's decay from the trunk's checkpoint to its end."""
    warmup_steps: int
    """The trunk's linear warm-up, in steps from step 0."""
    decay_steps: int = 0
    """A branch's decay steps (its own steps); 0 for the trunk."""
    shape: str | None = None
    """A branch's decay shape (``ddo.cooldown_shape``: ``1-sqrt`` or ``linear``); ``None`` for the trunk."""

    def __post_init__(self) -> None:
        if self.role not in WSD_ROLES:
            raise ValueError(f"wsd role {self.role!r} is invalid: expected one of {WSD_ROLES}")
        if not (isinstance(self.warmup_steps, int) and self.warmup_steps >= 0):
            raise ValueError(f"wsd warmup_steps {self.warmup_steps!r} is invalid: expected an integer >= 0")
        branch = self.role == "branch"
        if branch != (isinstance(self.decay_steps, int)
                      and self.decay_steps >= 1) or branch != (self.shape is not None):
            raise ValueError(f"wsd {self.role} run: decay_steps {self.decay_steps!r} and shape "
                             f"{self.shape!r} are invalid: expected decay_steps >= 1 and a shape for a "
                             "branch, 0 and None for the trunk")


@dataclass(frozen=True)
class RunSpec(Record):
    """One training run of the plan (``spec.json``; the codec of :mod:`autoscale_data._records` writes and
    reads it: a fixed-schedule run's JSON has no ``schedule``/``plan`` keys, as before they existed, and
    ``extension``, ``pools`` and ``hook`` only where set).

    Attributes:
        run_id: content hash (hex, 16 chars) of everything that determines the result.
        kind: ``"proxy"`` (DDO) or ``"target"``.
        scale: the nominal budget this run belongs to (N1, N2 or the target budget).
        label: e.g. ``"base"``, ``"code x3"``, ``"code /3"``, ``"autoscale"``, ``"uniform"``.
        sequences: whole sequences per domain (tokens = sequences x seq_len).
        seed: model-initialisation and data-order seed.
        eval_points: how many evaluations along the run (the last is at the end).
        perturbed: the perturbed domain of a DDO run (``None`` for base and target runs).
        multiplier: the multiplier of the perturbed domain actually trained (its sequences over the base
            run's; whole global batches can move it from the configured one).
        settings: the hashed training settings (model, optimiser, batches, backend, stores:
            :class:`~.settings.TrainingSettings`); ``None`` only in a spec file written without them (by
            hand).
        schedule: ``"fixed"`` (constant shares) or ``"anytime"`` (a target run whose cumulative
            per-domain counts follow :attr:`plan`'s allocation path).
        plan: the :class:`~autoscale_data.solver.MixturePlan` of an anytime run (else ``None``).
        extension: what an extension run (:func:`extension_spec`) continues, else ``None``; its
            :attr:`sequences` are the totals at the end (the parent's prefix included).
        pools: a repetition-matched proxy's pools (``ddo.repetition: match``): domain -> sequences of the
            seeded subset it draws from in epochs (:mod:`.repetition`); ``None`` for every other run.
        hook: the :class:`~autoscale_data.runner.registry.HookSpec` of the step hook the trainer runs (of its
            kind; in the run id), ``None`` for plain runs.
        wsd: a run of the ``ddo.schedule: wsd`` design (a ``trunk`` stretch or a ``proxy`` branch, continuing
            its parent as :attr:`extension` says; in the run id), ``None`` for every other run.
    """

    run_id: str
    kind: str
    scale: int
    label: str
    sequences: dict[str, int]
    seq_len: int
    seed: int
    eval_points: int
    perturbed: str | None = None
    multiplier: float = 1.0
    settings: TrainingSettings | None = omitted(default=None, compare=False, repr=False)
    schedule: str = omitted(default="fixed")
    plan: MixturePlan | None = omitted(default=None, compare=False, repr=False)
    extension: ExtensionSpec | None = omitted(default=None, repr=False)
    pools: dict[str, int] | None = omitted(default=None)
    hook: HookSpec | None = omitted(default=None, repr=False)
    wsd: WSDSpec | None = omitted(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.kind == "extension") != (self.extension is not None) and self.wsd is None:
            raise ValueError(f"run {self.run_id}: an 'extension' run needs its extension record, and only an "
                             f"extension run has one (kind {self.kind!r})")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"run {self.run_id}: schedule {self.schedule!r} is invalid: expected one of "
                             f"{SCHEDULES}")
        if (self.schedule == "anytime") != (self.plan is not None):
            raise ValueError(f"run {self.run_id}: an 'anytime' run needs its MixturePlan as plan, and only "
                             f"an anytime run has one (schedule {self.schedule!r}, plan "
                             f"{'set' if self.plan is not None else 'None'})")

    @property
    def training(self) -> TrainingSettings:
        """:attr:`settings`, which every planned run has.

        Raises:
            ValueError: the spec was written without them (a spec file made by hand trains nothing).
        """
        if self.settings is None:
            raise ValueError(f"run {self.run_id}: its spec records no training settings (model, optimiser, "
                             "batches)")
        return self.settings

    @property
    def total_sequences(self) -> int:
        return sum(self.sequences.values())

    @property
    def total_tokens(self) -> int:
        return self.total_sequences * self.seq_len

    @property
    def parent_sequences(self) -> int:
        """Sequences trained before this run started: the parent's total for an extension, else 0."""
        return self.extension.parent_sequences if self.extension is not None else 0

    @property
    def tokens(self) -> dict[str, int]:
        """Planned training tokens per domain."""
        return {d: n * self.seq_len for d, n in self.sequences.items()}

    @property
    def weights(self) -> dict[str, float]:
        """The mixture weights that give exactly :attr:`sequences` at :attr:`total_tokens`."""
        total = self.total_sequences
        return {d: n / total for d, n in self.sequences.items()}

    @property
    def name(self) -> str:
        """Human-readable name: ``proxy@40000 code x3 s0``."""
        return f"{self.kind}@{self.scale} {self.label} s{self.seed}"

    @property
    def keeps_model(self) -> bool:
        """Whether the run keeps its final checkpoint whatever ``target.keep_checkpoints`` says (a DoReMi
        reference: its proxy reads the model)."""
        return self.kind in registry.model_keeping_kinds() or (self.wsd is not None
                                                               and self.wsd.role == "trunk")


def proxy_dataset_options(spec: RunSpec, max_epochs: float | None) -> dict[str, Any]:
    """The dataset's ``pool`` (tokens) and ``max_epochs`` for ``spec``: a pooled domain may repeat as its
    pool needs (the target's bound is checked on the target,
    :func:`~autoscale_data.runner.planning.repetition.repetition_problems`)."""
    pools = getattr(spec, "pools", None)
    if not pools:
        return {"max_epochs": max_epochs}
    caps: dict[str, float | None] = dict.fromkeys(spec.sequences, max_epochs)
    for d, size in pools.items():
        caps[d] = max(1.0, spec.sequences[d] / size, max_epochs or 1.0)
    return {"pool": {d: int(n) * spec.seq_len for d, n in pools.items()}, "max_epochs": caps}


def _model_flops(config: RunnerConfig, domains: DomainInfo) -> float:
    """Training FLOPs per token of ``config``'s model at the stores' vocabulary
    (:func:`.estimate.flops_per_token`)."""
    return TrainingSettings.of(config, domains).model.flops_per_token(config.seq_len)


def target_run_flops(config: RunnerConfig, domains: DomainInfo) -> float:
    """Training FLOPs of one target run: its tokens (whole global batches) x its model's FLOPs per token."""
    return batch_sequences(config, config.target.budget) * config.seq_len * _model_flops(config, domains)


def proxy_config(config: RunnerConfig, domains: DomainInfo) -> RunnerConfig:
    """The config the proxies train under (the DDO proxies, DoReMi's runs, RegMix's swarm):
    ``ddo.proxy_model`` and ``ddo.proxy_lr`` in place of ``model`` (masking at the target's
    ``mlm_probability``) and ``optimizer.lr``; ``config`` itself when neither is set, so the proxies' settings
    and ids are the target model's.

    Raises:
        ValueError: the proxy model takes more training FLOPs per token than the target's (at the stores'
            vocabulary and ``seq_len``), naming both.
    """
    ddo = config.ddo
    if ddo.proxy_model is None and ddo.proxy_lr is None:
        return config
    changes: dict[str, Any] = {}
    if ddo.proxy_lr is not None:
        changes["optimizer"] = dataclasses.replace(config.optimizer, lr=float(ddo.proxy_lr))
    if ddo.proxy_model is not None:
        changes["model"] = config.model.another(ddo.proxy_model.preset, ddo.proxy_model.overrides)
    proxy = dataclasses.replace(config, **changes)
    mine, target = _model_flops(proxy, domains), _model_flops(config, domains)
    if mine > target:
        raise field_error("ddo", "proxy_model", config_to_dict(ddo.proxy_model),
                          f"a model no larger than model {config.model.preset!r}: it takes {mine:,.0f} "
                          f"training FLOPs per token, the target's {target:,.0f} (vocabulary "
                          f"{domains.vocab_size}, seq_len {config.seq_len})")
    return proxy


def id_payload(spec: RunSpec) -> dict[str, Any]:
    """What a run id hashes: the spec's settings, sequences, seed and evaluation points (its records as their
    JSON, as the spec file holds them; not its budget, label or perturbation, its kind only as
    ``keeps_model``). ``schedule`` and ``plan`` enter only for a non-fixed schedule, ``extension`` only for an
    extension run, ``hook`` only for a run with a step hook, ``keeps_model`` only when true (a DoReMi
    reference) and ``pools`` only for a repetition-matched proxy, so the ids of other runs do not depend on
    those options (nor on ``wsd``, which enters only for a run of the WSD design)."""
    payload: dict[str, Any] = {"settings": {} if spec.settings is None else spec.settings.to_json(),
                               "sequences": dict(sorted(spec.sequences.items())), "seed": spec.seed,
                               "eval_points": spec.eval_points}
    if spec.schedule != "fixed":
        payload["schedule"] = spec.schedule
        payload["plan"] = None if spec.plan is None else spec.plan.to_json()
    if spec.extension is not None:
        payload["extension"] = spec.extension.to_json()
    if spec.hook is not None:
        payload["hook"] = spec.hook.to_json()
    if spec.kind in registry.model_keeping_kinds():  # not a WSD trunk's: its ``wsd`` says so
        payload["keeps_model"] = True
    if spec.pools:
        payload["pools"] = dict(sorted(spec.pools.items()))
    if spec.wsd is not None:
        payload["wsd"] = spec.wsd.to_json()
    return payload


def run_fingerprint(spec: RunSpec) -> str:
    """The run id of ``spec``: SHA-256 (first 16 hex digits) of the canonical JSON of :func:`id_payload`."""
    blob = json.dumps(id_payload(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def recorded_anytime_spec(spec: RunSpec, recorded: Iterable[RunSpec]) -> RunSpec:
    """``spec``, or the run of ``recorded`` (a folder's specs) that is the same anytime run but for the
    tokenizer its plan names: one planned before 2026-11-28, whose plan named the tokenizer by its path (the
    id hashed it). Such a run keeps its id, so a kept, copied or moved folder trains it no more (the stores'
    fingerprints, in both ids, stand for the tokenizer's content)."""
    if spec.plan is None:
        return spec
    for old in recorded:
        if old.plan is None or old.plan.tokenizer == spec.plan.tokenizer or old.sequences != spec.sequences:
            continue
        if run_fingerprint(dataclasses.replace(old, plan=dataclasses.replace(old.plan,
                                                                             tokenizer=spec.plan.tokenizer))) \
                == spec.run_id:
            return old
    return spec


@dataclass(frozen=True)
class _Role:
    """What a run is in the plan (not what it trains on): kind, budget, label, seed, perturbation."""

    kind: str
    scale: int
    label: str
    seed: int
    perturbed: str | None = None
    multiplier: float = 1.0


def _make(config: RunnerConfig, domains: DomainInfo, role: _Role, sequences: Mapping[str, int], *,
          plan: MixturePlan | None = None, hook: HookSpec | None = None,
          pools: Mapping[str, int] | None = None,
          extension: ExtensionSpec | None = None, settings: TrainingSettings | None = None,
          wsd: WSDSpec | None = None) -> RunSpec:
    """The spec of one run; ``plan`` makes it follow the anytime schedule, ``hook`` gives it a step hook,
    ``pools`` draws domains from pools (a repetition-matched proxy), ``extension`` continues a run (its
    evaluation points spread over the new sequences); ``settings``: the hashed settings when already known;
    ``wsd``: a run of the WSD design."""
    settings = TrainingSettings.of(config, domains) if settings is None else settings
    points = config.eval.target_points if role.kind in ("target", "extension") else config.eval.proxy_points
    new = sum(sequences.values()) - (0 if extension is None else extension.parent_sequences)
    points = max(1, min(points, new // config.global_batch_size))
    schedule = "fixed" if plan is None else "anytime"
    spec = RunSpec(run_id="", kind=role.kind, scale=int(role.scale), label=role.label,
                   sequences=dict(sequences), seq_len=config.seq_len, seed=int(role.seed), eval_points=points,
                   perturbed=role.perturbed, multiplier=float(role.multiplier), settings=settings,
                   schedule=schedule, plan=plan, extension=extension, hook=hook,
                   pools=dict(pools) if pools else None,
                   wsd=wsd)
    return dataclasses.replace(spec, run_id=run_fingerprint(spec))


def method_spec(config: RunnerConfig, domains: DomainInfo, kind: str, budget: int, label: str,
                weights: Mapping[str, float], seed: int, *, hook: HookSpec | None = None) -> RunSpec:
    """A run another mixing method trains to choose its mix (``kind``: one of the registry's
    :func:`~autoscale_data.runner.registry.selection_kinds`): ``weights`` at ``budget`` tokens (whole global
    batches, largest-remainder sequences), with an optional step hook.

    Raises:
        ValueError: an unknown kind, weights naming unknown domains, or a budget under one global batch.
    """
    known = registry.selection_kinds()
    if kind not in known:
        raise ValueError(f"run kind {kind!r} is invalid: expected one of {known}")
    counts = _mix_counts(domains, weights, batch_sequences(config, budget), f"{kind} run {label!r}")
    return _make(config, domains, _Role(kind, budget, label, seed), counts, hook=hook)


def _mix_counts(domains: DomainInfo, weights: Mapping[str, float], total: int, what: str) -> dict[str, int]:
    """:func:`~.data.mix_counts`, refusing weights of domains the stores lack."""
    unknown = sorted(set(weights) - set(domains.names))
    if unknown:
        raise ValueError(f"{what} names unknown domains {unknown}; the stores hold {list(domains.names)}")
    return mix_counts(domains, weights, total)


def _perturbed_count(n: int, factor: float, others: int, batch: int, up: bool) -> int:
    want = n * factor
    lo = math.floor((others + want) / batch) * batch - others
    candidates = [c for c in (lo - batch, lo, lo + batch, lo + 2 * batch) if c >= 1
                  and (c > n if up else c < n)]
    if not candidates:
        raise ValueError(f"a DDO perturbation of {n} sequences by {'x' if up else '/'}"
                         f"{factor if up else 1 / factor:g} cannot keep whole global batches of {batch}: "
                         f"raise ddo.budgets or lower global_batch_size")
    return min(candidates, key=lambda c: (abs(c - want), -c))


#: A DDO multiplier that whole global batches move by more than this (relative) is reported.
MULTIPLIER_TOLERANCE = 0.05


@dataclass(frozen=True)
class _Perturbation:
    domain: str
    planned: float  # the configured multiplier (< 1 for a division)
    base: int  # the domain's sequences in the base run
    counts: dict[str, int]  # sequences per domain actually trained

    @property
    def trained(self) -> float:
        """The multiplier actually trained: perturbed sequences over the base run's."""
        return self.counts[self.domain] / self.base

    @property
    def off_by(self) -> float:
        """Relative distance of the trained multiplier from the planned one."""
        return abs(self.trained / self.planned - 1.0)

    @property
    def label(self) -> str:
        """``"web x3"``; ``"web x1.75 (planned x1.7)"`` when rounding moved it by more than 0.5%."""
        def tag(x: float) -> str:
            return f"x{x:.3g}" if x >= 1 else f"/{1 / x:.3g}"

        text = f"{self.domain} {tag(self.planned)}"
        return text if self.off_by <= 0.005 else f"{self.domain} {tag(self.trained)} (planned {tag(self.planned)})"


def _perturbations(config: RunnerConfig, domains: DomainInfo, budget: int) -> tuple[dict[str, int],
                                                                                    list[_Perturbation]]:
    """The base counts and every perturbation of the DDO design at ``budget`` (whole global batches)."""
    base = ddo_base_counts(config, domains, budget)
    batch = config.global_batch_size
    steps = [(True, up) for up in config.ddo.multiplier_up] + [(False, 1.0 / down)
                                                               for down in config.ddo.multiplier_down]
    out = []
    for d in domains.names:
        others = sum(base.values()) - base[d]
        for is_up, factor in steps:
            counts = dict(base)
            counts[d] = _perturbed_count(base[d], factor, others, batch, is_up)
            out.append(_Perturbation(d, factor, base[d], counts))
    return base, out


def design_rounding(config: RunnerConfig, domains: DomainInfo, budget: int) -> list[tuple[str, float, float]]:
    """``(domain, planned, trained)`` multipliers of the design at ``budget`` that whole global batches move
    by more than :data:`MULTIPLIER_TOLERANCE`."""
    _, perturbations = _perturbations(config, domains, budget)
    return [(p.domain, p.planned, p.trained) for p in perturbations if p.off_by > MULTIPLIER_TOLERANCE]


def faithful_budget(config: RunnerConfig, domains: DomainInfo, budget: int) -> int | None:
    """About the smallest budget >= ``budget`` (whole global batches) whose design keeps every multiplier
    within :data:`MULTIPLIER_TOLERANCE` (``None`` if none up to 2^30 times ``budget``)."""
    step = config.seq_len * config.global_batch_size

    def ok(n: int) -> bool:
        try:
            return not design_rounding(config, domains, n)
        except ValueError:
            return False

    lo, hi = budget, budget
    for _ in range(30):
        if ok(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return None
    if hi == budget:
        return budget
    while hi - lo > step:  # bisect in whole batches (the rounding error shrinks as the budget grows)
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            break
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def ddo_proxy_specs(config: RunnerConfig, domains: DomainInfo, budget: int) -> list[RunSpec]:
    """The DDO runs at one budget, for every seed: base, then each domain up and down by each multiplier.

    With one multiplier each way this is the paper's 2m+1 design; ``k`` multipliers each way give
    ``2km+1`` runs. Run sizes are whole global batches, so a perturbed domain's count is rounded: the
    spec's ``multiplier`` is the one actually trained, and its label shows it beside the planned one
    when they differ by more than 0.5% (``"web x1.75 (planned x1.7)"``). With ``ddo.repetition: match``
    every run draws each domain from the budget's pool
    (:func:`~autoscale_data.runner.planning.repetition.proxy_pools`). The runs train the proxy model and
    learning rate (:func:`proxy_config`).
    """
    from .repetition import proxy_pools

    base, perturbations = _perturbations(config, domains, budget)
    pools = proxy_pools(config, domains, budget)
    proxy = proxy_config(config, domains)
    specs: list[RunSpec] = []
    for seed in config.seeds:
        specs.append(_make(proxy, domains, _Role("proxy", budget, "base", seed), base, pools=pools))
        for p in perturbations:
            role = _Role("proxy", budget, p.label, seed, perturbed=p.domain, multiplier=p.trained)
            specs.append(_make(proxy, domains, role, p.counts, pools=pools))
    return specs


def schedule_counts(plan: MixturePlan, names: Sequence[str], total: int, seq_len: int) -> dict[str, int]:
    """Sequences per domain of an anytime stream of ``total`` sequences (exactly what the dataset plans).

    Raises:
        ValueError: the plan's domains are not ``names``.
    """
    from ...mixing import anytime_counts_and_stream

    ordered = sorted(names, key=str)  # the dataset's domain order
    if sorted(plan.domains, key=str) != ordered:
        raise ValueError(f"the mixture plan covers domains {sorted(plan.domains)}, the stores hold {ordered}")
    counts, _ = anytime_counts_and_stream(plan, ordered, total, seq_len)
    by_name = {d: int(c) for d, c in zip(ordered, counts, strict=True)}
    return {d: by_name[d] for d in names}


def target_spec(config: RunnerConfig, domains: DomainInfo, label: str, weights: Mapping[str, float] | None,
                seed: int, *, plan: MixturePlan | None = None, hook: HookSpec | None = None) -> RunSpec:
    """One run at the target budget with the given mixture ``weights`` (missing domains get 0).

    With ``plan`` the run follows the anytime schedule instead: ``weights`` is ignored, the final counts
    are the plan's allocation at the target budget, and the plan is stored in the spec (and so in
    ``job.json``). ``hook``
    gives a fixed-schedule run a step hook (an online-mixing run's controller: ``weights`` are then its
    initial weights; see :mod:`~autoscale_data.runner.mixes.online_method`).
    """
    total = batch_sequences(config, config.target.budget)
    if plan is not None:
        counts = schedule_counts(plan, domains.names, total, config.seq_len)
        return _make(config, domains, _Role("target", config.target.budget, label, seed), counts, plan=plan)
    if weights is None:
        raise ValueError(f"target run {label!r} needs mixture weights or a plan, got neither")
    counts = _mix_counts(domains, weights, total, f"mix {label!r}")
    return _make(config, domains, _Role("target", config.target.budget, label, seed), counts, hook=hook)


def extension_spec(config: RunnerConfig, domains: DomainInfo, parent: RunSpec, budget: int,
                   sequences: Mapping[str, int], extension: ExtensionSpec, *,
                   plan: MixturePlan | None = None) -> RunSpec:
    """The run that extends the finished run ``parent`` to ``budget`` tokens (whole global batches).

    Args:
        config: the experiment config; its training settings must be the parent's.
        budget: the new budget in tokens (the spec's ``scale``).
        sequences: per-domain sequences at the end (the parent's prefix included), as the dataset
            continued from the parent's end plans them.
        plan: the extension follows the anytime schedule of this plan (an anytime parent).

    Raises:
        ValueError: the config's training settings differ from the parent's (each difference named), or
            the new steps are not whole global batches.
    """
    from ..experiment import config_changes

    settings = TrainingSettings.of(config, domains)
    mine, theirs = (json.loads(json.dumps(s.to_json() if s is not None else {}))
                    for s in (settings, parent.settings))
    if mine != theirs:
        diff = config_changes(theirs, mine)
        raise ValueError(f"run {parent.run_id} was trained with other settings than this config's; it can "
                         "only be extended under its own: " + "; ".join(diff or ["(settings not recorded)"]))
    new = sum(sequences.values()) - extension.parent_sequences
    if new <= 0 or new % config.global_batch_size:
        raise ValueError(f"an extension of run {parent.run_id} must add whole global batches of "
                         f"{config.global_batch_size} sequences, it adds {new}")
    role = _Role("extension", budget, parent.label, parent.seed)
    return _make(config, domains, role, sequences, plan=plan, extension=extension, settings=settings)


def supply_problems(config: RunnerConfig, domains: DomainInfo, specs: Sequence[RunSpec]) -> list[str]:
    """What the stores cannot supply, found before any training: every planned run's per-domain tokens,
    and the target budget's least needs (``ddo.min_weight`` x budget of every domain; the budget itself, also
    with at most ``ddo.max_weight`` x budget of each domain).

    Each domain has ``train_tokens // seq_len`` whole sequences, each usable ``max_epochs`` times
    (default once). Returns one line per problem, naming the domain (empty when all is well).
    """
    epochs = 1.0 if config.max_epochs is None else float(config.max_epochs)
    have = {d: domains.train_tokens[d] // config.seq_len for d in domains.names}
    allowed = {d: allowed_draws(have[d], config.max_epochs) for d in domains.names}
    hint = "raise max_epochs" if config.max_epochs is not None else "allow repetition with max_epochs"
    problems: dict[str, list[str]] = {}
    for s in specs:
        for d, need in s.sequences.items():
            if need > allowed[d]:
                problems.setdefault(d, []).append(f"{s.kind} {s.label!r} at {s.scale:,} tokens asks "
                                                  f"{need * config.seq_len:,}")
    target = config.target.budget
    floor = config.ddo.min_weight * target
    for d in domains.names:
        if floor > allowed[d] * config.seq_len:
            problems.setdefault(d, []).append(
                f"every target mix asks at least {floor:,.0f} (ddo.min_weight {config.ddo.min_weight:g} x "
                f"target budget {target:,})")
    lines = [f"domain {d!r} has {have[d] * config.seq_len:,} training tokens ({epochs:g} epoch"
             f"{'s' if epochs != 1 else ''} allowed), but " + "; ".join(sorted(set(what))[:3])
             + (f" and {len(set(what)) - 3} more runs" if len(set(what)) > 3 else "")
             for d, what in problems.items()]
    from .repetition import repetition_problems

    lines += repetition_problems(config, domains)  # ddo.repetition: match: pools and the target's epoch cap
    total = sum(allowed.values()) * config.seq_len
    if total < target:
        lines.append(f"the target budget {target:,} tokens exceeds all the training data ({total:,} tokens "
                     "within the epoch cap)")
    else:  # what the fits' bounds allow at the target: up to max_weight x budget of each domain, within its data
        top = config.ddo.max_weight * target
        room = sum(min(top, allowed[d] * config.seq_len) for d in domains.names)
        if room < target:
            lines.append(f"ddo.max_weight {config.ddo.max_weight:g} x target budget {target:,} = {top:,.0f} "
                         f"tokens per domain at most, within each domain's data, make {room:,.0f} tokens, "
                         "less than the target budget: raise ddo.max_weight")
    if lines:
        lines.append(f"lower the budgets or ddo.min_weight, add data, or {hint} (max_epochs: 2 lets every "
                     "sequence be seen twice)")
    return lines


def describe_runs(specs: Sequence[RunSpec]) -> dict[str, Any]:
    """Totals of a list of runs (unique ids counted once)."""
    unique = {s.run_id: s for s in specs}
    return {"runs": len(unique), "tokens": sum(s.total_tokens for s in unique.values())}

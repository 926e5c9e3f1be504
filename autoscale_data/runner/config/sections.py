"""The sections of the runner's configuration (model, optimizer, DDO, target, eval, DeepSpeed, executor),
and the field checks every section uses (how they are validated: :mod:`autoscale_data.runner.config`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._checks import check_int, check_number, is_int, is_number
from ..._runner_names import EXECUTORS, GPT2, LOCAL, RAY, SLURM, SLURM_CLUSTERS
from ...solver.vocabulary import (
    AUTO,
    DEFAULT_LAW,
    DEFAULT_OBJECTIVE,
    DEFAULT_PROJECTION,
    LAWS,
    OBJECTIVES,
    PROJECTION_CHOICES,
    law_parameters,
)
from .. import registry
from ..registry import DDO_N2, NATURAL, REFERENCE, UNIFORM

__all__ = [
    "CHOICES",
    "COOLDOWN_SHAPES",
    "DDOConfig",
    "DeepSpeedConfig",
    "EXECUTORS",
    "EvalConfig",
    "ExecutorConfig",
    "ModelConfig",
    "OptimizerConfig",
    "PROXY_SCHEDULES",
    "ProxyModelConfig",
    "REPETITION_MATCH",
    "REPETITION_MODES",
    "REPETITION_OFF",
    "RayConfig",
    "SQRT_COOLDOWN",
    "SlurmConfig",
    "TargetConfig",
    "TrainConfig",
    "WSD",
    "build_section",
]


#: A field's ``metadata`` key for the names it takes, when they are not fixed (a function that returns them).
CHOICES = "choices"

#: ``ddo.repetition``: proxies on whole domains, or on pools that match the target's repetition.
REPETITION_MODES = ("off", "match")
REPETITION_OFF, REPETITION_MATCH = REPETITION_MODES
# : ``ddo.schedule``: every DDO run trained on its own (the paper's design), or one run per mix with cooldown
# branches.
PROXY_SCHEDULES = ("separate", "wsd")
SEPARATE, WSD = PROXY_SCHEDULES
# : ``ddo.cooldown_shape``: how a WSD branch's learning rate falls from the peak (Hägele et al. 2024:
# ``1-sqrt``).
COOLDOWN_SHAPES = ("1-sqrt", "linear")
SQRT_COOLDOWN, LINEAR_COOLDOWN = COOLDOWN_SHAPES


def _field(section: str, name: str) -> str:
    return f"config {section}.{name}" if section else f"config {name}"


def field_error(section: str, name: str, value: Any, expected: str) -> ValueError:
    """The error for a bad config value: names the field, the value and what was expected."""
    return ValueError(f"{_field(section, name)} = {value!r} is invalid: expected {expected}")


def check_int_field(section: str, name: str, value: Any, *, minimum: int = 1) -> None:
    """``ValueError`` naming the field unless ``value`` is an integer ``>= minimum`` (:func:`check_int`)."""
    check_int(_field(section, name), value, minimum=minimum)


def check_number_field(section: str, name: str, value: Any) -> None:
    """``ValueError`` naming the field unless ``value`` is a positive finite number (:func:`check_number`)."""
    check_number(_field(section, name), value)


def check_choice(section: str, name: str, value: Any, choices: Iterable[Any]) -> None:
    """``ValueError`` naming the field unless ``value`` is one of ``choices``."""
    if value not in tuple(choices):
        raise field_error(section, name, value, f"one of {tuple(choices)}")


def check_seeds(section: str, seeds: Any) -> tuple[int, ...]:
    """The seeds as a tuple; ``ValueError`` unless they are a non-empty list of distinct integers >= 0."""
    values = tuple(seeds)
    if not values or not all(is_int(s) and s >= 0 for s in values):
        raise field_error(section, "seeds", seeds, "a non-empty list of integers >= 0")
    if len(set(values)) != len(values):
        raise field_error(section, "seeds", list(values), "distinct seeds")
    return values


def build_section(cls: type, raw: Any, section: str, *, keys: Iterable[str] | None = None) -> Any:
    """Section dataclass ``cls`` from a config file's mapping (lists as tuples, YAML's ``1e-3`` strings as
    numbers), or ``raw`` if already one; ``ValueError`` naming the section on a key ``cls`` lacks, with the
    keys a file may give: ``keys`` (default ``cls``'s fields)."""
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, Mapping):
        raise ValueError(f"config section {section!r} must be a mapping, got {raw!r}")
    types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(types))
    if unknown:
        raise ValueError(f"config section {section or '<top>'!r} has unknown keys {unknown}; "
                         f"expected some of {sorted(types if keys is None else keys)}")
    kwargs = {}
    for key, value in raw.items():
        if isinstance(value, str) and "float" in types[key]:
            with contextlib.suppress(ValueError):  # YAML reads "1e-3" (no dot) as a string
                value = float(value)
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # wrong value types caught by the dataclass itself
        raise ValueError(f"config section {section or '<top>'!r}: {exc}") from None


def _check_weights(section: str, name: str, weights: Mapping[str, float]) -> None:
    if not isinstance(weights, Mapping) or not weights:
        raise field_error(section, name, weights, "a non-empty mapping domain -> weight")
    for key, w in weights.items():
        if not is_number(w) or w < 0:
            raise field_error(section, f"{name}[{key!r}]", w, "a finite weight >= 0")
    total = float(sum(weights.values()))
    if total <= 0:
        raise field_error(section, name, weights, "weights with a positive sum")


@dataclass(frozen=True)
class ModelConfig:
    """Which model to train: a preset plus overrides of its fields."""

    preset: str = "gpt2-tiny"
    """``gpt2-tiny`` (2x128), ``gpt2-small``, ``gpt2-medium``, ``gpt2-large`` (1280 wide, 36 layers, 20
    heads), ``bert-tiny`` or ``bert-base`` (``runner.models.PRESETS``)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Any transformers config field (``n_layer``, ``n_embd``, ``hidden_size`` ...); the vocabulary comes from
    the stores."""
    mlm_probability: float = 0.15
    """BERT's masking rate (80% [MASK], 10% random, 10% kept; [MASK] is an extra id)."""
    activation: str | None = None
    """GPT-2's GELU: ``gelu_pytorch_tanh`` (one PyTorch kernel) or ``gelu_new`` (HF's Python formula of the
    same function, slower on a CPU); ``None``: the output folder's, ``gelu_new`` where its ``config.json``
    predates this setting (its runs trained with it), else ``gelu_pytorch_tanh``. A model field: it enters run
    ids."""

    def __post_init__(self) -> None:
        from ..models import GPT2_ACTIVATIONS

        _check_model("model", self.preset, self.overrides)
        if self.activation is not None:
            if self.family != GPT2:
                raise field_error("model", "activation", self.activation,
                                  "null for a BERT preset (its hidden_act goes in model.overrides)")
            check_choice("model", "activation", self.activation, GPT2_ACTIVATIONS)
        if not 0.0 < float(self.mlm_probability) < 1.0:
            raise field_error("model", "mlm_probability", self.mlm_probability, "a number in (0, 1)")

    @property
    def family(self) -> str:
        """``"gpt2"`` (causal LM) or ``"bert"`` (masked LM)."""
        return _family(self.preset)

    def another(self, preset: str, overrides: Mapping[str, Any]) -> ModelConfig:
        """Another model (a proxy's, a swarm's) with this one's masking rate and, for a GPT-2, activation."""
        return ModelConfig(preset=preset, overrides=dict(overrides), mlm_probability=self.mlm_probability,
                           activation=self.activation if _family(preset) == GPT2 else None)


def _family(preset: str) -> str:
    return preset.split("-", 1)[0]


def _check_model(section: str, preset: Any, overrides: Any) -> None:
    """``ValueError`` naming the field unless ``preset`` is one of ``runner.models.PRESETS`` and ``overrides``
    a mapping."""
    from ..models import PRESETS

    check_choice(section, "preset", preset, PRESETS)
    if not isinstance(overrides, dict):
        raise field_error(section, "overrides", overrides, "a mapping of model config fields")


@dataclass(frozen=True)
class ProxyModelConfig:
    """The proxies' own model (``ddo.proxy_model``): a preset plus overrides, as ``model``; it masks at
    ``model.mlm_probability``."""

    preset: str
    """A preset of the target's family (``gpt2-*`` or ``bert-*``)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Its transformers config fields (as ``model.overrides``; the target's are not inherited)."""

    def __post_init__(self) -> None:
        _check_model("ddo.proxy_model", self.preset, self.overrides)

    @property
    def family(self) -> str:
        """``"gpt2"`` or ``"bert"``."""
        return _family(self.preset)


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW with a linear warm-up, then linear decay (the paper's defaults)."""

    lr: float = 2e-4
    """Peak learning rate."""
    weight_decay: float = 0.01
    """AdamW's weight decay."""
    warmup_fraction: float = 0.1
    """Share of the run's steps in the linear warm-up."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's betas."""
    eps: float = 1e-8
    """AdamW's epsilon."""
    grad_clip: float = 1.0
    """Gradient-norm clipping (0: none)."""
    min_lr_ratio: float = 0.0
    """The learning rate at the end of the decay, as a share of ``lr``."""

    def __post_init__(self) -> None:
        check_number_field("optimizer", "lr", self.lr)
        if not 0.0 <= float(self.weight_decay) < 1.0:
            raise field_error("optimizer", "weight_decay", self.weight_decay, "a number in [0, 1)")
        if not 0.0 <= float(self.warmup_fraction) < 1.0:
            raise field_error("optimizer", "warmup_fraction", self.warmup_fraction, "a number in [0, 1)")
        betas = tuple(self.betas)
        if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
            raise field_error("optimizer", "betas", self.betas, "two numbers in [0, 1)")
        object.__setattr__(self, "betas", (float(betas[0]), float(betas[1])))
        check_number_field("optimizer", "eps", self.eps)
        if float(self.grad_clip) < 0:
            raise field_error("optimizer", "grad_clip", self.grad_clip, "a number >= 0 (0 disables clipping)")
        if not 0.0 <= float(self.min_lr_ratio) <= 1.0:
            raise field_error("optimizer", "min_lr_ratio", self.min_lr_ratio, "a number in [0, 1]")


@dataclass(frozen=True)
class DDOConfig:
    """The small budgets where DDO runs, and how its perturbations are made."""

    budgets: tuple[int, ...] = (500_000, 1_000_000, 3_000_000)
    """Tokens of the DDO base runs: ``[N1, N2]`` (the paper's design) or ``[N0, N1, N2]`` (or more), with
    which ``projection: auto`` backtests its projection at N2 (see "Three budgets"; N0 = N1 / 2 costs about
    1.13x the proxy tokens of ``[N1, N2]`` at N2 = 3 N1). In a file ``extra_budget: half`` adds N0 = N1 / 2
    below the budgets given (read as the explicit list)."""
    multiplier_up: tuple[float, ...] = (3.0,)
    """x r_up of the perturbed runs, one or more (in a file ``multipliers: [up, down]`` sets both; paper: 3
    both ways; the authors' GPT-2 notebook: ``[3, 5]``; ``[[3, 1.7], [3, 1.7]]`` identifies the law)."""
    multiplier_down: tuple[float, ...] = (3.0,)
    """/ r_down of the perturbed runs, one or more."""
    base_weights: str | dict[str, float] = "uniform"
    """The base runs' mix: ``uniform`` or a mapping domain -> weight."""
    objective: str = DEFAULT_OBJECTIVE
    """``mean_loss`` or ``mean_ppl`` (the authors' code)."""
    min_weight: float = 0.0
    """Lower bound of every weight, at every DDO budget and at the target (a projected weight outside the
    bounds is moved to them, and reported); a domain at weight 0 cannot be projected: use a small one."""
    max_weight: float = 1.0
    """Upper bound of every weight (as ``min_weight``)."""
    law: str = DEFAULT_LAW
    """The per-domain law: ``3p``, or ``4p``, which adds an amplitude."""
    projection: str = DEFAULT_PROJECTION
    """What sets the target mix: ``auto`` (with three budgets or more every candidate is refitted without N2
    and scored there like with like, and the joint law is validated on N2's runs before its predicted gain at
    the target counts, see "Three budgets"; with two, the DDO optimum at N2 as is unless the law fitted
    jointly to both budgets predicts a projection beats it by more than twice the prediction's sd and twice
    the noise of one run), ``observed`` (DDO(N2) as is), ``geometric`` (the paper's Theorem-1 path through the
    DDO optima), ``robust`` (that path with each domain's trend shrunk by its uncertainty) or ``joint`` (one
    law fitted to the runs of both budgets); all are written to ``fits/projection.json``
    ([solver](solver.md#2c-the-default-answer-auto))."""
    objective_weights: dict[str, float] | None = None
    """Validation domain -> weight: the fits (DDO, joint, robust) minimise that weighted sum of losses (or
    perplexities) instead of the mean; the report's mean loss stays unweighted."""
    repetition: str = REPETITION_OFF
    """``off``: each proxy draws from the whole domain; ``match``: from a pool scaled by its budget over the
    target's, so it repeats each domain as the target will, and the laws and the projection work in effective
    tokens (see "Repetition-matched proxies")."""
    proxy_model: ProxyModelConfig | None = None
    """The proxies' own model, smaller than ``model``: a preset name or ``{preset, overrides}``. It trains the
    DDO proxies, DoReMi's reference and proxy, and RegMix's swarm unless ``regmix.swarm.preset`` names one; it
    enters their run ids. ``None``: the target's model (the paper's design; ids as before). A proxy model of
    more training FLOPs per token than the target's is refused when the plan is made (see "A proxy model of
    its own")."""
    proxy_lr: float | None = None
    """The proxies' peak learning rate (the runs ``proxy_model`` trains; ``None``: ``optimizer.lr``)."""
    schedule: str = SEPARATE
    """``separate``: every DDO run trains on its own, with warm-up and linear decay (the paper's design; ids
    as before); ``wsd``: each design mix trains once (the trunk, at constant learning rate after warm-up) and
    every budget's run is a short decay branched from the trunk's checkpoint (see "One run per mix: cooldown
    branches")."""
    cooldown: float = 0.2
    """With ``schedule: wsd``: the share of each budget's steps in its decay branch, in (0, 1) (Hägele et al.
    2024: 0.2)."""
    cooldown_shape: str = SQRT_COOLDOWN
    """With ``schedule: wsd``: the branch's learning rate from the peak to ``optimizer.min_lr_ratio``:
    ``1-sqrt`` (Hägele et al. 2024) or ``linear``."""

    def __post_init__(self) -> None:
        self._check_design()
        if isinstance(self.base_weights, str) and self.base_weights != "uniform":
            raise field_error("ddo", "base_weights", self.base_weights,
                              "'uniform' or a mapping domain -> weight")
        if not isinstance(self.base_weights, str):
            _check_weights("ddo", "base_weights", self.base_weights)
        check_choice("ddo", "objective", self.objective, OBJECTIVES)
        if not 0.0 <= self.min_weight < self.max_weight <= 1.0:
            raise field_error("ddo", "min_weight/max_weight", (self.min_weight, self.max_weight),
                       "0 <= min_weight < max_weight <= 1")
        check_choice("ddo", "law", self.law, LAWS)
        points, k = self.design_points, law_parameters(self.law)
        if len(points) < k:  # the fit of every domain's law would refuse the runs
            raise field_error("ddo", "law", self.law, f"a law the design can fit: the {self.law} law needs "
                              f"{k} distinct multipliers per domain, the design gives {len(points)} "
                              f"({', '.join(f'{x:.3g}' for x in points)}); use law 3p or two multipliers "
                              "each way, e.g. ddo.multipliers: [[3, 1.7], [3, 1.7]]")
        check_choice("ddo", "projection", self.projection, PROJECTION_CHOICES)
        check_choice("ddo", "repetition", self.repetition, REPETITION_MODES)
        self._check_schedule()
        if isinstance(self.proxy_model, str):  # a preset name: that preset as is
            object.__setattr__(self, "proxy_model", ProxyModelConfig(preset=self.proxy_model))
        elif self.proxy_model is not None:
            object.__setattr__(self, "proxy_model",
                               build_section(ProxyModelConfig, self.proxy_model, "ddo.proxy_model"))
        if self.proxy_lr is not None:
            check_number_field("ddo", "proxy_lr", self.proxy_lr)
        if self.objective_weights is not None:
            _check_weights("ddo", "objective_weights", self.objective_weights)
            object.__setattr__(self, "objective_weights",
                               {str(k): float(v) for k, v in self.objective_weights.items()})

    def _check_design(self) -> None:
        """``budgets`` (two or more, increasing) and the multipliers (each > 1, distinct), as tuples."""
        if not isinstance(self.budgets, (list, tuple)) or len(self.budgets) < 2:
            shown = list(self.budgets) if isinstance(self.budgets, tuple) else self.budgets
            raise field_error("ddo", "budgets", shown, "two budgets or more in tokens, [N1, N2] or "
                              "[N0, N1, N2]")
        budgets = tuple(self.budgets)
        for b in budgets:
            check_int_field("ddo", "budgets", b)
        if any(a >= b for a, b in zip(budgets[:-1], budgets[1:], strict=True)):
            raise field_error("ddo", "budgets", list(budgets), "increasing budgets (N1 < N2, N0 < N1 < N2)")
        object.__setattr__(self, "budgets", budgets)
        for name in ("multiplier_up", "multiplier_down"):
            value = getattr(self, name)
            values = tuple(value) if isinstance(value, (list, tuple)) else (value,)
            if not values:
                raise field_error("ddo", name, value, "one or more multipliers > 1")
            for v in values:
                check_number_field("ddo", name, v)
                if float(v) <= 1.0:
                    raise field_error("ddo", name, value, "multipliers > 1 (down divides by them)")
            if len(set(values)) != len(values):
                raise field_error("ddo", name, value, "distinct multipliers")
            object.__setattr__(self, name, tuple(float(v) for v in values))

    def _check_schedule(self) -> None:
        """``schedule``, ``cooldown`` and ``cooldown_shape``, and WSD against a repetition-matched design."""
        check_choice("ddo", "schedule", self.schedule, PROXY_SCHEDULES)
        check_choice("ddo", "cooldown_shape", self.cooldown_shape, COOLDOWN_SHAPES)
        if not (is_number(self.cooldown) and 0.0 < float(self.cooldown) < 1.0):
            raise field_error("ddo", "cooldown", self.cooldown, "a share of each budget's steps in (0, 1), "
                                                                "e.g. 0.2")
        object.__setattr__(self, "cooldown", float(self.cooldown))
        if self.schedule == WSD and self.repetition == REPETITION_MATCH:
            raise field_error("ddo", "schedule", self.schedule, "'separate' with ddo.repetition: match (a "
                              "WSD trunk draws one stream for every budget, a matched proxy a pool of its "
                              "budget's own)")

    def check_domains(self, names: Sequence[str]) -> None:
        """Refuse the settings that no mix of the domains ``names`` meets, known before training (the DDO fits
        would refuse them after it): weight bounds beyond ``1/m`` and objective weights of unknown domains.

        Raises:
            ValueError: naming the field, its value and what the domains allow.
        """
        m = len(names)
        why = f"the weights of the {m} domains {sorted(names)} sum to 1"
        if self.min_weight * m > 1 + 1e-12:
            raise field_error("ddo", "min_weight", self.min_weight, f"at most 1/{m} = {1 / m:.3g} ({why})")
        if self.max_weight * m < 1 - 1e-12:
            raise field_error("ddo", "max_weight", self.max_weight, f"at least 1/{m} = {1 / m:.3g} ({why})")
        unknown = sorted(set(self.objective_weights or {}) - set(names))
        if unknown:
            raise field_error("ddo", "objective_weights", self.objective_weights,
                              f"validation domains among {sorted(names)}; unknown: {unknown}")

    @property
    def largest(self) -> int:
        """``N2``: the largest budget (DDO(N2)'s and the backtest's held-back budget)."""
        return self.budgets[-1]

    @property
    def design_points(self) -> tuple[float, ...]:
        """The distinct multipliers each domain's law is fitted at (the base run's 1 included)."""
        return tuple(sorted({1.0, *self.multiplier_up, *(1.0 / d for d in self.multiplier_down)}))

    @property
    def identifies_law(self) -> bool:
        """Whether the design has more distinct points per domain than the law has parameters.

        With exactly as many points as parameters (the paper's 2m+1 design and the 3-parameter law)
        the law passes through every point, often in more than one way, so the optimum is not
        determined by the data; see :mod:`autoscale_data.solver.identify`.
        """
        return len(self.design_points) > law_parameters(self.law)


@dataclass(frozen=True)
class TargetConfig:
    """The target budget and the mixes trained there (AutoScale is always trained)."""

    budget: int = 10_000_000
    """Target tokens (more than N2)."""
    baselines: tuple[str, ...] = field(default=(UNIFORM, NATURAL, DDO_N2),
                                       metadata={CHOICES: registry.baselines})
    """Further mixes, each trained at the same budget, seeds and evaluation points (see "Other mixing
    methods")."""
    reference_weights: dict[str, float] | str | None = None
    """The ``reference`` baseline's weights, or a preset of ``solver.PRESETS`` (``llama1``)."""
    seeds: tuple[int, ...] = (0,)
    """Seeds of the target runs."""
    keep_checkpoints: bool = True
    """Keep each finished target run's final checkpoint in ``runs/<id>/final_ckpt/`` (about 12 bytes per
    parameter: ~1.5 GB for gpt2-small) so ``autoscale-data extend`` can continue it; false deletes it like a
    proxy's. Not part of any run id, not a config change."""
    reference_mapping: dict[str, str] | None = None
    """Preset key -> your domain (``{CommonCrawl: common_crawl, Books: book}``)."""

    def __post_init__(self) -> None:
        check_int_field("target", "budget", self.budget)
        baselines = tuple(self.baselines)
        known = registry.baselines()
        for b in baselines:
            if b not in known:
                raise field_error("target", "baselines", b, f"names from {known}")
        if len(set(baselines)) != len(baselines):
            raise field_error("target", "baselines", list(baselines), "each baseline at most once")
        object.__setattr__(self, "baselines", baselines)
        if REFERENCE in baselines and self.reference_weights is None:
            raise field_error("target", "reference_weights", None, "weights for the 'reference' baseline")
        if isinstance(self.reference_weights, str):
            from ...solver import PRESETS

            if self.reference_weights.lower() not in PRESETS:
                raise field_error("target", "reference_weights", self.reference_weights,
                                  f"a mapping domain -> weight or a preset from {sorted(PRESETS)}")
        elif self.reference_weights is not None:
            _check_weights("target", "reference_weights", self.reference_weights)
        if self.reference_mapping is not None and not isinstance(self.reference_mapping, Mapping):
            raise field_error("target", "reference_mapping", self.reference_mapping,
                              "a mapping preset key -> domain")
        object.__setattr__(self, "seeds", check_seeds("target", self.seeds))
        if not isinstance(self.keep_checkpoints, bool):
            raise field_error("target", "keep_checkpoints", self.keep_checkpoints, "true or false")


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation: the per-domain validation loss at evenly spaced points (the last at the end)."""

    heldout_tokens_per_domain: int = 65_536
    """Held-out tokens scored per domain."""
    proxy_points: int = 1
    """Evaluations along a proxy run."""
    target_points: int = 10
    """Evaluations along a target run."""
    batch_size: int = 16
    """Sequences per evaluation batch."""
    mlm_passes: int = 1
    """Passes of a masked LM over the held-out tokens, each under another fixed mask (see below)."""
    tasks: tuple[str, ...] = ()
    """Zero-shot tasks of :mod:`autoscale_data.evaluation` scored on every finished target run's final model
    (a causal LM; see "Zero-shot downstream tasks"). Not part of any run id, not a config change."""
    task_limit: int | None = 200
    """Questions per task (``None``: all), the same for every run."""
    task_seed: int = 0
    """Seed that draws the ``task_limit`` questions."""

    def __post_init__(self) -> None:
        from ...evaluation import check_task_names

        try:
            object.__setattr__(self, "tasks", tuple(check_task_names(self.tasks)))
        except ValueError as e:
            raise field_error("eval", "tasks", self.tasks, f"task names ({e})") from None
        if self.task_limit is not None:
            check_int_field("eval", "task_limit", self.task_limit)
        check_int_field("eval", "task_seed", self.task_seed, minimum=0)
        for name in ("mlm_passes", "heldout_tokens_per_domain", "proxy_points", "target_points",
                     "batch_size"):
            check_int_field("eval", name, getattr(self, name))


@dataclass(frozen=True)
class DeepSpeedConfig:
    """DeepSpeed settings used when ``backend: deepspeed``."""

    zero_stage: int = 1
    """ZeRO stage, 0 to 3."""
    launcher: str = "deepspeed"
    """``deepspeed`` or ``torchrun``."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Merged into the DeepSpeed config."""
    single_process: str = "torch"
    """What a run of one process does: ``torch`` trains the plain torch step (ZeRO shards nothing over one
    process; fused AdamW on CUDA, bf16 autocast over fp32 weights, torch checkpoints), ``deepspeed`` wraps it
    in the engine all the same. Runs of several processes always use the engine."""

    def __post_init__(self) -> None:
        check_choice("deepspeed", "zero_stage", self.zero_stage, (0, 1, 2, 3))
        check_choice("deepspeed", "launcher", self.launcher, ("deepspeed", "torchrun"))
        if self.single_process not in SINGLE_PROCESS_MODES:
            raise field_error("deepspeed", "single_process", self.single_process,
                              f"one of {list(SINGLE_PROCESS_MODES)} (what one process of backend deepspeed "
                              "runs)")


#: ``deepspeed.single_process`` (see its docstring).
SINGLE_PROCESS_MODES = ("torch", "deepspeed")

#: ``train.compile_mode``: ``torch.compile``'s modes.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")

#: ``train.micro_batch``: the configured ``micro_batch_size``, or one chosen from a dry step's memory.
MICRO_BATCH_MODES = ("config", AUTO)


@dataclass(frozen=True)
class TrainConfig:
    """How the training step runs (not what it trains: none of these enter a run id)."""

    compile: bool | str = AUTO
    """``torch.compile`` the model's training forward: true, false or ``auto`` (CUDA only: on the CPU it pays
    only after about 300k tokens of one run for the demo's model, never under load;
    ``benchmarks/bench_train_step.py --compile``)."""
    compile_mode: str = "default"
    """``torch.compile``'s mode (``default``, ``reduce-overhead``: CUDA graphs, ``max-autotune``)."""
    micro_batch: str = "config"
    """``config`` (``micro_batch_size``) or ``auto``: on CUDA the largest micro-batch dividing the per-process
    batch whose memory, measured by a dry step at ``micro_batch_size`` and extrapolated, fits
    ``memory_fraction`` of the GPU; on the CPU ``micro_batch_size`` (larger is not faster there)."""
    memory_fraction: float = 0.8
    """Share of the GPU's memory ``micro_batch: auto`` may fill."""
    pad_vocab: int = 64
    """Pad the vocabulary to a multiple of this (1: none); the extra logits are left out of the loss, so the
    loss is the unpadded model's. A padded model enters its run ids (``padded_vocab``)."""
    tf32: bool = True
    """TF32 matmuls on CUDA (fp32 runs; bf16 autocast is unaffected)."""

    def __post_init__(self) -> None:
        if not isinstance(self.compile, bool) and self.compile != AUTO:
            raise field_error("train", "compile", self.compile, "true, false or 'auto' (on CUDA only)")
        check_choice("train", "compile_mode", self.compile_mode, COMPILE_MODES)
        if self.micro_batch not in MICRO_BATCH_MODES:
            raise field_error("train", "micro_batch", self.micro_batch,
                              f"one of {list(MICRO_BATCH_MODES)} (the configured micro_batch_size, or "
                              "chosen)")
        if not 0.0 < float(self.memory_fraction) <= 1.0:
            raise field_error("train", "memory_fraction", self.memory_fraction, "a number in (0, 1]")
        check_int_field("train", "pad_vocab", self.pad_vocab)
        if not isinstance(self.tf32, bool):
            raise field_error("train", "tf32", self.tf32, "true or false")

    def compiles(self, device_type: str) -> bool:
        """Whether a run on ``device_type`` compiles its model."""
        return device_type == "cuda" if self.compile == AUTO else bool(self.compile)



@dataclass(frozen=True)
class SlurmConfig:
    """Slurm settings of ``executor: {kind: slurm}`` (jobs submitted through submitit)."""

    cluster: str = SLURM
    """``slurm``, or ``local``: the same jobs through submitit's local executor (no Slurm needed)."""
    partition: str | None = None
    """Slurm partition (``None``: the cluster's default)."""
    time_min: int = 60
    """Time limit of one job, in minutes."""
    nodes: int = 1
    """Nodes per job."""
    gpus_per_node: int | None = None
    """GPUs per node (``None``: ``procs / nodes`` with ``device: cuda``)."""
    cpus_per_task: int | None = None
    """CPUs per task (``None``: Slurm's default)."""
    mem_gb: float | None = None
    """Memory per node in GB (``None``: Slurm's default)."""
    account: str | None = None
    """Slurm account."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further ``#SBATCH --key=value`` options (``{qos: high, constraint: a100}``)."""
    array_parallelism: int = 64
    """Jobs of one array running at once."""
    requeue: bool = True
    """Let Slurm requeue a preempted or timed-out job (it resumes from its checkpoint)."""
    folder: str | None = None
    """submitit's folder (``None``: ``OUT/slurm``)."""

    def __post_init__(self) -> None:
        check_choice("executor.slurm", "cluster", self.cluster, SLURM_CLUSTERS)
        for name in ("time_min", "nodes", "array_parallelism"):
            check_int_field("executor.slurm", name, getattr(self, name))
        for name in ("gpus_per_node", "cpus_per_task"):
            if getattr(self, name) is not None:
                check_int_field("executor.slurm", name, getattr(self, name), minimum=0)
        if self.mem_gb is not None:
            check_number_field("executor.slurm", "mem_gb", self.mem_gb)
        if not isinstance(self.extra, dict):
            raise field_error("executor.slurm", "extra", self.extra, "a mapping of sbatch options")


@dataclass(frozen=True)
class RayConfig:
    """Ray settings of ``executor: {kind: ray}``."""

    address: str | None = None
    """The cluster's address (``None``: start a Ray on this machine)."""
    num_cpus: float | None = None
    """CPUs of one run (``None``: ``cpu_threads`` x ``procs``)."""
    num_gpus: float | None = None
    """GPUs of one run (``None``: ``procs`` on CUDA)."""

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            if value is not None and (not is_number(value) or value < 0):
                raise field_error("executor.ray", name, value, "a number >= 0 or null")


@dataclass(frozen=True)
class ExecutorConfig:
    """Where and how many runs train at once (see "Executors"). Not part of any run id: changing it retrains
    nothing."""

    kind: str = LOCAL
    """``local`` (this machine), ``slurm`` (one Slurm job per run through submitit) or ``ray`` (one Ray task
    per run)."""
    max_parallel: int | str = 1
    """Runs at once (1: one after another in the runner's own process; ``auto``: GPUs // procs x
    ``runs_per_gpu`` on a GPU machine, else cores // cpu_threads); caps slurm and ray too."""
    retries: int = 1
    """Resubmissions of a run whose job died, per runner call (it resumes; a diverged run: never)."""
    runs_per_gpu: int = 1
    """Runs sharing each GPU (slots take the GPUs in turn): small proxies train side by side."""
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def __post_init__(self) -> None:
        check_choice("executor", "kind", self.kind, EXECUTORS)
        mp = self.max_parallel
        if isinstance(mp, str):
            if mp != AUTO and not mp.isdigit():
                raise field_error("executor", "max_parallel", mp, "a positive integer or 'auto'")
            if mp.isdigit():
                object.__setattr__(self, "max_parallel", int(mp))
        check_int_field("executor", "max_parallel", 1 if self.max_parallel == AUTO else self.max_parallel)
        check_int_field("executor", "retries", self.retries, minimum=0)
        check_int_field("executor", "runs_per_gpu", self.runs_per_gpu)
        object.__setattr__(self, SLURM, build_section(SlurmConfig, self.slurm, f"executor.{SLURM}"))
        object.__setattr__(self, RAY, build_section(RayConfig, self.ray, f"executor.{RAY}"))

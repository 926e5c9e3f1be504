"""The sections of the runner's configuration (model, optimizer, DDO, target, eval, DeepSpeed).

Every section is a frozen dataclass checked in ``__post_init__``; a bad value raises ``ValueError``
naming the field, the value and what was expected. :class:`~autoscale_data.runner.config.RunnerConfig`
holds one of each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._checks import check_int, check_number, is_int, is_number
from ..._runner_names import EXECUTORS, LOCAL, RAY, SLURM, SLURM_CLUSTERS
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
    "DDOConfig",
    "DeepSpeedConfig",
    "EXECUTORS",
    "EvalConfig",
    "ExecutorConfig",
    "ModelConfig",
    "OptimizerConfig",
    "REPETITION_MATCH",
    "REPETITION_MODES",
    "REPETITION_OFF",
    "RayConfig",
    "SlurmConfig",
    "TargetConfig",
    "TrainConfig",
]


#: ``ddo.repetition``: proxies on whole domains, or on pools that match the target's repetition.
REPETITION_MODES = ("off", "match")
REPETITION_OFF, REPETITION_MATCH = REPETITION_MODES


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


def check_seeds(section: str, seeds: Any, *, distinct: bool = True) -> tuple[int, ...]:
    """The seeds as a tuple; ``ValueError`` unless they are a non-empty list of integers >= 0 (distinct)."""
    values = tuple(seeds)
    if not values or not all(is_int(s) and s >= 0 for s in values):
        raise field_error(section, "seeds", seeds, "a non-empty list of integers >= 0")
    if distinct and len(set(values)) != len(values):
        raise field_error(section, "seeds", list(values), "distinct seeds")
    return values


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
    """Which model to train: a preset name plus optional overrides of its fields.

    Presets (``autoscale_data.runner.models.PRESETS``): ``gpt2-tiny``, ``gpt2-small``,
    ``gpt2-medium``, ``gpt2-large``, ``bert-tiny``, ``bert-base``. Overrides are the
    transformers config fields (``n_layer``, ``n_embd``, ``hidden_size`` …).
    """

    preset: str = "gpt2-tiny"
    overrides: dict[str, Any] = field(default_factory=dict)
    mlm_probability: float = 0.15

    def __post_init__(self) -> None:
        from ..models import PRESETS

        if self.preset not in PRESETS:
            raise field_error("model", "preset", self.preset, f"one of {sorted(PRESETS)}")
        if not isinstance(self.overrides, dict):
            raise field_error("model", "overrides", self.overrides, "a mapping of model config fields")
        if not 0.0 < float(self.mlm_probability) < 1.0:
            raise field_error("model", "mlm_probability", self.mlm_probability, "a number in (0, 1)")

    @property
    def family(self) -> str:
        """``"gpt2"`` (causal LM) or ``"bert"`` (masked LM)."""
        return self.preset.split("-", 1)[0]


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW with linear decay after a linear warm-up (the paper's defaults: 10% warm-up, wd 0.01)."""

    lr: float = 2e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    grad_clip: float = 1.0
    min_lr_ratio: float = 0.0

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
    """The small budgets where DDO runs (two or more), and how its perturbations are made.

    ``budgets`` ``[N1, N2]`` is the paper's design; a third, smaller budget ``N0`` (``[N0, N1, N2]``, or
    ``extra_budget: half`` in a config file for ``N0 = N1 / 2``) lets ``ddo.projection: auto`` backtest
    its projection: refit without ``N2``, score every candidate at ``N2`` (``docs/runner.md``,
    "Three budgets"). The default is that design: ``N0 = N1 / 2`` costs about 1.13x the proxy tokens of
    ``[N1, N2]`` at ``N2 = 3 N1``.
    """

    budgets: tuple[int, ...] = (500_000, 1_000_000, 3_000_000)
    multiplier_up: tuple[float, ...] = (3.0,)
    multiplier_down: tuple[float, ...] = (3.0,)
    base_weights: str | dict[str, float] = "uniform"
    objective: str = DEFAULT_OBJECTIVE
    min_weight: float = 0.0
    max_weight: float = 1.0
    law: str = DEFAULT_LAW
    # auto by default: DDO(N2) as is unless the runs show a projection does better (three budgets: a
    # backtest at N2; two: a gain the joint law predicts beyond its uncertainty and the noise of one run;
    # docs/solver.md, "The default: auto"); geometric is the paper's path
    projection: str = DEFAULT_PROJECTION
    objective_weights: dict[str, float] | None = None  # {validation domain: weight}: weighted-sum objective
    # "match": each proxy draws every domain from a pool scaled by its budget over the target's, so it
    # repeats each domain as often as the target will (runner/planning/repetition.py); "off": the whole domain
    repetition: str = REPETITION_OFF

    def __post_init__(self) -> None:
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
        if isinstance(self.base_weights, str):
            if self.base_weights != "uniform":
                raise field_error("ddo", "base_weights", self.base_weights, "'uniform' or a mapping domain -> weight")
        else:
            _check_weights("ddo", "base_weights", self.base_weights)
        if self.objective not in OBJECTIVES:
            raise field_error("ddo", "objective", self.objective, f"one of {OBJECTIVES}")
        if not 0.0 <= self.min_weight < self.max_weight <= 1.0:
            raise field_error("ddo", "min_weight/max_weight", (self.min_weight, self.max_weight),
                       "0 <= min_weight < max_weight <= 1")
        if self.law not in LAWS:
            raise field_error("ddo", "law", self.law, " or ".join(map(repr, LAWS)))
        if self.projection not in PROJECTION_CHOICES:
            raise field_error("ddo", "projection", self.projection, f"one of {PROJECTION_CHOICES}")
        if self.repetition not in REPETITION_MODES:
            raise field_error("ddo", "repetition", self.repetition, f"one of {REPETITION_MODES}")
        if self.objective_weights is not None:
            _check_weights("ddo", "objective_weights", self.objective_weights)
            object.__setattr__(self, "objective_weights", {str(k): float(v) for k, v in self.objective_weights.items()})

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
    """The target budget and the mixes trained there (AutoScale is always trained).

    ``baselines`` names further mixes, each trained at the same budget, seeds and evaluation points: any
    method of the registry (:mod:`autoscale_data.runner.registry`, where each declares where its mix comes
    from and the config section it reads). ``reference`` trains ``reference_weights`` (a mapping, or a preset
    name of ``solver.PRESETS`` such as ``llama1`` whose keys ``reference_mapping`` renames to your domains).

    - ``autoscale_anytime``: the AutoScale plan (the ``MixturePlan`` fitted on the N1/N2 DDO optima,
      ``fits/mixture_plan.json``) with the dataset's ``schedule="anytime"``: the cumulative tokens
      per domain follow the plan's optimal-allocation path, so every intermediate point of the run
      has seen about the optimal mix for its own budget (the fixed ``autoscale`` run sees the
      target-budget mix throughout). The report compares the two at every evaluation point. When
      some domain's fitted allocation decreases from N1 to N2 (impossible under Theorem 1; noisy
      proxies), the run follows the plan's monotone envelope and ends at the same counts as the
      fixed run (logged, and noted in the report).

    ``keep_checkpoints`` (default true): keep each finished target run's final checkpoint (model,
    optimiser, schedule, RNG and the dataset state at the end) in ``runs/<id>/final_ckpt/``, so the run
    can be extended to a larger budget (``autoscale-data extend``). About 12 bytes per parameter
    (fp32 weights + AdamW's two moments): kilobytes for the tiny presets, ~1.5 GB for gpt2-small, ~9 GB
    for gpt2-large, per target run. Proxy runs never keep theirs. It changes no result and no run id.
    """

    budget: int = 10_000_000
    baselines: tuple[str, ...] = (UNIFORM, NATURAL, DDO_N2)
    reference_weights: dict[str, float] | str | None = None
    seeds: tuple[int, ...] = (0,)
    keep_checkpoints: bool = True
    reference_mapping: dict[str, str] | None = None

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
            raise field_error("target", "reference_mapping", self.reference_mapping, "a mapping preset key -> domain")
        object.__setattr__(self, "seeds", check_seeds("target", self.seeds, distinct=False))
        if not isinstance(self.keep_checkpoints, bool):
            raise field_error("target", "keep_checkpoints", self.keep_checkpoints, "true or false")


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation: how many held-out tokens per domain and how often.

    A masked LM (BERT) is scored only on the masked positions: one evaluation scores about
    ``model.mlm_probability`` (15%) of the held-out tokens. ``mlm_passes`` evaluates the same tokens
    that many times under different fixed masks, scoring ``mlm_passes`` times as many positions.

    ``tasks`` (default none) names zero-shot tasks of :mod:`autoscale_data.evaluation` (``arc_easy``,
    ``boolq``, ``hellaswag``, ``piqa``, ``sciq``, ``winogrande`` …) scored on every finished target run's
    final model (a causal LM; ``target.keep_checkpoints``): ``task_limit`` questions per task (``null``:
    all), drawn with ``task_seed``, the same for every run. The report's "Downstream tasks" table reads them.
    """

    heldout_tokens_per_domain: int = 65_536
    proxy_points: int = 1
    target_points: int = 10
    batch_size: int = 16
    mlm_passes: int = 1
    tasks: tuple[str, ...] = ()
    task_limit: int | None = 200
    task_seed: int = 0

    def __post_init__(self) -> None:
        from ...evaluation import check_task_names

        try:
            object.__setattr__(self, "tasks", tuple(check_task_names(self.tasks)))
        except ValueError as e:
            raise field_error("eval", "tasks", self.tasks, f"task names ({e})") from None
        if self.task_limit is not None:
            check_int_field("eval", "task_limit", self.task_limit)
        check_int_field("eval", "task_seed", self.task_seed, minimum=0)
        check_int_field("eval", "mlm_passes", self.mlm_passes)
        check_int_field("eval", "heldout_tokens_per_domain", self.heldout_tokens_per_domain)
        check_int_field("eval", "proxy_points", self.proxy_points)
        check_int_field("eval", "target_points", self.target_points)
        check_int_field("eval", "batch_size", self.batch_size)


@dataclass(frozen=True)
class DeepSpeedConfig:
    """DeepSpeed settings used when ``backend: deepspeed``."""

    zero_stage: int = 1
    launcher: str = "deepspeed"
    extra: dict[str, Any] = field(default_factory=dict)
    single_process: str = "torch"

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise field_error("deepspeed", "zero_stage", self.zero_stage, "0, 1, 2 or 3")
        if self.launcher not in ("deepspeed", "torchrun"):
            raise field_error("deepspeed", "launcher", self.launcher, "'deepspeed' or 'torchrun'")
        if self.single_process not in SINGLE_PROCESS_MODES:
            raise field_error("deepspeed", "single_process", self.single_process,
                              f"one of {list(SINGLE_PROCESS_MODES)} (what one process of backend deepspeed runs)")


#: ``deepspeed.single_process``: a run of one process trains with the plain torch step (ZeRO shards
#: nothing over one process; fused AdamW, no engine), or with the DeepSpeed engine all the same.
SINGLE_PROCESS_MODES = ("torch", "deepspeed")

#: ``train.compile_mode``: ``torch.compile``'s modes.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")

#: ``train.micro_batch``: the configured ``micro_batch_size``, or one chosen from a dry step's memory.
MICRO_BATCH_MODES = ("config", AUTO)


@dataclass(frozen=True)
class TrainConfig:
    """How the training step runs (not what it trains: none of these enter a run id).

    - ``compile``: ``torch.compile`` the model's training forward: ``true``, ``false`` or ``auto`` (on
      CUDA only: on the CPU each run's process compiles again, and for the demo's model that pays only
      after about 300k tokens of one run, never under load; ``benchmarks/bench_train_step.py --compile`` measures it); ``compile_mode``:
      ``torch.compile``'s mode (``default``, ``reduce-overhead``: CUDA graphs, ``max-autotune``).
    - ``micro_batch``: ``config`` (``micro_batch_size``) or ``auto``: on CUDA the largest micro-batch that
      divides the per-process batch and whose memory, extrapolated from a dry step at
      ``micro_batch_size``, fits ``memory_fraction`` of the GPU; on the CPU ``micro_batch_size`` (memory
      is rarely what limits a CPU run, and a larger micro-batch is not faster there).
    - ``pad_vocab``: pad the model's vocabulary to a multiple of this (1: none); the extra logits are
      left out of the loss, so the loss is the unpadded model's.
    - ``tf32``: allow TF32 matmuls on CUDA (fp32 runs; bf16 autocast is unaffected).
    """

    compile: bool | str = AUTO
    compile_mode: str = "default"
    micro_batch: str = "config"
    memory_fraction: float = 0.8
    pad_vocab: int = 64
    tf32: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.compile, bool) and self.compile != AUTO:
            raise field_error("train", "compile", self.compile, "true, false or 'auto' (on CUDA only)")
        if self.compile_mode not in COMPILE_MODES:
            raise field_error("train", "compile_mode", self.compile_mode, f"one of {list(COMPILE_MODES)}")
        if self.micro_batch not in MICRO_BATCH_MODES:
            raise field_error("train", "micro_batch", self.micro_batch,
                              f"one of {list(MICRO_BATCH_MODES)} (the configured micro_batch_size, or chosen)")
        if not 0.0 < float(self.memory_fraction) <= 1.0:
            raise field_error("train", "memory_fraction", self.memory_fraction, "a number in (0, 1]")
        check_int_field("train", "pad_vocab", self.pad_vocab)
        if not isinstance(self.tf32, bool):
            raise field_error("train", "tf32", self.tf32, "true or false")

    def compiles(self, device_type: str) -> bool:
        """Whether a run on ``device_type`` compiles its model."""
        return device_type == "cuda" if self.compile == AUTO else bool(self.compile)



def _subsection(cls: type, raw: Any, name: str) -> Any:
    import dataclasses

    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, Mapping):
        raise field_error("executor", name, raw, "a mapping")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise field_error("executor", name, dict(raw), f"keys from {sorted(known)} (unknown: {unknown})")
    return cls(**dict(raw))


@dataclass(frozen=True)
class SlurmConfig:
    """Slurm settings of ``executor: {kind: slurm}`` (jobs submitted through submitit).

    ``cluster: local`` runs the same jobs through submitit's local executor (no Slurm needed: tests
    and a quick check of a plan). ``gpus_per_node`` defaults to ``procs`` (one node) or
    ``procs / nodes``; ``extra`` is passed to sbatch as further ``#SBATCH --key=value`` lines
    (``{"qos": "high", "constraint": "a100"}``). ``array_parallelism`` caps the jobs of one array
    running at once. ``requeue`` lets Slurm requeue a preempted job (it resumes from its checkpoint).
    """

    cluster: str = SLURM
    partition: str | None = None
    time_min: int = 60
    nodes: int = 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    account: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    array_parallelism: int = 64
    requeue: bool = True
    folder: str | None = None

    def __post_init__(self) -> None:
        if self.cluster not in SLURM_CLUSTERS:
            raise field_error("executor.slurm", "cluster", self.cluster, "'slurm' or 'local'")
        check_int_field("executor.slurm", "time_min", self.time_min)
        check_int_field("executor.slurm", "nodes", self.nodes)
        check_int_field("executor.slurm", "array_parallelism", self.array_parallelism)
        for name in ("gpus_per_node", "cpus_per_task"):
            if getattr(self, name) is not None:
                check_int_field("executor.slurm", name, getattr(self, name), minimum=0)
        if self.mem_gb is not None:
            check_number_field("executor.slurm", "mem_gb", self.mem_gb)
        if not isinstance(self.extra, dict):
            raise field_error("executor.slurm", "extra", self.extra, "a mapping of sbatch options")


@dataclass(frozen=True)
class RayConfig:
    """Ray settings of ``executor: {kind: ray}``: the cluster address (``None``: start a local Ray)
    and the resources of one run (default: ``cpu_threads`` CPUs and ``procs`` GPUs on a GPU machine)."""

    address: str | None = None
    num_cpus: float | None = None
    num_gpus: float | None = None

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            if value is not None and (not is_number(value) or value < 0):
                raise field_error("executor.ray", name, value, "a number >= 0 or null")


@dataclass(frozen=True)
class ExecutorConfig:
    """Where and how many runs train at once. Not part of any run id: changing it retrains nothing.

    - ``local`` (default): up to ``max_parallel`` runs at once on this machine, each pinned to its
      own ``procs`` GPUs (``CUDA_VISIBLE_DEVICES``) or, on CPU, to ``cpu_threads`` threads.
      ``max_parallel: auto`` = GPUs // procs x ``runs_per_gpu`` on a GPU machine, else
      cores // cpu_threads. ``runs_per_gpu`` > 1 lets that many small runs share each GPU (slots
      take the GPUs in turn): a proxy too small to fill a GPU alone trains beside others.
      ``max_parallel: 1`` trains one run after another in the runner's own process (plain torch,
      one process), with no executor.
    - ``slurm``: one Slurm job per run through submitit (:class:`SlurmConfig`).
    - ``ray``: one Ray task per run (:class:`RayConfig`).

    ``retries``: how often one runner call resubmits a run whose job died (it resumes from its
    checkpoint); a diverged run is never retried. ``max_parallel`` also caps slurm and ray.
    """

    kind: str = LOCAL
    max_parallel: int | str = 1
    retries: int = 1
    runs_per_gpu: int = 1
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise field_error("executor", "kind", self.kind, f"one of {EXECUTORS}")
        mp = self.max_parallel
        if isinstance(mp, str):
            if mp != AUTO and not mp.isdigit():
                raise field_error("executor", "max_parallel", mp, "a positive integer or 'auto'")
            if mp.isdigit():
                object.__setattr__(self, "max_parallel", int(mp))
        check_int_field("executor", "max_parallel", 1 if self.max_parallel == AUTO else self.max_parallel)
        check_int_field("executor", "retries", self.retries, minimum=0)
        check_int_field("executor", "runs_per_gpu", self.runs_per_gpu)
        object.__setattr__(self, SLURM, _subsection(SlurmConfig, self.slurm, SLURM))
        object.__setattr__(self, RAY, _subsection(RayConfig, self.ray, RAY))

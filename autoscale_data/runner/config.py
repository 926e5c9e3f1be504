"""The runner's configuration: validated dataclasses loaded from YAML or JSON.

Every section is a frozen dataclass checked in ``__post_init__``; a bad value raises ``ValueError``
naming the field, the value and what was expected. Paths in a config file are relative to the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BASELINES",
    "DDOConfig",
    "DataConfig",
    "DeepSpeedConfig",
    "EvalConfig",
    "ModelConfig",
    "OptimizerConfig",
    "RunnerConfig",
    "TargetConfig",
    "config_from_dict",
    "config_to_dict",
    "load_config",
]

#: Mixes the runner can train at the target budget next to the AutoScale mix (``target.baselines``).
BASELINES = ("autoscale_anytime", "ddo_n2", "natural", "reference", "uniform")
_OBJECTIVES = ("mean_loss", "mean_ppl")


def _err(section: str, name: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"config {section}.{name} = {value!r} is invalid: expected {expected}")


def _pos_int(section: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _err(section, name, value, "a positive integer")


def _pos_float(section: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _err(section, name, value, "a positive finite number")


def _check_weights(section: str, name: str, weights: Mapping[str, float]) -> None:
    if not isinstance(weights, Mapping) or not weights:
        raise _err(section, name, weights, "a non-empty mapping domain -> weight")
    for key, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise _err(section, f"{name}[{key!r}]", w, "a finite weight >= 0")
    total = float(sum(weights.values()))
    if total <= 0:
        raise _err(section, name, weights, "weights with a positive sum")


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
        from .models import PRESETS

        if self.preset not in PRESETS:
            raise _err("model", "preset", self.preset, f"one of {sorted(PRESETS)}")
        if not isinstance(self.overrides, dict):
            raise _err("model", "overrides", self.overrides, "a mapping of model config fields")
        if not 0.0 < float(self.mlm_probability) < 1.0:
            raise _err("model", "mlm_probability", self.mlm_probability, "a number in (0, 1)")

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
        _pos_float("optimizer", "lr", self.lr)
        if not 0.0 <= float(self.weight_decay) < 1.0:
            raise _err("optimizer", "weight_decay", self.weight_decay, "a number in [0, 1)")
        if not 0.0 <= float(self.warmup_fraction) < 1.0:
            raise _err("optimizer", "warmup_fraction", self.warmup_fraction, "a number in [0, 1)")
        betas = tuple(self.betas)
        if len(betas) != 2 or not all(0.0 <= float(b) < 1.0 for b in betas):
            raise _err("optimizer", "betas", self.betas, "two numbers in [0, 1)")
        object.__setattr__(self, "betas", (float(betas[0]), float(betas[1])))
        _pos_float("optimizer", "eps", self.eps)
        if float(self.grad_clip) < 0:
            raise _err("optimizer", "grad_clip", self.grad_clip, "a number >= 0 (0 disables clipping)")
        if not 0.0 <= float(self.min_lr_ratio) <= 1.0:
            raise _err("optimizer", "min_lr_ratio", self.min_lr_ratio, "a number in [0, 1]")


@dataclass(frozen=True)
class DDOConfig:
    """The two small budgets where DDO runs, and how its perturbations are made."""

    budgets: tuple[int, int] = (1_000_000, 3_000_000)
    multiplier_up: float = 3.0
    multiplier_down: float = 3.0
    base_weights: str | dict[str, float] = "uniform"
    objective: str = "mean_loss"
    min_weight: float = 0.0
    max_weight: float = 1.0
    law: str = "3p"

    def __post_init__(self) -> None:
        budgets = tuple(self.budgets)
        if len(budgets) != 2:
            raise _err("ddo", "budgets", self.budgets, "two budgets [N1, N2] in tokens")
        for b in budgets:
            _pos_int("ddo", "budgets", b)
        if not budgets[0] < budgets[1]:
            raise _err("ddo", "budgets", list(budgets), "N1 < N2")
        object.__setattr__(self, "budgets", budgets)
        for name in ("multiplier_up", "multiplier_down"):
            value = getattr(self, name)
            _pos_float("ddo", name, value)
            if float(value) <= 1.0:
                raise _err("ddo", name, value, "a multiplier > 1 (down divides by it)")
        if isinstance(self.base_weights, str):
            if self.base_weights != "uniform":
                raise _err("ddo", "base_weights", self.base_weights, "'uniform' or a mapping domain -> weight")
        else:
            _check_weights("ddo", "base_weights", self.base_weights)
        if self.objective not in _OBJECTIVES:
            raise _err("ddo", "objective", self.objective, f"one of {_OBJECTIVES}")
        if not 0.0 <= self.min_weight < self.max_weight <= 1.0:
            raise _err("ddo", "min_weight/max_weight", (self.min_weight, self.max_weight),
                       "0 <= min_weight < max_weight <= 1")
        if self.law not in ("3p", "4p"):
            raise _err("ddo", "law", self.law, "'3p' or '4p'")


@dataclass(frozen=True)
class TargetConfig:
    """The target budget and the mixes trained there (AutoScale is always trained).

    ``baselines`` names further mixes, each trained at the same budget, seeds and evaluation points:

    - ``uniform``: equal weights; ``natural``: each domain's share of the training tokens;
      ``reference``: ``reference_weights``; ``ddo_n2``: the DDO optimum at N2 (no projection).
    - ``autoscale_anytime``: the AutoScale plan (the ``MixturePlan`` fitted on the N1/N2 DDO optima,
      ``fits/mixture_plan.json``) with the dataset's ``schedule="anytime"``: the cumulative tokens
      per domain follow the plan's optimal-allocation path, so every intermediate point of the run
      has seen about the optimal mix for its own budget (the fixed ``autoscale`` run sees the
      target-budget mix throughout). The report compares the two at every evaluation point. When
      some domain's fitted allocation decreases from N1 to N2 (impossible under Theorem 1; noisy
      proxies), the run follows the plan's monotone envelope and ends at the same counts as the
      fixed run (logged, and noted in the report).
    """

    budget: int = 10_000_000
    baselines: tuple[str, ...] = ("uniform", "natural", "ddo_n2")
    reference_weights: dict[str, float] | None = None
    seeds: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        _pos_int("target", "budget", self.budget)
        baselines = tuple(self.baselines)
        for b in baselines:
            if b not in BASELINES:
                raise _err("target", "baselines", b, f"names from {BASELINES}")
        if len(set(baselines)) != len(baselines):
            raise _err("target", "baselines", list(baselines), "each baseline at most once")
        object.__setattr__(self, "baselines", baselines)
        if "reference" in baselines and self.reference_weights is None:
            raise _err("target", "reference_weights", None, "weights for the 'reference' baseline")
        if self.reference_weights is not None:
            _check_weights("target", "reference_weights", self.reference_weights)
        seeds = tuple(self.seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise _err("target", "seeds", self.seeds, "a non-empty list of integers >= 0")
        object.__setattr__(self, "seeds", seeds)


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation: how many held-out tokens per domain and how often."""

    heldout_tokens_per_domain: int = 65_536
    proxy_points: int = 1
    target_points: int = 10
    batch_size: int = 16

    def __post_init__(self) -> None:
        _pos_int("eval", "heldout_tokens_per_domain", self.heldout_tokens_per_domain)
        _pos_int("eval", "proxy_points", self.proxy_points)
        _pos_int("eval", "target_points", self.target_points)
        _pos_int("eval", "batch_size", self.batch_size)


@dataclass(frozen=True)
class DeepSpeedConfig:
    """DeepSpeed settings used when ``backend: deepspeed``."""

    zero_stage: int = 1
    launcher: str = "deepspeed"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.zero_stage not in (0, 1, 2, 3):
            raise _err("deepspeed", "zero_stage", self.zero_stage, "0, 1, 2 or 3")
        if self.launcher not in ("deepspeed", "torchrun"):
            raise _err("deepspeed", "launcher", self.launcher, "'deepspeed' or 'torchrun'")


@dataclass(frozen=True)
class DataConfig:
    """Optional: build a synthetic demo corpus into ``domains`` when that path is missing."""

    synthetic: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.synthetic is not None and not isinstance(self.synthetic, dict):
            raise _err("data", "synthetic", self.synthetic, "a mapping of generator options")


@dataclass(frozen=True)
class RunnerConfig:
    """A whole AutoScale experiment: data, model, training, DDO budgets, target, evaluation.

    Example (YAML)::

        domains: ../stores/tiny        # a prepared-store dir (one sub-dir per domain) or name -> path
        model: {preset: gpt2-tiny}
        seq_len: 128
        micro_batch_size: 8
        global_batch_size: 16
        ddo: {budgets: [40000, 80000]}
        target: {budget: 200000, baselines: [uniform, natural]}
    """

    domains: str | dict[str, str]
    model: ModelConfig = field(default_factory=ModelConfig)
    seq_len: int = 128
    micro_batch_size: int = 8
    global_batch_size: int = 16
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    ddo: DDOConfig = field(default_factory=DDOConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seeds: tuple[int, ...] = (0,)
    backend: str = "torch"
    precision: str = "fp32"
    procs: int = 1
    device: str = "auto"
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    max_epochs: float | None = None
    checkpoint_every: int = 200
    num_workers: int = 0
    cpu_threads: int | None = None
    dropout: float | None = None
    data: DataConfig = field(default_factory=DataConfig)
    name: str = "autoscale"
    base_dir: str = "."

    def __post_init__(self) -> None:
        if isinstance(self.domains, str):
            if not self.domains:
                raise _err("", "domains", self.domains, "a prepared-store directory or a mapping")
        elif not isinstance(self.domains, dict) or len(self.domains) < 2:
            raise _err("", "domains", self.domains, "a store directory or a mapping of >= 2 domains -> store paths")
        _pos_int("", "seq_len", self.seq_len)
        _pos_int("", "micro_batch_size", self.micro_batch_size)
        _pos_int("", "global_batch_size", self.global_batch_size)
        _pos_int("", "procs", self.procs)
        if self.global_batch_size % (self.micro_batch_size * self.procs):
            raise _err("", "global_batch_size", self.global_batch_size,
                       f"a multiple of micro_batch_size x procs = {self.micro_batch_size * self.procs}")
        seeds = tuple(self.seeds)
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
            raise _err("", "seeds", self.seeds, "a non-empty list of integers >= 0")
        if len(set(seeds)) != len(seeds):
            raise _err("", "seeds", list(seeds), "distinct seeds")
        object.__setattr__(self, "seeds", seeds)
        if self.backend not in ("torch", "deepspeed"):
            raise _err("", "backend", self.backend, "'torch' or 'deepspeed'")
        if self.precision not in ("fp32", "bf16"):
            raise _err("", "precision", self.precision, "'fp32' or 'bf16' (DeepSpeed bf16 mode / torch autocast)")
        if self.device not in ("auto", "cpu", "cuda"):
            raise _err("", "device", self.device, "'auto', 'cpu' or 'cuda'")
        if self.max_epochs is not None:
            _pos_float("", "max_epochs", self.max_epochs)
        _pos_int("", "checkpoint_every", self.checkpoint_every)
        if isinstance(self.num_workers, bool) or not isinstance(self.num_workers, int) or self.num_workers < 0:
            raise _err("", "num_workers", self.num_workers, "an integer >= 0")
        if self.cpu_threads is not None:
            _pos_int("", "cpu_threads", self.cpu_threads)
        if self.dropout is not None and not 0.0 <= float(self.dropout) < 1.0:
            raise _err("", "dropout", self.dropout, "a number in [0, 1)")
        for b in self.ddo.budgets + (self.target.budget,):
            if b < self.global_batch_size * self.seq_len:
                raise _err("", "budgets", b, f"at least one global batch ({self.global_batch_size} x "
                           f"{self.seq_len} = {self.global_batch_size * self.seq_len} tokens)")
        if self.target.budget <= self.ddo.budgets[1]:
            raise _err("target", "budget", self.target.budget, f"more than ddo.budgets N2 = {self.ddo.budgets[1]}")

    @property
    def grad_accum(self) -> int:
        """Micro-batches per optimizer step on each process."""
        return self.global_batch_size // (self.micro_batch_size * self.procs)

    def resolve(self, path: str) -> Path:
        """A config path made absolute (relative paths are relative to the config file)."""
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()


_SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "optimizer": OptimizerConfig,
    "ddo": DDOConfig,
    "target": TargetConfig,
    "eval": EvalConfig,
    "deepspeed": DeepSpeedConfig,
    "data": DataConfig,
}


def _build(cls: type, raw: Any, section: str) -> Any:
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, Mapping):
        raise ValueError(f"config section {section!r} must be a mapping, got {raw!r}")
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
    known = set(fields)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"config section {section or '<top>'!r} has unknown keys {unknown}; "
                         f"expected some of {sorted(known)}")
    kwargs = {}
    for key, value in raw.items():
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, str) and "float" in fields[key]:
            try:  # YAML reads "1e-3" (no dot) as a string
                value = float(value)
            except ValueError:
                pass
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:  # wrong value types caught by the dataclass itself
        raise ValueError(f"config section {section or '<top>'!r}: {exc}") from None


def config_from_dict(raw: Mapping[str, Any], base_dir: str | os.PathLike[str] = ".") -> RunnerConfig:
    """Build and validate a :class:`RunnerConfig` from a plain mapping (parsed YAML/JSON)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a runner config must be a mapping, got {type(raw).__name__}")
    top = dict(raw)
    if "domains" not in top:
        raise ValueError("config is missing the required key 'domains' (a prepared-store directory "
                         "or a mapping domain -> store path)")
    for name, cls in _SECTIONS.items():
        if name in top:
            section = dict(top[name] or {})
            if cls is DDOConfig and "multipliers" in section:
                mult = section.pop("multipliers")
                if not isinstance(mult, (list, tuple)) or len(mult) != 2:
                    raise _err("ddo", "multipliers", mult, "[up, down], e.g. [3, 3] for x3 and /3")
                section["multiplier_up"], section["multiplier_down"] = mult
            top[name] = _build(cls, section, name)
    if "base_dir" in top:
        raise ValueError("config key 'base_dir' is set from the config file's location; remove it")
    top["base_dir"] = os.fspath(base_dir)
    return _build(RunnerConfig, top, "")


def load_config(path: str | os.PathLike[str]) -> RunnerConfig:
    """Read a runner config from a ``.yaml``/``.yml`` or ``.json`` file.

    Args:
        path: the config file; relative paths inside it are resolved against its directory.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file does not parse or a value is invalid (the message names it).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {os.fspath(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"config file {os.fspath(p)!r} is not valid JSON: {exc}") from None
    elif p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"config file {os.fspath(p)!r} is not valid YAML: {exc}") from None
    else:
        raise ValueError(f"config file {os.fspath(p)!r} must end in .yaml, .yml or .json")
    return config_from_dict(raw or {}, p.resolve().parent)


def config_to_dict(config: Any) -> Any:
    """A JSON-able dict of a config (dataclasses and tuples become dicts and lists)."""
    if dataclasses.is_dataclass(config):
        return {f.name: config_to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
    if isinstance(config, (list, tuple)):
        return [config_to_dict(v) for v in config]
    if isinstance(config, dict):
        return {str(k): config_to_dict(v) for k, v in config.items()}
    return config

"""The runner's configuration (:class:`RunnerConfig`) and its loaders from YAML or JSON; paths in a config
file are relative to the file."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from ..._checks import is_int
from ..._extras import require
from ..._runner_names import GPT2
from ...solver.vocabulary import AUTO
from .. import registry
from .sections import (
    DDOConfig,
    DeepSpeedConfig,
    EvalConfig,
    ExecutorConfig,
    ModelConfig,
    OptimizerConfig,
    TargetConfig,
    TrainConfig,
    build_section,
    check_choice,
    check_int_field,
    check_number_field,
    check_seeds,
    field_error,
)

__all__ = ["EXTRA_BUDGETS", "RunnerConfig", "SECTIONS", "config_from_dict", "config_to_dict", "load_config",
           "with_extra_budget"]

#: ``ddo.extra_budget``: ``half`` adds ``N0 = N1 / 2`` below the budgets given; ``none`` adds nothing.
EXTRA_BUDGETS = ("half", "none")


def with_extra_budget(budgets: Any, extra: Any) -> Any:
    """``ddo.budgets`` with ``ddo.extra_budget`` applied (a config file's shorthand, expanded on reading).

    ``"half"`` puts ``N0 = N1 // 2`` in front of the budgets (``N1`` the smallest given), so that
    ``{budgets: [N1, N2], extra_budget: half}`` reads as ``budgets: [N0, N1, N2]``; ``"none"`` (or
    ``None``) leaves them. The expanded list is what ``config.json`` records.

    Raises:
        ValueError: ``extra`` is not one of :data:`EXTRA_BUDGETS`, or the budgets are not a list.
    """
    if extra is None or extra == "none":
        return budgets
    if extra not in EXTRA_BUDGETS:
        raise field_error("ddo", "extra_budget", extra, " or ".join(map(repr, EXTRA_BUDGETS)))
    given = list(budgets) if isinstance(budgets, (list, tuple)) else budgets
    if (not isinstance(given, list) or not given or not all(is_int(b) and b > 0 for b in given)
            or any(a >= b for a, b in zip(given[:-1], given[1:], strict=False))):
        # checked as written: the expanded list would name an N0 the file does not hold
        raise field_error("ddo", "budgets", given, "increasing budgets [N1, N2] in tokens with "
                          f"ddo.extra_budget: {extra!r} (it adds N0 = N1 / 2 below them)")
    return (int(given[0]) // 2, *given)


@dataclass(frozen=True)
class RunnerConfig:
    """A whole AutoScale experiment: data, model, training, DDO budgets, target, evaluation.

    Example (YAML)::

        domains: ../stores/tiny
        model: {preset: gpt2-tiny}
        ddo: {budgets: [40000, 80000]}
        target: {budget: 200000, baselines: [uniform, natural]}
    """

    domains: str | dict[str, str]
    """A prepared-store directory (one sub-directory per domain) or a mapping ``name: store path``."""
    model: ModelConfig = field(default_factory=ModelConfig)
    seq_len: int = 128
    """Context length."""
    micro_batch_size: int = 8
    """Sequences per process per micro-step."""
    global_batch_size: int = 16
    """Sequences per optimiser step (a multiple of ``micro_batch_size`` x ``procs``)."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    ddo: DDOConfig = field(default_factory=DDOConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    seeds: tuple[int, ...] = (0,)
    """Seeds of every DDO point (several: error bars and a bootstrap verdict)."""
    backend: str = "torch"
    """``torch`` or ``deepspeed``."""
    precision: str = "fp32"
    """``fp32``, or ``bf16``: DeepSpeed's bf16 mode, or torch autocast."""
    procs: int = 1
    """Processes per run."""
    device: str = AUTO
    """``auto`` (CUDA when present, NCCL), ``cpu`` or ``cuda``."""
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    max_epochs: float | None = None
    """How often a domain may repeat (``None``: once; needed when x r_up exceeds a small domain)."""
    checkpoint_every: int = 200
    """Optimiser steps between checkpoints."""
    num_workers: int = 0
    """DataLoader workers (the stream and resume stay exact)."""
    cpu_threads: int | None = None
    """Intra-op threads per process (``None``: torch's default; 1 is much faster on a busy 2-core machine)."""
    dropout: float | None = 0.0
    """Every dropout probability (0 for pre-training, as nanoGPT; ``None``: the model's defaults, 0.1)."""
    train: TrainConfig = field(default_factory=TrainConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    sections: dict[str, Any] = field(default_factory=dict)
    """The registered methods' own sections, each a top-level key of the file (read as ``config.NAME``;
    unset: ``None``, the method's defaults)."""
    name: str = "autoscale"
    """The experiment's name (default output folder ``./runs/<name>``)."""
    base_dir: str = "."
    """Where relative paths start: the config file's folder (set on reading, not a key of the file)."""

    def __post_init__(self) -> None:
        if isinstance(self.domains, str):
            if not self.domains:
                raise field_error("", "domains", self.domains, "a prepared-store directory or a mapping")
        elif not isinstance(self.domains, dict) or len(self.domains) < 2:
            raise field_error("", "domains", self.domains, "a store directory or a mapping of >= 2 domains "
                                                           "-> store paths")
        for name in ("seq_len", "micro_batch_size", "global_batch_size", "procs"):
            check_int_field("", name, getattr(self, name))
        if self.global_batch_size % (self.micro_batch_size * self.procs):
            raise field_error("", "global_batch_size", self.global_batch_size,
                       f"a multiple of micro_batch_size x procs = {self.micro_batch_size * self.procs}")
        object.__setattr__(self, "seeds", check_seeds("", self.seeds))
        check_choice("", "backend", self.backend, ("torch", "deepspeed"))
        if self.backend == "deepspeed":
            require("deepspeed", "config backend 'deepspeed'")
        check_choice("", "precision", self.precision, ("fp32", "bf16"))
        check_choice("", "device", self.device, (AUTO, "cpu", "cuda"))
        if self.eval.tasks and self.model.family != GPT2:  # zero-shot ranked classification needs a causal LM
            raise field_error("eval", "tasks", list(self.eval.tasks), "none for the masked LM "
                              f"{self.model.preset!r} (the zero-shot tasks score a causal LM's answers)")
        proxy = self.ddo.proxy_model
        if proxy is not None and proxy.family != self.model.family:
            raise field_error("ddo", "proxy_model", proxy.preset, f"a {self.model.family} preset, as model "
                              f"{self.model.preset!r} (the proxies train the target's objective)")
        if self.max_epochs is not None:
            check_number_field("", "max_epochs", self.max_epochs)
        check_int_field("", "checkpoint_every", self.checkpoint_every)
        check_int_field("", "num_workers", self.num_workers, minimum=0)
        if self.cpu_threads is not None:
            check_int_field("", "cpu_threads", self.cpu_threads)
        if self.dropout is not None and not 0.0 <= float(self.dropout) < 1.0:
            raise field_error("", "dropout", self.dropout, "a number in [0, 1)")
        for b in self.ddo.budgets + (self.target.budget,):
            if b < self.global_batch_size * self.seq_len:
                raise field_error("", "budgets", b, f"at least one global batch ({self.global_batch_size} x "
                           f"{self.seq_len} = {self.global_batch_size * self.seq_len} tokens)")
        if isinstance(self.domains, dict):  # a store folder's domains are checked when it is opened
            self.ddo.check_domains(list(self.domains))
        if self.target.budget <= self.ddo.largest:
            raise field_error("target", "budget", self.target.budget, "more than ddo.budgets N2 = "
                                                                      f"{self.ddo.largest}")
        known = registry.sections()
        for name, section in self.sections.items():
            if name not in known or not isinstance(section, registry.load(known[name])):
                raise field_error("", name, section, f"a section of a registered method ({sorted(known)})")

    def __getattr__(self, name: str) -> Any:
        """A registered method's section (``config.regmix``): ``None`` where the config leaves it unset."""
        if name.startswith("_") or name not in registry.sections():
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.__dict__.get("sections", {}).get(name)

    @property
    def grad_accum(self) -> int:
        """Micro-batches per optimizer step on each process."""
        return self.global_batch_size // (self.micro_batch_size * self.procs)

    def resolve(self, path: str) -> Path:
        """A config path made absolute (relative paths are relative to the config file)."""
        p = Path(os.path.expanduser(path))
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()


#: RunnerConfig's own sections (its fields that are dataclasses); the methods' come from the registry.
SECTIONS: dict[str, type] = {n: t for n, t in get_type_hints(RunnerConfig).items()
                             if dataclasses.is_dataclass(t)}


def _read_multipliers(section: dict[str, Any], mult: Any) -> None:
    if not isinstance(mult, (list, tuple)) or len(mult) != 2:
        raise field_error("ddo", "multipliers", mult, "[up, down], e.g. [3, 3] for x3 and /3, or [[3, 1.7], "
                                                      "[3, 1.7]]")
    section["multiplier_up"], section["multiplier_down"] = mult


def _read_extra_budget(section: dict[str, Any], extra: Any) -> None:
    section["budgets"] = with_extra_budget(section.get("budgets", DDOConfig.budgets), extra)


# : A section's shorthand keys in a file, each read into the section's fields (in this order) before it is
# built.
_SHORTHANDS: dict[type, dict[str, Callable[[dict[str, Any], Any], None]]] = {
    DDOConfig: {"multipliers": _read_multipliers, "extra_budget": _read_extra_budget}}

#: RunnerConfig's fields that a file does not give: set on reading (``base_dir``), or one top-level key each.
_NOT_FILE_KEYS = ("base_dir", "sections")


def _file_keys(cls: type, also: Iterable[str]) -> list[str]:
    """The keys a config file may give for section ``cls``: its fields and ``also`` (shorthands, methods'
    sections)."""
    fields = {f.name for f in dataclasses.fields(cls)} - (set(_NOT_FILE_KEYS) if cls is RunnerConfig
                                                          else set())
    return sorted(fields | set(also))


def config_from_dict(raw: Mapping[str, Any], base_dir: str | os.PathLike[str] = ".") -> RunnerConfig:
    """Build and validate a :class:`RunnerConfig` from a plain mapping (parsed YAML/JSON)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a runner config must be a mapping, got {type(raw).__name__}")
    top = dict(raw)
    if "domains" not in top:
        raise ValueError("config is missing the required key 'domains' (a prepared-store directory "
                         "or a mapping domain -> store path)")
    for name, cls in SECTIONS.items():
        if name in top:
            section = dict(top[name] or {})
            shorthands = _SHORTHANDS.get(cls, {})
            for key, read in shorthands.items():
                if key in section:
                    read(section, section.pop(key))
            top[name] = build_section(cls, section, name, keys=_file_keys(cls, shorthands))
    if "sections" in top:
        raise ValueError("config key 'sections' is not read: give each method's section as a top-level key")
    methods = registry.sections()
    given = {name: top.pop(name) for name in methods if name in top}
    top["sections"] = {name: build_section(registry.load(methods[name]), value, name)
                       for name, value in given.items() if value is not None}  # None: the method's defaults
    if "data" in top:
        raise ValueError("config section 'data' (data.synthetic) is no longer read: the runner reads "
                         "prepared stores only. Build the synthetic demo stores with `autoscale-data demo "
                         "--stores DIR` (or autoscale_data.demo.prepare_synthetic_stores) and point "
                         "'domains' at DIR")
    if "base_dir" in top:
        raise ValueError("config key 'base_dir' is set from the config file's location; remove it")
    top["base_dir"] = os.fspath(base_dir)
    return build_section(RunnerConfig, top, "", keys=_file_keys(RunnerConfig, methods))


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
        raw = {f.name: config_to_dict(getattr(config, f.name)) for f in dataclasses.fields(config)}
        if isinstance(config, RunnerConfig):  # each method's section is a top-level key (null: unset)
            sections = raw.pop("sections")
            raw |= {name: sections.get(name) for name in registry.sections()}
        return raw
    if isinstance(config, (list, tuple)):
        return [config_to_dict(v) for v in config]
    if isinstance(config, dict):
        return {str(k): config_to_dict(v) for k, v in config.items()}
    return config

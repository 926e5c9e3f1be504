"""The registry of mixing methods: every method's declaration, the one place a method's name is spelt.

A method declares what :class:`MethodDeclaration` lists. The built-in methods are
:data:`autoscale_data.runner.mixes.builtin_methods.BUILTINS`, registered when the runner is imported (its
classes imported there, so the architecture test sees every import); :func:`register_method` adds another.

Everything else reads this registry: the layout's target-mix labels, the config's check of
``target.baselines`` and of its optional method sections, the selection kinds of a
:class:`~autoscale_data.runner.planning.specs.RunSpec`, the trainer's step hooks
(:func:`~autoscale_data.runner.training.hooks.make_step_hook`) and the methods the runner plans
(:func:`~autoscale_data.runner.mixes.methods.selected_methods`). It imports nothing of the runner and names no
module of the package (:func:`load` imports a method's ``package.module.Name`` given as a string, outside it).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .._records import Record, fields_from_json
from ..solver import MIXING_LAW, NATURAL, REFERENCE, REGMIX, UNIFORM

__all__ = [
    "ADO",
    "ANYTIME",
    "AUTOSCALE",
    "DDO_N2",
    "DOREMI",
    "DOREMI_PROXY",
    "DOREMI_REFERENCE",
    "FITTED",
    "HookSpec",
    "MIXING_LAW",
    "MIXING_METHODS",
    "MethodDeclaration",
    "MethodDoc",
    "NATURAL",
    "ODM",
    "ONLINE",
    "OWN_RUNS",
    "REFERENCE",
    "REGMIX",
    "RUN_PLACES",
    "STORES",
    "SWARM",
    "UNIFORM",
    "baselines",
    "declaration",
    "hook_factory",
    "load",
    "model_keeping_kinds",
    "names",
    "register_method",
    "sections",
    "selection_kinds",
]

RunPlace = Literal["fitted", "stores", "own_runs", "online"]
"""Where a method's mix is chosen: from AutoScale's fits, from the stores before any run, from runs the
runner trains for it, or by a controller inside each target run."""
RUN_PLACES: tuple[RunPlace, ...] = get_args(RunPlace)
FITTED, STORES, OWN_RUNS, ONLINE = RUN_PLACES

# ---- the built-in methods' names (the target runs' labels; the solver's baselines keep its names)
AUTOSCALE = "autoscale"
ANYTIME = "autoscale_anytime"
DDO_N2 = "ddo_n2"
DOREMI = "doremi"
ADO = "ado"
ODM = "odm"
# ---- their selection kinds (the kinds of the runs they train before their targets)
SWARM = "swarm"
DOREMI_REFERENCE = "doremi_reference"
DOREMI_PROXY = "doremi_proxy"


@dataclass(frozen=True)
class MethodDoc:
    """A method's row of the methods' table of ``docs/runner.md`` (markdown; equal docs share a row).

    Attributes:
        mix: where its mix comes from.
        cost: the runs it needs (its cost).
        origin: its paper and code.
    """

    mix: str
    cost: str = "none"
    origin: str = "—"


@dataclass(frozen=True)
class MethodDeclaration:
    """What a mixing method declares.

    Attributes:
        name: the label of its target runs and what ``target.baselines`` names.
        source: where its mix comes from, in words (``fits/methods.json`` and the report).
        runs: where the mix is chosen (one of :data:`RUN_PLACES`).
        order: its place in the plan (0 AutoScale, 1 DDO at N2, 2 the stores' mixes, 3 the anytime schedule,
            4 methods with runs of their own or online; within a place, ``target.baselines`` order).
        implementation: its :class:`~autoscale_data.runner.mixes.methods.MixingMethod` class
            (``package.module.Class``, imported when first used, or the class), built with this declaration.
        section: the optional top-level config section it reads (``None``: none).
        config: that section's frozen dataclass (as ``implementation``); the config builds, checks and
            documents the section from it.
        selection_kinds: the kinds of the runs it trains before its targets.
        keeps_model: those of ``selection_kinds`` whose run keeps its final model (another run reads it).
        hook_kind: the step-hook ``kind`` its runs train with (``None``: none).
        hook: the step hook's class (as ``implementation``), built from the :class:`HookSpec` its ``spec``
            names.
        doc: its row of the methods' table (``None``: ``source``, and no cost or origin stated).
    """

    name: str
    source: str
    runs: RunPlace
    order: int
    implementation: str | type
    section: str | None = None
    config: str | type | None = None
    selection_kinds: tuple[str, ...] = ()
    keeps_model: tuple[str, ...] = ()
    hook_kind: str | None = None
    hook: str | type | None = None
    doc: MethodDoc | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"mixing method name {self.name!r} is invalid: expected an identifier")
        if self.runs not in RUN_PLACES:
            raise ValueError(f"mixing method {self.name!r} runs = {self.runs!r} is invalid: expected one of "
                             f"{RUN_PLACES}")
        if not set(self.keeps_model) <= set(self.selection_kinds):
            raise ValueError(f"mixing method {self.name!r}: keeps_model {self.keeps_model} are not among its "
                             f"selection kinds {self.selection_kinds}")
        if (self.section is None) != (self.config is None):
            raise ValueError(f"mixing method {self.name!r} declares a config section and its class together "
                             "or neither")
        if (self.hook_kind is None) != (self.hook is None):
            raise ValueError(f"mixing method {self.name!r} declares a hook kind and a hook class together or "
                             "neither")


#: Every registered method by name: the built-ins
#: (:data:`autoscale_data.runner.mixes.builtin_methods.BUILTINS`, registered when the runner is imported),
#: then what :func:`register_method` added.
MIXING_METHODS: dict[str, MethodDeclaration] = {}


def register_method(method: MethodDeclaration) -> None:
    """Add (or replace) a method under its name: ``target.baselines`` may name it from then on.

    Raises:
        ValueError: the name is AutoScale's (always trained), or its hook kind is another method's.
    """
    if method.name == AUTOSCALE:
        raise ValueError(f"mixing method {AUTOSCALE!r} is AutoScale itself and cannot be replaced")
    taken = {m.hook_kind: m.name for m in MIXING_METHODS.values() if m.hook_kind and m.name != method.name}
    if method.hook_kind in taken and MIXING_METHODS[taken[method.hook_kind]].hook != method.hook:
        raise ValueError(f"step hook kind {method.hook_kind!r} of {method.name!r} is "
                         f"{taken[method.hook_kind]!r}'s with another hook class")
    MIXING_METHODS[method.name] = method


def declaration(name: str) -> MethodDeclaration:
    """The declaration of method ``name``.

    Raises:
        ValueError: no method of that name is registered.
    """
    if name not in MIXING_METHODS:
        raise ValueError(f"mixing method {name!r} is not registered: expected one of {names()}")
    return MIXING_METHODS[name]


def names(*runs: RunPlace) -> tuple[str, ...]:
    """The registered methods' names (only those whose mix is chosen at one of ``runs``, when given)."""
    return tuple(m.name for m in MIXING_METHODS.values() if not runs or m.runs in runs)


def baselines() -> tuple[str, ...]:
    """What ``target.baselines`` may name: every method but AutoScale (always trained)."""
    return tuple(n for n in names() if n != AUTOSCALE)


def _union(values: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for vs in values for v in vs))


def selection_kinds() -> tuple[str, ...]:
    """The kinds of the runs methods train before their targets."""
    return _union(m.selection_kinds for m in MIXING_METHODS.values())


def model_keeping_kinds() -> tuple[str, ...]:
    """The selection kinds whose run keeps its final model."""
    return _union(m.keeps_model for m in MIXING_METHODS.values())


def sections() -> dict[str, str | type]:
    """The optional top-level config sections the methods read: name -> its dataclass (as ``config``)."""
    return {m.section: m.config for m in MIXING_METHODS.values() if m.section and m.config}


def load(path: str | type) -> Any:
    """The class a declaration's ``implementation`` or ``hook`` names: a class as is, a
    ``package.module.Name`` imported now.

    Raises:
        ValueError: the path names no importable object.
    """
    if not isinstance(path, str):
        return path
    module, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"{path!r} names no importable object (expected package.module.Name): "
                         f"{exc}") from None


@dataclass(frozen=True)
class HookSpec(Record):
    """A run's step-hook config (:attr:`~autoscale_data.runner.planning.specs.RunSpec.hook`, in its run id):
    its ``kind``, and the fields of the subclass that the kind's hook class names as ``spec``."""

    kind: str

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> Any:
        """Read as the record of the kind's hook class (hand-written: the kind in the JSON picks the
        record)."""
        if cls is HookSpec and isinstance(data, Mapping):
            cls = hook_factory(str(data.get("kind"))).spec
        return cls(**fields_from_json(cls, data, path))


def hook_factory(kind: str) -> Any:
    """The step-hook class of ``kind`` (called with a spec's :class:`HookSpec`; its ``spec`` is that record's
    type).

    Raises:
        ValueError: no registered method declares that kind.
    """
    for m in MIXING_METHODS.values():
        if m.hook_kind == kind and m.hook is not None:
            return load(m.hook)
    kinds = sorted({m.hook_kind for m in MIXING_METHODS.values() if m.hook_kind})
    raise ValueError(f"step hook kind {kind!r} is unknown: expected one of {kinds}")

"""Which experiment an output folder belongs to: its config, the change check and the run ids it reports.

An output folder holds one experiment (docs/runner.md, "One output folder, one experiment"): another
config stops the runner (:class:`ConfigChangedError`) unless ``allow_config_change``. Settings that
cannot change a result (:data:`IGNORED_SETTINGS`) are not compared; a setting that a newer version added
is compared at its default (a folder whose config predates it holds runs made as with that default), except
``model.activation``: a GPT-2 folder whose config predates it trained ``gelu_new``, and a config that leaves
it unset keeps the folder's (:func:`with_folder_defaults`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io import atomic_write_json
from .._records import Record
from .._runner_names import GPT2
from . import layout

if TYPE_CHECKING:
    from .config import RunnerConfig

__all__ = ["ConfigChange", "ConfigChangedError", "IGNORED_SETTINGS", "check_config", "config_changes",
           "load_folder_config", "with_folder_defaults"]

#: Config keys (top-level or dotted) that do not affect any result, and so may change between invocations.
IGNORED_SETTINGS = ("base_dir", "executor", "target.keep_checkpoints",
                    # the zero-shot tasks score finished runs
                    "eval.tasks", "eval.task_limit", "eval.task_seed")


class ConfigChangedError(ValueError):
    """The output folder was run with another config (the message lists every changed setting)."""


@dataclass(frozen=True)
class ConfigChange(Record):
    """One line of ``config_history.jsonl``: a config the folder was run with, and what replaced it."""

    config: dict[str, Any]
    """The config as it was (``config.json`` before the change)."""
    replaced_by_changes: list[str]
    """The settings the new config changed, one line each."""


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping) and obj:
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: obj}


def config_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``"target.budget: 131072 -> 262144"`` for every setting that differs (ignored settings left out)."""
    def norm(cfg: Mapping[str, Any]) -> dict[str, Any]:
        flat = _flatten({k: v for k, v in cfg.items() if k not in IGNORED_SETTINGS})
        flat = {k: v for k, v in flat.items() if not k.startswith(tuple(f"{i}." for i in IGNORED_SETTINGS))
                and k not in IGNORED_SETTINGS}
        return json.loads(json.dumps(flat))  # tuples and lists compare alike

    a, b = norm(old), norm(new)
    def shown(flat: dict[str, Any], key: str) -> str:
        return json.dumps(flat[key]) if key in flat else "(unset)"

    return [f"{key}: {shown(a, key)} -> {shown(b, key)}"
            for key in sorted(set(a) | set(b)) if key not in a or key not in b or a[key] != b[key]]


def check_config(out: Path, config: Mapping[str, Any], *, allow_change: bool) -> list[str]:
    """Refuse (or, with ``allow_change``, record) a config that differs from the one ``out`` was run with.

    Writes ``out/config.json`` with ``config``. A changed config that is allowed appends the old one to
    ``out/config_history.jsonl`` first.

    Returns:
        The changed settings (empty for a new folder or the same config).

    Raises:
        ConfigChangedError: the config changed and ``allow_change`` is false.
    """
    # None: none, or a file torn by a crash before the atomic writer existed
    old = layout.read(out, layout.CONFIG)
    changes = [] if old is None else config_changes(_with_defaults(old), _as_trained(config))
    if changes and not allow_change:
        shown = "\n  ".join(changes)
        raise ConfigChangedError(
            f"{os.fspath(out)!r} holds an experiment run with another config; changed settings:\n  {shown}\n"
            "Finished runs there would be mixed with this config's runs. Either give a new output folder "
            "(--out NEW_DIR), or continue in this one with --allow-config-change "
            "(MixtureRunner(..., allow_config_change=True)): finished runs whose settings still match are "
            "reused, and the report covers only the new config's runs.")
    if changes:
        with open(out / layout.CONFIG_HISTORY, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(ConfigChange(dict(old), changes).to_json(), sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    atomic_write_json(out / layout.CONFIG, dict(config))
    return changes


def _as_trained(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A folder's ``config.json`` with a GPT-2's ``model.activation`` as its runs trained: transformers'
    default, ``gelu_new``, where the config was written before the setting existed; the default where it is
    null."""
    from .models import FORMER_GPT2_ACTIVATION, GPT2_ACTIVATION

    model = raw.get("model")
    model = dict(model) if isinstance(model, Mapping) else {}
    if model.get("activation") is None and str(model.get("preset", GPT2)).startswith(GPT2):
        model["activation"] = GPT2_ACTIVATION if "activation" in model else FORMER_GPT2_ACTIVATION
    return {**raw, "model": model}


def _with_defaults(old: Mapping[str, Any]) -> Mapping[str, Any]:
    """``old`` with every setting it lacks at its default (as this version reads it; ``model.activation`` as
    its runs trained); as is but for that if it no longer reads (the change check then names what differs)."""
    from .config import config_from_dict, config_to_dict

    trained = _as_trained(old)
    try:
        return config_to_dict(config_from_dict({k: v for k, v in trained.items() if k != "base_dir"},
                                               old.get("base_dir", ".")))
    except (ValueError, TypeError, FileNotFoundError):
        return trained


def with_folder_defaults(config: RunnerConfig, out: Path) -> RunnerConfig:
    """``config`` with an unset GPT-2 ``model.activation``
    as the folder ``out`` ran it: its ``config.json``'s, ``gelu_new`` where that predates the setting, and
    ``gelu_pytorch_tanh`` in a new folder; so a folder's runs keep their activation, and their run ids."""
    from dataclasses import replace

    from .models import GPT2_ACTIVATION

    if config.model.activation is not None or config.model.family != GPT2:
        return config
    raw = layout.read(out, layout.CONFIG)
    recorded = None if raw is None else _as_trained(raw)["model"].get("activation")
    return replace(config, model=replace(config.model, activation=recorded or GPT2_ACTIVATION))


def load_folder_config(out: Path) -> Any:
    """The :class:`~autoscale_data.runner.config.RunnerConfig` an output folder was last run with.

    Raises:
        FileNotFoundError: ``out`` has no ``config.json`` (not a runner output folder).
    """
    from .config import config_from_dict

    raw = layout.read(out, layout.CONFIG)
    if raw is None:
        raise FileNotFoundError(f"{os.fspath(out)!r} is not a runner output folder (no readable "
                                f"{layout.CONFIG}): give the --out folder of `autoscale-data run`")
    raw = _as_trained(raw)
    base_dir = raw.pop("base_dir", ".")
    return config_from_dict(raw, base_dir)

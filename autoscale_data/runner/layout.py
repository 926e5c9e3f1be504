"""The runner's output folder, defined once: every file name, and the labels of the target mixes.

Every module that reads or writes ``OUT/`` spells its paths through this module (a test checks that
no other module of the runner, the demo or the CLI spells an output file name)::

    OUT/config.json              the config the folder was run with (see :mod:`.experiment`)
    OUT/config_history.jsonl     configs it was run with before (``--allow-config-change``)
    OUT/domains.json             the stores: names, paths, tokens, fingerprints
    OUT/plan.json                the current plan: run ids of proxies, targets and extra runs
    OUT/ledger.jsonl             the event log (see :mod:`.ledger`); OUT/.lock: one runner at a time
    OUT/runs/<run_id>/           spec.json, job.json, result.json | failure.json, ckpt/, train.log,
                                 final_ckpt/ (a finished target run's final checkpoint, with
                                 final_state.json: its step and dataset state; target.keep_checkpoints),
                                 downstream.json (its zero-shot task scores; eval.tasks)
    OUT/fits/                    runs_<N>.csv, ddo_<N>.json, bootstrap_<N>.json, projection.json,
                                 target_mixes.json, mixture_plan.json | mixture_plan_error.json,
                                 methods.json (how each target mix was chosen and what that cost)
    OUT/report.json, report.md   the report; OUT/plots/<name>.png its plots

:data:`RECORDS` names the typed record of every JSON file (``RECORDS[RESULT]`` ->
``"autoscale_data.runner.records.RunResult"``); :func:`record_of` imports it, and :func:`read`
(:func:`read_lines` for the JSON-lines files) is the one reader of every JSON file of the folder: it returns
the file's record (a test checks that no other module parses an output file's JSON).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .registry import (
    ANYTIME,
    AUTOSCALE,
    DDO_N2,
    FITTED,
    NATURAL,
    OWN_RUNS,
    UNIFORM,
    names,
)

__all__ = [
    "ANYTIME",
    "AUTOSCALE",
    "BOOTSTRAP",
    "CHECKPOINT_DIR",
    "CHECKPOINT_POINTER",
    "CONFIG",
    "CONFIG_HISTORY",
    "DDO",
    "DDO_N2",
    "DOMAINS",
    "DOWNSTREAM",
    "FAILURE",
    "FINAL_CHECKPOINT_DIR",
    "FINAL_STATE",
    "FITS",
    "FITTED_MIXES",
    "JOB",
    "LEDGER",
    "LOCK",
    "METHODS_FILE",
    "METHOD_MIXES",
    "MIXTURE_PLAN",
    "MIXTURE_PLAN_ERROR",
    "NATURAL",
    "RUN_LIST",
    "PLOTS",
    "PLOT_CURVES",
    "PLOT_MIXES",
    "PLOT_TARGET_LOSSES",
    "PLOT_TRAIN_DOMAINS",
    "PLOT_WEIGHTS",
    "PROJECTION",
    "REFERENCE_LOSSES",
    "REPETITION",
    "REPORT_JSON",
    "REPORT_MD",
    "RESULT",
    "RUNS",
    "RUNS_CSV",
    "SPEC",
    "TARGET_MIXES",
    "TARGET_MIXES_FILE",
    "TRAIN_LOCK",
    "TRAIN_LOG",
    "UNIFORM",
    "RECORDS",
    "per_budget",
    "read",
    "read_lines",
    "record_of",
]

# ---- the folder itself
CONFIG = "config.json"
CONFIG_HISTORY = "config_history.jsonl"
DOMAINS = "domains.json"
RUN_LIST = "plan.json"  # the run list (the run ids of the current config); the file keeps its name
LEDGER = "ledger.jsonl"
LOCK = ".lock"
REFERENCE_LOSSES = "reference_losses.json"  # the held-out data's unigram / uniform losses per domain
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
PLOTS = "plots"
PLOT_WEIGHTS = "weights.png"
PLOT_TARGET_LOSSES = "target_losses.png"
PLOT_CURVES = "curves.png"
PLOT_TRAIN_DOMAINS = "train_domains.png"
PLOT_MIXES = "mixes.png"  # every target mix side by side (the comparison of methods)

# ---- one run: OUT/runs/<run_id>/
RUNS = "runs"
SPEC = "spec.json"
JOB = "job.json"
RESULT = "result.json"
FAILURE = "failure.json"
CHECKPOINT_DIR = "ckpt"
CHECKPOINT_POINTER = "latest.json"  # in CHECKPOINT_DIR / FINAL_CHECKPOINT_DIR: the newest complete checkpoint
FINAL_CHECKPOINT_DIR = "final_ckpt"  # kept after the run (target.keep_checkpoints): what `extend` starts from
FINAL_STATE = "final_state.json"  # in FINAL_CHECKPOINT_DIR: the run's steps and dataset state at its end
TRAIN_LOCK = ".train.lock"
TRAIN_LOG = "train.log"
DOWNSTREAM = "downstream.json"  # a finished target run's zero-shot task scores (eval.tasks)

# ---- the fits: OUT/fits/
FITS = "fits"
RUNS_CSV = "runs"  # runs_<N>.csv
DDO = "ddo"  # ddo_<N>.json
BOOTSTRAP = "bootstrap"  # bootstrap_<N>.json
PROJECTION = "projection.json"
TARGET_MIXES_FILE = "target_mixes.json"
MIXTURE_PLAN = "mixture_plan.json"
MIXTURE_PLAN_ERROR = "mixture_plan_error.json"
METHODS_FILE = "methods.json"  # per target mix: how it was chosen, its selection runs and their cost
REPETITION = "repetition.json"  # each target mix's epochs and effective tokens (ddo.repetition)


#: Each JSON file of the output folder -> its typed record (``module.Class`` under ``autoscale_data``; a
#: ``dict[str, Class]`` file maps names to records). Per-budget files are keyed by their kind (``DDO``).
#: The record's ``to_json()`` is the file's content and its ``from_json`` reads it back (older files too); a
#: file of two shapes names both (``A | B``: :func:`record_of` gives their union, which ``_records.from_json``
#: reads).
RECORDS: dict[str, str] = {
    CONFIG: "runner.config.RunnerConfig",  # the config as given (runner.config.config_from_dict reads it)
    DOMAINS: "runner.planning.data.DomainInfo",
    RUN_LIST: "runner.records.RunListFile",
    REFERENCE_LOSSES: "dict[str, runner.reporting.report_types.ReferenceLoss]",
    REPORT_JSON: "runner.reporting.report_types.Report",
    SPEC: "runner.planning.specs.RunSpec",
    JOB: "runner.records.JobFile",
    RESULT: "runner.records.RunResult",
    FAILURE: "runner.records.RunFailure",
    FINAL_STATE: "runner.records.FinalState",
    CHECKPOINT_POINTER: "runner.records.CheckpointPointer",
    DOWNSTREAM: "evaluation.records.DownstreamResult",
    DDO: "solver.ddo.DDOResult",
    BOOTSTRAP: "solver.bootstrap.BootstrapResult | "
               "runner.records.BootstrapUnavailable",  # it ran | why it did not
    PROJECTION: "runner.records.ProjectionFile",
    TARGET_MIXES_FILE: "dict[str, dict[str, float]]",  # target mix label -> its weights
    MIXTURE_PLAN: "solver.plan.MixturePlan",
    MIXTURE_PLAN_ERROR: "runner.records.MixturePlanError",
    METHODS_FILE: "dict[str, runner.mixes.methods.MethodRecord]",
    REPETITION: "runner.planning.repetition.RepetitionFile",
    LEDGER: "runner.records.LedgerEvent",  # one record a line
    CONFIG_HISTORY: "runner.experiment.ConfigChange",  # one record a line
}


def record_of(name: str) -> Any:
    """The record class of output file ``name`` (a key of :data:`RECORDS`; for a ``dict[str, Class]`` file,
    ``Class``; for a file of two shapes, the union of their classes).

    Raises:
        ValueError: ``name`` is not a JSON file of the output folder, or its content is a plain mapping.
    """
    import functools
    import importlib
    import operator

    if name not in RECORDS:
        raise ValueError(f"{name!r} is not a JSON file of the output folder: expected one of "
                         f"{sorted(RECORDS)}")
    classes = []
    for spec in RECORDS[name].removeprefix("dict[str, ").removesuffix("]").split(" | "):
        module, _, cls = spec.rpartition(".")
        if not module.startswith(("runner.", "solver.", "evaluation.")):
            raise ValueError(f"{name!r} holds a plain mapping ({RECORDS[name]}), not a record")
        classes.append(getattr(importlib.import_module(f"autoscale_data.{module}"), cls))
    return functools.reduce(operator.or_, classes)


def _hint(kind: str) -> Any:
    """The type :func:`read` parses file kind ``kind`` as."""
    if kind == CONFIG:
        return dict[str, Any]  # the config as given (config_from_dict reads it, with its base_dir)
    if kind == TARGET_MIXES_FILE:
        return dict[str, dict[str, float]]
    cls = record_of(kind)
    return dict[str, cls] if RECORDS[kind].startswith("dict[str, ") else cls  # type: ignore[valid-type]


def _kind(name: str) -> str:
    """The key of :data:`RECORDS` of file ``name``: itself, or a per-budget file's kind (``ddo_40000.json`` ->
    ``ddo``)."""
    if name in RECORDS:
        return name
    stem, _, budget = name.removesuffix(".json").rpartition("_")
    if stem in RECORDS and budget.isdigit():
        return stem
    raise ValueError(f"{name!r} is not a JSON file of the output folder: expected one of {sorted(RECORDS)}")


def read(folder: str | os.PathLike[str], name: str, *, kind: str | None = None,
         where: str | None = None) -> Any:
    """The record of the output file ``folder/name`` (its :data:`RECORDS` entry; a per-budget file's kind's),
    or ``None`` when the file is missing or is not JSON (a write torn by a crash).

    Args:
        folder: the folder that holds it (``OUT``, ``OUT/fits``, ``OUT/runs/<run_id>`` …).
        name: its file name (a key of :data:`RECORDS`, or a :func:`per_budget` name).
        kind: the key of :data:`RECORDS` when ``name`` is not one (a job file given by its path).
        where: how the error messages name the file's top (default ``name``; ``""``: not at all).

    Raises:
        ValueError: ``name`` is not an output file, or the JSON is not its record (the message names the key).
    """
    from .._records import from_json

    hint = _hint(kind or _kind(name))
    try:
        obj = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return from_json(hint, obj, name if where is None else where)


def read_lines(folder: str | os.PathLike[str], name: str) -> list[Any]:
    """Every record of the JSON-lines output file ``folder/name`` (``ledger.jsonl``, ``config_history.jsonl``)
    in order; a line torn by a crash, or one that is not its record, is skipped (none: the file is
    missing)."""
    from .._records import from_json

    hint = _hint(name)
    try:
        data = (Path(folder) / name).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            out.append(from_json(hint, json.loads(raw), name))
        except ValueError:  # a torn line, or one that is not a record
            continue
    return out


def per_budget(kind: str, budget: int | str, suffix: str = ".json") -> str:
    """``per_budget(DDO, 40000)`` -> ``"ddo_40000.json"``; ``per_budget(RUNS_CSV, N, ".csv")``."""
    return f"{kind}_{budget}{suffix}"


# ---- target mixes (labels of the target runs): the method registry's names, read when asked
#: ``TARGET_MIXES``: every target mix, AutoScale first, then the baselines a config may ask for.
#: ``FITTED_MIXES``: those known only after the fits (the rest are known from the stores or from runs of their
#: own). ``METHOD_MIXES``: other methods' mixes, chosen from runs the runner trains for them (DoReMi's proxy,
#: RegMix's swarm, the DDO proxies at N2 for RegMix and the data mixing law).
_MIX_LABELS = {"TARGET_MIXES": (), "FITTED_MIXES": (FITTED,), "METHOD_MIXES": (OWN_RUNS,)}
TARGET_MIXES: tuple[str, ...]
FITTED_MIXES: tuple[str, ...]
METHOD_MIXES: tuple[str, ...]


def __getattr__(name: str) -> tuple[str, ...]:
    """The labels of :data:`_MIX_LABELS` from the registry (its built-ins register when the runner is
    imported)."""
    if name in _MIX_LABELS:
        return names(*_MIX_LABELS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

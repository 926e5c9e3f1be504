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
``"autoscale_data.runner.records.RunResult"``); :func:`record_of` imports it.
"""

from __future__ import annotations

from .registry import (
    ADO,
    ANYTIME,
    AUTOSCALE,
    DDO_N2,
    DOREMI,
    FITTED,
    MIXING_LAW,
    NATURAL,
    ODM,
    OWN_RUNS,
    REFERENCE,
    REGMIX,
    UNIFORM,
    names,
)

__all__ = [
    "ANYTIME",
    "ADO",
    "AUTOSCALE",
    "BOOTSTRAP",
    "CHECKPOINT_DIR",
    "CONFIG",
    "CONFIG_HISTORY",
    "DDO",
    "DDO_N2",
    "DOMAINS",
    "DOREMI",
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
    "MIXING_LAW",
    "MIXTURE_PLAN",
    "MIXTURE_PLAN_ERROR",
    "NATURAL",
    "ODM",
    "PLAN",
    "PLOTS",
    "PLOT_CURVES",
    "PLOT_MIXES",
    "PLOT_TARGET_LOSSES",
    "PLOT_TRAIN_DOMAINS",
    "PLOT_WEIGHTS",
    "PROJECTION",
    "REFERENCE",
    "REFERENCE_LOSSES",
    "REGMIX",
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
    "record_of",
]

# ---- the folder itself
CONFIG = "config.json"
CONFIG_HISTORY = "config_history.jsonl"
DOMAINS = "domains.json"
PLAN = "plan.json"
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
#: The record's ``to_json()`` is the file's content and its ``from_json`` reads it back (older files too).
RECORDS: dict[str, str] = {
    CONFIG: "runner.config.RunnerConfig",  # the config as given (runner.config.config_from_dict reads it)
    DOMAINS: "runner.planning.data.DomainInfo",
    PLAN: "runner.records.PlanFile",
    REFERENCE_LOSSES: "dict[str, runner.reporting.report_types.ReferenceLoss]",
    REPORT_JSON: "runner.reporting.report_types.Report",
    SPEC: "runner.planning.plan.RunSpec",
    JOB: "runner.records.JobFile",
    RESULT: "runner.records.RunResult",
    FAILURE: "runner.records.RunFailure",
    FINAL_STATE: "runner.records.FinalState",
    DOWNSTREAM: "evaluation.records.DownstreamResult",
    DDO: "runner.records.DDOFile",
    BOOTSTRAP: "runner.records.BootstrapFile",
    PROJECTION: "runner.records.ProjectionFile",
    TARGET_MIXES_FILE: "dict[str, dict[str, float]]",  # target mix label -> its weights
    MIXTURE_PLAN: "solver.plan.MixturePlan",
    MIXTURE_PLAN_ERROR: "runner.records.MixturePlanError",
    METHODS_FILE: "dict[str, runner.mixes.methods.MethodRecord]",
    REPETITION: "runner.planning.repetition.RepetitionFile",
    LEDGER: "runner.records.LedgerEvent",  # one record a line
    CONFIG_HISTORY: "runner.experiment.ConfigChange",  # one record a line
}


def record_of(name: str) -> type:
    """The record class of output file ``name`` (a key of :data:`RECORDS`; for a ``dict[str, Class]`` file,
    ``Class``).

    Raises:
        ValueError: ``name`` is not a JSON file of the output folder, or its content is a plain mapping.
    """
    import importlib

    if name not in RECORDS:
        raise ValueError(f"{name!r} is not a JSON file of the output folder: expected one of {sorted(RECORDS)}")
    spec = RECORDS[name].removeprefix("dict[str, ").removesuffix("]")
    module, _, cls = spec.rpartition(".")
    if not module.startswith(("runner.", "solver.", "evaluation.")):
        raise ValueError(f"{name!r} holds a plain mapping ({RECORDS[name]}), not a record")
    return getattr(importlib.import_module(f"autoscale_data.{module}"), cls)  # type: ignore[no-any-return]


def per_budget(kind: str, budget: int | str, suffix: str = ".json") -> str:
    """``per_budget(DDO, 40000)`` -> ``"ddo_40000.json"``; ``per_budget(RUNS_CSV, N, ".csv")``."""
    return f"{kind}_{budget}{suffix}"


# ---- target mixes (labels of the target runs): the method registry's names (runner/registry.py)
#: Every built-in target mix: AutoScale first, then the baselines a config may ask for.
TARGET_MIXES = names()
#: Mixes known only after the fits (the rest are known from the stores or, below, from runs of their own).
FITTED_MIXES = names(FITTED)
#: Other methods' mixes, chosen from runs the runner trains for them (DoReMi's proxy, RegMix's swarm, the
#: DDO proxies at N2 for RegMix and the data mixing law).
METHOD_MIXES = names(OWN_RUNS)

"""One vocabulary: each closed name set is read from its one definition by the library, the runner's
config, the CLI (choices, defaults, help) and the docs, with one default everywhere.

The architecture test (``test_architecture.py``) fails on a name of these sets spelt as a string
outside its definition; this file checks that every reader offers the whole set and the same default.
"""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import dataclass

import pytest
from paths import REPO

from autoscale_data._options import field_help
from autoscale_data._runner_names import EXECUTORS, LOCAL, LR_SCHEDULES, REWARM_DECAY
from autoscale_data.cli import build_parser
from autoscale_data.runner.config.sections import REPETITION_OFF, DDOConfig, ExecutorConfig
from autoscale_data.runner.training.extension import LRSchedule
from autoscale_data.solver import DDOOptions, bootstrap_ddo, project_all
from autoscale_data.solver.contrib import mixing_law_weights, observed_best, regmix_weights
from autoscale_data.solver.laws import fit_power_law
from autoscale_data.solver.regression import REGRESSORS
from autoscale_data.solver.vocabulary import (
    AUTO,
    DEFAULT_LAW,
    DEFAULT_OBJECTIVE,
    DEFAULT_PROJECTION,
    LAWS,
    OBJECTIVES,
    PROJECTION_CHOICES,
    check_name,
)


def _option(verb: str, flag: str) -> argparse.Action:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[verb]._actions if flag in a.option_strings)


def _default(function: object, name: str) -> object:
    return inspect.signature(function).parameters[name].default


def test_one_objective_default_everywhere() -> None:
    assert DEFAULT_OBJECTIVE == "mean_loss"  # the mean validation loss (docs/solver.md, "Objective")
    defaults = {
        "DDOOptions": DDOOptions().objective,
        "runner config ddo.objective": DDOConfig().objective,
        "ddo --objective": _option("ddo", "--objective").default,
        "project --objective": _option("project", "--objective").default,
        "baseline --objective": _option("baseline", "--objective").default,
        "regmix_weights": _default(regmix_weights, "objective"),
        "mixing_law_weights": _default(mixing_law_weights, "objective"),
        "observed_best": _default(observed_best, "objective"),
    }
    assert {k: v for k, v in defaults.items() if v != DEFAULT_OBJECTIVE} == {}


def test_one_law_and_one_method_default_everywhere() -> None:
    laws = {"DDOOptions": DDOOptions().law, "runner config ddo.law": DDOConfig().law,
            "ddo --law": _option("ddo", "--law").default, "fit_power_law": _default(fit_power_law, "law")}
    assert {k: v for k, v in laws.items() if v != DEFAULT_LAW} == {}
    assert DDOConfig().projection == DEFAULT_PROJECTION == _default(project_all, "method") == AUTO
    assert ExecutorConfig().kind == LOCAL
    assert _default(bootstrap_ddo, "method") == AUTO == _option("baseline", "--model").default
    assert LRSchedule().schedule == REWARM_DECAY == _option("extend", "--lr-schedule").default
    assert DDOConfig().repetition == REPETITION_OFF


@pytest.mark.parametrize(("verb", "flag", "names"), [
    ("ddo", "--objective", OBJECTIVES), ("project", "--objective", OBJECTIVES), ("baseline", "--objective", OBJECTIVES),
    ("ddo", "--law", LAWS), ("project", "--method", PROJECTION_CHOICES), ("run", "--executor", EXECUTORS),
    ("baseline", "--model", REGRESSORS), ("extend", "--lr-schedule", LR_SCHEDULES)])
def test_the_cli_offers_each_set_whole(verb: str, flag: str, names: tuple[str, ...]) -> None:
    assert tuple(_option(verb, flag).choices) == names


def test_the_config_accepts_each_set_whole_and_names_it_when_refusing() -> None:
    for name in OBJECTIVES:
        assert DDOConfig(objective=name).objective == name
    for name in LAWS:  # two multipliers each way: a design the 4-parameter law can fit too
        assert DDOConfig(law=name, multiplier_up=(3.0, 1.7), multiplier_down=(3.0, 1.7)).law == name
    for name in PROJECTION_CHOICES:
        assert DDOConfig(projection=name).projection == name
    for name in EXECUTORS:
        assert ExecutorConfig(kind=name).kind == name
    with pytest.raises(ValueError, match=re.escape(f"expected one of {OBJECTIVES}")):
        DDOConfig(objective="mean_acc")
    with pytest.raises(ValueError, match=re.escape(f"expected one of {EXECUTORS}")):
        ExecutorConfig(kind="k8s")
    with pytest.raises(ValueError, match=re.escape(f"law must be one of {LAWS}, got '5p'")):
        DDOOptions(law="5p")
    with pytest.raises(ValueError, match=re.escape(f"objective must be one of {OBJECTIVES}")):
        check_name("objective", "mean_acc", OBJECTIVES)


def _config_row(key: str) -> str:
    text = (REPO / "docs" / "runner.md").read_text(encoding="utf-8")
    row = next((line for line in text.splitlines() if line.startswith(f"| `{key}`")), None)
    assert row is not None, f"docs/runner.md has no config row for {key}"
    return row


@pytest.mark.parametrize(("key", "names", "default"), [
    ("ddo.objective", OBJECTIVES, DEFAULT_OBJECTIVE), ("ddo.projection", PROJECTION_CHOICES, DEFAULT_PROJECTION),
    ("executor.kind", EXECUTORS, LOCAL)])
def test_the_docs_name_each_set_whole_with_its_default(key: str, names: tuple[str, ...], default: str) -> None:
    row = _config_row(key)
    assert [n for n in names if f"`{n}`" not in row] == []
    assert row.split("|")[2].strip() == f"`{default}`"


def test_the_docs_name_every_registered_baseline_and_the_default() -> None:
    """The method registry is the one list of baselines: the docs' row names each, with the config's default."""
    from autoscale_data.runner import registry
    from autoscale_data.runner.config.sections import TargetConfig

    row = _config_row("target.baselines")
    assert [n for n in registry.baselines() if f"`{n}`" not in row] == []
    assert row.split("|")[2].strip() == f"[{', '.join(TargetConfig().baselines)}]"


def test_the_docs_name_the_laws_and_the_solver_docs_the_methods_in_order() -> None:
    row = _config_row("ddo.law")
    assert all(f"`{n}`" in row for n in LAWS) and f"`{DEFAULT_LAW}`" in row.split("|")[2]
    solver = (REPO / "docs" / "solver.md").read_text(encoding="utf-8")
    assert f"`ddo.projection: {' | '.join(PROJECTION_CHOICES)}`" in solver


def test_the_cli_help_of_an_options_field_is_its_docstring() -> None:
    assert _option("ddo", "--objective").help == field_help(DDOOptions, "objective")
    assert _option("ddo", "--law").help == field_help(DDOOptions, "law")
    assert _option("project", "--objective").help.endswith(field_help(DDOOptions, "objective"))
    assert field_help(DDOOptions, "law").startswith('"3p" (paper) or "4p"')


def test_field_help_reads_one_attributes_entry() -> None:
    @dataclass
    class Opts:
        """Settings.

        Attributes:
            rate: how fast, in ``%`` of the
                budget (wrapped).
            lo, hi: the bounds.
        """

        rate: float = 1.0
        lo: float = 0.0
        hi: float = 1.0

    assert field_help(Opts, "rate") == "how fast, in %% of the budget (wrapped)."
    assert field_help(Opts, "hi") == "the bounds."
    with pytest.raises(ValueError, match="no 'Attributes:' entry for 'speed'"):
        field_help(Opts, "speed")

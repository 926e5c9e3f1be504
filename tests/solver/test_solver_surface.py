"""The solver's public surface: a pinned stable ``__all__``, an experimental ``contrib``, the rest internal.

A name added to or dropped from ``autoscale_data.solver.__all__`` is an API change: update
``STABLE`` here and the "Public surface" section of docs/solver.md together.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest
from paths import REPO

import autoscale_data
import autoscale_data.solver as solver
import autoscale_data.solver.contrib as contrib

STABLE = [
    "BASELINES", "Baseline", "MIXING_LAW", "NATURAL", "REFERENCE", "REGMIX", "TEMPERATURE", "UNIFORM", "BootstrapResult", "CandidateError", "DDODesign", "DDOOptions", "DDOResult", "Identifiability", "JointFit", "JointIdentifiability",
    "PROJECTION_CHOICES", "MixturePlan", "Observed", "PRESETS", "PROJECTIONS", "PlanEvidence", "Projection", "Projections",
    "ProjectionsRecord", "RobustProjection", "Run", "RunTable", "Selection", "Trust",
    "BacktestScore", "LawCheck",
    "apply_weight_bounds", "baseline_weights", "bootstrap_ddo", "ddo_runs_plan", "fit_ddo", "fit_joint",
    "natural_weights", "project", "project_all", "read_design", "read_olmix", "reference_weights",
    "robust_project", "temperature_weights", "uniform_weights", "write_olmix",
]

#: What the modules export for each other but neither namespace offers: import it from its module.
INTERNAL = {
    "Allocation", "AllocationPath", "B_MAX", "PlanScale", "DEFAULT_PROJECTION", "DEFAULT_OBJECTIVE", "DomainFits", "DomainLaw", "FIT_MODES", "MAX_COMBINATIONS", "PAPER_START",
    "OUT_FLOOR", "PROFILE_B", "PROFILE_SHIFTS", "SHARE_SUM_TOL", "SHIFT_RANGE", "allocate", "as_scales", "choose",
    "consistent_fits", "fit_on_grid",
    "fit_path", "fit_power_law_paper", "identify", "joint_options", "local_fits", "objective_weight",
    "backtest_margin", "law_noise", "law_objective", "mix_groups",  # the backtest's pieces (solver/select.py)
    "one_scale",
    # the closed name sets (solver/vocabulary.py): read by the runner's config, the CLI and the docs
    "AUTO", "DEFAULT_LAW", "GEOMETRIC", "JOINT", "LAWS", "LAW_3P", "LAW_4P", "Law", "MEAN_LOSS", "MEAN_PPL", "ProjectionChoice",
    "OBJECTIVES", "OBSERVED", "Objective", "ROBUST", "check_name", "law_parameters", "objective_key",
    "LIGHTGBM", "LINEAR", "REGRESSORS",
    "profile_over_b", "run_objective", "shift_frame", "token_caps_array", "trend_evidence",
    # the checks behind Projections.trust (solver/trust.py) and the run tables' column check (solver/runs.py)
    "EDGE_FRACTION", "GAMMA_RANGE", "SEED_Z", "EdgeCheck", "NoiseCheck", "ParameterCheck", "assess", "edge_check",
    "noise_check", "parameter_check", "seeds_needed", "check_same_columns",
    # the two-budget rule's evidence (solver/gain.py) and its tests (solver/select.py)
    "GainEstimate", "GainLaw", "predicted_gain", "predicted_gains", "predicted_values", "passes", "vouched", "computed_projections",
    # the rule of three budgets or more (solver/backtest.py) and its typed parts (solver/scores.py)
    "BIAS_FRACTION", "MAX_DISTANCE", "ROUTES", "TOTAL_TOL", "VALIDATION_ALPHA", "check_law", "choose_by_backtest",
    "distance_tolerance", "score_candidates", "untrusted", "BacktestScore", "LawCheck", "SCORE_LAW", "SCORE_RUN",
    "SCORE_RUN_BEFORE", "SCORING", "run_noise",
    "RULES", "Rule", "Scoring", "Candidates",
}


def _surface_section() -> str:
    text = (REPO / "docs" / "solver.md").read_text(encoding="utf-8")
    match = re.search(r"^## \d+\. Public surface\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, "docs/solver.md has no 'Public surface' section"
    return match.group(1)


def test_the_stable_surface_is_pinned_and_sorted() -> None:
    assert solver.__all__ == sorted(STABLE), "update STABLE and docs/solver.md's 'Public surface' together"
    assert len(STABLE) == len(set(STABLE))
    for name in STABLE:
        assert getattr(solver, name) is not None, name


@pytest.mark.parametrize("module", [solver, contrib], ids=["stable", "contrib"])
def test_every_public_name_is_documented_in_the_public_surface_section(module: object) -> None:
    section = _surface_section()
    missing = [name for name in module.__all__ if f"`{name}`" not in section]  # type: ignore[attr-defined]
    assert not missing, f"not in docs/solver.md's 'Public surface': {missing}"


def test_contrib_is_experimental_sorted_and_apart_from_the_stable_surface() -> None:
    assert contrib.__all__ == sorted(set(contrib.__all__))
    assert not set(contrib.__all__) & set(solver.__all__)
    assert "experimental" in (contrib.__doc__ or "").lower().split("\n", 1)[0]
    for name in contrib.__all__:
        assert getattr(contrib, name) is not None, name
        assert not hasattr(solver, name), f"solver.{name} is importable but not stable"
    assert {"compare_projections", "fit_budget_law", "per_budget_optima", "heldout_scale_check",
            "regmix_weights", "synthetic_ddo_runs", "kkt_violation", "multiplier_bounds"} <= set(contrib.__all__)


def test_every_exported_name_is_stable_contrib_or_internal() -> None:
    """A new public name of a solver module has to be placed: stable, contrib, or internal on purpose."""
    exported = set()
    for info in pkgutil.iter_modules(solver.__path__):
        exported |= set(getattr(importlib.import_module(f"autoscale_data.solver.{info.name}"), "__all__", ()))
    placed = set(solver.__all__) | set(contrib.__all__) | INTERNAL
    assert exported - placed == set(), f"unplaced names: {sorted(exported - placed)}"
    assert INTERNAL <= exported, f"INTERNAL lists names no module exports: {sorted(INTERNAL - exported)}"


def test_the_package_facade_only_reexports_stable_solver_names() -> None:
    from_solver = [n for n in autoscale_data.__all__ if hasattr(solver, n) and not n.startswith("__")]
    assert set(from_solver) <= set(solver.__all__)
    assert {"fit_ddo", "project", "fit_joint", "MixturePlan"} <= set(from_solver)

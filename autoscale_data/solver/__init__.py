"""The embedded AutoScale solver: pure numpy/scipy (imports nothing from torch).

The stable surface (this ``__all__``): runs in (:class:`RunTable`), DDO at one budget
(:func:`fit_ddo`), the projections to any budget (one entry point: :func:`project_all`; each on its
own: :func:`project`, :func:`fit_joint`, :func:`robust_project`), the plan the dataset follows
(:class:`MixturePlan`), uncertainty (:func:`bootstrap_ddo`), baselines (:func:`baseline_weights`),
designs (:func:`ddo_runs_plan`) and Olmix files (:func:`read_olmix`).

Research helpers (mixing-law / RegMix regression, synthetic runs, the held-out and projection
comparisons, the per-domain law fits) are in :mod:`autoscale_data.solver.contrib`, which is
experimental and may change; everything else is internal to its module.
"""

from __future__ import annotations

from .allocation_path import Projection, project
from .baselines import (
    BASELINES,
    MIXING_LAW,
    NATURAL,
    PRESETS,
    REFERENCE,
    REGMIX,
    TEMPERATURE,
    UNIFORM,
    Baseline,
    baseline_weights,
    natural_weights,
    reference_weights,
    temperature_weights,
    uniform_weights,
)
from .bootstrap import BootstrapResult, bootstrap_ddo
from .bounds import apply_weight_bounds
from .ddo import DDOOptions, DDOResult, fit_ddo
from .design import DDODesign, ddo_runs_plan, read_design
from .identify import Identifiability, JointIdentifiability
from .joint import JointFit, fit_joint
from .olmix import read_olmix, write_olmix
from .plan import MixturePlan
from .projections import Projections, ProjectionsRecord, project_all
from .robust import RobustProjection, robust_project
from .runs import Run, RunTable
from .scores import BacktestScore, CandidateError, LawCheck, Selection
from .select import Observed
from .trust import PlanEvidence, Trust
from .vocabulary import PROJECTION_CHOICES, PROJECTIONS

__all__ = [
    "BASELINES",
    "BacktestScore",
    "Baseline",
    "BootstrapResult",
    "CandidateError",
    "DDODesign",
    "DDOOptions",
    "DDOResult",
    "Identifiability",
    "JointFit",
    "JointIdentifiability",
    "LawCheck",
    "MIXING_LAW",
    "MixturePlan",
    "NATURAL",
    "Observed",
    "PRESETS",
    "PROJECTIONS",
    "PROJECTION_CHOICES",
    "PlanEvidence",
    "Projection",
    "Projections",
    "ProjectionsRecord",
    "REFERENCE",
    "REGMIX",
    "RobustProjection",
    "Run",
    "RunTable",
    "Selection",
    "TEMPERATURE",
    "Trust",
    "UNIFORM",
    "apply_weight_bounds",
    "baseline_weights",
    "bootstrap_ddo",
    "ddo_runs_plan",
    "fit_ddo",
    "fit_joint",
    "natural_weights",
    "project",
    "project_all",
    "read_design",
    "read_olmix",
    "reference_weights",
    "robust_project",
    "temperature_weights",
    "uniform_weights",
    "write_olmix",
]

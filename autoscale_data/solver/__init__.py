"""The embedded AutoScale solver: pure numpy/scipy (imports nothing from torch).

Runs in (:class:`RunTable`), DDO at one budget (:func:`fit_ddo`), projection to any budget
(:func:`project`, :class:`MixturePlan`; a law fitted jointly over budgets: :func:`fit_joint`), uncertainty (:func:`bootstrap_ddo`) and baselines
(:func:`baseline_weights`).
"""

from __future__ import annotations

from .allocate import Allocation, allocate, kkt_violation, multiplier_bounds
from .baselines import (
    BASELINES,
    PRESETS,
    baseline_weights,
    natural_weights,
    reference_weights,
    temperature_weights,
    uniform_weights,
)
from .bootstrap import (
    BootstrapResult,
    HeldoutCheck,
    ProjectionBootstrap,
    bootstrap_ddo,
    bootstrap_projection,
    heldout_scale_check,
)
from .bounds import apply_weight_bounds
from .ddo import DDOOptions, DDOResult, fit_ddo
from .design import DDODesign, ddo_runs_plan, read_design
from .identify import Identifiability, identify
from .joint import (
    PROJECTIONS,
    JointFit,
    compare_projections,
    fit_budget_law,
    fit_joint,
    per_budget_optima,
    weight_distance,
)
from .laws import PowerLawFit, fit_power_law, fit_power_law_batch, power_law
from .olmix import read_olmix, write_olmix
from .plan import MixturePlan
from .projection import AllocationPath, Projection, fit_path, project
from .projections import Projections, project_all
from .regression import fit_mixing_law, mixing_law_weights, regmix_weights, sample_mixtures
from .robust import RobustProjection, log_share_sd, robust_project
from .runs import Run, RunTable
from .synthetic import synthetic_budget_runs, synthetic_ddo_runs, synthetic_loss

__all__ = [
    "Allocation",
    "AllocationPath",
    "BASELINES",
    "BootstrapResult",
    "DDODesign",
    "DDOOptions",
    "DDOResult",
    "HeldoutCheck",
    "Identifiability",
    "JointFit",
    "MixturePlan",
    "PRESETS",
    "PROJECTIONS",
    "PowerLawFit",
    "Projection",
    "ProjectionBootstrap",
    "Projections",
    "RobustProjection",
    "Run",
    "RunTable",
    "allocate",
    "apply_weight_bounds",
    "baseline_weights",
    "bootstrap_ddo",
    "bootstrap_projection",
    "compare_projections",
    "ddo_runs_plan",
    "fit_budget_law",
    "fit_ddo",
    "fit_joint",
    "fit_mixing_law",
    "fit_path",
    "fit_power_law",
    "fit_power_law_batch",
    "heldout_scale_check",
    "identify",
    "kkt_violation",
    "log_share_sd",
    "mixing_law_weights",
    "multiplier_bounds",
    "natural_weights",
    "per_budget_optima",
    "power_law",
    "project",
    "project_all",
    "read_design",
    "read_olmix",
    "reference_weights",
    "regmix_weights",
    "robust_project",
    "sample_mixtures",
    "synthetic_budget_runs",
    "synthetic_ddo_runs",
    "synthetic_loss",
    "temperature_weights",
    "uniform_weights",
    "weight_distance",
    "write_olmix",
]

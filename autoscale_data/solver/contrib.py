"""Experimental solver helpers: research tools that may change or go without notice.

Not part of the stable surface of :mod:`autoscale_data.solver`; import them from here
(``from autoscale_data.solver.contrib import regmix_weights``) and pin the package version if you
depend on them. They are tested like the rest, but their names, arguments and outputs follow the
research they serve:

- regression baselines on runs of random mixtures (RegMix, the Data Mixing Laws' law):
  :func:`regmix_weights`, :func:`mixing_law_weights`, :func:`fit_mixing_law`, :func:`sample_mixtures`;
- synthetic runs of a known law: :func:`synthetic_ddo_runs`, :func:`synthetic_budget_runs`,
  :func:`synthetic_loss`;
- checks of a projection: :func:`heldout_scale_check`, :func:`bootstrap_projection`,
  :func:`compare_projections`, :func:`weight_distance`, :func:`log_share_sd`;
- the per-budget fits the projections are built on: :func:`per_budget_optima`,
  :func:`fit_budget_law`, :func:`fit_power_law`, :func:`fit_power_law_batch`, :func:`power_law`;
- the exact optimisation's checks: :func:`kkt_violation`, :func:`multiplier_bounds`;
- repeated data in effective tokens (Muennighoff et al. 2023): :func:`effective_tokens`,
  :func:`raw_tokens`, :data:`R_STAR`, :func:`epochs_table` -> :class:`DomainEpochs`, and DDO and the
  projection in effective tokens with the budget in raw tokens: :func:`effective_table`,
  :func:`allocate_effective` -> :class:`EffectiveAllocation`, :func:`optimize_effective` ->
  :class:`EffectiveOptimum`, :func:`project_effective` -> :class:`EffectiveProjection`, :func:`raw_slope`.
- the pieces of ``method="auto"``: :func:`observed_best`, :func:`noise_estimate`, :func:`path_scales`.
"""

from __future__ import annotations

from .allocate import kkt_violation, multiplier_bounds
from .bootstrap import HeldoutCheck, ProjectionBootstrap, bootstrap_projection, heldout_scale_check
from .effective import (
    EffectiveAllocation,
    EffectiveOptimum,
    EffectiveProjection,
    allocate_effective,
    effective_table,
    optimize_effective,
    project_effective,
    raw_slope,
)
from .joint import compare_projections, fit_budget_law, per_budget_optima, weight_distance
from .laws import PowerLawFit, fit_power_law, fit_power_law_batch, power_law
from .left_out import path_scales
from .regression import fit_mixing_law, mixing_law_weights, regmix_weights, sample_mixtures
from .repetition import R_STAR, DomainEpochs, effective_tokens, epochs_table, raw_tokens
from .robust import log_share_sd
from .select import noise_estimate, observed_best
from .synthetic import synthetic_budget_runs, synthetic_ddo_runs, synthetic_loss

__all__ = [
    "DomainEpochs",
    "EffectiveAllocation",
    "EffectiveOptimum",
    "EffectiveProjection",
    "HeldoutCheck",
    "PowerLawFit",
    "ProjectionBootstrap",
    "R_STAR",
    "allocate_effective",
    "bootstrap_projection",
    "compare_projections",
    "effective_table",
    "effective_tokens",
    "epochs_table",
    "fit_budget_law",
    "fit_mixing_law",
    "fit_power_law",
    "fit_power_law_batch",
    "heldout_scale_check",
    "kkt_violation",
    "log_share_sd",
    "mixing_law_weights",
    "multiplier_bounds",
    "noise_estimate",
    "observed_best",
    "optimize_effective",
    "path_scales",
    "per_budget_optima",
    "power_law",
    "project_effective",
    "raw_slope",
    "raw_tokens",
    "regmix_weights",
    "sample_mixtures",
    "synthetic_budget_runs",
    "synthetic_ddo_runs",
    "synthetic_loss",
    "weight_distance",
]

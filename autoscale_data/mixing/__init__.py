"""Pure-numpy mixing primitives: budgets, the deterministic interleave, per-domain orders, the index."""

from .budget import (
    WEIGHT_SUM_TOLERANCE,
    allowed_draws,
    bounded_round,
    check_supply,
    largest_remainder,
    sequence_budget,
    validate_weights,
)
from .carry import carried_counts
from .controller import Controller, Window, check_proposal, check_state
from .index import MixtureStream, build_index
from .interleave import InterleaveTree, christoffel_mask, domain_id_dtype, interleave, prefix_deviation
from .permutation import (
    DomainOrders,
    domain_order,
    feistel_permute,
    name_seed,
    sequence_id_dtype,
    window_permutation,
)
from .phases import Phase, SegmentPlan, check_draws, phase_bounds, plan_segments
from .pool import PooledOrders, pool_members, resolve_pools
from .schedule import (
    GRID_POINTS,
    allocation_path,
    anytime_counts_and_stream,
    anytime_segments,
    anytime_stream,
    path_deviation,
)

__all__ = [
    "Controller",
    "DomainOrders",
    "GRID_POINTS",
    "InterleaveTree",
    "MixtureStream",
    "Phase",
    "PooledOrders",
    "SegmentPlan",
    "WEIGHT_SUM_TOLERANCE",
    "Window",
    "allocation_path",
    "allowed_draws",
    "anytime_counts_and_stream",
    "anytime_segments",
    "anytime_stream",
    "bounded_round",
    "build_index",
    "carried_counts",
    "check_draws",
    "check_proposal",
    "check_state",
    "check_supply",
    "christoffel_mask",
    "domain_id_dtype",
    "domain_order",
    "feistel_permute",
    "interleave",
    "largest_remainder",
    "name_seed",
    "path_deviation",
    "phase_bounds",
    "plan_segments",
    "pool_members",
    "prefix_deviation",
    "resolve_pools",
    "sequence_budget",
    "sequence_id_dtype",
    "validate_weights",
    "window_permutation",
]

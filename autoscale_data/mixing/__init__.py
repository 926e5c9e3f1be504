"""Pure-numpy mixing primitives: budgets, the deterministic interleave, per-domain orders, the index,
phases and the anytime schedule."""

from .anytime import (
    GRID_POINTS,
    allocation_path,
    anytime_counts_and_stream,
    anytime_segments,
    anytime_stream,
    path_deviation,
)
from .budget import (
    WEIGHT_SUM_TOLERANCE,
    allowed_draws,
    bounded_round,
    check_supply,
    largest_remainder,
    sequence_budget,
    validate_weights,
)
from .index import MixtureStream
from .interleave import InterleaveTree, christoffel_mask, interleave, prefix_deviation
from .permutation import DomainOrders, domain_order, feistel_permute, window_permutation
from .phases import (
    ANYTIME_SCHEDULE,
    FIXED_SCHEDULE,
    SCHEDULES,
    Phase,
    PlannedCounts,
    SegmentTable,
    check_draws,
    phase_bounds,
    segment_table,
)
from .pool import PooledOrders, pool_members, resolve_pools

__all__ = [
    "ANYTIME_SCHEDULE",
    "DomainOrders",
    "FIXED_SCHEDULE",
    "GRID_POINTS",
    "InterleaveTree",
    "MixtureStream",
    "Phase",
    "PlannedCounts",
    "PooledOrders",
    "SCHEDULES",
    "SegmentTable",
    "WEIGHT_SUM_TOLERANCE",
    "allocation_path",
    "allowed_draws",
    "anytime_counts_and_stream",
    "anytime_segments",
    "anytime_stream",
    "bounded_round",
    "check_draws",
    "check_supply",
    "christoffel_mask",
    "domain_order",
    "feistel_permute",
    "interleave",
    "largest_remainder",
    "path_deviation",
    "phase_bounds",
    "pool_members",
    "prefix_deviation",
    "resolve_pools",
    "segment_table",
    "sequence_budget",
    "validate_weights",
    "window_permutation",
]

"""Pure-numpy mixing primitives: budgets, the deterministic interleave, per-domain orders, the index."""

from .budget import WEIGHT_SUM_TOLERANCE, check_supply, largest_remainder, sequence_budget, validate_weights
from .index import CHECKPOINT_EVERY, MixtureIndex, build_index
from .interleave import christoffel_mask, domain_id_dtype, interleave, prefix_deviation
from .permutation import domain_order, name_seed, sequence_id_dtype, window_permutation
from .schedule import GRID_POINTS, allocation_path, anytime_counts_and_stream, anytime_stream, path_deviation

__all__ = [
    "CHECKPOINT_EVERY",
    "GRID_POINTS",
    "MixtureIndex",
    "WEIGHT_SUM_TOLERANCE",
    "allocation_path",
    "anytime_counts_and_stream",
    "anytime_stream",
    "build_index",
    "check_supply",
    "christoffel_mask",
    "domain_id_dtype",
    "domain_order",
    "interleave",
    "largest_remainder",
    "name_seed",
    "path_deviation",
    "prefix_deviation",
    "sequence_budget",
    "sequence_id_dtype",
    "validate_weights",
    "window_permutation",
]

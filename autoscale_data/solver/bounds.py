"""Weight bounds applied to a projected mix (the paper's projection itself is unbounded)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["apply_weight_bounds"]


def apply_weight_bounds(weights: Mapping[str, float], min_weight: float = 0.0,
                        max_weight: float = 1.0) -> dict[str, float]:
    """The mix nearest in ratios to ``weights`` with every weight in ``[min_weight, max_weight]``.

    Weights below ``min_weight`` are raised to it, weights above ``max_weight`` lowered to it, and the
    rest keep their ratios to each other while taking up what is left (repeated until no weight
    crosses a bound). Weights already inside the bounds come back unchanged (renormalised).

    Raises:
        ValueError: no mix fits the bounds (``m * min_weight > 1`` or ``m * max_weight < 1``), bounds
            out of order, or a negative / non-finite weight.
    """
    names = list(weights)
    m = len(names)
    if not names:
        raise ValueError("apply_weight_bounds needs at least one weight, got none")
    if not 0.0 <= min_weight <= max_weight <= 1.0:
        raise ValueError(f"weight bounds must satisfy 0 <= min_weight <= max_weight <= 1, got {min_weight}, "
                         f"{max_weight}")
    if m * min_weight > 1 + 1e-12 or m * max_weight < 1 - 1e-12:
        raise ValueError(f"no mix of {m} domains has every weight in [{min_weight}, {max_weight}]")
    bad = {d: w for d, w in weights.items() if not (w >= 0.0 and w < float("inf"))}
    if bad:
        raise ValueError(f"weights must be finite and >= 0, got {bad}")
    total = sum(weights.values())
    w = {d: (weights[d] / total if total > 0 else 1.0 / m) for d in names}
    fixed: dict[str, float] = {}
    while True:  # each pass fixes at least one more domain at a bound
        free = [d for d in names if d not in fixed]
        left = 1.0 - sum(fixed.values())
        mass = sum(w[d] for d in free)
        scaled = {d: (left * (w[d] / mass) if mass > 0 else left / len(free)) for d in free}
        low = {d for d, v in scaled.items() if v < min_weight - 1e-12}
        high = {d for d, v in scaled.items() if v > max_weight + 1e-12}
        if not low and not high:
            return {d: fixed.get(d, scaled.get(d, 0.0)) for d in names}
        # fix the side that violates most; the other side is re-examined after rescaling
        if low and (not high or sum(min_weight - scaled[d] for d in low) >= sum(scaled[d] - max_weight
                                                                                for d in high)):
            fixed.update({d: min_weight for d in low})
        else:
            fixed.update({d: max_weight for d in high})
        if len(fixed) == m:
            return {d: fixed[d] / sum(fixed.values()) for d in names}

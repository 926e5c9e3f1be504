"""Checks of user-supplied values shared by every layer.

Each raises ``ValueError`` naming the parameter, the bad value and what was expected, so a wrong
setting fails early with a message the user can act on (never an ``assert``).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_int", "check_number", "is_int", "is_number"]


def is_int(value: Any) -> bool:
    """True for an ``int`` (or numpy integer) that is not a ``bool``."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value: Any, *, minimum: int = 1, allow_none: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is an integer ``>= minimum`` (or ``None`` when
    ``allow_none``)."""
    if value is None and allow_none:
        return
    if not is_int(value) or value < minimum:
        kind = {1: "a positive integer", 0: "a non-negative integer"}.get(minimum, f"an integer >= {minimum}")
        if allow_none:
            kind += " or None"
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def is_number(value: Any) -> bool:
    """True for a finite ``int`` or ``float`` that is not a ``bool``."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_number(name: str, value: Any, *, positive: bool = True) -> None:
    """Raise ``ValueError`` unless ``value`` is a finite real number (``> 0`` when ``positive``)."""
    if not is_number(value) or (positive and value <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")

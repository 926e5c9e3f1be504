"""Options dataclasses with keyword shortcuts: ``f(..., options=Opts(...))`` or ``f(..., field=value)``.

A function with many settings takes one frozen, validated dataclass and, for convenience and for
callers written before the dataclass existed, the same settings as keywords:
``build_options(Opts, options, settings, caller="f")`` merges them (keywords override ``options``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["build_options"]

T = TypeVar("T")


def build_options(cls: type[T], options: T | None, settings: Mapping[str, Any], *, caller: str) -> T:
    """``options`` with ``settings`` applied, or ``cls(**settings)`` when ``options`` is None.

    Raises:
        TypeError: a setting that is not a field of ``cls`` (naming it and the fields), or
            ``options`` of another type.
        ValueError: from ``cls``'s own validation.
    """
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(settings) - set(names))
    if unknown:
        raise TypeError(f"{caller}() got unknown setting(s) {unknown}; {cls.__name__} has {names}")
    if options is None:
        return cls(**settings)
    if not isinstance(options, cls):
        raise TypeError(f"{caller}(): options must be a {cls.__name__}, got {type(options).__name__}")
    return dataclasses.replace(options, **settings) if settings else options  # type: ignore[type-var]

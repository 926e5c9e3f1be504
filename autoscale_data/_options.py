"""Options dataclasses with keyword shortcuts: ``f(..., options=Opts(...))`` or ``f(..., field=value)``.

A function with many settings takes one frozen, validated dataclass and, for convenience and for
callers written before the dataclass existed, the same settings as keywords:
``build_options(Opts, options, settings, caller="f")`` merges them (keywords override ``options``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["build_options", "field_help"]

_ATTRIBUTE = re.compile(r"^(\s*)([A-Za-z_][\w, ]*):\s+(.*)$")

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


def field_help(cls: type, name: str) -> str:
    """What ``cls``'s docstring says of the field ``name`` (its ``Attributes:`` entry), on one line.

    A CLI's ``help=`` for a setting that is a field of an options dataclass reads it from here, so
    the setting is described once, in the dataclass. An entry may name several fields
    (``min_weight, max_weight: ...``); double backticks are dropped and ``%`` is escaped for argparse.

    Raises:
        ValueError: the docstring has no ``Attributes:`` entry for ``name``.
    """
    doc = inspect.getdoc(cls) or ""
    lines = doc.split("Attributes:", 1)[1].splitlines() if "Attributes:" in doc else []
    for i, line in enumerate(lines):
        match = _ATTRIBUTE.match(line)
        if match is None or name not in [n.strip() for n in match.group(2).split(",")]:
            continue
        indent, text = len(match.group(1)), [match.group(3).strip()]
        for more in lines[i + 1:]:
            if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                break
            text.append(more.strip())
        return " ".join(text).replace("``", "").replace("%", "%%")
    raise ValueError(f"{cls.__name__}'s docstring has no 'Attributes:' entry for {name!r}")

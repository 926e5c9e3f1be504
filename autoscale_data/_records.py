"""One JSON codec for every typed record the package writes, driven by the dataclass fields.

A record is a dataclass; its JSON object has one key per field, named as the field, holding the field's value
in JSON (nested records as objects, tuples as lists, ``float('nan')`` as the ``NaN`` that :func:`json.dumps`
writes). :func:`to_json` writes it and :func:`from_json` reads it back, checked against the field's type hint
(``int``, ``float``, ``str``, ``bool``, ``Literal[...]``, ``list[T]``, ``tuple[T, ...]``, ``tuple[A, B]``,
``dict[str, T]``, ``dict[int, T]`` (its keys written as strings, as JSON has them), ``T | None``, nested
records, ``Any``). Subclassing :class:`Record` gives a dataclass ``to_json()`` / ``from_json(data)`` methods
that call them.

Reading is lenient where the files of earlier versions need it: a key that is missing (or ``null``) takes its
field's default, and ``None`` for an optional field; a field marked :func:`required` must be present even
though it has a default. Keys the record does not know are ignored. Writing leaves out the fields marked
:func:`omitted` whose value is their default (keys later versions added, so that older readers and older files
agree), or where a condition on the record holds (keys that follow a status); such a field may be required
where a condition on the JSON read holds. A dict field marked :func:`inline` writes its entries beside the
other keys (a curve keyed by domain) and reads every key that is no other field's. A field with ``init=False``
is written and never read: a constant (``method``) or a value the record computes from its other fields
(``summary``). A field marked :func:`transient` is neither: the record keeps it in memory (raw samples, the
fits behind a summary) and a record read back holds its default. A record whose JSON shape truly differs from
its fields writes its own ``to_json`` / ``from_json`` and says why; the codec calls them for it when it is
nested in another record, as it does for any class with a ``to_json`` / ``from_json`` of its own (the solver's
:class:`~autoscale_data.solver.MixturePlan`).

A key that is missing or of the wrong type raises ``ValueError`` naming its path
(``targets.autoscale.losses``, ``curve[3].tokens``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["Record", "fields_from_json", "fields_to_json", "from_json", "inline", "omitted", "required",
           "to_json",
           "transient"]

T = TypeVar("T")

_OMIT = "records.omit_default"
_REQUIRED = "records.required"
_TRANSIENT = "records.transient"
_INLINE = "records.inline"


def omitted(when: Callable[[Any], bool] | None = None,
            required: bool | Callable[[Mapping[str, Any]], bool] = False, **kwargs: Any) -> Any:
    """A dataclass field left out of the JSON while it holds its default, or, given ``when``, where
    ``when(record)`` holds; ``required``: it must be in the JSON read (where ``required(data)`` holds). The
    rest: ``dataclasses.field``."""
    return dataclasses.field(metadata={_OMIT: when or True, _REQUIRED: required}, **kwargs)


def required(**kwargs: Any) -> Any:
    """A dataclass field that must be present in the JSON read, although it has a default."""
    return dataclasses.field(metadata={_REQUIRED: True}, **kwargs)


def transient(**kwargs: Any) -> Any:
    """A dataclass field kept in memory only: never written, and its default when read (``dataclasses.field``
    arguments; it needs a default)."""
    return dataclasses.field(metadata={_TRANSIENT: True}, **kwargs)


def inline(**kwargs: Any) -> Any:
    """A dict field whose entries are keys of the record's own object, beside its other fields."""
    return dataclasses.field(metadata={_INLINE: True}, **kwargs)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _custom(cls: type, name: str) -> bool:
    """Whether ``cls`` writes its own ``name`` (``to_json`` / ``from_json``) rather than the codec's."""
    own = getattr(cls, name, None)
    generic = getattr(Record, name)
    return own is not None and getattr(own, "__func__", own) is not getattr(generic, "__func__", generic)


def to_json(obj: Any) -> Any:
    """The JSON value of ``obj``: records as objects (one key per field), tuples as lists, the rest as is."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return obj.to_json() if _custom(type(obj), "to_json") else fields_to_json(obj)
    if callable(getattr(obj, "to_json", None)) and not isinstance(obj, type):
        return obj.to_json()  # a class of its own JSON (the solver's MixturePlan …)
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    return obj


def fields_to_json(obj: Any, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The codec's JSON object of the record ``obj``, one key per field (but ``skip``), ignoring a custom
    ``to_json``."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value, omit = getattr(obj, f.name), f.metadata.get(_OMIT)
        if f.name in skip or f.metadata.get(_TRANSIENT) or (omit(obj) if callable(omit) else
                                                            omit and _same(value, _default(f))):
            continue
        out.update(to_json(value) if f.metadata.get(_INLINE) else {f.name: to_json(value)})
    return out


def _same(value: Any, default: Any) -> bool:
    if default is dataclasses.MISSING:
        return False
    if isinstance(value, float) and isinstance(default, float) and math.isnan(value) and math.isnan(default):
        return True
    return bool(value == default)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_SCALARS: dict[Any, tuple[tuple[type, ...], str]] = {
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    str: ((str,), "a string"),
    bool: ((bool,), "true or false"),
}


def _where(path: str) -> str:
    return f"key {path!r}" if path else "the record"


def _bad(value: Any, expected: str, path: str) -> ValueError:
    return ValueError(f"{_where(path)} = {value!r} is invalid: expected {expected}")


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def from_json(tp: type[T] | Any, data: Any, path: str = "") -> T:
    """Read ``data`` (parsed JSON) as a value of type ``tp``, checked against it.

    Args:
        tp: a record class or a type hint (``dict[str, float]``, ``list[Point] | None`` …).
        data: the parsed JSON.
        path: where ``data`` sits in its file, for the error messages.

    Raises:
        ValueError: a key is missing or a value is not of its field's type; the message names its path.
    """
    if tp is Any:
        return data  # type: ignore[no-any-return]
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _union(typing.get_args(tp), data, path)  # type: ignore[no-any-return]
    if origin is typing.Literal:
        if data not in typing.get_args(tp):
            raise _bad(data, f"one of {typing.get_args(tp)}", path)
        return data  # type: ignore[no-any-return]
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or callable(getattr(tp, "from_json", None))):
        return _record(tp, data, path)  # type: ignore[return-value]
    if origin in (list, tuple):
        return _sequence(origin, typing.get_args(tp), data, path)  # type: ignore[no-any-return]
    if origin is dict:
        if not isinstance(data, Mapping):
            raise _bad(data, "an object", path)
        args = typing.get_args(tp)
        key_tp, value_tp = args if args else (str, Any)
        return {_key(key_tp, k, path): from_json(value_tp, v, _at(path, str(k)))  # type: ignore[return-value]
                for k, v in data.items()}
    if tp in _SCALARS:
        accepted, expected = _SCALARS[tp]
        if (isinstance(data, bool) and tp is not bool) or not isinstance(data, accepted):
            raise _bad(data, expected, path)
        return data  # type: ignore[no-any-return]
    raise TypeError(f"the records codec cannot read type {tp!r} (at {path or 'the top'})")


def _union(args: tuple[Any, ...], data: Any, path: str) -> Any:
    """``data`` as the first of the union's ``args`` that reads it (``None`` for an optional one)."""
    if data is None and type(None) in args:
        return None
    options = [a for a in args if a is not type(None)]
    if len(options) == 1:
        return from_json(options[0], data, path)
    for option in options:
        try:
            return from_json(option, data, path)
        except ValueError:
            continue
    raise _bad(data, " or ".join(str(o) for o in options), path)


def _sequence(origin: type, args: tuple[Any, ...], data: Any, path: str) -> Any:
    """``data`` as a ``list[T]``, a ``tuple[T, ...]`` or a fixed tuple (one type per place)."""
    if not isinstance(data, (list, tuple)):
        raise _bad(data, "a list", path)
    if origin is tuple and args and args[1:] != (Ellipsis,):
        if len(data) != len(args):
            raise _bad(data, f"a list of {len(args)}", path)
        return tuple(from_json(t, v, f"{path}[{k}]") for k, (t, v) in enumerate(zip(args, data, strict=True)))
    values = [from_json(args[0] if args else Any, v, f"{path}[{k}]") for k, v in enumerate(data)]
    return tuple(values) if origin is tuple else values


def _key(tp: Any, key: Any, path: str) -> Any:
    if tp is int:
        try:
            return int(key)
        except ValueError:
            raise ValueError(f"{_where(_at(path, str(key)))} is invalid: expected an integer key") from None
    return str(key)


def _record(cls: type, data: Any, path: str) -> Any:
    if _custom(cls, "from_json"):
        reader = cls.from_json  # type: ignore[attr-defined]
        takes_path = len(inspect.signature(reader).parameters) > 1
        return reader(data, path) if takes_path else reader(data)
    return cls(**fields_from_json(cls, data, path))


def fields_from_json(cls: type, data: Any, path: str = "", *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The constructor arguments of record ``cls`` read from ``data`` by the codec (but ``skip``), ignoring a
    custom ``from_json``: what a record with one key of its own reads the rest with."""
    if not isinstance(data, Mapping):
        raise _bad(data, "an object", path)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skip or f.metadata.get(_TRANSIENT):
            continue
        if f.metadata.get(_INLINE):
            named = {g.name for g in dataclasses.fields(cls)}
            values[f.name] = from_json(hints[f.name], {k: v for k, v in data.items() if k not in named}, path)
            continue
        key = _at(path, f.name)
        value = data.get(f.name)
        if value is None:
            default = _default(f)
            hint = hints[f.name]
            optional = type(None) in typing.get_args(hint) or hint is Any
            needed = f.metadata.get(_REQUIRED)
            if f.name not in data and ((needed(data) if callable(needed) else needed)
                                       or (default is dataclasses.MISSING and not optional)):
                raise ValueError(f"key {key!r} is missing")
            if default is not dataclasses.MISSING:
                values[f.name] = default
                continue
            if not optional:
                raise ValueError(f"key {key!r} is missing")
        values[f.name] = from_json(hints[f.name], value, key)
    return values


class Record:
    """Gives a dataclass ``to_json()`` and ``from_json(data)`` through the codec (see the module)."""

    def to_json(self) -> dict[str, Any]:
        """This record's JSON object (:func:`to_json`)."""
        return to_json(self)  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls: type[T], data: Any, path: str = "") -> T:
        """Read a JSON object written by :meth:`to_json` (:func:`from_json`)."""
        return _record(cls, data, path)  # type: ignore[no-any-return]

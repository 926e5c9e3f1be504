"""Argument pieces shared by the CLI verbs: argparse value types, the supply options, JSON input."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._checks import check_int
from ..solver.design import objective_weight

__all__ = ["add_json_flag", "add_supply_args", "add_verb", "check_finite_answer", "objective_weights_arg",
           "parse_token_count", "parse_tokens", "positive_float", "positive_int", "print_json", "read_json",
           "token_count",
           "weight_float"]

_SUFFIXES = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def add_verb(subparsers: Any, name: str, run: Callable[[argparse.Namespace], int], *, help: str,
             description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` whose ``func`` is ``run``; ``epilog`` keeps its line breaks."""
    parser = subparsers.add_parser(name, help=help, description=description, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(func=run)
    return parser


def add_json_flag(parser: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``: print ``what`` as JSON instead of the table (the CLI then sends anything else a verb or a
    library prints to stderr, so stdout holds the JSON alone)."""
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def print_json(args: argparse.Namespace, obj: Any) -> None:
    """Print ``obj`` as the verb's JSON answer, on the stdout the CLI kept for it (``json_stream``)."""
    print(json.dumps(obj, indent=2), file=getattr(args, "json_stream", None) or sys.stdout)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (accepts 400_000)."""
    try:
        value = int(text.replace("_", ""))
        check_int("value", value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0 (accepts 1e9, 3_000_000)."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return v


def parse_token_count(text: str, *, what: str = "token count", minimum: int = 1) -> int:
    """A token count as every command reads it: ``400000``, ``400_000``, ``4e5``, ``2.5e6``, ``400k``,
    ``2.5M``, ``1B`` (k, M, B/G, T: powers of 1000) -> an ``int``.

    Raises:
        ValueError: not a number, not a whole number of tokens, or below ``minimum``; the message names
            ``what``.
    """
    raw = str(text).strip().replace("_", "")
    scale = _SUFFIXES.get(raw[-1:].lower(), 1) if raw[-1:].isalpha() else 1
    number = raw[:-1] if scale != 1 else raw
    try:
        value = float(number) * scale
    except ValueError:
        raise ValueError(f"{what} {text!r} is invalid: expected a number of tokens such as 400000, 4e5, "
                         "400_000 or 400k") from None
    if not value == value or value in (float("inf"), float("-inf")) or value != int(value):
        raise ValueError(f"{what} {text!r} is invalid: expected a whole number of tokens")
    if int(value) < minimum:
        raise ValueError(f"{what} {text!r} is invalid: expected at least {minimum:,} tokens")
    return int(value)


def token_count(text: str) -> int:
    """argparse type of every token-count option: :func:`parse_token_count` (a whole number >= 1)."""
    try:
        return parse_token_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def weight_float(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a weight in [0, 1], got {text!r}")
    return v


def add_supply_args(parser: argparse.ArgumentParser, *, effect: str) -> None:
    """``--available DOMAIN=TOKENS`` (repeatable) and ``--max-epochs E``: what each domain can supply
    (``effect``: what the supply does in this verb, for the help)."""
    parser.add_argument("--available", action="append", metavar="DOMAIN=TOKENS",
                        help=f"tokens available per domain ({effect}; repeatable or comma-separated)")
    parser.add_argument("--max-epochs", type=positive_float, default=None, metavar="E",
                        help="epoch cap applied to --available")


def read_json(path: str) -> Any:
    """Load a JSON file, with clear errors."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON ({exc})") from None


def parse_tokens(items: list[str] | None) -> dict[str, float] | None:
    """``["web=1e9", "code=2e8"]`` or ``["web=1e9,code=2e8"]`` -> ``{"web": 1e9, "code": 2e8}``."""
    if not items:
        return None
    return {name: float(parse_token_count(val, what=f"token count for {name!r}", minimum=0))
            for name, val in _pairs(items, "expected DOMAIN=TOKENS")}


def _pairs(items: Iterable[str], expected: str) -> Iterator[tuple[str, str]]:
    """``(name, value)`` of every ``NAME=VALUE`` in the comma-separated ``items`` (empty parts skipped)."""
    for part in (p for item in items for p in item.split(",")):
        if not part.strip():
            continue
        name, sep, val = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{expected}, got {part!r}")
        yield name.strip(), val


def objective_weights_arg(spec: str | None) -> dict[str, float] | None:
    """``"a=0.7,b=0.3"`` or the path of a JSON object ``{"a": 0.7, "b": 0.3}`` -> the weights."""
    if spec is None:
        return None
    if spec.endswith(".json") or os.path.isfile(spec):
        obj = read_json(spec)
        if not isinstance(obj, dict) or not obj:
            raise ValueError(f"{spec}: expected a JSON object {{validation domain: weight}}")
        return {str(d): objective_weight(str(d), v) for d, v in obj.items()}
    out = {name: objective_weight(name, val.strip())
           for name, val in _pairs([spec], "--objective-weights: expected DOMAIN=WEIGHT")}
    if not out:
        raise ValueError("--objective-weights is empty")
    return out


def _non_finite(obj: Any, path: str) -> list[str]:
    """``path = value`` of every non-finite number in a JSON-able object."""
    if isinstance(obj, float):
        return [] if math.isfinite(obj) else [f"{path} = {obj!r}"]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _non_finite(v, f"{path}.{k}" if path else str(k))]
    if isinstance(obj, (list, tuple)):
        return [x for i, v in enumerate(obj) for x in _non_finite(v, f"{path}[{i}]")]
    return []


def check_finite_answer(answer: Any, verb: str) -> None:
    """The last check before a verb prints or saves ``answer``: a NaN or infinity in it is a bug, never an
    answer.

    Raises:
        ValueError: naming every non-finite number by its path (the CLI then exits non-zero).
    """
    bad = _non_finite(answer, "")
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ValueError(f"the {verb} answer holds non-finite numbers ({shown}): a bug, nothing was printed "
                         "or saved; please report it with the input files")


"""The one JSON codec of the typed records (``autoscale_data._records``): a record's JSON has one key per field,
reads back equal, and a missing or badly typed key is a ``ValueError`` naming its path."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscale_data._records import Record, fields_from_json, from_json, inline, omitted, required, to_json


@dataclass(frozen=True)
class Point(Record):
    tokens: int
    value: float = math.nan
    shares: dict[str, float] | None = omitted(default=None)


@dataclass(frozen=True)
class Run(Record):
    run_id: str
    points: list[Point] = field(default_factory=list)
    seeds: tuple[int, ...] = ()
    by_budget: dict[int, float] = field(default_factory=dict)
    note: str | None = None
    hook: dict[str, Any] | None = omitted(default=None)
    done: bool = required(default=False)


_points = st.lists(st.builds(Point, tokens=st.integers(0, 10**9),
                             value=st.floats(allow_nan=False, allow_infinity=False),
                             shares=st.none() | st.dictionaries(st.text(max_size=4), st.floats(0, 1), max_size=3)),
                   max_size=4)
_runs = st.builds(Run, run_id=st.text(max_size=8), points=_points, seeds=st.tuples(st.integers(0, 9)),
                  by_budget=st.dictionaries(st.integers(1, 10**6), st.floats(0, 1), max_size=3),
                  note=st.none() | st.text(max_size=5), hook=st.none() | st.just({"kind": "doremi", "n": 2}),
                  done=st.booleans())


@given(_runs)
def test_a_record_reads_back_equal_through_its_json_text(run: Run) -> None:
    text = json.dumps(run.to_json(), sort_keys=True)
    assert Run.from_json(json.loads(text)) == run


def test_the_json_has_one_key_per_field_and_omits_only_the_omitted_defaults() -> None:
    run = Run("r1", points=[Point(3, 1.5)], seeds=(0, 1), by_budget={4096: 0.5})
    assert run.to_json() == {"run_id": "r1", "points": [{"tokens": 3, "value": 1.5}], "seeds": [0, 1],
                             "by_budget": {"4096": 0.5}, "note": None, "done": False}
    assert Point(1).to_json()["value"] != Point(1).to_json()["value"]  # NaN, as json writes it
    assert "NaN" in json.dumps(Point(1).to_json())
    assert Run("r", hook={"kind": "x"}).to_json()["hook"] == {"kind": "x"}


def test_older_files_read_with_defaults_but_a_required_key_must_be_there() -> None:
    old = Run.from_json({"run_id": "r", "done": True, "points": [{"tokens": 5}]})
    assert old.points[0].value != old.points[0].value and old.seeds == () and old.note is None and old.hook is None
    assert Run.from_json({"run_id": "r", "done": True, "later_key": 1}).run_id == "r"  # unknown keys are ignored
    with pytest.raises(ValueError, match="key 'done' is missing"):
        Run.from_json({"run_id": "r"})


@pytest.mark.parametrize(("obj", "match"), [
    ({"done": True}, "key 'run_id' is missing"),
    ({"run_id": 3, "done": True}, "key 'run_id' = 3 is invalid: expected a string"),
    ({"run_id": "r", "done": 1}, "key 'done' = 1 is invalid: expected true or false"),
    ({"run_id": "r", "done": True, "points": [{"tokens": 1}, {"tokens": True}]},
     r"key 'points\[1\].tokens' = True is invalid: expected an integer"),
    ({"run_id": "r", "done": True, "points": [{"tokens": 1, "shares": {"a": "x"}}]},
     r"key 'points\[0\].shares.a' = 'x' is invalid: expected a number"),
    ({"run_id": "r", "done": True, "by_budget": {"N1": 0.5}}, r"key 'by_budget.N1' is invalid: expected an integer key"),
    ({"run_id": "r", "done": True, "seeds": "0,1"}, "key 'seeds' = '0,1' is invalid: expected a list"),
    ([1, 2], "expected an object"),
])
def test_a_missing_or_bad_key_is_named_by_its_path(obj: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Run.from_json(obj)


def test_plain_types_maps_of_records_and_the_field_helpers() -> None:
    assert from_json(dict[str, list[Point]], {"a": [{"tokens": 1}]}) == {"a": [Point(1)]}
    assert to_json({"a": [Point(1, 2.0)]}) == {"a": [{"tokens": 1, "value": 2.0}]}
    assert from_json(int | None, None) is None and from_json(float, 3) == 3
    with pytest.raises(ValueError, match="the record = 3 is invalid: expected an object"):
        fields_from_json(Run, 3)
    assert fields_from_json(Run, {"run_id": "r", "done": True}, skip=("points",)).keys() == {
        "run_id", "seeds", "by_budget", "note", "hook", "done"}


@dataclass(frozen=True)
class Curve(Record):
    status: str
    tokens: list[int] = omitted(when=lambda c: c.status == "empty", required=lambda data: data.get("status") != "empty",
                                default_factory=list)
    losses: dict[str, list[float]] = inline(default_factory=dict)


def test_conditional_omission_conditional_requirement_and_an_inline_dict() -> None:
    curve = Curve("ok", [1, 2], {"a": [3.0, 2.0], "b": [4.0, 1.0]})
    assert curve.to_json() == {"status": "ok", "tokens": [1, 2], "a": [3.0, 2.0], "b": [4.0, 1.0]}
    assert Curve.from_json(curve.to_json()) == curve
    assert Curve("empty", [5]).to_json() == {"status": "empty"} and Curve.from_json({"status": "empty"}) == Curve("empty")
    with pytest.raises(ValueError, match="'c.tokens' is missing"):
        Curve.from_json({"status": "ok", "a": [1.0]}, "c")
    with pytest.raises(ValueError, match=r"'c.a\[0\]' = 'x' is invalid"):
        Curve.from_json({"status": "ok", "tokens": [], "a": ["x"]}, "c")

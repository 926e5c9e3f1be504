"""The shared check that resuming at position k gives exactly the remaining suffix.

    from resume_helper import assert_resume_equals_suffix
    assert_resume_equals_suffix(lambda: MyStatefulIterable(...), ks=range(0, 50, 7))

Works for any iterable with ``state_dict()`` / ``load_state_dict(state)`` whose ``state_dict()``
after taking ``k`` items describes "resume after item k". Every state goes through a JSON round
trip, so a state that is not plain JSON fails the check too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["assert_resume_equals_suffix", "interleave_ranks", "item_key", "take"]


def item_key(item: Any) -> Any:
    """A hashable identity of a sample: ``(domain, seq_index)`` for mixture samples (a tuple of
    them for a batch); the item itself otherwise."""
    if isinstance(item, dict) and "domain" in item and "seq_index" in item:
        d, s = item["domain"], item["seq_index"]
        if hasattr(d, "tolist"):
            return tuple(zip(d.tolist(), s.tolist(), strict=False))
        return (int(d), int(s))
    return item


def take(iterator: Any, k: int, key: Callable[[Any], Any] = item_key) -> list[Any]:
    """The keys of the next ``k`` items of ``iterator`` (fails if it ends early)."""
    out = []
    for _ in range(k):
        try:
            out.append(key(next(iterator)))
        except StopIteration:
            raise AssertionError(f"the iterator ended after {len(out)} items, {k} were asked") from None
    return out


def assert_resume_equals_suffix(
    make: Callable[[], Any],
    ks: Iterable[int] | None = None,
    *,
    key: Callable[[Any], Any] = item_key,
    make_resumed: Callable[[], Any] | None = None,
) -> list[Any]:
    """Check ``prefix(k) + resumed_run == full_run`` for every ``k`` in ``ks`` (default: every k).

    Args:
        make: builds a fresh stateful iterable (the same configuration each call).
        ks: resume points; default ``0 .. len(full)``.
        key: maps an item to a comparable identity.
        make_resumed: builds the iterable that loads the state (default ``make``).

    Returns:
        The full run's keys.
    """
    full = [key(x) for x in make()]
    points = range(len(full) + 1) if ks is None else ks
    for k in points:
        if k > len(full):
            continue
        source = make()
        iterator = iter(source)
        prefix = take(iterator, k, key)
        assert prefix == full[:k], f"the first {k} items differ from the full run"
        state = json.loads(json.dumps(source.state_dict()))
        resumed = (make_resumed or make)()
        resumed.load_state_dict(state)
        rest = [key(x) for x in resumed]
        assert prefix + rest == full, (
            f"resume at k={k}: got {len(rest)} items after the prefix, expected {len(full) - k}; "
            f"first difference at {next((i for i, (a, b) in enumerate(zip(rest, full[k:], strict=False)) if a != b), None)}")
    return full


def interleave_ranks(streams: Sequence[Sequence[Any]]) -> list[Any]:
    """Merge per-rank outputs of a strided partition back into global order.

    Rank ``r`` of ``W`` holds global positions ``start_r, start_r + W, ...`` where ranks are ordered
    by their first position; pass the streams in that order (rank ``r`` at index ``(r - cursor) % W``).
    """
    out: list[Any] = []
    longest = max((len(s) for s in streams), default=0)
    for j in range(longest):
        for s in streams:
            if j < len(s):
                out.append(s[j])
    return out

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

__all__ = ["assert_continuation", "assert_resume_equals_suffix", "interleave_ranks", "item_key", "take"]


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


def _keys_of(dataset: Any, workers: int) -> list[Any]:
    """A dataset's sample keys, read in process (``workers=0``) or through ``DataLoader`` workers
    (whole batches when the dataset makes them; batches are flattened to samples)."""
    if workers:
        from torch.utils.data import DataLoader

        items = list(DataLoader(dataset, batch_size=None, num_workers=workers))
    else:
        items = list(dataset)
    out: list[Any] = []
    for item in items:
        k = item_key(item)
        out.extend(k if isinstance(k, tuple) and k and isinstance(k[0], tuple) else [k])
    return out


def assert_continuation(
    make_old: Callable[[int, int], Any],
    make_new: Callable[..., Any],
    cursor: int,
    *,
    world: int = 1,
    world2: int = 1,
    workers: int = 0,
    batch_size: int = 3,
) -> tuple[list[Any], list[Any]]:
    """Save a run at ``cursor`` with ``world`` ranks and continue it under a new configuration.

    ``make_old(rank, world_size)`` builds a rank of the saved run; ``make_new(rank, world_size,
    **settings)`` a rank of the new configuration. ``cursor`` must be a multiple of ``world`` (ranks
    save in step). The new run is read by ``world2`` ranks, each through ``workers`` DataLoader
    workers in batches of ``batch_size``, after ``load_state_dict(state, continue_run=True)`` (the
    state through a JSON round trip).

    Checks that every old rank saves the same state, and that the ranks of the new run together
    yield exactly what one process of the new configuration yields after the cursor.

    Returns:
        ``(prefix, rest)``: the old run's first ``cursor`` keys and the new run's keys after it.
    """
    assert cursor % world == 0, "ranks save in step: the cursor is a multiple of the world size"
    olds = [make_old(r, world) for r in range(world)]
    per = cursor // world
    prefix = interleave_ranks([take(iter(ds), per) for ds in olds])
    states = [json.loads(json.dumps(ds.state_dict(samples_taken=per))) for ds in olds]
    assert all({**s, "rank": 0} == {**states[0], "rank": 0} for s in states), "ranks disagree on the state"
    state = states[0]
    assert state["cursor"] == cursor
    parts = []
    for r in range(world2):
        ds = make_new(r, world2, batch_size=batch_size)
        ds.load_state_dict(state, continue_run=True)
        parts.append(((r - cursor) % world2, _keys_of(ds, workers)))
    rest = interleave_ranks([p for _, p in sorted(parts)])
    single = make_new(0, 1)
    single.load_state_dict(json.loads(json.dumps(state)), continue_run=True)
    assert [item_key(x) for x in single] == rest, "the new run's ranks and workers do not make its one stream"
    return prefix, rest

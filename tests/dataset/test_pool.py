"""Domain pools: a seeded subset of a domain, drawn in epochs; exact, resumable, part of the state."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_store import write_synthetic_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loader_run import LoaderRun
from resume_helper import assert_resume_equals_suffix, interleave_ranks, item_key

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.mixing import PooledOrders, pool_members, resolve_pools

L = 32
SIZES = {"a": 40_000, "b": 12_000, "c": 3_000}  # 1250 / 375 / 93 sequences of 32
AVAIL = {n: t // L for n, t in SIZES.items()}
W3 = {"a": 0.6, "b": 0.3, "c": 0.1}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("pool") / "stores", SIZES)


def make(root: Path, seqs: int = 400, weights: dict[str, float] | None = None, **kw: Any) -> ScaleAwareMixtureDataset:
    kw.setdefault("verify", "size")
    return ScaleAwareMixtureDataset(root, weights or W3, seqs * L, L, **kw)


def keys(ds: Any) -> list[Any]:
    return [item_key(x) for x in ds]


def pool_sizes(pool: dict[str, Any]) -> dict[str, int]:
    return resolve_pools(pool, list(SIZES), list(AVAIL.values()), L)


# ------------------------------------------------------------------------- the orders alone
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), frac=st.floats(0.001, 1.0), seed=st.integers(0, 50), epochs=st.integers(1, 4))
def test_pooled_orders_epochs_over_one_subset(n: int, frac: float, seed: int, epochs: int) -> None:
    size = max(1, int(frac * n))
    orders = PooledOrders(["x"], [n], seed, {"x": size})
    ids = orders(np.zeros(size * epochs, dtype=np.intp), np.arange(size * epochs)).astype(np.int64)
    members = set(pool_members("x", n, size, seed, np.arange(size)).tolist())
    assert len(members) == size and all(0 <= m < n for m in members)
    for e in range(epochs):  # each epoch: every member once, nothing else
        chunk = ids[e * size : (e + 1) * size]
        assert set(chunk.tolist()) == members and len(set(chunk.tolist())) == size
    if epochs > 1 and size > 2:  # a fresh order each epoch (not the same sequence again)
        assert not np.array_equal(ids[:size], ids[size : 2 * size])


def test_whole_domain_pool_is_no_pool() -> None:
    assert resolve_pools({"a": 1.0}, ["a"], [10], L) == {}
    assert resolve_pools({"a": 10 * L}, ["a"], [10], L) == {}
    assert resolve_pools({"a": 0.5, "b": 3 * L + 5}, ["a", "b"], [10, 10], L) == {"a": 5, "b": 3}


@pytest.mark.parametrize(("pool", "message"), [
    ({"c": 93 * L + 1}, "larger than the domain"),
    ({"c": 0}, "positive token count"),
    ({"c": 0.0}, r"in \(0, 1\]"),
    ({"c": 1.5}, r"in \(0, 1\]"),
    ({"c": float("nan")}, r"in \(0, 1\]"),
    ({"c": L - 1}, "no whole sequence"),
    ({"c": 0.001}, "no whole sequence"),
    ({"c": True}, "fraction"),
    ({"c": "half"}, "fraction"),
    ({"zz": 0.5}, "unknown domain"),
])
@pytest.mark.timeout(30)
def test_bad_pools(root: Path, pool: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(root, pool=pool)


@pytest.mark.timeout(30)
def test_pool_that_cannot_supply_names_the_pool(root: Path) -> None:
    with pytest.raises(ValueError, match=r"domain 'c' is too short: it has 640 tokens \(20 whole sequences"):
        make(root, seqs=400, pool={"c": 20 * L})  # 40 draws of a 20-sequence pool, no max_epochs
    ds = make(root, seqs=400, pool={"c": 20 * L}, max_epochs={"c": 2})
    assert ds.sequences_per_domain["c"] == 40


# ------------------------------------------------------------------------------- the dataset
@pytest.mark.timeout(120)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(frac=st.floats(0.02, 1.0), tokens=st.integers(L, 375 * L), seqs=st.integers(1, 500),
       seed=st.integers(0, 5), window=st.sampled_from([0, 5]), world=st.integers(1, 5), data=st.data())
def test_pool_counts_epochs_and_partition(root: Path, frac: float, tokens: int, seqs: int, seed: int, window: int,
                                          world: int, data: st.DataObject) -> None:
    pool = {"c": frac, "b": tokens}
    opts = {"pool": pool, "max_epochs": 200, "seed": seed, "shuffle_window": window}
    ds = make(root, seqs, **opts)
    full = keys(ds)
    sizes = {**AVAIL, **pool_sizes(pool)}
    counts = ds.sequences_per_domain
    assert Counter(d for d, _ in full) == Counter({i: c for i, c in enumerate(counts.values()) if c})
    for i, name in enumerate(SIZES):
        drawn = [s for d, s in full if d == i]
        size = sizes[name]
        members = set(drawn[:size])
        if len(drawn) >= size and window == 0:
            assert len(members) == size
        uses = Counter(drawn)  # every member drawn floor or ceil(draws / pool) times, nothing else
        assert len(drawn) // size <= min(uses.values(), default=0) and max(uses.values(), default=0) <= -(
            -len(drawn) // size) and len(uses) == min(len(drawn), size)
        for e in range(0, len(drawn) if window == 0 else 0, size):  # in draw order: no repeat within an epoch
            epoch = drawn[e : e + size]
            assert len(set(epoch)) == len(epoch) and set(epoch) <= members
        if name in ds.pools:  # the pool is the seeded subset: the same whatever the weights
            assert members <= set(pool_members(name, AVAIL[name], size, seed, np.arange(size)).tolist())
    # ranks take strided slices that together are the stream
    ranks = [make(root, seqs, rank=r, world_size=world, **opts) for r in range(world)]
    assert interleave_ranks([keys(r) for r in ranks]) == full
    # resume at a random point, on another world size
    k = data.draw(st.integers(0, len(full)))
    state = json.loads(json.dumps(ds.state_dict(samples_taken=k)))
    assert state["config"]["pools"] == ds.pools
    world2 = data.draw(st.integers(1, 4))
    resumed = []
    for r in range(world2):
        part = make(root, seqs, rank=r, world_size=world2, **opts)
        part.load_state_dict(state)
        resumed.append(((r - k) % world2, keys(part)))
    assert interleave_ranks([s for _, s in sorted(resumed)]) == full[k:]


@pytest.mark.timeout(60)
def test_pool_resume_at_every_k(root: Path) -> None:
    opts = {"pool": {"c": 0.1, "a": 0.05}, "max_epochs": 20, "seed": 3, "seqs": 200}
    full = assert_resume_equals_suffix(lambda: make(root, **opts), ks=range(0, 201, 3))
    assert len({s for d, s in full if d == 2}) == 9  # 20 draws of "c" from its 9-sequence pool
    assert len({s for d, s in full if d == 0}) == 62  # 120 draws of "a" from its 62-sequence pool
    assert_resume_equals_suffix(lambda: make(root, batch_size=7, **opts), ks=range(0, 30, 2))


def _loader(root: Path, workers: int, **kw: Any) -> LoaderRun:
    return LoaderRun(make(root, seqs=60, batch_size=4, **kw), workers)


@pytest.mark.timeout(120)
def test_pool_resume_across_worker_counts(root: Path) -> None:
    opts = {"pool": {"c": 5 * L}, "max_epochs": {"c": 5}, "seed": 1}
    batches = assert_resume_equals_suffix(lambda: _loader(root, 2, **opts), ks=[0, 3, 14],
                                          make_resumed=lambda: _loader(root, 3, **opts))
    assert [k for b in batches for k in b] == keys(make(root, seqs=60, **opts))


@pytest.mark.timeout(60)
def test_pool_is_part_of_the_fingerprint_and_the_state(root: Path) -> None:
    plain = make(root)
    same = make(root, pool={"c": 1.0})  # the whole domain: no pool, the very same stream
    assert same.fingerprint == plain.fingerprint and "pools" not in plain.config
    assert keys(same) == keys(plain)
    a = make(root, pool={"c": 0.5}, max_epochs={"c": 2})
    b = make(root, pool={"c": 0.25}, max_epochs={"c": 4})
    assert len({plain.fingerprint, a.fingerprint, b.fingerprint}) == 3
    assert a.config["pools"] == {"c": 46}
    state = json.loads(json.dumps(a.state_dict(samples_taken=10)))
    for other in (b, plain):
        with pytest.raises(ValueError, match=r"different mixture.*pools"):
            other.load_state_dict(state)
    with pytest.raises(ValueError, match=r"only be continued on the same.*pools"):
        b.load_state_dict(state, continue_run=True)
    # a pooled run continued under new weights keeps its pool and draws on from it
    c = make(root, seqs=500, weights={"a": 0.4, "b": 0.4, "c": 0.2}, pool={"c": 0.5}, max_epochs={"c": 4})
    c.load_state_dict(state, continue_run=True)
    rest = keys(c)
    head = keys(a)[:10]
    drawn_c = [s for d, s in head + rest if d == 2]
    assert set(drawn_c) <= set(pool_members("c", 93, 46, 0, np.arange(46)).tolist())
    assert len(set(drawn_c[:46])) == 46

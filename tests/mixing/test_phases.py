"""Phases of a run and continuing a run under a new configuration (new mix, phases or a longer budget)."""

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
from path_plan import PathPlan
from resume_helper import assert_continuation, assert_resume_equals_suffix, item_key

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.mixing import Phase, domain_order, largest_remainder, prefix_deviation

L = 32
SIZES = {"a": 40_000, "b": 12_000, "c": 3_000}  # 1250 / 375 / 93 sequences of 32
AVAILABLE = [n // L for n in SIZES.values()]
W3 = {"a": 0.6, "b": 0.3, "c": 0.1}
ANNEAL = {"a": 0.2, "b": 0.5, "c": 0.3}
SLOW = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("phases") / "stores", SIZES)


def make(root: Path, weights: Any = None, seqs: int = 400, **kw: Any) -> ScaleAwareMixtureDataset:
    kw.setdefault("verify", "size")
    return ScaleAwareMixtureDataset(root, W3 if weights is None else weights, seqs * L, L, **kw)


def keys(ds: Any) -> list[tuple[int, int]]:
    return [item_key(x) for x in ds]


def assert_orders_continue(stream: list[tuple[int, int]], seed: int = 0) -> None:
    """Each domain's sequences, in stream order, are the first draws of its order: nothing skipped or repeated."""
    for d, name in enumerate("abc"):
        got = [s for dd, s in stream if dd == d]
        assert got == domain_order(name, AVAILABLE[d], len(got), seed).tolist()


weights_st = st.tuples(*[st.sampled_from([0.0, 0.05, 0.3, 1.0]) for _ in range(3)]).filter(lambda t: sum(t) > 0)


def _mix(raw: tuple[float, ...]) -> dict[str, float]:
    return {n: x / sum(raw) for n, x in zip("abc", raw, strict=True)}


# ----------------------------------------------------------------------------------- phases
@pytest.mark.timeout(60)
def test_one_phase_is_the_plain_dataset(root: Path) -> None:
    plain, phased = make(root, seqs=120, shuffle_window=5), make(root, [Phase(120 * L, W3)], seqs=120, shuffle_window=5)
    assert keys(phased) == keys(plain)
    assert phased.fingerprint == plain.fingerprint and phased.phase_bounds == [0, 120]


@pytest.mark.timeout(180)
@SLOW
@given(mixes=st.lists(st.tuples(weights_st, st.integers(1, 150)), min_size=2, max_size=3),
       world=st.integers(1, 4), data=st.data())
def test_phases_are_exact_low_discrepancy_and_continue_each_order(root: Path, mixes: list, world: int,
                                                                  data: st.DataObject) -> None:
    phases = [Phase(n * L, _mix(raw)) for raw, n in mixes]
    seqs = sum(n for _, n in mixes)
    ds = make(root, phases, seqs, max_epochs=8)
    full = keys(ds)
    assert len(full) == seqs and ds.phase_bounds == list(np.cumsum([0] + [n for _, n in mixes]))
    domains = np.asarray([d for d, _ in full])
    for p, (raw, n) in enumerate(mixes):  # each phase: exact largest-remainder counts, every prefix within 2
        a, b = ds.phase_bounds[p], ds.phase_bounds[p + 1]
        expected = largest_remainder(list(_mix(raw).values()), n)
        assert np.bincount(domains[a:b], minlength=3).tolist() == expected.tolist()
        assert prefix_deviation(domains[a:b], expected / n).max() < 2.0
    assert_orders_continue(full)  # each domain's order goes on across the phase boundaries
    cursor = data.draw(st.integers(0, seqs))
    state = json.loads(json.dumps(ds.state_dict(samples_taken=cursor)))
    assert state["phase"] == int(np.searchsorted(ds.phase_bounds, min(cursor, seqs - 1), side="right")) - 1
    resumed = []
    for r in range(world):  # a new world size resumes anywhere, across phase boundaries too
        part = make(root, phases, seqs, max_epochs=8, rank=r, world_size=world)
        part.load_state_dict(state)
        resumed.append(keys(part))
    merged = [resumed[(cursor + i) % world][i // world] for i in range(seqs - cursor)]
    assert merged == full[cursor:]


@pytest.mark.timeout(60)
def test_a_phase_plan_is_evaluated_at_its_own_budget(root: Path) -> None:
    class Plan:
        def weights_for_budget(self, n: float) -> dict[str, float]:
            return W3 if n > 100 * L else ANNEAL

    ds = make(root, [Phase(300 * L, Plan()), Phase(100 * L, Plan())])
    assert ds.config["phases"] == [{"budget_tokens": 300 * L, "weights": W3}, {"budget_tokens": 100 * L, "weights": ANNEAL}]
    assert ds.sequences_per_domain == {"a": 180 + 20, "b": 90 + 50, "c": 30 + 30}
    assert_resume_equals_suffix(lambda: make(root, [Phase(300 * L, Plan()), Phase(100 * L, Plan())]),
                                ks=[0, 299, 300, 301, 400])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("phases", "seqs", "message"), [
    ([Phase(100 * L, W3), Phase(200 * L, W3)], 400, r"phase budgets \[3200, 6400\] sum to 9600 tokens, not .*12800"),
    ([Phase(400 * L, W3), Phase(L // 2, W3)], 400, r"sum to"),
    ([Phase(L // 2, W3), Phase(399 * L + L // 2, W3)], 400, r"phase 0 \(16 tokens\) holds no whole sequence"),
    ([Phase(300 * L, W3), Phase(100 * L, {"a": 0.0, "b": 0.0, "c": 1.0})], 400,
     r"phase 1 asks more of domain 'c' than is left: by position 400 it would have drawn 130 sequences.*allows 93"),
    ([], 400, "phases is empty"),
])
def test_bad_phases(root: Path, phases: list, seqs: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(root, phases, seqs)


def test_bad_phase_values(root: Path) -> None:
    for bad in (0, -5, 1.5, "100"):
        with pytest.raises(ValueError, match="a phase's budget_tokens must be a positive integer"):
            Phase(bad, W3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be combined with phases"):
        make(root, [Phase(200 * L, W3), Phase(200 * L, W3)], schedule="anytime")


# ------------------------------------------------------------------------ continuing a run
@pytest.mark.timeout(300)
@SLOW
@given(raw1=weights_st, raw2=weights_st, seqs1=st.integers(1, 200), extra=st.integers(0, 150),
       world=st.integers(1, 4), world2=st.integers(1, 4), workers=st.integers(0, 2), frac=st.floats(0, 1),
       seed=st.integers(0, 2))
def test_continue_under_a_new_mix_or_budget_at_any_cursor(root: Path, raw1: tuple, raw2: tuple, seqs1: int,
                                                          extra: int, world: int, world2: int, workers: int,
                                                          frac: float, seed: int) -> None:
    w1, w2 = _mix(raw1), _mix(raw2)
    cursor = int(frac * seqs1) // world * world  # ranks save in step: a multiple of the old world size
    seqs2 = cursor + extra + (1 if cursor + extra == 0 else 0)
    old = make(root, w1, seqs1, seed=seed, max_epochs=8)
    prefix, rest = assert_continuation(
        lambda r, w: make(root, w1, seqs1, seed=seed, max_epochs=8, rank=r, world_size=w),
        lambda r, w, **kw: make(root, w2, seqs2, seed=seed, max_epochs=8, rank=r, world_size=w, **kw),
        cursor, world=world, world2=world2, workers=workers)
    assert prefix == keys(old)[:cursor]  # the consumed prefix stays as it was
    assert Counter(d for d, _ in rest) == Counter(  # the new mix on what is left of the new budget
        {d: c for d, c in enumerate(largest_remainder(list(w2.values()), seqs2 - cursor).tolist()) if c})
    assert_orders_continue(prefix + rest, seed)  # nothing repeats (beyond the epochs) or is skipped


@pytest.mark.timeout(120)
def test_a_continued_run_resumes_and_continues_again(root: Path) -> None:
    first = make(root, W3, 200)
    state = first.state_dict(samples_taken=150)
    second = make(root, ANNEAL, 300)
    second.load_state_dict(json.loads(json.dumps(state)), continue_run=True)
    assert len(second) == 150 and second.config["continued_from"]["cursor"] == 150
    rest = keys(second)
    assert keys(second) == rest  # later passes start at the continuation point
    # an ordinary resume of the continued run, on a dataset built with the configuration it continued under
    state2 = json.loads(json.dumps(second.state_dict(samples_taken=40)))
    again = make(root, ANNEAL, 300)
    again.load_state_dict(state2)
    assert keys(again) == rest[40:]
    built = make(root, ANNEAL, 300, continue_from=state2)  # the same through the constructor
    assert keys(built) == rest[40:] and built.fingerprint == second.fingerprint
    with pytest.raises(ValueError, match="budget of this configuration"):  # its record cannot apply here
        make(root, ANNEAL, 100, continue_from=state2)
    small = make(root, ANNEAL, 100)  # nor as a resume: the reason is named, the dataset is left as it was
    small_keys = keys(small)
    with pytest.raises(ValueError, match=r"different mixture .*; nor can it continue where the saved run was "
                                         r"continued: the budget of this configuration \(3200 tokens, 100 sequences\) "
                                         r"is smaller than the state's cursor \(150 .*continue_run=True"):
        small.load_state_dict(state2)
    assert keys(small) == small_keys and "continued_from" not in small.config
    assert_resume_equals_suffix(lambda: _continued(root, state), ks=[0, 1, 77, 150])
    # and a continued run continued once more (a larger budget at the weights of the start)
    third = make(root, W3, 420)
    third.load_state_dict(state2, continue_run=True)
    tail = keys(third)
    assert len(tail) == 420 - 190 and third.config["continued_from"]["cursor"] == 190
    assert_orders_continue(keys(first)[:150] + rest[:40] + tail)
    # continue_from= in the constructor: the supply check counts the prefix (here the full new mix at
    # 400 sequences would ask 160 of c, which holds 93; after the cursor it asks 60 + what c gave before)
    with pytest.raises(ValueError, match="domain 'c' is too short"):
        make(root, {"a": 0.3, "b": 0.3, "c": 0.4}, 400)
    cont = make(root, {"a": 0.3, "b": 0.3, "c": 0.4}, 400, continue_from=make(root, W3, 400).state_dict(samples_taken=300))
    assert cont.sequences_per_domain == {"a": 180 + 30, "b": 90 + 30, "c": 30 + 40}
    assert_orders_continue(keys(make(root, W3, 400))[:300] + keys(cont))


def _continued(root: Path, state: dict[str, Any]) -> ScaleAwareMixtureDataset:
    ds = make(root, ANNEAL, 300)
    ds.load_state_dict(json.loads(json.dumps(state)), continue_run=True)
    return ds


@pytest.mark.timeout(120)
def test_a_longer_budget_with_a_plan_takes_the_plans_weights_for_it(root: Path) -> None:
    class Plan:
        def weights_for_budget(self, n: float) -> dict[str, float]:
            return W3 if n <= 200 * L else ANNEAL

    state = make(root, Plan(), 200).state_dict(samples_taken=200)  # a finished run
    longer = make(root, Plan(), 300)
    longer.load_state_dict(state, continue_run=True)
    assert longer.weights == ANNEAL and len(longer) == 100
    assert Counter(d for d, _ in keys(longer)) == Counter({0: 20, 1: 50, 2: 30})
    same = make(root, [Phase(100 * L, W3), Phase(100 * L, ANNEAL)], 200)  # nothing left: an empty stream
    same.load_state_dict(state, continue_run=True)
    assert len(same) == 0 and keys(same) == []
    end = same.state_dict()
    assert (end["cursor"], end["domain_counts"], end["phase"]) == (200, state["domain_counts"], 1)


@pytest.mark.timeout(60)
def test_continue_errors(root: Path) -> None:
    state = make(root, W3, 200).state_dict(samples_taken=150)
    with pytest.raises(ValueError, match=r"different mixture .*weights.a: saved 0.6, now 0.2.*continue_run=True"):
        make(root, ANNEAL, 300).load_state_dict(state)
    with pytest.raises(ValueError, match=r"same stores, seq_len, seed and shuffle window; differences: seed: saved 0, now 1"):
        make(root, ANNEAL, 300, seed=1).load_state_dict(state, continue_run=True)
    with pytest.raises(ValueError, match=r"shuffle_window: saved 0, now 4"):
        make(root, ANNEAL, 300, shuffle_window=4).load_state_dict(state, continue_run=True)
    with pytest.raises(ValueError, match=r"stores.c.tokens: saved 2999, now 3000"):
        make(root, ANNEAL, 300).load_state_dict(
            dict(state, config={**state["config"], "stores": {**state["config"]["stores"],
                                                               "c": {**state["config"]["stores"]["c"], "tokens": 2999}}}),
            continue_run=True)
    with pytest.raises(ValueError, match=r"budget of this configuration \(3200 tokens, 100 sequences\) is smaller "
                                         r"than the state's cursor \(150"):
        make(root, ANNEAL, 100).load_state_dict(state, continue_run=True)
    with pytest.raises(ValueError, match=r"phase 0 asks more of domain 'c' than is left"):
        make(root, {"a": 0.0, "b": 0.0, "c": 1.0}, 300, continue_from=state)
    with pytest.raises(ValueError, match="do not describe 150 sequences"):
        make(root, ANNEAL, 300).load_state_dict(dict(state, domain_counts={"a": 1, "b": 2, "c": 3}), continue_run=True)
    ds = make(root, ANNEAL, 300)  # a failed continuation leaves the dataset as it was
    before = keys(ds)
    with pytest.raises(ValueError):
        ds.load_state_dict(state | {"cursor": 10**6}, continue_run=True)
    assert keys(ds) == before and "continued_from" not in ds.config


# ------------------------------------------------------------------------- at a large budget
@pytest.mark.timeout(120)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(frac=st.floats(0, 1), world=st.integers(1, 4), phased=st.booleans(), window=st.sampled_from([0, 64]))
def test_resume_anywhere_in_a_trillion_token_stream(root: Path, frac: float, world: int, phased: bool,
                                                    window: int) -> None:
    seqs = 10**12 // L
    weights = [Phase(seqs // 2 * L, W3), Phase(seqs // 2 * L, ANNEAL)] if phased else W3
    opts = {"max_epochs": 10**10, "shuffle_window": window}
    ds = make(root, weights, seqs, **opts)
    assert ds.index_nbytes < 4096
    cursor = min(seqs - 8 * world, int(frac * seqs))
    state = json.loads(json.dumps(ds.state_dict(samples_taken=cursor)))
    counts = np.asarray(list(state["domain_counts"].values()))
    assert counts.sum() == cursor and state["phase"] == (int(cursor >= seqs // 2) if phased else 0)
    ds.load_state_dict(state)
    it = iter(ds)
    expected = [item_key(next(it)) for _ in range(8 * world)]
    parts = []
    for r in range(world):
        part = make(root, weights, seqs, rank=r, world_size=world, **opts)
        part.load_state_dict(state)
        pit = iter(part)
        parts.append(((r - cursor) % world, [item_key(next(pit)) for _ in range(8)]))
    merged = [k for group in zip(*[p for _, p in sorted(parts)], strict=True) for k in group]
    assert merged == expected
    after = ds.state_dict(samples_taken=8 * world)  # the counts move on by what those samples hold
    moved = np.asarray(list(after["domain_counts"].values())) - counts
    assert moved.tolist() == np.bincount([d for d, _ in expected], minlength=3).tolist()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cursor", [0, 37, 250, 400])
def test_continue_between_the_anytime_schedule_and_a_fixed_mix(root: Path, cursor: int) -> None:
    anytime = make(root, PathPlan(L), 400, schedule="anytime")
    full = keys(anytime)
    # an anytime run continued under a fixed mix: the prefix is the anytime stream's
    state = make(root, PathPlan(L), 400, schedule="anytime").state_dict(samples_taken=cursor)
    fixed = make(root, W3, 500)
    fixed.load_state_dict(state, continue_run=True)
    rest = keys(fixed)
    assert Counter(d for d, _ in rest) == Counter(
        {d: c for d, c in enumerate(largest_remainder(list(W3.values()), 500 - cursor).tolist()) if c})
    assert_orders_continue(full[:cursor] + rest)
    # a fixed run continued under the anytime schedule: after the cursor, the path's own segments
    state = make(root, W3, 400).state_dict(samples_taken=cursor)
    cont = make(root, PathPlan(L), 400, schedule="anytime", continue_from=state)
    tail = keys(cont)
    assert len(tail) == 400 - cursor
    assert_orders_continue(keys(make(root, W3, 400))[:cursor] + tail)
    # the segment the cursor cuts is re-planned at its own mix; every later one is the path's own
    nxt = int(next((b for b in anytime._stream.starts.tolist() if b > cursor), 400))
    assert [d for d, _ in tail[nxt - cursor:]] == [d for d, _ in full[nxt:]]

"""Properties of the pure-numpy mixing layer: budgets, interleave, orders, index."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stream_reference import reference_stream

from autoscale_data.mixing import (
    InterleaveTree,
    MixtureStream,
    allocation_path,
    anytime_counts_and_stream,
    anytime_segments,
    check_supply,
    christoffel_mask,
    domain_order,
    feistel_permute,
    interleave,
    largest_remainder,
    path_deviation,
    prefix_deviation,
    sequence_budget,
    validate_weights,
    window_permutation,
)
from autoscale_data.mixing.interleave import floor_share

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def weight_vectors(draw: st.DrawFn, max_domains: int = 8) -> np.ndarray:
    """Random probability vectors that may hold exact zeros and tiny (1e-4) weights."""
    n = draw(st.integers(1, max_domains))
    raw = draw(st.lists(st.sampled_from([0.0, 1e-4, 0.01, 0.1, 0.3, 1.0, 2.5]) | st.floats(0, 5),
                        min_size=n, max_size=n))
    w = np.asarray(raw, dtype=np.float64)
    if w.sum() <= 0:
        w[draw(st.integers(0, n - 1))] = 1.0
    return w / w.sum()


# ----------------------------------------------------------------------------------- budget
@FAST
@given(weight_vectors(), st.integers(0, 200_000))
def test_largest_remainder_is_exact(w: np.ndarray, total: int) -> None:
    counts = largest_remainder(w, total)
    assert counts.sum() == total
    assert np.all(counts >= 0)
    assert np.all(np.abs(counts - w * total) < 1.0 + 1e-9)
    assert np.all(counts[w == 0] == 0)


@FAST
@given(weight_vectors(), st.integers(0, 10_000))
def test_largest_remainder_of_a_mapping_is_a_dict_in_its_order(w: np.ndarray, total: int) -> None:
    named = {f"d{i}": float(x) for i, x in reversed(list(enumerate(w)))}
    counts = largest_remainder(named, total)
    assert list(counts) == list(named) and all(type(c) is int for c in counts.values())
    assert list(counts.values()) == largest_remainder(list(named.values()), total).tolist()


def test_sequence_budget_uses_whole_sequences() -> None:
    total, counts = sequence_budget([0.7, 0.3], 50_000_000, 2048)
    assert total == 50_000_000 // 2048
    assert counts.tolist() == [17090, 7324]


@pytest.mark.parametrize("seq_len", [0, -5])
def test_seq_len_must_be_positive(seq_len: int) -> None:
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        sequence_budget([1.0], 1000, seq_len)


def test_budget_smaller_than_one_sequence() -> None:
    with pytest.raises(ValueError, match="budget_tokens=100 is smaller than one sequence of seq_len=2048"):
        sequence_budget([1.0], 100, 2048)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"a": -0.1, "b": 1.1}, "weight of domain 'a' is negative"),
        ({"a": float("nan"), "b": 0.5}, "weight of domain 'a' is nan"),
        ({"a": 0.5, "b": 0.4}, "they sum to 0.9"),
        ({"a": 0.5, "b": 0.25, "zzz": 0.25}, r"unknown domain\(s\) \['zzz'\]"),
        ({"a": 1.0}, r"missing domain\(s\) \['b'\]"),
        ({"a": "x", "b": 1.0}, "weight of domain 'a' is not a number"),
    ],
)
def test_validate_weights_errors(weights: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_weights(weights, ["a", "b"])


def test_check_supply_messages() -> None:
    with pytest.raises(ValueError, match=r"domain 'web' is empty"):
        check_supply("web", 3, 0, 64, None)
    with pytest.raises(ValueError, match=r"domain 'web' is too short: it has 640 tokens \(10 whole sequences of 64\).* asks 1280 tokens"):
        check_supply("web", 20, 10, 64, None)
    check_supply("web", 20, 10, 64, 2.0)  # allowed with an explicit epoch cap
    with pytest.raises(ValueError, match="raise max_epochs above 1.5"):
        check_supply("web", 20, 10, 64, 1.5)


# ------------------------------------------------------------------------------- interleave
@FAST
@given(st.integers(1, 500), st.data())
def test_christoffel_prefix_is_rounded_share(n: int, data: st.DataObject) -> None:
    n_a = data.draw(st.integers(0, n))
    mask = christoffel_mask(n, n_a)
    cum = np.cumsum(mask)
    t = np.arange(1, n + 1)
    assert cum[-1] == n_a
    assert np.all(np.abs(cum - t * n_a / n) <= 0.5 + 1e-12)


_WORST: list[float] = []


@settings(max_examples=150, deadline=None)
@given(weight_vectors(), st.integers(1, 30_000))
def test_interleave_exact_counts_and_prefix_bound(w: np.ndarray, total: int) -> None:
    counts = largest_remainder(w, total)
    stream = interleave(counts)
    assert stream.size == total
    assert np.bincount(stream, minlength=w.size).tolist() == counts.tolist()
    dev = prefix_deviation(stream, counts / total).max()
    _WORST.append(float(dev))
    assert dev < 2.0, f"prefix deviation {dev} for counts {counts.tolist()}"
    assert np.array_equal(stream, interleave(counts))  # depends only on the counts


def test_interleave_worst_deviation_over_random_mixtures(capsys: pytest.CaptureFixture[str]) -> None:
    """A broad seeded scan (many domains, skewed weights); reports the worst deviation seen."""
    rng = np.random.default_rng(2024)
    worst_counts, worst_weights = 0.0, 0.0
    for _ in range(300):
        m = int(rng.integers(2, 10))
        w = rng.dirichlet(np.full(m, rng.uniform(0.05, 3.0)))
        total = int(rng.integers(10, 50_000))
        counts = largest_remainder(w, total)
        stream = interleave(counts)
        worst_counts = max(worst_counts, prefix_deviation(stream, counts / total).max())
        worst_weights = max(worst_weights, prefix_deviation(stream, w).max())
    with capsys.disabled():
        hyp = f", hypothesis cases: {max(_WORST):.3f}" if _WORST else ""
        print(f"\n[interleave] worst prefix deviation vs count shares {worst_counts:.3f}, "
              f"vs raw weights {worst_weights:.3f}{hyp}")
    assert worst_counts < 2.0
    assert worst_weights < 2.0


def test_interleave_single_domain_and_zero_counts() -> None:
    assert interleave([0, 5, 0]).tolist() == [1] * 5
    with pytest.raises(ValueError):
        interleave([0, 0])


# -------------------------------------------------------------------------- orders / index
@FAST
@given(st.integers(1, 300), st.integers(0, 1000), st.integers(0, 2**32))
def test_domain_order_without_replacement_per_epoch(available: int, needed: int, seed: int) -> None:
    order = domain_order("web", available, needed, seed)
    assert order.size == needed
    for e in range(math.ceil(needed / available)):
        epoch = order[e * available : (e + 1) * available]
        assert len(set(epoch.tolist())) == epoch.size  # no repeat inside an epoch
        assert epoch.max(initial=0) < available
    assert np.array_equal(order, domain_order("web", available, needed, seed))


def test_domain_order_depends_on_name_and_seed() -> None:
    a = domain_order("web", 1000, 1000, 0)
    assert not np.array_equal(a, domain_order("code", 1000, 1000, 0))
    assert not np.array_equal(a, domain_order("web", 1000, 1000, 1))
    two = domain_order("web", 1000, 2000, 0)
    assert not np.array_equal(two[:1000], two[1000:])  # a fresh permutation per epoch


@FAST
@given(st.integers(0, 5000), st.integers(1, 300), st.integers(0, 100))
def test_window_permutation_stays_in_window(total: int, window: int, seed: int) -> None:
    perm = window_permutation(total, window, seed)
    assert sorted(perm.tolist()) == list(range(total))
    assert np.all(perm // window == np.arange(total) // window)


@FAST
@given(st.lists(st.integers(0, 400), min_size=1, max_size=8), st.data())
def test_the_closed_form_interleave_is_the_materialized_one(counts: list[int], data: st.DataObject) -> None:
    if sum(counts) == 0:
        counts[0] = 1
    tree, stream = InterleaveTree(counts), interleave(counts)
    domains, ranks = tree.locate(np.arange(sum(counts)))
    assert np.array_equal(domains, stream)
    for d, n in enumerate(counts):  # the within-domain ranks number each domain's positions in order
        assert np.array_equal(ranks[domains == d], np.arange(n))
    for t in data.draw(st.lists(st.integers(0, sum(counts)), max_size=6)) + [0, sum(counts)]:
        assert tree.prefix_counts(t).tolist() == np.bincount(stream[:t], minlength=len(counts))[: len(counts)].tolist()


@FAST
@given(st.integers(1, 2**40), st.data())
def test_floor_share_is_exact_beyond_int64_products(n: int, data: st.DataObject) -> None:
    n_a = data.draw(st.integers(0, n))
    p = np.asarray(data.draw(st.lists(st.integers(0, n), min_size=1, max_size=20)), dtype=np.int64)
    got = floor_share(p, n_a, n)
    assert got.tolist() == [(2 * int(x) * n_a + n) // (2 * n) for x in p]


@FAST
@given(st.integers(1, 5000), st.integers(0, 2**64 - 1))
def test_feistel_is_a_bijection_of_any_size(n: int, key: int) -> None:
    image = feistel_permute(np.arange(n), n, key)
    assert sorted(image.tolist()) == list(range(n))
    assert np.array_equal(image, feistel_permute(np.arange(n), n, key))  # deterministic
    if n >= 64:
        assert not np.array_equal(image, np.arange(n))


@st.composite
def segment_plans(draw: st.DrawFn) -> tuple[list[int], np.ndarray, list[int], list[int], int]:
    """Random segments (1-4), per-domain counts (2-5 domains, zeros allowed), bases and supplies."""
    d = draw(st.integers(2, 5))
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = draw(st.lists(st.integers(0, 300), min_size=d, max_size=d))
        if sum(row) == 0:
            row[draw(st.integers(0, d - 1))] = 1
        rows.append(row)
    counts = np.asarray(rows, dtype=np.int64)
    origin = draw(st.integers(0, 50))
    base = draw(st.lists(st.integers(0, 40), min_size=d, max_size=d))
    origin = sum(base)
    starts = (origin + np.concatenate([[0], np.cumsum(counts.sum(axis=1))])).tolist()
    total = counts.sum(axis=0) + np.asarray(base)
    available = [max(1, int(t) // draw(st.sampled_from([1, 2, 3])) + draw(st.integers(0, 5))) for t in total]
    return starts, counts, base, available, draw(st.sampled_from([0, 1, 7, 64]))


@FAST
@given(segment_plans(), st.integers(0, 5))
def test_the_closed_form_stream_is_the_materialized_reference(plan: tuple, seed: int) -> None:
    starts, counts, base, available, window = plan
    names = [f"d{i}" for i in range(counts.shape[1])]
    stream = MixtureStream(names, available, seed, starts, counts, base=base, shuffle_window=window)
    ref_d, ref_s = reference_stream(names, available, seed, starts, counts, base, window)
    positions = np.arange(starts[0], starts[-1])
    domains, sequences = stream.lookup(positions)
    assert np.array_equal(domains, ref_d) and np.array_equal(sequences.astype(np.int64), ref_s)
    single = positions[:: max(1, positions.size // 7)]
    assert [stream[int(p)] for p in single] == [(int(d), int(s)) for d, s in zip(ref_d[single - starts[0]],
                                                                                     ref_s[single - starts[0]],
                                                                                     strict=True)]
    for cursor in {starts[0], starts[-1], *starts, *(single + 1).tolist()}:
        expected = np.asarray(base) + np.bincount(ref_d[: cursor - starts[0]], minlength=len(names))
        assert stream.domain_counts(int(cursor)).tolist() == expected.tolist()
    for d in range(len(names)):  # no sequence repeats before the domain's every sequence was drawn
        uses = np.bincount(ref_s[ref_d == d], minlength=available[d])
        assert uses.size == available[d] and (uses.max() - uses.min() <= 1 or base[d] > 0)
        if base[d] + counts[:, d].sum() <= available[d]:
            assert uses.max() <= 1
    if window <= 1:  # every prefix of every segment within the interleave's bound of the segment's shares
        for j in range(counts.shape[0]):
            seg = ref_d[starts[j] - starts[0] : starts[j + 1] - starts[0]]
            assert prefix_deviation(seg, counts[j] / counts[j].sum()).max() < 2.0
    with pytest.raises(ValueError, match="positions must lie in the stream"):
        stream.lookup(np.asarray([starts[-1]]))


def test_the_stream_at_a_15t_token_budget_holds_a_few_kb() -> None:
    weights = [0.67, 0.15, 0.045, 0.045, 0.045, 0.025, 0.02]
    total = 15 * 10**12 // 2048
    counts = largest_remainder(weights, total)
    available = [5_000_000_000, 2_000_000_000, 700_000_000, 400_000_000, 400_000_000, 200_000_000, 200_000_000]
    names = [f"d{i}" for i in range(7)]
    stream = MixtureStream(names, available, 0, [0, total], counts[None, :])
    assert stream.nbytes < 4096
    assert stream.domain_counts(total).tolist() == counts.tolist()
    tail = np.arange(total - 5000, total)
    d, s = stream.lookup(tail)
    tree = InterleaveTree(counts)
    assert np.array_equal(d, tree.locate(tail)[0])
    assert np.all(s < np.asarray(available, dtype=np.uint64)[d])
    for t in (1, 12345, total // 3, total - 1):  # shares of big prefixes within the interleave's bound
        assert np.all(np.abs(stream.domain_counts(t) - counts / total * t) < 2.0)


# --------------------------------------------------------------------------- anytime schedule
class PowerLawPlan:
    """A fake plan on the projection path ``N_i(t) = A1_i * (A2_i / A1_i)**t``; the budget picks ``t``."""

    def __init__(self, a1: Sequence[float], a2: Sequence[float]) -> None:
        self.a, self.r = np.asarray(a1, dtype=float), np.asarray(a2, dtype=float) / np.asarray(a1, dtype=float)

    def allocation_for_budget(self, n: float) -> dict[str, float]:
        from scipy.optimize import brentq

        t = brentq(lambda t: float(np.sum(self.a * self.r**t)) - n, -60.0, 10.0, xtol=1e-14)
        alloc = self.a * self.r**t
        alloc *= n / alloc.sum()
        return {f"d{i}": float(x) for i, x in enumerate(alloc)}


def _plan(total: int, s1: float, s2: float, seq_len: int) -> PowerLawPlan:
    n1, n2 = total * seq_len / 100, total * seq_len
    return PowerLawPlan((s1 * n1, (1 - s1) * n1), (s2 * n2, (1 - s2) * n2))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40_000), st.floats(0.05, 0.95), st.floats(0.05, 0.95))
def test_anytime_schedule_follows_the_path(total: int, s1: float, s2: float) -> None:
    plan = _plan(total, s1, s2, 16)
    names = ["d0", "d1"]
    counts, stream = anytime_counts_and_stream(plan, names, total, 16)
    assert counts.sum() == total == stream.size
    assert np.bincount(stream, minlength=2).tolist() == counts.tolist()
    final = plan.allocation_for_budget(total * 16.0)
    assert np.all(np.abs(counts - np.asarray([final[n] for n in names]) / 16) < 1.0 + 1e-6)
    grid, targets = allocation_path(plan, names, total, 16)
    dev = path_deviation(stream, grid, targets).max()
    _PATH_WORST.append(float(dev))
    assert dev < 2.0, dev
    phased = _segment_stream(plan, names, total, 16, counts)  # the dataset's stream: the path as short phases
    dev = path_deviation(phased, grid, targets).max()
    _PHASED_WORST.append(float(dev))
    assert dev < 2.0, dev


def _segment_stream(plan: object, names: list[str], total: int, seq_len: int, counts: np.ndarray) -> np.ndarray:
    """The anytime stream as the dataset builds it (many short phases), materialized; checks the phases."""
    starts, rows = anytime_segments(plan, names, total, seq_len)
    assert starts[0] == 0 and starts[-1] == total and np.all(np.diff(starts) > 0)
    assert np.all(rows >= 0) and np.array_equal(rows.sum(axis=1), np.diff(starts))
    assert np.array_equal(rows.sum(axis=0), counts)  # the same end point as anytime_counts_and_stream
    return np.concatenate([interleave(r) for r in rows])


_PATH_WORST: list[float] = []
_PHASED_WORST: list[float] = []


def test_anytime_report_worst_path_deviation(capsys: pytest.CaptureFixture[str]) -> None:
    total, seq_len = 200_000, 2048
    n1, n2 = total * seq_len / 1000, total * seq_len
    plan = PowerLawPlan((0.2 * n1, 0.5 * n1, 0.3 * n1), (0.6 * n2, 0.3 * n2, 0.1 * n2))
    names = ["d0", "d1", "d2"]
    counts, stream = anytime_counts_and_stream(plan, names, total, seq_len)
    grid, targets = allocation_path(plan, names, total, seq_len)
    dev = path_deviation(stream, grid, targets)
    phased = _segment_stream(plan, names, total, seq_len, counts)
    dev_phased = path_deviation(phased, grid, targets)
    shares_early = np.bincount(phased[:200], minlength=3) / 200
    shares_late = counts / counts.sum()
    with capsys.disabled():
        hyp = f"; hypothesis cases worst {max(_PATH_WORST):.3f}" if _PATH_WORST else ""
        hyp2 = f"; hypothesis cases worst {max(_PHASED_WORST):.3f}" if _PHASED_WORST else ""
        print(f"\n[anytime] worst per-prefix deviation from the allocation path {dev.max():.3f}{hyp}; "
              f"as short phases (the dataset's stream) {dev_phased.max():.3f}{hyp2}; "
              f"shares first 200 {np.round(shares_early, 3).tolist()} -> final {np.round(shares_late, 3).tolist()}")
    assert dev.max() < 2.0 and dev_phased.max() < 2.0
    assert shares_early[0] < 0.4 < shares_late[0]  # the growing domain ramps up along the path


@settings(max_examples=20, deadline=None)
@given(st.integers(50, 20_000), st.floats(0.05, 0.6), st.floats(0.3, 0.95))
def test_anytime_schedule_follows_the_monotone_envelope_of_a_decreasing_plan(total: int, a1: float,
                                                                               drop: float) -> None:
    from autoscale_data.solver import MixturePlan

    seq_len = 16
    n1, n2 = total * seq_len / 10, total * seq_len / 2
    b1 = (1 - a1) * n1
    b2 = b1 * drop  # domain b's optimum shrinks from N1 to N2 (noisy DDO optima can do that)
    plan = MixturePlan.from_scales([(n1, {"a": a1 * n1, "b": b1}), (n2, {"a": n2 - b2, "b": b2})],
                                   allow_decreasing=True)
    names = ["a", "b"]
    counts, stream = anytime_counts_and_stream(plan, names, total, seq_len)
    final = plan.allocation_for_budget(total * seq_len)
    assert counts.sum() == total == stream.size
    assert np.bincount(stream, minlength=2).tolist() == counts.tolist()
    assert np.all(np.abs(counts - np.asarray([final[n] for n in names]) / seq_len) < 1.0 + 1e-6)
    grid, targets = allocation_path(plan, names, total, seq_len)
    assert np.all(np.diff(targets, axis=0) >= -1e-9)  # monotone in every domain
    assert np.allclose(targets.sum(axis=1), grid, rtol=1e-6, atol=1e-6)  # ... and the rows still sum to s
    assert targets[:, 1].max() <= final["b"] / seq_len * (1 + 1e-9)  # b never runs ahead of what it ends with
    assert path_deviation(stream, grid, targets).max() < 2.0
    assert path_deviation(_segment_stream(plan, names, total, seq_len, counts), grid, targets).max() < 2.0


def test_the_envelope_of_a_monotone_plan_is_its_path() -> None:
    total, seq_len = 5_000, 16
    plan = _plan(total, 0.3, 0.8, seq_len)
    grid, targets = allocation_path(plan, ["d0", "d1"], total, seq_len)
    for s, row in zip(grid[1:], targets[1:], strict=True):
        alloc = plan.allocation_for_budget(s * seq_len)
        assert row == pytest.approx([alloc["d0"] / seq_len, alloc["d1"] / seq_len], rel=1e-9)

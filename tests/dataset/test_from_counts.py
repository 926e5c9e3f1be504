"""Planned counts (``ScaleAwareMixtureDataset.from_counts``): the stream of given whole sequences per domain is the
stream of the shares that produced them (their largest-remainder split), with no shares in between; the runner's
former path (shares ``count / total``) gives the very dataset, fingerprint included, so its checkpoints resume."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_store import write_synthetic_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from resume_helper import item_key

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.mixing import largest_remainder

L = 16
SIZES = {"a": 8_000, "b": 3_200, "c": 1_600}  # 500 / 200 / 100 sequences of 16
CAPS = {"max_epochs": 4}  # any mix below fits: 300 sequences at most


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("counts") / "stores", SIZES)


def _keys(ds: ScaleAwareMixtureDataset) -> list[tuple[int, int]]:
    return [item_key(x) for x in ds]


shares_st = st.tuples(*[st.integers(0, 20) for _ in SIZES]).filter(lambda t: sum(t) > 0).map(
    lambda t: {n: x / sum(t) for n, x in zip(SIZES, t, strict=True)})


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shares=shares_st, total=st.integers(1, 300), seed=st.integers(0, 3), batch=st.sampled_from([None, 4]),
       window=st.sampled_from([0, 8]))
def test_the_stream_of_counts_is_the_stream_of_the_shares_that_made_them(
        root: Path, shares: dict[str, float], total: int, seed: int, batch: int | None, window: int) -> None:
    counts = largest_remainder(shares, total)
    opts = {**CAPS, "batch_size": batch, "shuffle_window": window, "output": "numpy", "verify": "size"}
    by_shares = ScaleAwareMixtureDataset(root, shares, total * L, L, seed, **opts)
    by_counts = ScaleAwareMixtureDataset.from_counts(root, counts, L, seed, **opts)
    assert by_counts.sequences_per_domain == counts == by_shares.sequences_per_domain
    assert by_counts.total_sequences == total and by_counts.budget_tokens == total * L
    assert _keys(by_counts) == _keys(by_shares)
    # the runner's former path (the counts' own shares) is the same dataset: config, fingerprint, state
    own = ScaleAwareMixtureDataset(root, {n: c / total for n, c in counts.items()}, total * L, L, seed, **opts)
    assert by_counts.weights == own.weights and by_counts.config == own.config
    assert by_counts.fingerprint == own.fingerprint
    per_step = batch or 1
    assert by_counts.state_dict(step=0, samples_per_step=per_step) == own.state_dict(step=0, samples_per_step=per_step)


@pytest.mark.timeout(60)
def test_a_counts_dataset_resumes_a_state_of_the_shares_dataset_of_the_runner(root: Path) -> None:
    counts = {"a": 37, "b": 0, "c": 11}
    own = ScaleAwareMixtureDataset(root, {n: c / 48 for n, c in counts.items()}, 48 * L, L, 2, batch_size=4)
    it = iter(own)
    for _ in range(5):
        next(it)
    state = own.state_dict(step=5)
    again = ScaleAwareMixtureDataset.from_counts(root, counts, L, 2, batch_size=4)
    again.load_state_dict(state, step=5)
    assert _keys(again) == [item_key(x) for x in it]


@pytest.mark.parametrize(("counts", "kw", "needle"), [
    ({"a": 3, "b": -1, "c": 0}, {}, r"counts \{'b': -1\} are invalid: expected whole numbers of sequences >= 0"),
    ({"a": 3, "b": 1.5, "c": 0}, {}, r"counts \{'b': 1.5\} are invalid"),
    ({"a": 3, "b": True, "c": 0}, {}, r"counts \{'b': True\} are invalid"),
    ({"a": 0, "b": 0, "c": 0}, {}, r"expected at least one sequence in all"),
    ({"a": 3, "b": 1, "c": 0, "zzz": 2}, {}, r"counts name unknown domain\(s\) \['zzz'\]"),
    ({"a": 3, "b": 1}, {}, r"counts are missing domain\(s\) \['c'\]; give every domain a count \(0 to skip it\)"),
    ([3, 1, 0], {}, r"counts = \[3, 1, 0\] is invalid: expected a mapping"),
    ({"a": 3, "b": 1, "c": 0}, {"schedule": "anytime"}, r"planned counts are a fixed schedule"),
    ({"a": 3, "b": 1, "c": 0}, {"seq_len": 0}, r"seq_len"),
])
def test_bad_counts_are_refused_naming_them(root: Path, counts, kw: dict, needle: str) -> None:
    seq_len = kw.pop("seq_len", L)
    with pytest.raises(ValueError, match=needle):
        ScaleAwareMixtureDataset.from_counts(root, counts, seq_len, 0, **kw)


def test_counts_too_large_for_a_domain_are_refused_as_weights_are(root: Path) -> None:
    with pytest.raises(ValueError, match="'c'"):
        ScaleAwareMixtureDataset.from_counts(root, {"a": 1, "b": 1, "c": 101}, L, 0)

"""ScaleAwareMixtureDataset / MixtureValidationDataset: exactness, partitioning, resume, errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers_store import write_synthetic_store, write_synthetic_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loader_run import LoaderRun
from path_plan import PathPlan
from resume_helper import assert_resume_equals_suffix, interleave_ranks, item_key, take
from torch.utils.data import DataLoader

from autoscale_data.dataset import MixtureValidationDataset, ScaleAwareMixtureDataset
from autoscale_data.mixing import prefix_deviation
from autoscale_data.store import TokenStore

L = 32
SIZES = {"a": 40_000, "b": 12_000, "c": 3_000}  # 1250 / 375 / 93 sequences of 32; "a" spans 3 shards
W3 = {"a": 0.6, "b": 0.3, "c": 0.1}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("mix") / "stores", SIZES)


def make(root: Path, weights: dict[str, float] | None = None, seqs: int = 400, **kw: Any) -> ScaleAwareMixtureDataset:
    kw.setdefault("verify", "size")
    return ScaleAwareMixtureDataset(root, weights or W3, seqs * L, L, **kw)


def keys(ds: Any) -> list[Any]:
    return [item_key(x) for x in ds]


def flat(batches: list[Any]) -> list[tuple[int, int]]:
    return [k for b in batches for k in (b if isinstance(b, tuple) and b and isinstance(b[0], tuple) else [b])]


# ------------------------------------------------------------------------------ the stream
@pytest.mark.timeout(60)
def test_totals_no_duplicates_and_content(root: Path) -> None:
    ds = make(root, seqs=1000, max_epochs={"c": 2})
    assert ds.domain_names == ["a", "b", "c"]
    assert ds.sequences_per_domain == {"a": 600, "b": 300, "c": 100} and len(ds) == ds.total_sequences == 1000
    # "c" holds 93 sequences: 100 need a second epoch -> without max_epochs this was an error
    samples = list(make(root, seqs=400))
    assert len({item_key(s) for s in samples}) == 400
    stores = {n: TokenStore(root / n) for n in SIZES}
    for s in samples[:50]:
        expected = stores[ds.domain_names[s["domain"]]].train.sequence(s["seq_index"], L)
        assert s["input_ids"].dtype == torch.int64 and s["input_ids"].shape == (L,)
        assert np.array_equal(s["input_ids"].numpy(), expected)
        assert np.array_equal(s["input_ids"].numpy(), expected)
        assert s["labels"] is s["input_ids"]


@pytest.mark.timeout(60)
def test_short_domain_allowed_with_max_epochs(root: Path) -> None:
    ds = make(root, seqs=1000, max_epochs={"c": 2})
    got = keys(ds)
    assert Counter(d for d, _ in got) == Counter({0: 600, 1: 300, 2: 100})
    c = [s for d, s in got if d == 2]
    assert len(set(c[:93])) == 93 and len(set(c[93:])) == 7  # whole first epoch before any repeat


@pytest.mark.timeout(60)
@pytest.mark.parametrize("output", ["numpy", "compact"])
def test_output_modes(root: Path, output: str) -> None:
    ref = next(iter(make(root)))
    x = next(iter(make(root, output=output)))
    if output == "numpy":
        assert isinstance(x["input_ids"], np.ndarray) and x["input_ids"].dtype == np.int64
        assert np.array_equal(x["input_ids"], ref["input_ids"].numpy())
    else:
        assert x["input_ids"].dtype == torch.uint16
        assert torch.equal(x["input_ids"].long(), ref["input_ids"])
    b = next(iter(make(root, output=output, batch_size=5)))
    assert tuple(b["input_ids"].shape) == (5, L)
    assert item_key(b)[0] == item_key(ref)


@pytest.mark.timeout(60)
def test_plan_object_weights(root: Path) -> None:
    class Plan:
        def weights_for_budget(self, n: int) -> dict[str, float]:
            assert n == 400 * L
            return {"a": 0.5, "b": 0.5, "c": 0.0}

    ds = make(root, Plan())
    assert ds.weights == {"a": 0.5, "b": 0.5, "c": 0.0}
    assert ds.sequences_per_domain == {"a": 200, "b": 200, "c": 0}


weights_st = st.tuples(*[st.sampled_from([0.0, 1e-4, 0.05, 0.3, 1.0]) for _ in range(3)]).filter(lambda t: sum(t) > 0)


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(raw=weights_st, seqs=st.integers(1, 500), world=st.integers(1, 8), world2=st.integers(1, 8),
       window=st.sampled_from([0, 5]), frac=st.floats(0, 1), data=st.data())
def test_partition_resume_and_resize(root: Path, raw: tuple[float, ...], seqs: int, world: int, world2: int,
                                     window: int, frac: float, data: st.DataObject) -> None:
    total = sum(raw)
    w = dict(zip("abc", (x / total for x in raw), strict=False))
    opts = {"max_epochs": 6, "shuffle_window": window, "seed": data.draw(st.integers(0, 3))}
    full = keys(make(root, w, seqs, **opts))
    ds0 = make(root, w, seqs, **opts)
    counts = ds0.sequences_per_domain
    assert len(full) == len(set(full)) + sum(max(0, c - n // L) for c, n in zip(counts.values(), SIZES.values(), strict=False))
    assert Counter(d for d, _ in full) == Counter({i: c for i, c in enumerate(counts.values()) if c})
    if window == 0:
        shares = np.asarray(list(counts.values())) / len(full)
        assert prefix_deviation(np.asarray([d for d, _ in full]), shares).max() < 2.0
    # ranks take strided slices that together are the stream
    ranks = [make(root, w, seqs, rank=r, world_size=world, **opts) for r in range(world)]
    streams = [keys(r) for r in ranks]
    assert [len(s) for s in streams] == [len(r) for r in ranks]
    assert interleave_ranks(streams) == full
    # every rank takes k samples (in step), the state is saved, and a new world size resumes
    k = int(frac * min(len(s) for s in streams))
    it = iter(ranks[0])
    take(it, k)
    state = json.loads(json.dumps(ranks[0].state_dict()))
    other = ranks[1 % world].state_dict(samples_taken=k)
    assert (state["cursor"], state["domain_counts"]) == (other["cursor"], other["domain_counts"])
    cursor = state["cursor"]
    assert cursor == min(k * world, len(full))
    assert list(state["domain_counts"].values()) == [sum(1 for d, _ in full[:cursor] if d == i) for i in range(3)]
    resumed = []
    for r in range(world2):
        ds = make(root, w, seqs, rank=r, world_size=world2, **opts)
        ds.load_state_dict(state)
        resumed.append((r - cursor) % world2 and ((r - cursor) % world2, keys(ds)) or (0, keys(ds)))
    assert interleave_ranks([s for _, s in sorted(resumed)]) == full[cursor:]


@pytest.mark.timeout(60)
def test_resume_at_every_k_in_process(root: Path) -> None:
    assert_resume_equals_suffix(lambda: make(root, seqs=60, seed=5), ks=range(0, 61))
    assert_resume_equals_suffix(lambda: make(root, seqs=60, batch_size=7), ks=range(0, 10))
    assert_resume_equals_suffix(lambda: make(root, seqs=60, rank=1, world_size=3), ks=range(0, 21, 4))


class _AllRanks:
    """The ranks ``0..W-1`` of one mixture read together in stream order (a stateful iterable for the
    resume helper; its state, after a multiple of ``W`` items, is the ranks' common state)."""

    def __init__(self, root: Path, world: int, **kw: Any) -> None:
        self.ranks = [make(root, seqs=60, rank=r, world_size=world, **kw) for r in range(world)]
        self.cursor = 0
        self.taken = 0

    def __iter__(self) -> Any:
        world = len(self.ranks)
        order = sorted(range(world), key=lambda r: (r - self.cursor) % world)  # who owns the next position
        for item in interleave_ranks([list(self.ranks[r]) for r in order]):
            self.taken += 1
            yield item

    def state_dict(self) -> dict[str, Any]:
        world = len(self.ranks)
        assert self.taken % world == 0, "ranks are in step only after whole rounds"
        states = [ds.state_dict(samples_taken=self.taken // world) for ds in self.ranks]
        assert all(st == states[0] for st in states[1:]) or all(  # the same, but for the rank field
            {**st, "rank": 0} == {**states[0], "rank": 0} for st in states)
        return states[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for ds in self.ranks:
            ds.load_state_dict(state)
        self.cursor = state["cursor"]


class _Loader(LoaderRun):
    """A mixture read through ``DataLoader(num_workers=workers)`` in batches, its state by samples taken."""

    def __init__(self, root: Path, workers: int, **kw: Any) -> None:
        super().__init__(make(root, seqs=60, batch_size=4, **kw), workers)


@pytest.mark.timeout(120)
def test_resume_at_every_k_across_ranks_workers_and_world_sizes(root: Path) -> None:
    full = keys(make(root, seqs=60, seed=2))
    # 3 ranks saved after each whole round, resumed by 3, 2 and 5 ranks: the rest of the stream
    for world2 in (3, 2, 5):
        got = assert_resume_equals_suffix(lambda: _AllRanks(root, 3, seed=2), ks=range(0, 61, 3),
                                          make_resumed=lambda w=world2: _AllRanks(root, w, seed=2))
        assert got == full
    # through DataLoader workers: saved with 2 workers, resumed with 2 and with 3
    batches = assert_resume_equals_suffix(lambda: _Loader(root, 2, seed=2), ks=[0, 1, 6, 15])
    assert [k for b in batches for k in b] == full
    assert_resume_equals_suffix(lambda: _Loader(root, 2, seed=2), ks=[3, 14],
                                make_resumed=lambda: _Loader(root, 3, seed=2))


@pytest.mark.timeout(60)
def test_older_state_versions_are_refused_and_the_former_parameter_name(root: Path) -> None:
    ds = make(root, seqs=50)
    state = ds.state_dict(samples_taken=20)
    assert state["version"] == 3 and sum(state["domain_counts"].values()) == 20 and state["phase"] == 0
    old = {k: v for k, v in state.items() if k != "domain_counts"} | {"version": 1, "consumed": state["domain_counts"]}
    resumed = make(root, seqs=50)
    for version, saved in ((1, old), (2, dict(state, version=2))):
        with pytest.raises(ValueError, match=rf"state \(version {version}\) was saved by an earlier autoscale_data "
                                             r"whose stream was a materialized index.*cannot be resumed"):
            resumed.load_state_dict(json.loads(json.dumps(saved)))
    with pytest.raises(TypeError, match="consumed"):  # the former name of samples_taken
        ds.state_dict(consumed=20)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"unsupported state version 4, expected 3"):
        resumed.load_state_dict(dict(state, version=4))


@pytest.mark.timeout(60)
def test_resume_is_one_shot(root: Path) -> None:
    ds = make(root, seqs=50)
    full = keys(ds)
    ds.load_state_dict(ds.state_dict(samples_taken=20))
    assert len(ds) == 30
    assert keys(ds) == full[20:]
    assert ds.state_dict()["cursor"] == 50
    assert keys(ds) == full  # the next pass starts over


@pytest.mark.timeout(60)
def test_anytime_schedule_dataset(root: Path) -> None:
    plan = PathPlan(L)  # shares move from (0.2, 0.6, 0.2) at tiny budgets to (0.7, 0.2, 0.1) at 400 sequences
    ds = make(root, plan, seqs=400, schedule="anytime")
    full = keys(ds)
    assert ds.sequences_per_domain == {"a": 280, "b": 80, "c": 40}
    assert Counter(d for d, _ in full) == Counter({0: 280, 1: 80, 2: 40}) and len(set(full)) == 400
    assert sum(1 for d, _ in full[:10] if d == 0) < 5  # early prefix follows the small-budget mix (fixed: 7)
    assert_resume_equals_suffix(lambda: make(root, plan, seqs=400, schedule="anytime"), ks=[0, 13, 200, 399])
    with pytest.raises(ValueError, match="different mixture .*schedule: saved 'anytime', now 'fixed'"):
        make(root, plan, seqs=400).load_state_dict(ds.state_dict(samples_taken=3))


@pytest.mark.timeout(60)
def test_anytime_schedule_of_a_plan_with_a_decreasing_domain(root: Path) -> None:
    from autoscale_data.solver import MixturePlan

    n1, n2 = 40 * L, 160 * L  # c's optimum shrinks from N1 to N2: the schedule follows the monotone envelope
    plan = MixturePlan.from_scales([(n1, {"a": 0.3 * n1, "b": 0.3 * n1, "c": 0.4 * n1}),
                                    (n2, {"a": 0.6 * n2, "b": 0.35 * n2, "c": 0.05 * n2})], allow_decreasing=True)
    ds = make(root, plan, seqs=400, schedule="anytime")
    fixed = make(root, plan, seqs=400)
    assert ds.sequences_per_domain == fixed.sequences_per_domain  # same end point as the fixed schedule
    full = keys(ds)
    assert Counter(d for d, _ in full) == Counter({i: n for i, n in enumerate(fixed.sequences_per_domain.values())})
    assert len(set(full)) == 400
    assert_resume_equals_suffix(lambda: make(root, plan, seqs=400, schedule="anytime"), ks=[0, 7, 150, 399])


# ------------------------------------------------------------------------------ DataLoader
@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_dataloader_workers_yield_the_rank_slice_once(root: Path, workers: int) -> None:
    expected = keys(make(root, seqs=300, rank=1, world_size=2))
    loader = DataLoader(make(root, seqs=300, rank=1, world_size=2), batch_size=8, num_workers=workers)
    got = [(int(d), int(s)) for b in loader for d, s in zip(b["domain"], b["seq_index"], strict=False)]
    assert sorted(got) == sorted(expected) and len(got) == len(expected)
    if workers <= 1:
        assert got == expected
    # whole batches from the dataset: the loader delivers the rank's stream in exact order
    ds = make(root, seqs=300, rank=1, world_size=2, batch_size=8, output="compact")
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    assert flat([item_key(b) for b in loader]) == expected
    assert len(loader) == len(ds) == -(-len(expected) // 8)


def _storage_ptrs(batch: dict[str, Any]) -> set[int]:
    return {batch[k].untyped_storage().data_ptr() for k in ("input_ids", "domain", "seq_index")}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("output", ["torch", "compact"])
def test_batches_are_views_of_one_storage(root: Path, output: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing.reduction
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers the tensor reductions)

    samples = list(make(root, seqs=60))
    dtype = torch.int64 if output == "torch" else torch.uint16
    in_process = list(make(root, seqs=60, batch_size=7, output=output))
    via_worker = list(DataLoader(make(root, seqs=60, batch_size=7, output=output), batch_size=None, num_workers=1))
    for batches in (in_process, via_worker):
        assert [len(b["domain"]) for b in batches] == [7] * 8 + [4]
        rows = [(r, int(d), int(i)) for b in batches
                for r, d, i in zip(b["input_ids"], b["domain"], b["seq_index"], strict=True)]
        assert [(d, i) for _, d, i in rows] == [item_key(x) for x in samples]
        for (r, _, _), x in zip(rows, samples, strict=True):
            assert r.dtype == dtype and torch.equal(r.long(), x["input_ids"])
        for b in batches:
            assert b["labels"] is b["input_ids"] and len(_storage_ptrs(b)) == 1
            assert b["domain"].dtype == b["seq_index"].dtype == torch.int64
    # pickling a batch for another process shares one segment: one fd, not one per tensor
    dup = multiprocessing.reduction.DupFd
    fds: list[int] = []
    monkeypatch.setattr(multiprocessing.reduction, "DupFd", lambda fd: fds.append(fd) or dup(fd))
    ForkingPickler.dumps(in_process[0])
    assert len(fds) == 1


@pytest.mark.timeout(60)
def test_compact_batches_of_a_32bit_store(tmp_path: Path) -> None:
    write_synthetic_store(tmp_path, "w", 4000, vocab_size=100_000)  # > 65536 ids: a uint32 store
    ds = ScaleAwareMixtureDataset(tmp_path, {"w": 1.0}, 100 * L, L, verify="size")
    ref = torch.stack([x["input_ids"] for x in ds])
    assert int(ref.max()) >= 1 << 16
    batched = ScaleAwareMixtureDataset(tmp_path, {"w": 1.0}, 100 * L, L, verify="size", batch_size=8,
                                       output="compact")
    for workers in (0, 1):
        got = list(DataLoader(batched, batch_size=None, num_workers=workers))
        assert all(b["input_ids"].dtype == torch.int32 and len(_storage_ptrs(b)) == 1 for b in got)
        assert torch.equal(torch.cat([b["input_ids"] for b in got]).long(), ref)


@pytest.mark.timeout(120)
def test_plain_dataloader_resume_with_new_worker_count(root: Path) -> None:
    full = keys(make(root, seqs=300))
    ds = make(root, seqs=300, batch_size=8)
    it = iter(DataLoader(ds, batch_size=None, num_workers=2))
    prefix = flat(take(it, 5))
    del it
    state = json.loads(json.dumps(ds.state_dict(samples_taken=5 * 8)))
    ds2 = make(root, seqs=300, batch_size=4)
    ds2.load_state_dict(state)
    rest = flat([item_key(b) for b in DataLoader(ds2, batch_size=None, num_workers=3)])
    assert prefix + rest == full


@pytest.mark.timeout(60)
def test_batch_mode_takes_the_step_and_refuses_a_step_count_as_samples(root: Path) -> None:
    ds = make(root, seqs=100, batch_size=8)
    assert len(ds) == 13  # batches: 12 of 8 and one of 4
    assert ds.state_dict(step=5)["cursor"] == ds.state_dict(samples_taken=40)["cursor"] == 40
    assert ds.state_dict(step=13)["cursor"] == ds.state_dict(samples_taken=100)["cursor"] == 100
    assert ds.state_dict(step=5)["step"] == 5 and ds.state_dict(samples_taken=40)["step"] is None
    with pytest.raises(ValueError, match=r"samples_taken=12 is not a whole number of batches of 8.*step="):
        ds.state_dict(samples_taken=12)  # a step count passed as samples: refused, not a mid-batch cursor
    with pytest.raises(ValueError, match=r"step=14 is 14 steps after the pass's start \(step 0, cursor 0\), but this "
                                         r"rank has only 13 steps of 8 samples"):
        ds.state_dict(step=14)
    with pytest.raises(TypeError, match="both"):
        ds.state_dict(samples_taken=8, step=1)
    with pytest.raises(TypeError, match=r"batches_taken=5\) was removed.*pass step="):
        ds.state_dict(batches_taken=5)
    with pytest.raises(ValueError, match="needs samples_per_step"):
        make(root, seqs=100).state_dict(step=1)
    assert make(root, seqs=100).state_dict(step=3, samples_per_step=8)["cursor"] == 24  # per sample: say it
    with pytest.raises(ValueError, match="samples_per_step=12 is not a whole number of batches of 8"):
        ds.state_dict(step=1, samples_per_step=12)
    assert ds.state_dict(step=2, samples_per_step=16)["cursor"] == 32  # two batches a step (accumulation)
    resumed = make(root, seqs=100, batch_size=8)
    resumed.load_state_dict(ds.state_dict(step=5))
    assert flat([item_key(b) for b in resumed]) == flat([item_key(b) for b in ds])[40:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [None, 4])
def test_the_global_step_after_a_resume_saves_where_the_loop_is(root: Path, batch_size: int | None) -> None:
    """Resume at step 5, train 3 more, save with the global step 8: the same stream as never stopping
    (before the step travelled in the state, a count from the load point landed 5 steps too far)."""
    per = {} if batch_size else {"samples_per_step": 4}
    full = flat([item_key(b) for b in make(root, seqs=100, batch_size=batch_size)])
    first = make(root, seqs=100, batch_size=batch_size)
    it = iter(first)
    prefix = flat([item_key(next(it)) for _ in range(5 * (1 if batch_size else 4))])
    at5 = json.loads(json.dumps(first.state_dict(step=5, **per)))
    assert at5["step"] == 5 and at5["cursor"] == 20
    second = make(root, seqs=100, batch_size=batch_size)
    second.load_state_dict(at5)
    it = iter(second)
    middle = flat([item_key(next(it)) for _ in range(3 * (1 if batch_size else 4))])
    at8 = json.loads(json.dumps(second.state_dict(step=8, **per)))
    assert at8["cursor"] == 32 and at8["step"] == 8
    with pytest.raises(ValueError, match=r"step=3 is before the loaded state's step 5"):
        second.state_dict(step=3, **per)
    with pytest.raises(ValueError, match=r"step=9 \(16 samples since the pass's start at step 5\) is more than "
                                         r"this dataset has yielded in this pass: 12 samples"):
        second.state_dict(step=9, **per)  # the loop cannot have trained on what was not read
    with pytest.raises(ValueError, match=r"samples_taken=32 is more than this dataset has yielded in this pass: 12"):
        second.state_dict(samples_taken=32)  # the old mistake: the global count as samples since the load
    third = make(root, seqs=100, batch_size=batch_size)
    third.load_state_dict(at8)
    assert prefix + middle + flat([item_key(b) for b in third]) == full


@pytest.mark.timeout(60)
def test_a_state_without_its_step_still_loads_and_the_step_can_be_given(root: Path) -> None:
    ds = make(root, seqs=100, batch_size=4)
    old = {k: v for k, v in ds.state_dict(samples_taken=20).items() if k != "step"}  # an earlier version's state
    resumed = make(root, seqs=100, batch_size=4)
    resumed.load_state_dict(old)
    assert flat([item_key(b) for b in resumed]) == flat([item_key(b) for b in ds])[20:]
    resumed.load_state_dict(old)
    with pytest.raises(ValueError, match=r"step=7: the loaded state does not record the training step"):
        resumed.state_dict(step=7)
    assert resumed.state_dict(samples_taken=8)["cursor"] == 28  # counted from the load point, as documented
    resumed.load_state_dict(old, step=5)
    assert resumed.state_dict(step=7)["cursor"] == 28
    assert resumed.state_dict()["step"] == 5  # re-saved before iterating: the resume point as loaded
    with pytest.raises(ValueError, match=r"load_state_dict\(step=6\): the state records that it was saved at step 5"):
        resumed.load_state_dict(resumed.state_dict(), step=6)


@pytest.mark.timeout(120)
def test_persistent_workers_repeat_the_pass(root: Path) -> None:
    full = sorted(keys(make(root, seqs=100)))
    loader = DataLoader(make(root, seqs=100), batch_size=4, num_workers=2, persistent_workers=True)
    for _ in range(2):
        assert sorted((int(d), int(s)) for b in loader for d, s in zip(b["domain"], b["seq_index"], strict=False)) == full


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("workers", "batch_size"), [(0, None), (2, None), (2, 4)])
def test_stateful_dataloader_resume(root: Path, workers: int, batch_size: int | None) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader() -> StatefulDataLoader:
        ds = make(root, seqs=200, batch_size=batch_size)
        return StatefulDataLoader(ds, batch_size=None if batch_size else 4, num_workers=workers)

    def batch_keys(b: Any) -> list[tuple[int, int]]:
        return [(int(d), int(s)) for d, s in zip(b["domain"], b["seq_index"], strict=False)]

    full = [k for b in loader() for k in batch_keys(b)]
    first = loader()
    it = iter(first)
    prefix = [k for _ in range(7) for k in batch_keys(next(it))]
    state = json.loads(json.dumps(first.state_dict()))
    del it
    second = loader()
    second.load_state_dict(state)
    rest = [k for b in second for k in batch_keys(b)]
    assert prefix + rest == full if (workers == 0 or batch_size) else sorted(prefix + rest) == sorted(full)
    assert len(prefix + rest) == len(set(prefix + rest)) == 200


@pytest.mark.timeout(60)
def test_rank_from_torch_distributed(root: Path, tmp_path: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        ds = make(root, seqs=10)
        assert (ds.rank, ds.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------------------ validation
@pytest.mark.timeout(60)
def test_validation_yields_every_heldout_sequence_once(root: Path) -> None:
    val = MixtureValidationDataset(root, L, verify="size")
    assert val.domain_names == ["a", "b", "c"]
    assert val.sequences_per_domain == {n: (s // 10) // L for n, s in SIZES.items()}
    got = [item_key(x) for r in range(3)
           for x in DataLoader(MixtureValidationDataset(root, L, rank=r, world_size=3), batch_size=None, num_workers=2)]
    assert sorted(got) == sorted(item_key(x) for x in val) and len(set(got)) == len(val) == len(got)
    x = next(iter(val))
    assert np.array_equal(x["input_ids"].numpy(), TokenStore(root / "a").val.sequence(0, L))
    capped = MixtureValidationDataset(root, L, max_sequences_per_domain=2)
    assert len(capped) == 6


@pytest.mark.timeout(60)
def test_validation_needs_heldout_data(tmp_path: Path) -> None:
    write_synthetic_store(tmp_path, "x", 1000, val_tokens=0)
    write_synthetic_store(tmp_path, "y", 1000)
    with pytest.raises(ValueError, match=r"domain\(s\) \['x'\] have no held-out sequence"):
        MixtureValidationDataset(tmp_path, L)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"a": -0.5, "b": 1.0, "c": 0.5}, "weight of domain 'a' is negative"),
        ({"a": float("nan"), "b": 0.5, "c": 0.5}, "weight of domain 'a' is nan"),
        ({"a": 0.5, "b": 0.3, "c": 0.1}, "sum to 0.9"),
        ({"a": 0.5, "b": 0.3, "c": 0.1, "d": 0.1}, r"unknown domain\(s\) \['d'\]"),
        ({"a": 0.5, "b": 0.5}, r"missing domain\(s\) \['c'\]"),
    ],
    ids=["negative", "nan", "sum", "unknown", "missing"],
)
def test_bad_weights(root: Path, weights: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(root, weights)


@pytest.mark.timeout(30)
def test_empty_domain(tmp_path: Path) -> None:
    write_synthetic_store(tmp_path, "a", 5000)
    write_synthetic_store(tmp_path, "e", 10)  # fewer tokens than one sequence
    with pytest.raises(ValueError, match=r"domain 'e' is empty: it holds 10 tokens, .* 640 tokens \(20 sequences\)"):
        ScaleAwareMixtureDataset(tmp_path, {"a": 0.5, "e": 0.5}, 40 * L, L)


@pytest.mark.timeout(30)
def test_short_domain_names_tokens(root: Path) -> None:
    with pytest.raises(ValueError, match=r"domain 'c' is too short: it has 3000 tokens \(93 whole sequences of 32\), "
                                         r"the budget asks 3200 tokens"):
        make(root, seqs=1000)


@pytest.mark.timeout(30)
def test_every_short_domain_is_named(tmp_path: Path) -> None:
    write_synthetic_stores(tmp_path, {"a": 40_000, "b": 3000, "c": 2000})
    with pytest.raises(ValueError, match=r"2 domains cannot supply their share: domain 'b' is too short.*; "
                                         r"domain 'c' is too short"):
        ScaleAwareMixtureDataset(tmp_path, {"a": 0.4, "b": 0.3, "c": 0.3}, 1000 * L, L)


@pytest.mark.timeout(30)
def test_missing_shard(tmp_path: Path) -> None:
    write_synthetic_stores(tmp_path, {"a": 40_000, "b": 5000})
    (tmp_path / "a" / "train-00001.bin").unlink()
    with pytest.raises(FileNotFoundError, match="train-00001.bin"):
        ScaleAwareMixtureDataset(tmp_path, {"a": 0.5, "b": 0.5}, 100 * L, L)


@pytest.mark.timeout(30)
def test_missing_store(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ScaleAwareMixtureDataset({"a": tmp_path / "nope"}, {"a": 1.0}, 100 * L, L)


@pytest.mark.timeout(30)
def test_corrupted_shard(tmp_path: Path) -> None:
    write_synthetic_stores(tmp_path, {"a": 40_000, "b": 5000})
    path = tmp_path / "a" / "train-00000.bin"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    ds = ScaleAwareMixtureDataset(tmp_path, {"a": 1.0, "b": 0.0}, 1250 * L, L)  # sizes are right: opens
    with pytest.raises(ValueError, match=r"a/train-00000.bin' is corrupted: its sha256 is"):
        list(ds)  # the shard's checksum is checked when the stream first reads from it


@pytest.mark.timeout(120)
def test_each_shard_is_hashed_once_across_dataloader_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autoscale_data.store import reader

    write_synthetic_stores(tmp_path / "s", {"a": 40_000, "b": 12_000})
    log = tmp_path / "hashed.log"
    real = reader._sha256_of

    def logged(fh: Any, nbytes: int | None = None) -> str:
        with open(log, "a") as out:
            out.write(f"{fh.name}\n")
        return real(fh, nbytes)

    monkeypatch.setattr(reader, "_sha256_of", logged)
    ds = ScaleAwareMixtureDataset(tmp_path / "s", {"a": 0.5, "b": 0.5}, 600 * L, L, batch_size=8)
    assert not log.exists()  # opening hashes nothing
    assert len(flat([item_key(b) for b in DataLoader(ds, batch_size=None, num_workers=2)])) == 600
    hashed = log.read_text().split()
    assert sorted(hashed) == sorted(str(p) for p in (tmp_path / "s").glob("*/train-*.bin"))  # each once
    # the workers' verdicts are in memory shared with this process: its own reads hash nothing again
    assert len(keys(ds)) == 75 and len(log.read_text().split()) == len(hashed)


@pytest.mark.timeout(120)
def test_spawned_workers_share_the_checksum_flags(tmp_path: Path) -> None:
    write_synthetic_stores(tmp_path / "s", {"a": 40_000, "b": 12_000})
    ds = ScaleAwareMixtureDataset(tmp_path / "s", {"a": 0.5, "b": 0.5}, 200 * L, L, batch_size=8)
    expected = flat([item_key(b) for b in ds])
    fresh = ScaleAwareMixtureDataset(tmp_path / "s", {"a": 0.5, "b": 0.5}, 200 * L, L, batch_size=8)
    loader = DataLoader(fresh, batch_size=None, num_workers=1, multiprocessing_context="spawn")
    assert flat([item_key(b) for b in loader]) == expected
    flags = [bytes(split._checked) for split in fresh._reader.splits]
    assert flags == [b"\x01" * split.num_shards for split in fresh._reader.splits]  # set by the spawned worker


@pytest.mark.timeout(30)
def test_truncated_shard(tmp_path: Path) -> None:
    write_synthetic_stores(tmp_path, {"a": 40_000, "b": 5000})
    path = tmp_path / "a" / "train-00000.bin"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        ScaleAwareMixtureDataset(tmp_path, {"a": 0.5, "b": 0.5}, 100 * L, L, verify="size")


@pytest.mark.timeout(30)
def test_mixed_tokenizers(tmp_path: Path) -> None:
    write_synthetic_store(tmp_path, "a", 5000)
    write_synthetic_store(tmp_path, "z", 5000, vocab_size=300)
    with pytest.raises(ValueError, match=r"domains 'a' and 'z' were tokenized differently"):
        ScaleAwareMixtureDataset(tmp_path, {"a": 0.5, "z": 0.5}, 100 * L, L)


@pytest.mark.timeout(30)
def test_wrong_fingerprint_on_resume(root: Path) -> None:
    state = make(root, seed=0).state_dict(samples_taken=3)
    with pytest.raises(ValueError, match=r"different mixture .*seed: saved 0, now 1"):
        make(root, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match=r"sequences.a: saved 240, now 200"):
        make(root, {"a": 0.5, "b": 0.4, "c": 0.1}).load_state_dict(state)


@pytest.mark.timeout(60)
def test_resuming_with_other_weights_of_the_same_sequences_per_domain(root: Path) -> None:
    """Trained on a plan, resumed with the weights the report printed: the same stream, so it resumes."""
    from autoscale_data.solver import MixturePlan

    plan = MixturePlan.from_scales([(4096, {"a": 1900.0, "b": 1600.0, "c": 596.0}),
                                    (8192, {"a": 4592.0, "b": 3000.0, "c": 600.0})])
    trained = make(root, plan)
    printed = {d: round(w, 4) for d, w in plan.weights_for_budget(400 * L).items()}  # as report.json holds them
    assert printed != trained.weights
    resumed = make(root, printed)
    assert resumed.sequences_per_domain == trained.sequences_per_domain
    full = keys(trained)
    state = json.loads(json.dumps(trained.state_dict(samples_taken=123)))
    resumed.load_state_dict(state)
    assert keys(resumed) == full[123:]
    again = resumed.state_dict(samples_taken=200 - 123)  # its own fingerprint now; the plan resumes from it too
    trained.load_state_dict(again)
    assert keys(trained) == full[200:]
    other = dict(printed, a=printed["a"] + 0.01, b=printed["b"] - 0.01)  # sequences move: another stream
    with pytest.raises(ValueError, match=r"different mixture .*sequences.a: saved"):
        make(root, other).load_state_dict(state)
    at_start = json.loads(json.dumps(trained.state_dict(samples_taken=0)))  # nothing drawn: every count matches
    with pytest.raises(ValueError, match=r"different mixture"):  # the saved weights' own counts are compared
        make(root, other).load_state_dict(at_start)


@pytest.mark.timeout(30)
def test_tampered_state(root: Path) -> None:
    ds = make(root)
    state = ds.state_dict(samples_taken=10)
    bad = dict(state, domain_counts=dict(state["domain_counts"], a=state["domain_counts"]["a"] + 1))
    with pytest.raises(ValueError, match="do not match the stream at cursor 10"):
        ds.load_state_dict(bad)
    with pytest.raises(ValueError, match="outside the stream"):
        ds.load_state_dict(dict(state, cursor=10**9))
    with pytest.raises(ValueError, match="not a autoscale-mixture-state state"):
        ds.load_state_dict({"cursor": 3})
    with pytest.raises(ValueError, match="samples_taken=401 is outside"):
        ds.state_dict(samples_taken=401)
    worker = dict(state, worker={"id": 1, "num_workers": 2, "base": 0, "next_unit": 5, "block": 1,
                                 "rank": 0, "world_size": 1})
    with pytest.raises(ValueError, match="one DataLoader worker's progress"):
        ds.load_state_dict(worker)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("seq_len", [0, -1])
def test_seq_len_not_positive(root: Path, seq_len: int) -> None:
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        ScaleAwareMixtureDataset(root, W3, 1000, seq_len)


@pytest.mark.timeout(30)
def test_budget_smaller_than_one_sequence(root: Path) -> None:
    with pytest.raises(ValueError, match="smaller than one sequence"):
        ScaleAwareMixtureDataset(root, W3, L - 1, L)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rank": 2, "world_size": 2}, r"rank must be an integer in \[0, 2\)"),
        ({"rank": 0}, "give both rank and world_size"),
        ({"output": "int8"}, "output must be one of"),
        ({"max_epochs": {"zz": 2}}, r"max_epochs names unknown domain\(s\) \['zz'\]"),
        ({"max_epochs": -1}, "max_epochs for domain 'a' must be a positive number"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"schedule": "anytime"}, "needs a plan object"),
    ],
)
def test_bad_options(root: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(root, **kwargs)


@pytest.mark.timeout(30)
def test_options_object_and_keyword_settings(root: Path) -> None:
    from autoscale_data.dataset import MixtureOptions

    opts = MixtureOptions(batch_size=7, verify="size", shuffle_window=5)
    a = ScaleAwareMixtureDataset(root, W3, 60 * L, L, 3, options=opts)
    b = make(root, seqs=60, seed=3, batch_size=7, shuffle_window=5)
    assert (a.fingerprint, keys(a)) == (b.fingerprint, keys(b))
    c = ScaleAwareMixtureDataset(root, W3, 60 * L, L, 3, options=opts, batch_size=None)  # keywords override
    assert c.options == MixtureOptions(verify="size", shuffle_window=5) and c.fingerprint == a.fingerprint
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['batchsize'\]; MixtureOptions has"):
        make(root, batchsize=8)
    with pytest.raises(ValueError, match="shuffle_window must be a non-negative integer"):
        MixtureOptions(shuffle_window=-1)


def test_worker_batches_cross_as_bytes_and_arrive_as_plain_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import multiprocessing.reduction
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401  (registers the tensor reductions)

    from autoscale_data.dataset._batch import PIPE_MAX_BYTES, WireBatch, new_batch

    batch, ids, dom, seq = new_batch(3, 5, torch.uint16, in_worker=True)
    assert isinstance(batch, WireBatch) and not ids.is_shared()
    ids.copy_(torch.arange(15, dtype=torch.int32).view(3, 5).to(torch.uint16))
    dom.copy_(torch.tensor([2, 0, 1]))
    seq.copy_(torch.tensor([7, 8, 9]))
    assert isinstance(copy.copy(batch), WireBatch)  # what DataLoader's default_convert makes
    fds: list[int] = []
    dup = multiprocessing.reduction.DupFd
    monkeypatch.setattr(multiprocessing.reduction, "DupFd", lambda fd: fds.append(fd) or dup(fd))
    ForkingPickler.dumps(batch)
    assert fds == []  # no shared-memory segment: the bytes travel in the pickle
    batch["attention_mask"] = torch.ones(3, 5, dtype=torch.bool)  # an entry added by a transform
    got = pickle.loads(ForkingPickler.dumps(batch))
    assert type(got) is dict and got.keys() == batch.keys()
    assert got["labels"] is got["input_ids"] and len(_storage_ptrs(got)) == 1
    assert got["input_ids"].dtype == torch.uint16 and torch.equal(got["input_ids"], ids)
    assert got["domain"].tolist() == [2, 0, 1] and got["seq_index"].tolist() == [7, 8, 9]
    assert torch.equal(got["attention_mask"], batch["attention_mask"])
    got["input_ids"][0, 0] = 99  # writable, and no longer tied to the worker's buffer
    assert int(ids[0, 0]) == 0
    # an entry replaced in the worker: pickled as a plain dict of what it now holds
    batch["input_ids"] = ids.long()
    got = pickle.loads(ForkingPickler.dumps(batch))
    assert type(got) is dict and got["input_ids"].dtype == torch.int64 and got["labels"].dtype == torch.uint16
    # above the pipe limit a worker's batch is one shared-memory storage
    rows = PIPE_MAX_BYTES // (8 * 64) + 1
    big, ids, _, _ = new_batch(rows, 64, torch.int64, in_worker=True)
    assert type(big) is dict and ids.is_shared() and len(_storage_ptrs(big)) == 1


@pytest.mark.timeout(60)
def test_large_worker_batches_go_through_shared_memory(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autoscale_data.dataset._batch as batch_mod

    expected = [item_key(x) for x in make(root, seqs=60)]
    monkeypatch.setattr(batch_mod, "PIPE_MAX_BYTES", 64)  # workers are forked: they see it too
    got = list(DataLoader(make(root, seqs=60, batch_size=7), batch_size=None, num_workers=2))
    assert all(type(b) is dict and b["labels"] is b["input_ids"] for b in got)
    assert [(int(d), int(i)) for b in got for d, i in zip(b["domain"], b["seq_index"], strict=True)] == expected

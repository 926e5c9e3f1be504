"""Online mixing through the exact sampler: segments decided during the run, exact, resumable, the same on every rank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers_store import write_synthetic_stores
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from resume_helper import item_key
from torch.utils.data import DataLoader

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.mixing import domain_order
from autoscale_data.online import ODM, PresetWeights, replay_phases

L = 32
SIZES = {"a": 40_000, "b": 12_000, "c": 8_000}  # 1250 / 375 / 250 sequences of 32
AVAILABLE = [n // L for n in SIZES.values()]
SEQS = 300  # sequences of a run
G = 12  # sequences per step (all ranks): 12 / world per rank for world 1-4
EVERY = 2
START = {"a": 0.5, "b": 0.3, "c": 0.2}


class Walk:
    """A test controller that draws its weights from its own numpy generator (so its state holds one)."""

    name = "walk"

    def __init__(self, domain_names: Any, seed: int = 0) -> None:
        self.domain_names = tuple(domain_names)
        self.rng = np.random.default_rng(seed)

    def initial_weights(self) -> dict[str, float]:
        return dict(START)

    def update(self, window: Any) -> dict[str, float]:
        w = self.rng.dirichlet([2.0, 2.0, 2.0]) * 0.6 + np.array([0.2, 0.1, 0.1])  # every domain its share
        w = np.round(w, 6)
        w[-1] = 1.0 - w[:-1].sum()
        return dict(zip(self.domain_names, w.tolist(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


CONTROLLERS = {"odm": ODM, "walk": Walk}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("online") / "stores", SIZES)


def make(root: Path, rank: int = 0, world: int = 1, controller: str = "odm", **kw: Any) -> tuple[Any, OnlineMixture]:
    ds = ScaleAwareMixtureDataset(root, START, SEQS * L, L, batch_size=G // world, rank=rank, world_size=world,
                                  verify="size", max_epochs=kw.pop("max_epochs", None))
    om = OnlineMixture(ds, CONTROLLERS[controller](ds.domain_names), every=kw.pop("every", EVERY),
                       sequences_per_step=G, **kw)
    return ds, om


def token_losses(batch: dict[str, Any]) -> torch.Tensor:
    """Exact small-integer losses (sums are exact in float64, whatever the order or the topology)."""
    d, s = batch["domain"].double(), batch["seq_index"].double()
    return torch.stack([2.0 * d + (s % 5), 1.0 + (s % 3)], dim=1)


def run(root: Path, world: int, workers: int, *, controller: str = "odm", state: dict | None = None,
        stop: int | None = None) -> tuple[list[tuple[int, int]], dict | None, list[OnlineMixture]]:
    """Train ``world`` in-process ranks (each through ``workers`` DataLoader workers) from ``state``:
    the global stream's keys, rank 0's state at step ``stop`` (its meter holds the all-ranks window)."""
    ranks = [make(root, r, world, controller) for r in range(world)]
    for ds, _ in ranks:
        if state is not None:
            ds.load_state_dict(json.loads(json.dumps(state)))
    step0 = 0 if state is None else state["step"]  # the step travels in the state
    its = [iter(DataLoader(ds, batch_size=None, num_workers=workers)) if workers else iter(ds) for ds, _ in ranks]
    lead = ranks[0][1]
    out: list[tuple[int, int]] = []
    step = step0
    while True:
        if stop is not None and step == stop:
            return out, ranks[0][0].state_dict(step=step), [om for _, om in ranks]
        try:
            batches = [next(it) for it in its]
        except StopIteration:
            return out, None, [om for _, om in ranks]
        rows = [item_key(b) for b in batches]
        out.extend(rows[r][m] for m in range(len(rows[0])) for r in range(world) if m < len(rows[r]))
        for b in batches:  # the all-reduce: every rank's losses into rank 0's meter
            lead.meter.update(token_losses(b), b["domain"])
        step += 1
        if lead.due(step):
            sums, toks = lead.meter.totals()
            lead.meter.reset()
            for _, om in ranks:
                om.update(step, sums.numpy(), toks.numpy())


def assert_orders_continue(stream: list[tuple[int, int]]) -> None:
    for d, name in enumerate("abc"):
        got = [s for dd, s in stream if dd == d]
        assert got == domain_order(name, AVAILABLE[d], len(got), 0).tolist()


@pytest.fixture(scope="module")
def reference(root: Path) -> dict[str, tuple[list, dict]]:
    out = {}
    for name in CONTROLLERS:
        keys, _, oms = run(root, 1, 0, controller=name)
        out[name] = (keys, oms[0].segment_log())
    return out


# ------------------------------------------------------------------------------ the stream
@pytest.mark.timeout(120)
@pytest.mark.parametrize("controller", sorted(CONTROLLERS))
def test_exact_segments_and_continuing_orders(root: Path, reference: dict, controller: str) -> None:
    keys, log = reference[controller]
    assert len(keys) == len(set(keys)) == SEQS  # nothing repeated, nothing missing
    assert_orders_continue(keys)
    counts, weights, starts = np.asarray(log["counts"]), np.asarray(log["weights"]), np.asarray(log["starts"])
    assert starts[-1] == SEQS and counts.shape[0] == -(-SEQS // (EVERY * G))
    target = np.cumsum(weights * np.diff(starts)[:, None], axis=0)
    assert np.abs(target - np.cumsum(counts, axis=0)).max() < 1.0  # within one sequence of Σ w × len
    for j in range(counts.shape[0]):  # each segment holds exactly its counts
        seg = keys[starts[j]:starts[j + 1]]
        assert np.bincount([d for d, _ in seg], minlength=3).tolist() == counts[j].tolist()
    assert weights[0].tolist() == list(CONTROLLERS[controller]("abc").initial_weights().values())
    assert len({tuple(w) for w in weights.round(9).tolist()}) > 3  # the controller did move the mix


@pytest.mark.timeout(120)
def test_replayed_phases_are_the_same_stream(root: Path, reference: dict) -> None:
    keys, log = reference["odm"]
    phases = replay_phases("abc", log["counts"], L)
    static = ScaleAwareMixtureDataset(root, phases, sum(b for b, _ in phases), L, verify="size")
    assert [item_key(x) for x in static] == keys


@pytest.mark.timeout(120)
def test_fixed_schedule_is_the_phases_dataset(root: Path) -> None:
    ds = ScaleAwareMixtureDataset(root, START, SEQS * L, L, batch_size=G, verify="size")
    late = {"a": 0.2, "b": 0.2, "c": 0.6}
    om = OnlineMixture(ds, PresetWeights(ds.domain_names, [(0, START), (5, late)]), every=EVERY, lookahead=1)
    keys = []
    for step, batch in enumerate(ds, 1):
        keys.extend(item_key(batch))
        if om.due(step):
            om.update(step, np.zeros(3), np.zeros(3))
    # update u decides segment u (lookahead 1): `late` from segment 5 = position 5 * EVERY * G on
    cut = 5 * EVERY * G
    log = om.segment_log()
    assert [w == list(START.values()) for w in log["weights"]] == [True] * 5 + [False] * 8
    phases = ScaleAwareMixtureDataset(root, [(cut * L, START), ((SEQS - cut) * L, late)], SEQS * L, L,
                                      verify="size")  # the same schedule as static phases
    ours = np.cumsum(np.asarray(log["counts"]), axis=0)
    theirs = [phases._stream.domain_counts(p) for p in log["starts"][1:]]
    assert np.abs(ours - np.asarray(theirs)).max() <= 1  # per-domain counts within one sequence at every segment
    assert sorted(keys) == sorted(item_key(x) for x in phases) or np.abs(ours[-1] - theirs[-1]).max() <= 1


# ------------------------------------------------------------------------------ resume
@pytest.mark.timeout(600)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(world=st.integers(1, 4), workers=st.integers(0, 2), world2=st.integers(1, 4), workers2=st.integers(0, 2),
       stop=st.integers(0, SEQS // G), controller=st.sampled_from(sorted(CONTROLLERS)))
def test_resume_anywhere_any_topology_reproduces_the_run(root: Path, reference: dict, world: int, workers: int,
                                                         world2: int, workers2: int, stop: int,
                                                         controller: str) -> None:
    full, log = reference[controller]
    prefix, state, _ = run(root, world, workers, controller=controller, stop=stop)
    assert prefix == full[:stop * G]
    assert state is not None and state["cursor"] == stop * G
    rest, _, oms = run(root, world2, workers2, controller=controller, state=state)
    assert prefix + rest == full
    assert all(om.segment_log() == log for om in oms)  # every rank holds the same log


@pytest.mark.timeout(120)
def test_every_rank_saves_the_same_online_state(root: Path) -> None:
    _, _, oms = run(root, 3, 0, stop=7)
    states = [om.state_dict() for om in oms]
    assert states[1] == states[2]
    assert {**states[0], "meter": None} == {**states[1], "meter": None}  # only rank 0's meter held the window here


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_with_workers_resumes_exactly(root: Path, workers: int) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    def train(state: dict | None, stop: int | None) -> tuple[list, dict | None]:
        ds, om = make(root)
        if state is not None:
            om.load_state_dict(state["online"])
        loader = StatefulDataLoader(ds, batch_size=None, num_workers=workers)
        if state is not None:
            loader.load_state_dict(state["loader"])
        step = 0 if state is None else state["step"]
        out = []
        for batch in loader:
            out.extend(item_key(batch))
            om.meter.update(token_losses(batch), batch["domain"])
            step += 1
            if om.due(step):
                om.update(step)
            if step == stop:
                return out, json.loads(json.dumps({"loader": loader.state_dict(), "online": om.state_dict(),
                                                   "step": step}))
        return out, None

    full, _ = train(None, None)
    assert len(full) == len(set(full)) == SEQS
    for stop in (3, 8):
        prefix, state = train(None, stop)
        rest, _ = train(state, None)
        assert prefix + rest == full, stop


# ------------------------------------------------------------------------------ bad input
def test_bad_settings(root: Path) -> None:
    ds = ScaleAwareMixtureDataset(root, START, SEQS * L, L, batch_size=4, verify="size")
    with pytest.raises(ValueError, match="every must be a positive integer, got 0"):
        OnlineMixture(ds, ODM(ds.domain_names), every=0)
    with pytest.raises(ValueError, match="every must be a positive integer, got -3"):
        OnlineMixture(ds, ODM(ds.domain_names), every=-3)
    with pytest.raises(ValueError, match="are not the dataset's"):
        OnlineMixture(ds, ODM(("x", "y", "z")), every=2)
    plain = ScaleAwareMixtureDataset(root, START, SEQS * L, L, verify="size")
    with pytest.raises(ValueError, match="sequences_per_step is needed"):
        OnlineMixture(plain, ODM(plain.domain_names), every=2)
    windowed = ScaleAwareMixtureDataset(root, START, SEQS * L, L, batch_size=4, shuffle_window=8, verify="size")
    with pytest.raises(ValueError, match="needs a plain dataset"):
        OnlineMixture(windowed, ODM(windowed.domain_names), every=2)


class Bad:
    name = "bad"

    def __init__(self, domain_names: Any, proposal: Any) -> None:
        self.domain_names, self.proposal = tuple(domain_names), proposal

    def initial_weights(self) -> dict[str, float]:
        return dict(START)

    def update(self, window: Any) -> Any:
        return self.proposal

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Any) -> None:
        pass


@pytest.mark.parametrize(("proposal", "match"), [
    ({"a": float("nan"), "b": 0.5, "c": 0.5}, "step 4: weight nan of domain 'a'"),
    ({"a": -0.1, "b": 0.6, "c": 0.5}, "step 4: weight -0.1 of domain 'a'"),
    ({"a": 0.5, "b": 0.5, "c": 0.5}, "step 4: the weights .* sum to 1.5"),
    ({"a": 0.5, "b": 0.5, "web": 0.0}, r"step 4: the controller named unknown domain\(s\) \['web'\]"),
])
def test_bad_weights_from_a_controller_name_the_step_and_value(root: Path, proposal: Any, match: str) -> None:
    ds = ScaleAwareMixtureDataset(root, START, SEQS * L, L, batch_size=4, verify="size")
    om = OnlineMixture(ds, Bad(ds.domain_names, proposal), every=2)
    with pytest.raises(ValueError, match="update at step 4: the next update is at step 2"):
        om.update(4, np.ones(3), np.ones(3))
    om.controller.proposal = START
    om.update(2, np.ones(3), np.ones(3))
    om.controller.proposal = proposal
    with pytest.raises(ValueError, match=match):
        om.update(4, np.ones(3), np.ones(3))


@pytest.mark.timeout(60)
def test_a_loop_that_skips_its_updates_is_told(root: Path) -> None:
    ds, om = make(root, lookahead=1)
    it = iter(ds)
    for _ in range(EVERY):  # segment 0 is decided ahead; segment 1 needs update 1
        next(it)
    with pytest.raises(ValueError, match="segment 1, which is not decided yet .* update\\(step\\) every 2 steps"):
        next(it)


@pytest.mark.timeout(60)
def test_a_domain_asked_beyond_its_supply_names_the_step(root: Path) -> None:
    ds = ScaleAwareMixtureDataset(root, START, 600 * L, L, batch_size=G, verify="size")
    om = OnlineMixture(ds, PresetWeights(ds.domain_names, [(0, START), (1, {"a": 0, "b": 0, "c": 1})]), every=EVERY)
    with pytest.raises(ValueError, match=r"step \d+: weights .* ask domain 'c' for 274 sequences by segment \d+, "
                                         r"it allows 250; allow repetition with max_epochs"):
        for u in range(1, 30):
            om.update(u * EVERY, np.zeros(3), np.zeros(3))


def test_states_of_other_configurations_are_refused(root: Path) -> None:
    ds, om = make(root)
    state = json.loads(json.dumps(ds.state_dict()))
    ds2, _ = make(root, every=3)
    with pytest.raises(ValueError, match="different mixture.*online.every: saved 2, now 3"):
        ds2.load_state_dict(state)
    with pytest.raises(ValueError, match="cannot continue another configuration"):
        ds.load_state_dict(state, continue_run=True)
    tampered = json.loads(json.dumps(om.state_dict()))
    tampered["log"]["weights"][0] = [0.1, 0.1, 0.8]
    with pytest.raises(ValueError, match="does not replay to its recorded counts"):
        om.load_state_dict(tampered)


@pytest.mark.timeout(60)
def test_memory_is_per_segment(root: Path) -> None:
    ds, om = make(root)
    assert om.counts_table.numel() == om.num_segments * 3 == 13 * 3  # one row per segment of 24 sequences
    big = ScaleAwareMixtureDataset(root, START, 1200 * L, L, batch_size=G, verify="size", max_epochs=10)
    om_big = OnlineMixture(big, ODM(big.domain_names), every=EVERY)
    assert om_big.num_segments == 50
    assert big.index_nbytes < 2 * ds.index_nbytes < 4096  # the stream's tables: only the decided segments


@pytest.mark.timeout(120)
def test_workers_wait_for_undecided_segments_and_change_nothing(root: Path) -> None:
    def train(workers: int) -> list:
        ds, om = make(root, every=1, lookahead=1)  # workers run ahead of every decision and must wait for it
        out = []
        loader = DataLoader(ds, batch_size=None, num_workers=workers, prefetch_factor=4 if workers else None)
        for step, batch in enumerate(loader, 1):
            out.extend(item_key(batch))
            om.meter.update(token_losses(batch), batch["domain"])
            om.update(step)
        return out

    alone = train(0)
    assert train(2) == alone and len(set(alone)) == SEQS


@pytest.mark.timeout(240)
def test_spawned_workers_share_the_segment_table(root: Path) -> None:
    def train(**loader: Any) -> list:
        ds, om = make(root, every=1, lookahead=1)
        out = []
        for step, batch in enumerate(DataLoader(ds, batch_size=None, **loader), 1):
            out.extend(item_key(batch))
            om.meter.update(token_losses(batch), batch["domain"])
            om.update(step)
        return out

    assert train(num_workers=2, multiprocessing_context="spawn", prefetch_factor=4) == train()


@pytest.mark.timeout(60)
def test_require_lookahead_decides_more_segments_before_the_run_only(root: Path) -> None:
    ds, om = make(root, every=8, lookahead=1)  # 4 segments
    before = ds.fingerprint
    om.require_lookahead(1)  # already enough: nothing changes
    assert om.lookahead == 1 and om.published == 1 and ds.fingerprint == before
    om.require_lookahead(2)
    assert om.lookahead == 2 and om.published == 2 and ds.config["online"]["lookahead"] == 2
    assert ds.fingerprint != before  # part of the stream's configuration
    _, same = make(root, every=8, lookahead=2)
    assert same.dataset.fingerprint == ds.fingerprint  # the same stream as asking for it when built
    next(iter(ds))
    with pytest.raises(ValueError, match=r"lookahead 2 must become 3 before the first update, state load or "
                                         r"iteration.*OnlineMixture\(\.\.\., lookahead=3\)"):
        om.require_lookahead(3)

"""MixtureLoader (shared by every trainer adapter) and the adapters' missing-extra errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers_store import write_synthetic_stores
from paths import REPO
from resume_helper import assert_resume_equals_suffix, item_key

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.integrations import MixtureLoader

ROOT = REPO
WEIGHTS = {"a": 0.5, "b": 0.3, "c": 0.2}
TOTAL = 61  # sequences: batches of 4 -> 16 per pass, the last one short


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("stores"), {"a": 4000, "b": 3000, "c": 2500})


def dataset(stores: Path, **kw) -> ScaleAwareMixtureDataset:
    return ScaleAwareMixtureDataset(stores, WEIGHTS, budget_tokens=TOTAL * 32, seq_len=32, seed=3,
                                    batch_size=4, **kw)


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_at_every_batch_equals_the_rest_of_the_pass(stores: Path, workers: int) -> None:
    full = assert_resume_equals_suffix(lambda: MixtureLoader(dataset(stores), num_workers=workers),
                                       ks=range(0, 16, 1 if workers == 0 else 5))  # at 16 the pass is over (see below)
    assert len(full) == 16 and sum(len(b) for b in full) == TOTAL
    assert full == [item_key(b) for b in dataset(stores)]  # the dataset's own stream, in order


def test_passes_len_and_the_state_at_a_pass_end(stores: Path) -> None:
    loader = MixtureLoader(dataset(stores))
    first = [item_key(b) for b in loader]
    assert len(loader) == 16 and len(first) == 16
    end = loader.state_dict()
    assert end["dataset"]["cursor"] == 0  # a complete pass: the next one starts at 0
    assert [item_key(b) for b in loader] == first  # and a second pass is the same stream
    it = iter(loader)
    for _ in range(3):
        next(it)
    mid = json.loads(json.dumps(loader.state_dict()))
    assert mid["samples_consumed"] == 12 and mid["dataset"]["cursor"] == 12
    resumed = MixtureLoader(dataset(stores))
    resumed.load_state_dict(mid)
    assert len(resumed) == 16  # a whole pass, also after a resume
    assert resumed.state_dict()["dataset"]["cursor"] == 12  # loaded, not iterated yet
    assert [item_key(b) for b in resumed] == first[3:]
    assert [item_key(b) for b in resumed] == first  # the resume applies to one pass only


@pytest.mark.parametrize("workers", [0, 2])
def test_a_pass_draws_nothing_from_the_global_rng(stores: Path, workers: int) -> None:
    # a resumed run starts a pass where the uninterrupted one did not; a pass that drew torch's global seed
    # (DataLoader's base seed) would then leave dropout another random stream, and resumed losses would differ
    loader = MixtureLoader(dataset(stores), num_workers=workers)
    torch.manual_seed(11)
    before = torch.get_rng_state()
    it = iter(loader)
    next(it)
    assert torch.equal(torch.get_rng_state(), before)
    rest = [item_key(b) for b in it]
    assert len(rest) == 15 and torch.equal(torch.get_rng_state(), before)


def test_a_probing_iter_does_not_take_the_resume_point(stores: Path) -> None:
    loader = MixtureLoader(dataset(stores))
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    resumed = MixtureLoader(dataset(stores))
    resumed.load_state_dict(state)
    iter(resumed)  # Lightning calls iter() once to check the loader is iterable
    iter(resumed)
    rest = [item_key(b) for b in resumed]
    assert len(rest) == 15 and rest[0] == item_key(next(it))


def test_read_ahead_counts_only_marked_batches(stores: Path) -> None:
    loader = MixtureLoader(dataset(stores), count_on_yield=False)
    it = iter(loader)
    batches = [next(it) for _ in range(3)]  # a trainer that read two batches ahead
    loader.mark_consumed(batches[0])
    state = loader.state_dict()
    assert state["samples_consumed"] == 4 and state["dataset"]["cursor"] == 4
    resumed = MixtureLoader(dataset(stores))
    resumed.load_state_dict(state)
    assert item_key(next(iter(resumed))) == item_key(batches[1])
    loader.mark_consumed(batches[1])
    loader.mark_consumed(batches[2])
    with pytest.raises(ValueError, match="only 12 yielded"):
        loader.mark_consumed(batches[2])


def test_resume_under_another_world_size(stores: Path) -> None:
    """A state saved by rank 0 of 2 after k batches each resumes the global stream at 2k batches' worth."""
    one = [item_key(b) for b in MixtureLoader(dataset(stores))]
    flat = [s for b in one for s in b]
    loaders = [MixtureLoader(dataset(stores, rank=r, world_size=2)) for r in range(2)]
    its = [iter(x) for x in loaders]
    for _ in range(3):
        for i in its:
            next(i)
    state = loaders[0].state_dict()
    assert state["dataset"]["cursor"] == 24
    resumed = MixtureLoader(dataset(stores))
    resumed.load_state_dict(state)
    assert [s for b in resumed for s in item_key(b)] == flat[24:]


def test_device_and_refusals(stores: Path) -> None:
    batch = next(iter(MixtureLoader(dataset(stores), device="cpu")))
    assert batch["input_ids"].device == torch.device("cpu") and batch["input_ids"].shape == (4, 32)
    with pytest.raises(ValueError, match="batch_size=B"):
        MixtureLoader(ScaleAwareMixtureDataset(stores, WEIGHTS, budget_tokens=TOTAL * 32, seq_len=32))
    ds = dataset(stores)
    it = iter(MixtureLoader(ds))
    next(it)
    moved = dataset(stores)
    moved.load_state_dict(ds.state_dict(samples_taken=4))
    with pytest.raises(ValueError, match="already positioned at cursor 4"):
        MixtureLoader(moved)
    with pytest.raises(ValueError, match="num_workers"):
        MixtureLoader(dataset(stores), num_workers=-1)
    loader = MixtureLoader(dataset(stores))
    with pytest.raises(ValueError, match="not a autoscale_data.integrations.MixtureLoader state"):
        loader.load_state_dict(ds.state_dict())
    with pytest.raises(ValueError, match="different mixture"):
        other = MixtureLoader(ScaleAwareMixtureDataset(stores, WEIGHTS, budget_tokens=TOTAL * 32, seq_len=32, seed=4,
                                                       batch_size=4))
        other.load_state_dict(loader.state_dict())


@pytest.mark.parametrize(("module", "library", "extra"), [
    ("lightning", "lightning", "lightning"),
    ("accelerate", "accelerate", "accelerate"),
    ("megatron", "megatron.core", "megatron"),
    ("torchtitan", "torchtitan", "torchtitan"),
])
def test_a_missing_library_names_its_extra(module: str, library: str, extra: str) -> None:
    """With the library hidden, importing the adapter raises MissingExtraError naming the extra."""
    code = (f"import sys; sys.modules[{library.split('.')[0]!r}] = None\n"
            "from autoscale_data import MissingExtraError\n"
            f"try:\n    import autoscale_data.integrations.{module}\n"
            "except MissingExtraError as e:\n    print('EXTRA', e.extra, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"EXTRA {extra} ") and f"autoscale-data[{extra}]" in out.stdout, out.stdout


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resumed_pass_saves_and_resumes_again(stores: Path, workers: int) -> None:
    """Resume at batch 3, take 4 more with workers, save, resume again: the rest of the pass, then whole passes."""
    full = [item_key(b) for b in MixtureLoader(dataset(stores))]
    first = MixtureLoader(dataset(stores))
    it = iter(first)
    for _ in range(3):
        next(it)
    second = MixtureLoader(dataset(stores), num_workers=workers)
    second.load_state_dict(json.loads(json.dumps(first.state_dict())))
    it = iter(second)
    assert [item_key(next(it)) for _ in range(4)] == full[3:7]
    state = json.loads(json.dumps(second.state_dict()))
    assert state["dataset"]["cursor"] == 28 and state["samples_consumed"] == 16
    third = MixtureLoader(dataset(stores), num_workers=workers)
    third.load_state_dict(state)
    assert [item_key(b) for b in third] == full[7:]
    assert [item_key(b) for b in third] == full
    assert third.state_dict()["dataset"]["cursor"] == 0


def _adapter(name: str, stores: Path, workers: int) -> tuple[Any, Callable[[], Any], Callable[[Any], None]]:
    """An adapter over a fresh dataset: ``(next_batch, save, load)``, used as its trainer would."""
    if name == "megatron":
        pytest.importorskip("megatron.core")
        from autoscale_data.integrations.megatron import MixtureExternalIterator

        it = MixtureExternalIterator(dataset(stores), num_workers=workers, raw=True)
        return (lambda: next(it)), it.save_state, it.restore_state
    if name == "lightning":
        pytest.importorskip("lightning")
        from autoscale_data.integrations.lightning import MixtureDataModule

        dm = MixtureDataModule(stores, WEIGHTS, TOTAL * 32, 32, 3, batch_size=4, num_workers=workers)
        state: dict[str, Any] = {}

        def take() -> Any:  # what Lightning does: the fetcher reads, the loop marks the batch it trains on
            if "it" not in state:
                state["it"] = iter(dm.train_dataloader())
            batch = next(state["it"])
            dm.loader.mark_consumed(batch)
            return batch

        return take, dm.state_dict, dm.load_state_dict
    assert name == "accelerate"
    accelerate = pytest.importorskip("accelerate")
    from autoscale_data.integrations.accelerate import prepare_mixture_loader

    loader = prepare_mixture_loader(accelerate.Accelerator(cpu=True), dataset(stores), num_workers=workers)
    holder: dict[str, Any] = {}

    def next_batch() -> Any:
        holder.setdefault("it", iter(loader))
        return next(holder["it"])

    return next_batch, loader.state_dict, loader.load_state_dict


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", ["megatron", "lightning", "accelerate"])
def test_every_adapter_saves_a_resumed_run_where_it_is(stores: Path, name: str, workers: int) -> None:
    """Resume at batch 5, train 3 more, save, resume again: the uninterrupted stream (the resume-then-save
    path, where a count from the load point and a global one differ)."""
    full = [item_key(b) for b in dataset(stores)]
    take, save, _ = _adapter(name, stores, workers)
    seen = [item_key(take()) for _ in range(5)]
    at5 = json.loads(json.dumps(save()))
    take, save, load = _adapter(name, stores, workers)
    load(at5)
    seen += [item_key(take()) for _ in range(3)]
    at8 = json.loads(json.dumps(save()))
    take, _, load = _adapter(name, stores, workers)
    load(at8)
    seen += [item_key(take()) for _ in range(len(full) - 8)]
    assert seen == full

"""The Lightning adapter with the real library: fit, checkpoint, resume in new processes, same data."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_runner import run_example
from helpers_store import write_synthetic_stores

pytest.importorskip("lightning")

from autoscale_data.integrations.lightning import MixtureDataModule  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fit_from_a_checkpoint_trains_on_the_uninterrupted_batches(tmp_path: Path) -> None:
    """examples/lightning_train.py --tiny: 20 steps over 13-batch passes, a checkpoint every step (the
    loader hides len(), so Lightning's fetcher holds a batch ahead at each save); resumes from steps 5,
    13 (a pass boundary) and 16, each in a new process with another worker count, must train on the
    same batches (tokens, domains, sequence ids) as the uninterrupted run did after that step, with the same
    losses bit for bit. Then two DDP
    processes (gloo) checkpoint at step 4 and one process resumes: it must train, in stream order, on
    exactly the 32 samples the two processes trained on after step 4."""
    r = run_example("lightning_train.py", tmp_path)
    assert r["steps"] == 20 and r["batches_per_pass"] == 13
    assert {k: (v["batches"], v["equal"], v["steps_ok"], v["same_losses"]) for k, v in r["resumes"].items()} == {
        "5": (15, True, True, True), "13": (7, True, True, True), "16": (4, True, True, True)}
    assert r["two_to_one"] == {"samples": 32, "equal": True}


def test_rank_comes_from_lightning(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="process group"):
        MixtureDataModule(tmp_path, {"a": 1.0}, 100, 10, batch_size=2, rank=0)
    stores = write_synthetic_stores(tmp_path / "stores", {"a": 2_000, "b": 2_000})
    dm = MixtureDataModule(stores, {"a": 0.5, "b": 0.5}, 100, 10, batch_size=2)
    assert dm.state_dict() == {} and dm.loader is None  # nothing built for training before setup()


def test_a_missing_store_or_an_unknown_domain_is_refused_when_the_module_is_built(tmp_path: Path) -> None:
    stores = write_synthetic_stores(tmp_path / "stores", {"a": 2_000, "b": 2_000})
    with pytest.raises(FileNotFoundError, match="nowhere"):
        MixtureDataModule(tmp_path / "nowhere", {"a": 1.0}, 100, 10, batch_size=2)
    with pytest.raises(ValueError, match="'c'"):
        MixtureDataModule(stores, {"a": 0.5, "c": 0.5}, 100, 10, batch_size=2)

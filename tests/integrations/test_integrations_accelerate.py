"""The Accelerate adapter with the real library: save_state, load_state in new processes, same data."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_runner import run_example
from helpers_store import write_synthetic_stores

pytest.importorskip("accelerate")

from accelerate import Accelerator  # noqa: E402

from autoscale_data.dataset import ScaleAwareMixtureDataset  # noqa: E402
from autoscale_data.integrations.accelerate import prepare_mixture_loader  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_load_state_trains_on_the_uninterrupted_batches(tmp_path: Path) -> None:
    """examples/accelerate_train.py --tiny: 20 steps over 13-batch passes, save_state at steps 5, 13 (a
    pass boundary) and 16; each resumed in a new process (another worker count) must train on the same
    batches (tokens, domains, sequence ids) as the uninterrupted run did after that step, with the same
    losses bit for bit. Then two
    processes (torchrun, gloo) save at step 4 and one process resumes: it must read, in stream order,
    exactly the 32 samples the two processes read after step 4."""
    r = run_example("accelerate_train.py", tmp_path)
    assert r["steps"] == 20 and r["batches_per_pass"] == 13
    assert {k: (v["batches"], v["equal"], v["same_losses"]) for k, v in r["resumes"].items()} == {
        "5": (15, True, True), "13": (7, True, True), "16": (4, True, True)}
    assert r["two_to_one"] == {"samples": 32, "equal": True}


def test_prepare_passes_the_loader_through_and_checks_the_rank(tmp_path: Path) -> None:
    stores = write_synthetic_stores(tmp_path, {"a": 2000, "b": 2000})
    accelerator = Accelerator(cpu=True)
    ds = ScaleAwareMixtureDataset(stores, {"a": 0.5, "b": 0.5}, 1600, 16, batch_size=4)
    loader = prepare_mixture_loader(accelerator, ds)
    assert accelerator.prepare(loader) is loader and loader in accelerator._custom_objects
    assert next(iter(loader))["input_ids"].device == accelerator.device
    with pytest.raises(ValueError, match="rank 1 of 2"):
        prepare_mixture_loader(accelerator, ScaleAwareMixtureDataset(stores, {"a": 0.5, "b": 0.5}, 1600, 16,
                                                                     batch_size=4, rank=1, world_size=2))

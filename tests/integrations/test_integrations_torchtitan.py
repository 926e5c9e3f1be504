"""The torchtitan adapter against torchtitan's own classes (BaseDataLoader, Config.build) and DCP.

torchtitan (0.3.0) needs ``datasets<4.8``, which the ``[dev]`` environment (datasets 5.x) does not
allow, so these tests run only where torchtitan is importable (see README, "Trainers").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from example_runner import run_example
from helpers_store import write_synthetic_stores

pytest.importorskip("torchtitan")

import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.stateful import Stateful  # noqa: E402
from torchtitan.components.dataloader import BaseDataLoader  # noqa: E402

from autoscale_data.integrations.torchtitan import MixtureTitanDataLoader  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dcp_resume_reads_the_uninterrupted_samples(tmp_path: Path) -> None:
    """examples/torchtitan_train.py --tiny: 36 steps of 4 over a 100-sequence pass; DCP checkpoints at steps
    6, 25 (a pass boundary) and 28; resumed in new processes (28 on two data-parallel ranks), each must
    read the same samples (domain, tokens, labels) as the uninterrupted run after that step."""
    r = run_example("torchtitan_train.py", tmp_path)
    assert r["samples"] == 144
    assert {k: (v["samples"], v["equal"], v["dp"], v["compared"]) for k, v in r["resumes"].items()} == {
        "6": (120, True, 1, ["samples"]), "25": (44, True, 1, ["samples"]), "28": (32, True, 2, ["samples"])}


def build(stores: Path, **kw) -> MixtureTitanDataLoader:
    config = MixtureTitanDataLoader.Config(dataset_path=str(stores), weights={"a": 0.5, "b": 0.5},
                                           budget_tokens=24 * 17, **kw)
    return config.build(dp_world_size=1, dp_rank=0, tokenizer=None, seq_len=16, local_batch_size=4,
                        snapshot_every_n_steps=1)  # the trainer's keywords


def test_contract_and_dcp_round_trip(tmp_path: Path) -> None:
    stores = write_synthetic_stores(tmp_path / "stores", {"a": 3000, "b": 3000})
    loader = build(stores)
    assert isinstance(loader, BaseDataLoader) and isinstance(loader, Stateful)
    it = iter(loader)
    input_dict, labels = next(it)
    assert set(input_dict) == {"input"} and input_dict["input"].shape == labels.shape == (4, 16)
    assert torch.equal(input_dict["input"][:, 1:], labels[:, :-1]) and loader.last_domains.shape == (4,)
    stream = [next(it) for _ in range(13)]  # 6 batches per pass: infinite passes by default
    assert torch.equal(stream[5][1], stream[11][1])
    fresh = build(stores)
    take = iter(fresh)
    for _ in range(3):
        next(take)
    dcp.save({"dataloader": fresh}, checkpoint_id=str(tmp_path / "ckpt"))
    resumed = build(stores)
    dcp.load({"dataloader": resumed}, checkpoint_id=str(tmp_path / "ckpt"))
    assert torch.equal(next(iter(resumed))[1], stream[2][1])
    resumed.load_state_dict({})  # an empty state is a fresh start, as for torchtitan's loaders
    with pytest.raises(ValueError, match="not a MixtureTitanDataLoader state"):
        resumed.load_state_dict({"dp_rank_0": b""})
    one_pass = build(stores, infinite=False)
    assert len(list(one_pass)) == 6
    json.loads(fresh.state_dict()["autoscale_data.mixture"])
    with pytest.raises(ValueError, match="budget_tokens"):
        MixtureTitanDataLoader.Config(dataset_path=str(stores), weights={"a": 1.0}).build(
            dp_world_size=1, dp_rank=0, tokenizer=None, seq_len=16, local_batch_size=4)

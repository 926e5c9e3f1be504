"""The Megatron adapter against megatron-core's classes on CPU: save_state, restore in new processes."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from example_runner import run_example
from helpers_store import write_synthetic_stores
from paths import EXAMPLES

pytest.importorskip("megatron.core")

from megatron.core.rerun_state_machine import RerunDataIterator  # noqa: E402

from autoscale_data.dataset import ScaleAwareMixtureDataset  # noqa: E402
from autoscale_data.integrations.megatron import (  # noqa: E402
    MixtureExternalIterator,
    load_megatron_dataloader_state,
    megatron_state_path,
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_restored_iterator_reads_the_uninterrupted_samples(tmp_path: Path) -> None:
    """examples/megatron_external.py --tiny: 20 iterations of 2 micro-batches of 4 over a 100-sequence pass,
    states saved Megatron's way at iterations 3, 13 (after a pass boundary) and 15; resumed in new processes
    (15 on two data-parallel ranks, both from rank 0's file), each must read the same samples (domain,
    sequence id, tokens) as the uninterrupted run after that iteration and, on one rank, train with the
    same losses, bit for bit."""
    r = run_example("megatron_external.py", tmp_path)
    assert r["samples"] == 160
    assert {k: (v["samples"], v["equal"], v["dp"], v["compared"], v.get("same_losses"))
            for k, v in r["resumes"].items()} == {
        "3": (136, True, 1, ["samples", "losses"], True), "13": (56, True, 1, ["samples", "losses"], True),
        "15": (40, True, 2, ["samples"], None)}


def test_the_example_check_fails_without_the_trainer_state(tmp_path: Path, monkeypatch) -> None:
    """examples/megatron_external.py's verdict on a resume that restores the data but not the model's or
    the optimizer's state: the same samples, other losses, so not ok (the same resume restoring both: ok)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import megatron_external as example
    from _tiny import TINY_WEIGHTS, compare_phases, make_tiny_stores

    stores = str(make_tiny_stores(tmp_path / "stores"))
    run = functools.partial(example.train, stores, TINY_WEIGHTS, 100 * 49, 49, iters=6, out=tmp_path, num_workers=0)
    full = run(save_at=(3,))

    def verdict() -> tuple[dict, bool]:
        return compare_phases(full, {3: run(resume=3)}, ((3, 0, 1),), unit="iteration",
                              per_step=example.MICRO_BATCH * example.NUM_MICROBATCHES)

    report, ok = verdict()
    assert ok and report["3"]["same_losses"] and report["3"]["compared"] == ["samples", "losses"]
    for owner in (torch.nn.Module, torch.optim.Optimizer):
        with monkeypatch.context() as m:
            m.setattr(owner, "load_state_dict", lambda self, state: None)
            report, ok = verdict()
        assert not ok and report["3"]["equal"] and not report["3"]["same_losses"], owner


@pytest.fixture
def make(tmp_path: Path):
    stores = write_synthetic_stores(tmp_path / "stores", {"a": 3000, "b": 3000})
    return lambda: MixtureExternalIterator(ScaleAwareMixtureDataset(stores, {"a": 0.6, "b": 0.4}, 40 * 17, 17,
                                                                    batch_size=4))


def test_state_through_megatrons_wrapper_and_file_layout(make, tmp_path: Path) -> None:
    full = RerunDataIterator(iter(make()))
    stream = [next(full) for _ in range(25)]  # 10 micro-batches per pass: crosses two pass boundaries
    assert stream[0]["tokens"].shape == (4, 16) and torch.equal(stream[0]["tokens"][:, 1:], stream[0]["labels"][:, :-1])
    assert [b["seq_index"].tolist() for b in stream[10:20]] == [b["seq_index"].tolist() for b in stream[:10]]
    first = RerunDataIterator(iter(make()))
    for _ in range(13):
        next(first)
    path = tmp_path / "dl" / "iter_0000013" / "mp_rank_00" / "train_dataloader_dprank000.pt"
    path.parent.mkdir(parents=True)
    torch.save({"dataloader_state_dict": first.iterable.save_state()}, path)
    assert megatron_state_path(tmp_path / "dl", 13) == str(path)
    resumed = make()
    load_megatron_dataloader_state(resumed, tmp_path / "dl", 13)
    for want in stream[13:25]:
        got = next(resumed)
        assert got["domain"].tolist() == want["domain"].tolist() and torch.equal(got["tokens"], want["tokens"])
    with pytest.raises(FileNotFoundError, match="iter_0000014"):
        megatron_state_path(tmp_path / "dl", 14)
    with pytest.raises(ValueError, match="not a autoscale_data.integrations.megatron state"):
        resumed.restore_state({"cursor": 3})

"""``MaskedLMCollator``: the runner's BERT masking for an own loop, each sample's mask a function of the
sample, so batching, workers and resumes do not change it."""

from __future__ import annotations

import pytest
import torch
from helpers_store import write_synthetic_stores
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from autoscale_data.dataset import MaskedLMCollator, ScaleAwareMixtureDataset, mask_tokens
from autoscale_data.runner import models


def _samples(n: int, seq_len: int = 64) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(0, 200, (seq_len,), generator=g, dtype=torch.int32) for _ in range(n)]
    return [{"input_ids": t, "labels": t, "domain": i % 3, "seq_index": i // 3} for i, t in enumerate(ids)]


@given(split=st.integers(1, 11), seed=st.integers(0, 3))
@settings(max_examples=20, deadline=None)
def test_a_samples_mask_does_not_depend_on_its_batch(split: int, seed: int) -> None:
    samples = _samples(12)
    collate = MaskedLMCollator(257, seed=seed)
    whole = collate(samples)
    parts = [collate(samples[:split]), collate(samples[split:])]
    assert torch.equal(whole["input_ids"], torch.cat([p["input_ids"] for p in parts]))
    assert torch.equal(whole["labels"], torch.cat([p["labels"] for p in parts]))
    other = MaskedLMCollator(257, seed=seed + 1)(samples)
    assert not torch.equal(whole["labels"], other["labels"])  # another seed, other masks


def test_labels_are_the_masked_positions_only() -> None:
    samples = _samples(60, seq_len=128)
    out = MaskedLMCollator(257, probability=0.15)(samples)
    ids = torch.stack([s["input_ids"] for s in samples]).long()
    predicted = out["labels"] != -100
    assert 0.12 < predicted.float().mean() < 0.18
    assert torch.equal(out["labels"][predicted], ids[predicted])
    assert torch.equal(out["input_ids"][~predicted], ids[~predicted])  # unmasked positions unchanged
    masked = out["input_ids"][predicted]
    assert 0.7 < (masked == 257).float().mean() < 0.9  # [MASK] = vocab_size by default
    assert out["input_ids"].dtype == torch.int64 and out["domain"].tolist()[:3] == [0, 1, 2]
    assert set(MaskedLMCollator(257, model_inputs_only=True)(samples)) == {"input_ids", "labels"}
    assert models.mask_tokens is mask_tokens  # the runner masks its BERT batches with the same function


def test_bad_settings_and_batches_are_named() -> None:
    with pytest.raises(ValueError, match="probability = 1.5"):
        MaskedLMCollator(257, probability=1.5)
    with pytest.raises(ValueError, match="vocab_size"):
        MaskedLMCollator(0)
    with pytest.raises(ValueError, match=r"missing \['domain', 'seq_index'\]"):
        MaskedLMCollator(257)({"input_ids": torch.zeros(2, 8, dtype=torch.long)})


@pytest.mark.timeout(120)
def test_a_resumed_loader_masks_the_rest_as_the_uninterrupted_one(tmp_path) -> None:
    root = write_synthetic_stores(tmp_path, {"a": 6_000, "b": 6_000})

    def loader(state=None):
        ds = ScaleAwareMixtureDataset(root, {"a": 0.5, "b": 0.5}, budget_tokens=4_096, seq_len=32, seed=1)
        if state is not None:
            ds.load_state_dict(state)
        return ds, DataLoader(ds, batch_size=4, collate_fn=MaskedLMCollator(257, seed=7), num_workers=2)
    ds, full = loader()
    batches = list(full)
    state = ds.state_dict(samples_taken=5 * 4)  # 5 batches taken, whatever the workers read ahead

    def by_sample(loaded: list[dict]) -> dict[tuple[int, int], tuple[list[int], list[int]]]:
        return {(d, s): (b["input_ids"][i].tolist(), b["labels"][i].tolist()) for b in loaded
                for i, (d, s) in enumerate(zip(b["domain"].tolist(), b["seq_index"].tolist(), strict=True))}

    before, after = by_sample(batches), by_sample(list(loader(state)[1]))
    assert len(after) == len(before) - 20 and all(before[k] == v for k, v in after.items())

"""The HF Trainer callback: the mixture state in every checkpoint, resumed in O(1) with
``ignore_data_skip=True``, the same batches and bit-identical losses as the uninterrupted run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_store import write_synthetic_stores

pytest.importorskip("accelerate")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from autoscale_data.dataset import ScaleAwareMixtureDataset  # noqa: E402
from autoscale_data.integrations.hf_trainer import STATE_FILE, MixtureStateCallback  # noqa: E402


class _Record(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def _fit(root: Path, out: Path, *, resume: str | None = None, skip: bool = False) -> tuple[list[float], list[Any]]:
    torch.manual_seed(0)
    ds = ScaleAwareMixtureDataset(root, {"a": 0.5, "b": 0.5}, budget_tokens=10 * 4 * 32, seq_len=32, seed=3)
    read: list[Any] = []

    def collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        read.append([(s["domain"], s["seq_index"]) for s in samples])
        ids = torch.stack([torch.as_tensor(s["input_ids"]).long() for s in samples])
        return {"input_ids": ids, "labels": ids}

    args = TrainingArguments(output_dir=str(out), max_steps=10, per_device_train_batch_size=4, learning_rate=3e-3,
                             logging_steps=1, save_steps=4, save_strategy="steps", report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False,
                             ignore_data_skip=not skip, seed=0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=257, n_positions=32, n_embd=32, n_layer=1, n_head=2))
    state, record = MixtureStateCallback(ds), _Record()
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=collate, callbacks=[state, record])
    if resume is not None:
        assert state.resume(out / resume) == 4
    trainer.train(resume_from_checkpoint=None if resume is None else str(out / resume))
    return record.losses, read


@pytest.mark.timeout(300)
def test_a_resume_reads_only_the_rest_and_matches_bit_for_bit(tmp_path: Path) -> None:
    root = write_synthetic_stores(tmp_path / "stores", {"a": 8_000, "b": 8_000})
    full_losses, full_read = _fit(root, tmp_path / "out")
    assert (tmp_path / "out" / "checkpoint-4" / STATE_FILE).is_file() and len(full_read) == 10
    losses, read = _fit(root, tmp_path / "out", resume="checkpoint-4")
    assert read == full_read[4:]  # 6 batches: nothing before the checkpoint is read again
    assert losses == full_losses[4:]  # dropout and all: the same numbers
    with pytest.raises(ValueError, match="ignore_data_skip=True"):
        _fit(root, tmp_path / "out", resume="checkpoint-4", skip=True)


def test_a_checkpoint_without_the_state_is_named(tmp_path: Path) -> None:
    root = write_synthetic_stores(tmp_path / "stores", {"a": 2_000, "b": 2_000})
    ds = ScaleAwareMixtureDataset(root, {"a": 0.5, "b": 0.5}, budget_tokens=1024, seq_len=32)
    with pytest.raises(FileNotFoundError, match="saved without MixtureStateCallback"):
        MixtureStateCallback(ds).resume(tmp_path)
    with pytest.raises(ValueError, match="expected a ScaleAwareMixtureDataset"):
        MixtureStateCallback([1, 2])  # type: ignore[arg-type]

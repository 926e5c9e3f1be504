"""The HF Trainer callback, fixed and online mixing: the mixture state in every checkpoint, restored by the
callback itself when ``train()`` resumes; a run killed after a checkpoint and resumed reads the same batches
(and computes the same losses) as the uninterrupted run, with 0 and 2 DataLoader workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers_store import write_synthetic_stores

pytest.importorskip("accelerate")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from autoscale_data.dataset import OnlineMixture, ScaleAwareMixtureDataset  # noqa: E402
from autoscale_data.integrations.hf_trainer import (  # noqa: E402
    STATE_FILE,
    MixtureTrainerCallback,
    online_loss,
    whole_batches,
)
from autoscale_data.online import ODM  # noqa: E402

L = 16  # tokens per sequence
B = 4  # sequences per step
START = {"a": 0.5, "b": 0.3, "c": 0.2}


class Killed(Exception):
    """Raised where the training process would be killed."""


class _Record(TrainerCallback):
    def __init__(self, die_at: int | None) -> None:
        self.losses: list[float] = []
        self.die_at = die_at

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))

    def on_save(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.die_at:  # after the checkpoint and the mixture callback's file
            raise Killed


class _Trainer(Trainer):
    online: OnlineMixture | None
    seen: list[tuple[int, int]]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
        self.seen.extend(zip(inputs["domain"].tolist(), inputs["seq_index"].tolist(), strict=True))
        if self.online is not None:
            return online_loss(self.online, model, inputs)
        inputs.pop("domain")
        inputs.pop("seq_index", None)
        return model(input_ids=inputs["input_ids"].long(), labels=inputs["labels"].long()).loss


def _collate(samples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    ids = torch.stack([torch.as_tensor(s["input_ids"]).long() for s in samples])
    return {"input_ids": ids, "labels": ids, "domain": torch.tensor([int(s["domain"]) for s in samples]),
            "seq_index": torch.tensor([int(s["seq_index"]) for s in samples])}


def _fit(root: Path, out: Path, *, every: int | None, workers: int, steps: int, save: int,
         die_at: int | None = None, resume: bool = False, **overrides: Any) -> tuple[_Trainer, _Record]:
    batch = B if workers else None  # with workers the dataset yields whole batches
    ds = ScaleAwareMixtureDataset(root, START, steps * B * L, L, seed=3, batch_size=batch, verify="size")
    online = OnlineMixture(ds, ODM(ds.domain_names), every=every, sequences_per_step=B) if every else None
    callback = MixtureTrainerCallback(online or ds)
    record = _Record(die_at)
    args = dict(output_dir=str(out), max_steps=steps, per_device_train_batch_size=1 if workers else B,
                learning_rate=3e-3, logging_steps=1, save_steps=save, save_strategy="steps", report_to=[],
                use_cpu=True, dataloader_num_workers=workers, disable_tqdm=True, remove_unused_columns=False,
                ignore_data_skip=True, seed=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=257, n_positions=L, n_embd=16, n_layer=1, n_head=2))
    trainer = _Trainer(model=model, args=TrainingArguments(**{**args, **overrides}), train_dataset=ds,
                       data_collator=whole_batches if workers else _collate, callbacks=[callback, record])
    trainer.online, trainer.seen = online, []
    if die_at is None:
        trainer.train(resume_from_checkpoint=True if resume else None)
    else:
        with pytest.raises(Killed):
            trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer, record


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("hf_trainer") / "stores",
                                  {"a": 40_000, "b": 40_000, "c": 40_000})


# Every (every, workers) pair takes 1-3 minutes on the 2-core CPU: the default run keeps the crash case
# (every=16 with the Trainer's read-ahead) and the fixed mix with workers; `pytest -m heavy` runs them all.
_FAST = {(16, 0), (None, 2)}
_CASES = [pytest.param(e, w, marks=() if (e, w) in _FAST else pytest.mark.heavy)
          for e in (None, 2, 16, 100) for w in (0, 2)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("every", "workers"), _CASES)
def test_a_killed_run_resumes_bit_for_bit(root: Path, tmp_path: Path, every: int | None, workers: int) -> None:
    """Fixed mix (every=None) and online mixing: killed after a checkpoint, resumed from it with
    ``resume_from_checkpoint=True`` and no other call, killed again after the resumed run's checkpoint
    (saved at the global step, after a resume) and resumed again. Before the callback set the lookahead
    the Trainer's one-batch read-ahead needs, every=16 and 100 crashed at the first segment boundary."""
    steps = 10 if every is None else 2 * every + 6  # the kills fall before and after segment boundaries
    save = steps // 3
    full, full_log = _fit(root, tmp_path / "full", every=every, workers=workers, steps=steps, save=save)
    assert len(full.seen) == steps * B
    first, first_log = _fit(root, tmp_path / "run", every=every, workers=workers, steps=steps, save=save,
                            die_at=save)
    assert (tmp_path / "run" / f"checkpoint-{save}" / STATE_FILE).is_file()
    second, second_log = _fit(root, tmp_path / "run", every=every, workers=workers, steps=steps, save=save,
                              die_at=2 * save, resume=True)
    rest, rest_log = _fit(root, tmp_path / "run", every=every, workers=workers, steps=steps, save=save, resume=True)
    seen = first.seen[: save * B] + second.seen[: save * B] + rest.seen
    assert seen == full.seen  # nothing read again, nothing skipped
    losses = first_log.losses[:save] + second_log.losses[:save] + rest_log.losses
    assert losses == full_log.losses  # dropout and all: the same numbers
    if every is not None:
        assert full.online is not None and rest.online is not None and full.online.lookahead == 2
        assert rest.online.segment_log() == full.online.segment_log() and full.online.updates == steps // every
        assert rest.online.controller.state_dict() == full.online.controller.state_dict()


def test_wrong_training_arguments_and_a_missing_state_are_named(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"ignore_data_skip=True \(the callback moves the data"):
        _fit(root, tmp_path, every=None, workers=0, steps=4, save=2, ignore_data_skip=False)
    with pytest.raises(ValueError, match=r"remove_unused_columns=False"):
        _fit(root, tmp_path, every=2, workers=0, steps=4, save=2, remove_unused_columns=True)
    with pytest.raises(ValueError, match=r"per_device_train_batch_size=1 and data_collator=whole_batches"):
        _fit(root, tmp_path, every=None, workers=2, steps=4, save=2, per_device_train_batch_size=4)
    ds = ScaleAwareMixtureDataset(root, START, 40 * L, L)
    with pytest.raises(ValueError, match=r"dataloader_num_workers=0, or a dataset with batch_size=B"):
        MixtureTrainerCallback(ds)._check_args(TrainingArguments(output_dir=str(tmp_path), ignore_data_skip=True,
                                                                 dataloader_num_workers=2, use_cpu=True))
    with pytest.raises(ValueError, match="expected a ScaleAwareMixtureDataset or an OnlineMixture"):
        MixtureTrainerCallback([1, 2])  # type: ignore[arg-type]
    _fit(root, tmp_path / "plain", every=None, workers=0, steps=4, save=2)
    (tmp_path / "plain" / "checkpoint-4" / STATE_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=r"resuming at step 4: .*checkpoint-4/mixture_state.json' does not "
                                                r"exist.*resume_from="):
        _fit(root, tmp_path / "plain", every=None, workers=0, steps=6, save=2, resume=True)

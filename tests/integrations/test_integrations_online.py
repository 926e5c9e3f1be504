"""Online mixing where users train: the Lightning callback and the HF Trainer callback, resumed from checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers_store import write_synthetic_stores
from torch.nn import functional as F

from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.online import ODM

L = 16
SIZES = {"a": 20_000, "b": 8_000, "c": 6_000}
START = {"a": 0.5, "b": 0.3, "c": 0.2}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_stores(tmp_path_factory.mktemp("online_int") / "stores", SIZES)


def keys(batch: dict[str, Any]) -> list[tuple[int, int]]:
    return list(zip(batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True))


@pytest.mark.timeout(300)
def test_lightning_callback_resumes_the_online_run(root: Path, tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from autoscale_data.integrations.lightning import MixtureDataModule, OnlineMixingCallback

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(257, 8)
            self.out = torch.nn.Linear(8, 257)
            self.seen: list[tuple[int, int]] = []

        def training_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, Any]:
            self.seen.extend(keys(batch))
            ids = batch["input_ids"].long()
            per_token = F.cross_entropy(self.out(self.embed(ids[:, :-1])).transpose(1, 2), ids[:, 1:],
                                        reduction="none")
            return {"loss": per_token.mean(), "token_losses": per_token.detach()}

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit(max_steps: int, ckpt: str | None = None, save: bool = False) -> tuple[Tiny, MixtureDataModule]:
        torch.manual_seed(0)
        dm = MixtureDataModule(root, START, 600 * L, L, batch_size=4,
                               online=lambda ds: OnlineMixture(ds, ODM(ds.domain_names), every=3))
        model = Tiny()
        callbacks: list[Any] = [OnlineMixingCallback()]
        if save:
            callbacks.append(pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=5, save_top_k=-1,
                                                          filename="{step}"))
        trainer = pl.Trainer(max_steps=max_steps, callbacks=callbacks, logger=False, enable_progress_bar=False,
                             enable_model_summary=False, accelerator="cpu", enable_checkpointing=save)
        trainer.fit(model, datamodule=dm, ckpt_path=ckpt)
        return model, dm

    full, dm_full = fit(14, save=True)
    assert len(full.seen) == 14 * 4 and dm_full.online.updates == 4
    resumed, dm_resumed = fit(14, ckpt=str(tmp_path / "step=5.ckpt"))
    assert resumed.seen == full.seen[5 * 4:]  # the batches after the checkpoint, in order
    assert dm_resumed.online.segment_log() == dm_full.online.segment_log()
    assert dm_resumed.online.controller.state_dict() == dm_full.online.controller.state_dict()


@pytest.mark.timeout(300)
def test_hf_trainer_callback_resumes_the_online_run(root: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from autoscale_data.dataset import ScaleAwareMixtureDataset
    from autoscale_data.integrations.hf import OnlineMixingTrainerCallback, online_loss

    class OnlineTrainer(Trainer):
        seen: list[tuple[int, int]]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            self.seen.extend(zip(inputs["domain"].tolist(), inputs["seq_index"].tolist(), strict=True))
            return online_loss(self.online, model, inputs)

    def train(max_steps: int, resume: str | None = None) -> tuple[OnlineTrainer, OnlineMixture]:
        ds = ScaleAwareMixtureDataset(root, START, 600 * L, L, batch_size=None, verify="size")
        online = OnlineMixture(ds, ODM(ds.domain_names), every=2, sequences_per_step=4)
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=257, n_positions=L))
        args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=max_steps, per_device_train_batch_size=4,
                                 save_steps=3, save_strategy="steps", report_to=[], remove_unused_columns=False,
                                 logging_steps=100, use_cpu=True, dataloader_num_workers=0, seed=0)
        trainer = OnlineTrainer(model=model, args=args, train_dataset=ds,
                                callbacks=[OnlineMixingTrainerCallback(online)])
        trainer.online, trainer.seen = online, []
        trainer.train(resume_from_checkpoint=resume)
        return trainer, online

    full, online_full = train(8)
    assert len(full.seen) == 8 * 4 and online_full.updates == 4
    resumed, online_resumed = train(8, resume=str(tmp_path / "hf" / "checkpoint-3"))
    assert resumed.seen[-5 * 4:] == full.seen[3 * 4:]  # HF re-reads the first 3 batches to skip them
    assert online_resumed.segment_log() == online_full.segment_log()
    assert online_resumed.controller.state_dict() == online_full.controller.state_dict()

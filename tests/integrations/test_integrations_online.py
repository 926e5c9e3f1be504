"""Online mixing where users train: the Lightning callback, resumed from checkpoints (the HF Trainer's is in
test_integrations_hf_trainer.py)."""

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

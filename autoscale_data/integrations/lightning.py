"""PyTorch Lightning: a ``LightningDataModule`` whose data position goes into the Lightning checkpoint.

Lightning checkpoints ``datamodule.state_dict()`` and restores it before ``train_dataloader()``; its
fetcher reads one batch ahead, so the module counts a batch as consumed in ``on_before_batch_transfer``,
called for the batch about to be trained on (docs/ecosystem.md). A resumed fit therefore continues with
exactly the batch after the checkpoint's step::

    dm = MixtureDataModule("stores/", weights, budget_tokens=N, seq_len=1024, batch_size=8, num_workers=2)
    trainer = L.Trainer(max_steps=..., callbacks=[ModelCheckpoint(every_n_train_steps=1000)])
    trainer.fit(model, datamodule=dm)                        # later, in a new process:
    trainer.fit(model, datamodule=MixtureDataModule(...same args...), ckpt_path="last.ckpt")

Lightning files the state under the datamodule's class name: resume with the same class (a
renamed subclass finds no state and starts the data from the beginning).

The dataset is built in ``setup()``, after Lightning has started the process group, so each rank
reads its own slice. Subclass it to add ``val_dataloader`` (e.g. a
:class:`~autoscale_data.dataset.MixtureValidationDataset`). If the LightningModule also overrides
``on_before_batch_transfer``, Lightning calls the datamodule's only: call ``super()`` there or count with
``dm.loader.mark_consumed(batch)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._loader import require_library

require_library("lightning", "autoscale_data.integrations.lightning", "lightning", "lightning")

import lightning.pytorch as pl  # noqa: E402

from ..dataset import ScaleAwareMixtureDataset  # noqa: E402
from ._loader import MixtureLoader  # noqa: E402

__all__ = ["MixtureDataModule", "OnlineMixingCallback"]


class MixtureDataModule(pl.LightningDataModule):
    """The mixture stream as a Lightning datamodule with an exact, checkpointed resume.

    Args:
        domains, weights, budget_tokens, seq_len, seed: as for
            :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset`.
        batch_size: samples per batch (per process).
        num_workers: DataLoader worker processes.
        pin_memory: pin batches (Lightning moves them to the device).
        online: ``dataset -> OnlineMixture`` (e.g. ``lambda ds: OnlineMixture(ds, ADO(ds.domain_names),
            every=50)``): the stream follows a controller; add :class:`OnlineMixingCallback` to the
            trainer. Its segment log, controller and loss window are in the datamodule's state.
        **settings: further dataset settings (``max_epochs``, ``shuffle_window``, ``output``, ...).

    Attributes:
        dataset, loader: built in ``setup("fit")``.

    Raises:
        FileNotFoundError, ValueError: as the dataset would at ``setup()``, already when the module is
            built (the stores are opened once to check them, on one rank, without checksums).
    """

    def __init__(self, domains: Any, weights: Any, budget_tokens: int, seq_len: int, seed: int = 0, *,
                 batch_size: int, num_workers: int = 0, pin_memory: bool = False,
                 online: Callable[[ScaleAwareMixtureDataset], Any] | None = None, **settings: Any) -> None:
        super().__init__()
        if "rank" in settings or "world_size" in settings:
            raise ValueError("MixtureDataModule takes rank and world_size from Lightning's process group; "
                             "do not pass them")
        self._dataset_args = (domains, weights, int(budget_tokens), int(seq_len), int(seed))
        self._dataset_settings = {**settings, "batch_size": batch_size}
        self._loader_args = {"num_workers": num_workers, "pin_memory": pin_memory}
        self._pending: Mapping[str, Any] | None = None
        self._online_factory = online
        self.online: Any = None  # the OnlineMixture, when built with online=
        self.dataset: ScaleAwareMixtureDataset | None = None
        self.loader: MixtureLoader | None = None
        # fail here, not at setup(): a missing store, domains the weights do not name, a bad setting.
        # One rank and no checksums: the stores' manifests and file sizes, the weights and the budget.
        ScaleAwareMixtureDataset(*self._dataset_args, **{**self._dataset_settings, "rank": 0, "world_size": 1,
                                                         "verify": "none"})

    def _build(self) -> MixtureLoader:
        if self.loader is None:
            self.dataset = ScaleAwareMixtureDataset(*self._dataset_args, **self._dataset_settings)
            if self._online_factory is not None:  # before any state is loaded: the state holds its log
                self.online = self._online_factory(self.dataset)
            self.loader = MixtureLoader(self.dataset, count_on_yield=False, **self._loader_args)
        if self._pending is not None:
            self.loader.load_state_dict(self._pending)
            self._pending = None
        return self.loader

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self._build()

    def train_dataloader(self) -> MixtureLoader:
        return self._build()

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        trainer = self.trainer
        if self.loader is not None and trainer is not None and trainer.training and isinstance(batch, Mapping):
            self.loader.mark_consumed(batch)
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The data position after the batches trained on so far (what Lightning checkpoints)."""
        if self.loader is None:
            return dict(self._pending) if self._pending is not None else {}
        return self.loader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a checkpoint's state (applied now, or when the dataset is built)."""
        if not state_dict:
            return
        self._pending = state_dict
        if self.loader is not None:
            self._build()


class OnlineMixingCallback(pl.Callback):
    """Feeds a :class:`MixtureDataModule`'s ``online`` mixture every step and updates it every ``every``
    steps.

    The LightningModule's ``training_step`` returns the per-token losses beside the loss::

        def training_step(self, batch, batch_idx):
            per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            return {"loss": per_token.mean(), "token_losses": per_token.detach()}

    After each batch the callback adds them to ``online.meter`` (with ``batch["domain"]``); when the
    optimizer step count (``trainer.global_step``, so gradient accumulation counts once) reaches a
    multiple of ``every`` it calls ``online.update(step)`` (one all-reduce of the window over the
    ranks). Lightning runs checkpoint callbacks after this one, so a checkpoint at an update step
    holds the segment it decided. The state lives in the datamodule's (no callback state).
    """

    def __init__(self, key: str = "token_losses") -> None:
        self.key = key
        self._updated = -1

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        online = getattr(trainer.datamodule, "online", None)
        if online is None:
            raise ValueError("OnlineMixingCallback needs a MixtureDataModule built with online=...")
        if not isinstance(outputs, Mapping) or self.key not in outputs:
            raise ValueError(f"training_step must return a dict with {self.key!r} (the per-token losses, [B, "
                             "T]) for OnlineMixingCallback")
        online.meter.update(outputs[self.key], batch["domain"])
        step = int(trainer.global_step)
        if step != self._updated and online.due(step):
            online.update(step)
            self._updated = step

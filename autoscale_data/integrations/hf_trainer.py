"""HF ``transformers.Trainer``: resume the mixture in O(1) instead of re-reading every skipped batch.

On ``trainer.train(resume_from_checkpoint=...)`` the Trainer skips the batches already trained by
reading them again (``skip_first_batches``): for a large budget that re-reads, and with workers
re-tokenizes nothing but still loads, every sample before the checkpoint. The mixture's own state
jumps there at once. :class:`MixtureStateCallback` writes it into every checkpoint folder
(``mixture_state.json``: the dataset state and torch's CPU RNG state); set ``ignore_data_skip=True``
so the Trainer does not skip batches, and call :meth:`MixtureStateCallback.resume` before
``train``::

    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024)
    args = TrainingArguments(..., max_steps=ds.total_sequences // batch, ignore_data_skip=True)
    state = MixtureStateCallback(ds)
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[state])
    state.resume("out/checkpoint-500")          # only when resuming; the dataset continues there
    trainer.train(resume_from_checkpoint="out/checkpoint-500")

With ``ignore_data_skip=True`` the Trainer (5.x, ``_inner_training_loop``) also leaves torch's RNG
as it is, and creating the DataLoader iterator draws a seed from torch's global RNG: the callback
puts the saved RNG state back at the first step after the resume, so dropout draws what the
uninterrupted run drew and the losses match it bit for bit (CPU; on GPU, non-deterministic kernels
aside). One process: under several processes the Trainer's accelerate loader re-shards an
iterable dataset; use :mod:`autoscale_data.integrations.accelerate` there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ._loader import require_library

require_library("accelerate", "autoscale_data.integrations.hf_trainer", "transformers", "transformers")

import torch  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from .._io import atomic_write_json  # noqa: E402
from ..dataset import ScaleAwareMixtureDataset  # noqa: E402

__all__ = ["STATE_FILE", "MixtureStateCallback"]

#: The file the callback writes into each ``checkpoint-<step>`` folder.
STATE_FILE = "mixture_state.json"


class MixtureStateCallback(TrainerCallback):
    """Saves the mixture's data position (and torch's RNG) with every Trainer checkpoint; resumes both.

    Args:
        dataset: the Trainer's ``train_dataset``.

    Samples taken are counted as ``steps x per_device_train_batch_size x gradient_accumulation_steps``
    since the start (or since the resumed checkpoint), the batches the Trainer has trained on.
    """

    def __init__(self, dataset: ScaleAwareMixtureDataset) -> None:
        if not isinstance(dataset, ScaleAwareMixtureDataset):
            raise ValueError(f"dataset = {type(dataset).__name__} is invalid: expected a ScaleAwareMixtureDataset")
        self.dataset = dataset
        self.start_step = 0
        self._rng: torch.Tensor | None = None

    def resume(self, checkpoint: str | os.PathLike[str]) -> int:
        """Load the dataset state saved in ``checkpoint`` (a ``checkpoint-<step>`` folder); returns its step.

        Raises:
            FileNotFoundError: the folder has no ``mixture_state.json`` (saved without this callback).
        """
        path = Path(checkpoint) / STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{os.fspath(path)!r} does not exist: the checkpoint was saved without "
                                    "MixtureStateCallback, so the data position is unknown (resume with "
                                    "ignore_data_skip=False to let the Trainer skip the trained batches)")
        saved = json.loads(path.read_text())
        self.dataset.load_state_dict(saved["dataset"])
        self.start_step = int(saved["step"])
        self._rng = torch.tensor(saved["rng"], dtype=torch.uint8)
        return self.start_step

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._rng is not None and not args.ignore_data_skip:
            raise ValueError("MixtureStateCallback.resume() moved the dataset to the checkpoint already: set "
                             "TrainingArguments(ignore_data_skip=True), or the Trainer skips those batches again")

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._rng is not None:  # after the Trainer built its DataLoader iterator (which drew a seed)
            torch.set_rng_state(self._rng)
            self._rng = None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
        taken = (state.global_step - self.start_step) * per_step
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / STATE_FILE, {"step": state.global_step,
                                                 "dataset": self.dataset.state_dict(samples_taken=taken),
                                                 "rng": torch.get_rng_state().tolist()})

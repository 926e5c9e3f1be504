"""Hugging Face ``Trainer``: online mixing through a ``TrainerCallback``, its state saved with each checkpoint.

``Trainer`` computes one loss per batch; the per-domain losses need the per-token ones, so the
``compute_loss`` of your ``Trainer`` subclass calls :func:`online_loss` (it drops the ``domain`` /
``seq_index`` columns before the model, adds the per-token losses to ``online.meter`` and returns
the mean). :class:`OnlineMixingTrainerCallback` then updates the mixture at every step that is a
multiple of ``every`` (``on_step_end``: ``state.global_step`` counts optimizer steps, so gradient
accumulation counts once), writes ``online_mixing.json`` (the segment log, the controller's state,
the loss window) into every checkpoint folder (``on_save``), and on a resumed ``train()`` loads it
from ``output_dir/checkpoint-<step>`` (``on_train_begin``, before the loader is read)::

    ds = ScaleAwareMixtureDataset("stores/", weights, N, 1024)                  # per sample: Trainer batches
    online = OnlineMixture(ds, ADO(ds.domain_names), every=50, sequences_per_step=8 * world_size)

    class OnlineTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return online_loss(online, model, inputs)

    args = TrainingArguments(..., remove_unused_columns=False)                 # keep "domain"
    OnlineTrainer(model=model, args=args, train_dataset=ds,
                  callbacks=[OnlineMixingTrainerCallback(online)]).train(resume_from_checkpoint=...)

``Trainer`` resumes an iterable dataset by reading and dropping the batches already trained on,
and its loader reads one batch ahead: both need segments already decided, which the default
``lookahead`` (``ceil(prefetch_steps / every)``, at least 1 segment) covers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ._loader import require_library

require_library("accelerate", "autoscale_data.integrations.hf", "transformers", "transformers")

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from .._io import atomic_write_json  # noqa: E402

__all__ = ["ONLINE_STATE_FILE", "OnlineMixingTrainerCallback", "online_loss"]

#: The file in each checkpoint folder that holds the online mixing state.
ONLINE_STATE_FILE = "online_mixing.json"


def online_loss(online: Any, model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    """A causal LM's mean next-token loss; its per-token losses go to ``online.meter`` by ``inputs["domain"]``."""
    domain = inputs.pop("domain")
    inputs.pop("seq_index", None)
    ids = inputs["input_ids"]
    labels = inputs.get("labels", ids)
    logits = model(input_ids=ids).logits[:, :-1]
    per_token = F.cross_entropy(logits.transpose(1, 2).float(), labels[:, 1:], reduction="none",
                                ignore_index=-100)
    mask = labels[:, 1:] != -100
    online.meter.update(per_token.detach(), domain, mask=mask)
    return (per_token * mask).sum() / mask.sum().clamp_min(1)


class OnlineMixingTrainerCallback(TrainerCallback):
    """Updates an :class:`~autoscale_data.dataset.online.OnlineMixture` from ``Trainer`` and checkpoints it.

    Args:
        online: the online mixture of the ``train_dataset``.
        resume_from: a checkpoint folder to load the state from at ``on_train_begin``; default
            ``output_dir/checkpoint-<global step>`` when ``train()`` resumes (global step > 0).
    """

    def __init__(self, online: Any, resume_from: str | os.PathLike[str] | None = None) -> None:
        self.online = online
        self.resume_from = resume_from

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = self.resume_from
        if folder is None and state.global_step > 0:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder is None:
            return
        path = Path(folder) / ONLINE_STATE_FILE
        if not path.is_file():
            raise ValueError(f"resuming at step {state.global_step}: {path} is missing (the online mixing state "
                             "of that checkpoint)")
        self.online.load_state_dict(json.loads(path.read_text()))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.online.due(state.global_step):
            self.online.update(state.global_step)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        online_state = self.online.state_dict()  # all-reduces the window: every rank calls it
        if state.is_world_process_zero:
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(folder / ONLINE_STATE_FILE, online_state)

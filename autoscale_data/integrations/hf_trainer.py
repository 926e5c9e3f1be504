"""HF ``transformers.Trainer``: one callback for a fixed or an online mixture, resumed from its checkpoint.

:class:`MixtureTrainerCallback` writes ``mixture_state.json`` (the data position at the global step,
an online mixture's state, torch's CPU RNG) into every checkpoint folder and reads it back by itself
when ``train()`` resumes; online, it also updates the mixture every ``every`` optimizer steps and
makes it decide two segments ahead (the Trainer's loader reads one batch ahead). It needs
``ignore_data_skip=True``, online ``remove_unused_columns=False``, one process (several:
:mod:`autoscale_data.integrations.accelerate`) and, with ``dataloader_num_workers > 0``, whole batches
taken one at a time (``batch_size=B``, ``per_device_train_batch_size=1``, ``data_collator=whole_batches``);
a wrong argument raises ``ValueError`` with its reason (the Trainer's side: docs/ecosystem.md)::

    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024)          # fixed mix
    args = TrainingArguments(..., ignore_data_skip=True, remove_unused_columns=False)
    Trainer(model=model, args=args, train_dataset=ds,
            callbacks=[MixtureTrainerCallback(ds)]).train(resume_from_checkpoint=...)  # None or a checkpoint

    online = OnlineMixture(ds, ODM(ds.domain_names), every=50, sequences_per_step=8)          # online mix

    class OnlineTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return online_loss(online, model, inputs)     # the per-domain losses go to online.meter

    OnlineTrainer(model=model, args=args, train_dataset=ds,
                  callbacks=[MixtureTrainerCallback(online)]).train(resume_from_checkpoint=...)

The checkpoint is the one ``train(resume_from_checkpoint=...)`` resumes: ``resume_from``, else
``args.resume_from_checkpoint`` when it is a folder, else ``output_dir/checkpoint-<global step>``
(what ``resume_from_checkpoint=True`` picks). The saved RNG state is put back at the first step, after
the Trainer's DataLoader iterator drew its seed, so the losses match the uninterrupted run bit for bit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._loader import require_library

require_library("accelerate", "autoscale_data.integrations.hf_trainer", "transformers", "transformers")

import torch  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from .._io import atomic_write_json  # noqa: E402
from ..dataset import OnlineMixture, ScaleAwareMixtureDataset  # noqa: E402

__all__ = ["STATE_FILE", "TRAINER_LOOKAHEAD", "MixtureTrainerCallback", "online_loss", "whole_batches"]

#: The file the callback writes into each ``checkpoint-<step>`` folder.
STATE_FILE = "mixture_state.json"
#: Segments an online mixture decides ahead under the Trainer (its loader reads one batch ahead).
TRAINER_LOOKAHEAD = 2


def whole_batches(items: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The Trainer's ``data_collator`` for a dataset that yields whole batches
    (``per_device_train_batch_size=1``): the one batch, as it is."""
    if len(items) != 1:
        raise ValueError(f"whole_batches got {len(items)} dataset batches: set per_device_train_batch_size=1 "
                         "(the dataset's batch_size is the batch)")
    return items[0]


def online_loss(online: Any, model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    """A causal LM's mean next-token loss; its per-token losses go to ``online.meter`` by
    ``inputs["domain"]``."""
    domain = inputs.pop("domain")
    inputs.pop("seq_index", None)
    ids = inputs["input_ids"].long()
    labels = inputs.get("labels", ids).long()
    logits = model(input_ids=ids).logits[:, :-1]
    per_token = F.cross_entropy(logits.transpose(1, 2).float(), labels[:, 1:], reduction="none",
                                ignore_index=-100)
    mask = labels[:, 1:] != -100
    online.meter.update(per_token.detach(), domain, mask=mask)
    return (per_token * mask).sum() / mask.sum().clamp_min(1)


class MixtureTrainerCallback(TrainerCallback):
    """Checkpoints and resumes a mixture (fixed or online) with the HF ``Trainer`` (see the module docstring).

    Args:
        mixture: the ``train_dataset`` (a :class:`~autoscale_data.dataset.ScaleAwareMixtureDataset`),
            or the :class:`~autoscale_data.dataset.OnlineMixture` it follows; an online mixture's
            lookahead is raised to :data:`TRAINER_LOOKAHEAD` here (so build it the same way on resume).
        resume_from: the checkpoint folder to resume from when ``train()`` resumes; default: the
            one the Trainer resumes (see the module docstring).

    Raises:
        ValueError: ``mixture`` is neither.
    """

    def __init__(self, mixture: ScaleAwareMixtureDataset | OnlineMixture, *,
                 resume_from: str | os.PathLike[str] | None = None) -> None:
        if isinstance(mixture, OnlineMixture):
            mixture.require_lookahead(TRAINER_LOOKAHEAD)
            self.online: OnlineMixture | None = mixture
            self.dataset: ScaleAwareMixtureDataset = mixture.dataset
        elif isinstance(mixture, ScaleAwareMixtureDataset):
            self.online, self.dataset = None, mixture
        else:
            raise ValueError(f"mixture = {type(mixture).__name__} is invalid: expected a "
                             "ScaleAwareMixtureDataset or an OnlineMixture")
        self.resume_from = resume_from
        self._rng: torch.Tensor | None = None

    def _check_args(self, args: Any) -> None:
        wrong = []
        if not args.ignore_data_skip:
            wrong.append("ignore_data_skip=True (the callback moves the data to the checkpoint itself; the "
                         "Trainer must not skip the trained batches again)")
        if self.online is not None and args.remove_unused_columns:
            wrong.append("remove_unused_columns=False (keep the 'domain' column)")
        if args.world_size > 1:
            wrong.append(f"one process, not {args.world_size} (the Trainer's accelerate loader re-shards an "
                         "iterable dataset: use autoscale_data.integrations.accelerate)")
        if self.dataset.batch_size is None and args.dataloader_num_workers > 0:
            wrong.append(f"dataloader_num_workers=0, or a dataset with batch_size=B and "
                         f"per_device_train_batch_size=1, data_collator=whole_batches (with "
                         f"{args.dataloader_num_workers} workers the Trainer's "
                         "DataLoader batches each worker's samples apart, out of the stream's order)")
        if self.dataset.batch_size is not None and args.per_device_train_batch_size != 1:
            wrong.append("per_device_train_batch_size=1 and data_collator=whole_batches (the dataset yields "
                         f"whole batches of {self.dataset.batch_size}), not "
                         f"{args.per_device_train_batch_size}")
        if wrong:
            raise ValueError("MixtureTrainerCallback needs TrainingArguments with " + "; ".join(wrong))

    def _samples_per_step(self, args: Any) -> int:
        """This process's samples per optimizer step."""
        per_batch = self.dataset.batch_size or args.per_device_train_batch_size
        return int(per_batch * args.gradient_accumulation_steps)

    def _checkpoint(self, args: Any, state: Any) -> Path:
        if self.resume_from is not None:
            return Path(self.resume_from)
        named = getattr(args, "resume_from_checkpoint", None)
        if isinstance(named, str | os.PathLike) and (Path(named) / STATE_FILE).is_file():
            return Path(named)
        return Path(args.output_dir) / f"checkpoint-{state.global_step}"

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._check_args(args)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._check_args(args)
        if state.global_step == 0:  # a fresh start
            return
        path = self._checkpoint(args, state) / STATE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"resuming at step {state.global_step}: {os.fspath(path)!r} does not "
                                    "exist (the checkpoint was saved without MixtureTrainerCallback, or lies "
                                    "elsewhere: pass MixtureTrainerCallback(..., resume_from=<checkpoint "
                                    "folder>))")
        saved = json.loads(path.read_text())
        if saved["dataset"].get("step") != state.global_step:
            raise ValueError(f"{os.fspath(path)!r} holds the data position of step "
                             f"{saved['dataset'].get('step')}, the Trainer resumes at step "
                             f"{state.global_step}")
        self.dataset.load_state_dict(saved["dataset"])  # online: the segment log and controller too
        self._rng = torch.tensor(saved["rng"], dtype=torch.uint8)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._rng is not None:  # after the Trainer built its DataLoader iterator (which drew a seed)
            torch.set_rng_state(self._rng)
            self._rng = None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.online is not None and self.online.due(state.global_step):
            self.online.update(state.global_step)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        dataset_state = self.dataset.state_dict(step=state.global_step,
                                                samples_per_step=self._samples_per_step(args))
        if not state.is_world_process_zero:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / STATE_FILE,
                          {"dataset": dataset_state, "rng": torch.get_rng_state().tolist()})

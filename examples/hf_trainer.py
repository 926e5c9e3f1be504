"""Example (c): Hugging Face ``Trainer`` with the mixture dataset as ``train_dataset``.

:class:`ScaleAwareMixtureDataset` is a torch ``IterableDataset`` whose samples are dicts with
``input_ids`` and ``labels`` (plus ``domain`` / ``seq_index``, which the Trainer drops because the
model's ``forward`` does not take them). An iterable dataset has no length, so give ``max_steps``:
one pass over the budget is ``total_sequences / (batch size × devices × accumulation)`` steps::

    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024)
    steps = ds.total_sequences // (per_device_batch * world_size * grad_accum)
    Trainer(model=model, args=TrainingArguments(..., max_steps=steps), train_dataset=ds).train()

Under ``torchrun``/``accelerate launch`` with several processes, build the dataset after the
process group exists (or pass ``rank=``/``world_size=``) so each process reads its own slice.

Per-domain training loss: ``DomainLossTrainer`` below keeps the ``domain`` column
(``remove_unused_columns=False``), takes it out of the model's inputs, and feeds the per-token
losses to a :class:`~autoscale_data.dataset.DomainLossMeter`; every log line then carries
``loss/<domain>`` (token-weighted, summed over processes). Trainer's own ``loss`` divides by every
label position, ``B × seq_len``, although a causal model predicts ``seq_len - 1`` of them per row, so
it reads about ``(seq_len - 1) / seq_len`` of the per-domain means.

Checkpoints and resume: :class:`~autoscale_data.integrations.hf_trainer.MixtureTrainerCallback` in
``callbacks`` writes the dataset's state (and torch's RNG) into every ``checkpoint-<step>`` and, when
``trainer.train(resume_from_checkpoint=...)`` resumes, reads it back by itself: the data continues in
O(1) after the checkpoint's step with bit-identical losses. Set ``ignore_data_skip=True`` (the
callback refuses the default, under which the Trainer re-reads every trained batch to skip it)::

    args = TrainingArguments(..., save_steps=500, ignore_data_skip=True, remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[MixtureTrainerCallback(ds)])
    trainer.train(resume_from_checkpoint=True)    # the latest checkpoint in output_dir (None: from the start)

For online mixing pass the ``OnlineMixture`` to the same callback (see ``integrations.hf_trainer``).
``--tiny`` trains the whole pass, then a run stopped after its checkpoint at step 4, then resumes it
in a new ``Trainer`` and checks that the resumed steps log the uninterrupted run's losses.

Run: ``python examples/hf_trainer.py --tiny`` (a 2-layer GPT-2 built from its config, no download).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

import torch
from _tiny import add_data_args  # examples/_tiny.py: the options every example shares
from torch.nn import functional as F
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from autoscale_data.dataset import DomainLossMeter, ScaleAwareMixtureDataset
from autoscale_data.integrations.hf_trainer import MixtureTrainerCallback


class LossLog(TrainerCallback):
    """Keeps the logged training losses."""

    def __init__(self) -> None:
        self.losses: list[float] = []
        self.domain_losses: list[dict[str, float]] = []

    def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))
            self.domain_losses.append({k[len("loss/"):]: v for k, v in logs.items() if k.startswith("loss/")})


class StopAt(TrainerCallback):
    """Stops training after step ``step`` (after its checkpoint), as a killed job would have."""

    def __init__(self, step: int | None) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.step:
            control.should_training_stop = True


class DomainLossTrainer(Trainer):
    """``Trainer`` that also logs the training loss per domain (``loss/<name>``) at every log step."""

    def __init__(self, *args: Any, domain_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.domain_loss = DomainLossMeter(domain_names)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[no-untyped-def]
        domain = inputs.pop("domain")
        inputs.pop("seq_index", None)
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        with torch.no_grad():  # the model's loss per token, as its forward computes it (labels shifted by one)
            labels = inputs["labels"][:, 1:]
            per_token = F.cross_entropy(outputs.logits[:, :-1].transpose(1, 2).float(), labels, reduction="none")
            self.domain_loss.update(per_token, domain, mask=labels != -100)
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if "loss" in logs:  # the training log: this window's per-domain means, over every process
            means = self.domain_loss.compute(all_reduce=self.args.world_size > 1)
            logs.update({f"loss/{n}": v for n, v in means.items()})
            self.domain_loss.reset()
        super().log(logs, *args, **kwargs)


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, out_dir: str, *,
          batch_size: int = 8, vocab_size: int = 257, save_steps: int = 4, stop: int | None = None,
          resume: bool = False) -> dict[str, object]:
    """Train a tiny GPT-2 for one pass over the mixture with ``Trainer`` (stopped after step ``stop``, or
    resumed from the latest checkpoint in ``out_dir``); returns a summary."""
    torch.manual_seed(0)
    ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens=budget_tokens, seq_len=seq_len)
    steps = ds.total_sequences // batch_size
    config = GPT2Config(vocab_size=vocab_size, n_positions=seq_len, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=vocab_size - 1, eos_token_id=vocab_size - 1)
    model = GPT2LMHeadModel(config)
    args = TrainingArguments(output_dir=out_dir, max_steps=steps, per_device_train_batch_size=batch_size,
                             learning_rate=3e-3, warmup_steps=0, logging_steps=1, save_steps=save_steps,
                             save_strategy="steps", report_to=[], use_cpu=True, dataloader_num_workers=0,
                             disable_tqdm=True, seed=0,
                             ignore_data_skip=True,  # the callback moves the data to the checkpoint itself
                             remove_unused_columns=False)  # keep `domain` for the per-domain loss
    log = LossLog()
    trainer = DomainLossTrainer(model=model, args=args, train_dataset=ds,
                                callbacks=[MixtureTrainerCallback(ds), log, StopAt(stop)],
                                domain_names=ds.domain_names)
    trainer.train(resume_from_checkpoint=True if resume else None)
    return {"steps": trainer.state.global_step, "planned_steps": steps, "losses": log.losses,
            "domain_losses": log.domain_losses, "sequences_per_domain": ds.sequences_per_domain}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and train a few steps")
    parser.add_argument("--vocab-size", type=int, default=257, help="the stores' tokenizer vocabulary size")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            from _tiny import TINY_WEIGHTS, make_tiny_stores, result

            stores = str(make_tiny_stores(f"{tmp}/stores"))
            summary = train(stores, TINY_WEIGHTS, 80 * 48, 48, f"{tmp}/out")
            losses = summary["losses"]
            ok = summary["steps"] == summary["planned_steps"] and len(losses) > 1 and losses[-1] < losses[0]
            ok = ok and all(set(d) == set(TINY_WEIGHTS) for d in summary["domain_losses"])
            first = train(stores, TINY_WEIGHTS, 80 * 48, 48, f"{tmp}/resumed", stop=4)  # checkpoint-4, then stop
            rest = train(stores, TINY_WEIGHTS, 80 * 48, 48, f"{tmp}/resumed", resume=True)  # a new Trainer
            resumed_same = first["losses"] + rest["losses"] == losses and len(rest["losses"]) == len(losses) - 4
            result(example="hf_trainer", ok=ok and resumed_same, resumed_same=resumed_same, **summary)
            return 0 if ok else 1
        if not args.domains or not args.weights:
            parser.error("give --domains and --weights, or --tiny")
        summary = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len,
                        f"{tmp}/out", vocab_size=args.vocab_size)
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Example (i): torchtitan with ``MixtureTitanDataLoader``; its state rides in the checkpoint.

Name the loader in a torchtitan training config::

    from autoscale_data.integrations.torchtitan import MixtureTitanDataLoader

    config = Trainer.Config(
        ...,
        dataloader=MixtureTitanDataLoader.Config(dataset_path="stores/", weights={"web": 0.7, "code": 0.3},
                                                 budget_tokens=10**10, num_workers=2),
    )

The trainer builds it with ``config.dataloader.build(dp_world_size=..., dp_rank=..., tokenizer=...,
seq_len=..., local_batch_size=..., snapshot_every_n_steps=...)`` and checkpoints it as the
``"dataloader"`` state of torch.distributed.checkpoint (DCP).

Run: ``python examples/torchtitan_train.py --tiny`` (needs torchtitan importable): builds the
loader through its ``Config.build`` with the trainer's keywords, trains a tiny model pulling one
batch per step as ``Trainer.batch_generator`` does, saves ``{"dataloader": loader}`` with DCP at
three steps, resumes each with ``dcp.load`` in a new process (one of them on 2 data-parallel ranks)
and checks that every resumed run reads exactly the samples (tokens and domains) the uninterrupted
run read after that step. (torchtitan's ``Trainer`` itself needs tensorboard, wandb and a
torchtitan model on an accelerator; this runs the data-loader contract with torchtitan's classes.)

Losses are not compared (each resume's ``"compared": ["samples"]`` in the ``RESULT`` line): only the
loader's state is saved and restored here, not the model's and optimizer's, which torchtitan's
``Trainer`` checkpoints itself, so a resumed run trains another model. ``megatron_external.py`` and
``accelerate_train.py`` restore both and compare the losses too, bit for bit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
import torchtitan
from _tiny import resume_example  # examples/_tiny.py: the save / resume driver the examples share
from plain_pytorch import TinyLM
from torch.nn import functional as F
from torchtitan.components.dataloader import BaseDataLoader, DataloaderExhaustedError

from autoscale_data.integrations.torchtitan import MixtureTitanDataLoader

LOCAL_BATCH = 4


def samples(input_dict: dict[str, torch.Tensor], labels: torch.Tensor, domains: torch.Tensor) -> list[list[Any]]:
    """Per sample of a batch: ``[domain, digest of its input and labels]``."""
    return [[int(d), hashlib.sha256(x.numpy().tobytes() + y.numpy().tobytes()).hexdigest()[:16]]
            for d, x, y in zip(domains.tolist(), input_dict["input"], labels, strict=True)]


def batch_generator(loader: BaseDataLoader):  # the shape of torchtitan's Trainer.batch_generator
    data_iterator = iter(loader)
    while True:
        try:
            batch = next(data_iterator)
        except StopIteration as ex:
            raise DataloaderExhaustedError() from ex
        yield batch


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, steps: int, out: Path,
          num_workers: int, dp: int = 1, save_at: tuple[int, ...] = (), resume: int | None = None) -> list[list[Any]]:
    """Steps of a tiny model on ``dp`` simulated data-parallel ranks; returns every sample read, in stream order."""
    torch.manual_seed(0)
    config = MixtureTitanDataLoader.Config(dataset_path=domains, weights=weights, budget_tokens=budget_tokens,
                                           seed=1, num_workers=num_workers)
    loaders = [config.build(dp_world_size=dp, dp_rank=r, tokenizer=None, seq_len=seq_len,
                            local_batch_size=LOCAL_BATCH, snapshot_every_n_steps=1) for r in range(dp)]
    if resume is not None:
        for loader in loaders:  # every rank loads the same (global) position
            dcp.load({"dataloader": loader}, checkpoint_id=str(out / f"step-{resume}"))
    model = TinyLM(257)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    iterators = [batch_generator(loader) for loader in loaders]
    seen: list[list[Any]] = []
    for step in range(resume or 0, steps):
        rows = []
        for loader, it in zip(loaders, iterators, strict=True):
            input_dict, labels = next(it)
            logits = model(input_dict["input"])
            F.cross_entropy(logits.transpose(1, 2), labels).backward()
            rows.append(samples(input_dict, labels, loader.last_domains))
        for j in range(max(len(r) for r in rows)):  # rank r holds positions r, r + dp, ...: stream order
            seen += [r[j] for r in rows if j < len(r)]
        optimizer.step()
        optimizer.zero_grad()
        if step + 1 in save_at:
            dcp.save({"dataloader": loaders[0]}, checkpoint_id=str(out / f"step-{step + 1}"))
    return seen


PER_PASS = -(-100 // LOCAL_BATCH)  # 100 sequences: 25 steps per pass
POINTS = ((6, 0, 1), (PER_PASS, 2, 1), (28, 0, 2))  # the resumes of --tiny: (step, workers, data-parallel ranks)


def main(argv: list[str] | None = None) -> int:
    return resume_example(argv, script=__file__, description=__doc__.splitlines()[0], train=train, count="steps",
                          default=36, unit="step", out_help="where the checkpoints go", per_step=LOCAL_BATCH,
                          points=POINTS, seq_len=48, example="torchtitan_train", torchtitan=torchtitan.__version__)


if __name__ == "__main__":
    raise SystemExit(main())

"""Example (h): Megatron ``--dataloader-type external`` with ``MixtureExternalIterator`` and ``--dataloader-save``.

In Megatron-LM, return the iterator from your ``train_valid_test_datasets_provider`` and run with
``--dataloader-type external --dataloader-save DIR``::

    from autoscale_data.integrations.megatron import MixtureExternalIterator, load_megatron_dataloader_state

    def train_valid_test_datasets_provider(train_val_test_num_samples):
        args = get_args()
        ds = ScaleAwareMixtureDataset(stores, weights, budget_tokens=N, seq_len=args.seq_length + 1,
                                      batch_size=args.micro_batch_size, rank=mpu.get_data_parallel_rank(),
                                      world_size=mpu.get_data_parallel_world_size())
        it = MixtureExternalIterator(ds, num_workers=args.num_workers)
        if args.load and args.dataloader_save:
            load_megatron_dataloader_state(it, args.dataloader_save, args.iteration)
        return it, None, None

Megatron-LM's training package is not on PyPI, so ``--tiny`` runs the same protocol with
megatron-core's own pieces on CPU: the iterator wrapped as Megatron wraps it
(``RerunDataIterator(iter(obj))``), ``num_microbatches`` ``next()`` calls per iteration, the state
written where and how Megatron's ``maybe_save_dataloader_state`` writes it, beside the model,
optimizer and RNG state (Megatron's ``--save`` checkpoint), and all restored in new processes (one
with 2 data-parallel ranks reading rank 0's file). Every resumed run must read exactly the samples
(tokens and domains) the uninterrupted run read after that iteration, and, on the same data-parallel
size, train with the same loss at every iteration, bit for bit. On 2 ranks an iteration trains on
other samples, so its losses differ by design: there only the samples are compared (each resume's
``compared`` in the ``RESULT`` line).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import megatron.core
import torch
from _tiny import resume_example  # examples/_tiny.py: the save / resume driver the examples share
from megatron.core.rerun_state_machine import RerunDataIterator
from plain_pytorch import TinyLM
from torch.nn import functional as F

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.integrations.megatron import MixtureExternalIterator, load_megatron_dataloader_state

MICRO_BATCH, NUM_MICROBATCHES = 4, 2


def samples(batch: dict[str, Any]) -> list[list[Any]]:
    """Per sample of a micro-batch: ``[domain, seq_index, digest of its tokens and labels]``."""
    out = []
    for d, s, tok, lab in zip(batch["domain"].tolist(), batch["seq_index"].tolist(), batch["tokens"],
                              batch["labels"], strict=True):
        digest = hashlib.sha256(tok.numpy().tobytes() + lab[-1:].numpy().tobytes()).hexdigest()[:16]
        out.append([d, s, digest])
    return out


def save_like_megatron(iterator: RerunDataIterator, dataloader_save: Path, iteration: int, dp_rank: int) -> None:
    """What ``maybe_save_dataloader_state`` does (tensor and pipeline rank 0)."""
    path = dataloader_save / f"iter_{iteration:07d}" / "mp_rank_00" / f"train_dataloader_dprank{dp_rank:03d}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"dataloader_state_dict": iterator.iterable.save_state()}, path)


def checkpoint_path(save: Path, iteration: int) -> Path:
    """Where Megatron's ``save_checkpoint`` writes the model, optimizer and RNG state (tensor and pipeline rank 0)."""
    return save / f"iter_{iteration:07d}" / "mp_rank_00" / "model_optim_rng.pt"


def save_checkpoint(save: Path, iteration: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """The model, optimizer and RNG state at ``iteration``, in Megatron's layout and key names."""
    path = checkpoint_path(save, iteration)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"iteration": iteration, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng_state": {"torch_rng_state": torch.get_rng_state()}}, path)


def load_checkpoint(save: Path, iteration: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Restore what :func:`save_checkpoint` wrote (Megatron does so before it builds the data iterators)."""
    saved = torch.load(checkpoint_path(save, iteration), map_location="cpu", weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng_state"]["torch_rng_state"])


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, iters: int, out: Path,
          num_workers: int, dp: int = 1, save_at: tuple[int, ...] = (),
          resume: int | None = None) -> dict[str, list[Any]]:
    """Megatron's loop shape on ``dp`` simulated data-parallel ranks; returns every sample read, in stream
    order, and the loss of every iteration run (the mean over its micro-batches and ranks)."""
    torch.manual_seed(0)
    model = TinyLM(257)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    if resume is not None:
        # the RNG state restored with the model: the iterator draws nothing from torch's RNG (its DataLoader
        # seeds from a generator of its own), so a model with dropout resumes exactly too
        load_checkpoint(out / "checkpoints", resume, model, optimizer)
    iterators = []
    for rank in range(dp):
        ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens, seq_len, seed=1, batch_size=MICRO_BATCH,
                                      rank=rank, world_size=dp)
        it = MixtureExternalIterator(ds, num_workers=num_workers)
        if resume is not None:
            load_megatron_dataloader_state(it, out / "dataloader", resume)
        iterators.append(RerunDataIterator(iter(it)))  # build_train_valid_test_data_iterators, external type
    seen: list[list[Any]] = []
    losses: list[float] = []
    for iteration in range(resume or 0, iters):
        micro_losses = []
        for _ in range(NUM_MICROBATCHES):
            per_rank = [next(it) for it in iterators]  # forward_backward_func: one next() per micro-batch
            for batch in per_rank:
                loss = F.cross_entropy(model(batch["tokens"]).transpose(1, 2), batch["labels"], reduction="none")
                loss = (loss * batch["loss_mask"]).mean()
                loss.backward()
                micro_losses.append(loss.item())
            rows = [samples(b) for b in per_rank]
            for j in range(max(len(r) for r in rows)):  # rank r holds positions r, r + dp, ...: stream order
                seen += [r[j] for r in rows if j < len(r)]
        optimizer.step()
        optimizer.zero_grad()
        losses.append(sum(micro_losses) / len(micro_losses))  # the resumes compare it, bit for bit
        if iteration + 1 in save_at:
            save_checkpoint(out / "checkpoints", iteration + 1, model, optimizer)
            for rank, it in enumerate(iterators):
                save_like_megatron(it, out / "dataloader", iteration + 1, rank)
    return {"samples": seen, "losses": losses}


PER_PASS = -(-100 // (MICRO_BATCH * NUM_MICROBATCHES))  # 100 sequences: a pass is 12.5 iterations
POINTS = ((3, 0, 1), (PER_PASS, 2, 1), (15, 0, 2))  # the resumes of --tiny: (iteration, workers, data-parallel ranks)


def main(argv: list[str] | None = None) -> int:
    return resume_example(argv, script=__file__, description=__doc__.splitlines()[0], train=train, count="iters",
                          default=20, unit="iteration", out_help="where the checkpoints and dataloader states go",
                          per_step=MICRO_BATCH * NUM_MICROBATCHES, points=POINTS, seq_len=49,
                          example="megatron_external", megatron_core=megatron.core.__version__)


if __name__ == "__main__":
    raise SystemExit(main())

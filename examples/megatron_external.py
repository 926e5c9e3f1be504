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
written where and how Megatron's ``maybe_save_dataloader_state`` writes it, and restored in new
processes (one with 2 data-parallel ranks reading rank 0's file); every resumed run must read
exactly the samples (tokens and domains) the uninterrupted run read after that iteration.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import megatron.core
import torch
from _tiny import add_data_args, add_resume_args, check_resumes, finish_phase  # examples/_tiny.py
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


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, iters: int, out: Path,
          num_workers: int, dp: int = 1, save_at: tuple[int, ...] = (), resume: int | None = None) -> list[list[Any]]:
    """Megatron's loop shape on ``dp`` simulated data-parallel ranks; returns every sample read, in stream order."""
    torch.manual_seed(0)
    iterators = []
    for rank in range(dp):
        ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens, seq_len, seed=1, batch_size=MICRO_BATCH,
                                      rank=rank, world_size=dp)
        it = MixtureExternalIterator(ds, num_workers=num_workers)
        if resume is not None:
            load_megatron_dataloader_state(it, out / "dataloader", resume)
        iterators.append(RerunDataIterator(iter(it)))  # build_train_valid_test_data_iterators, external type
    model = TinyLM(257)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    seen: list[list[Any]] = []
    for iteration in range(resume or 0, iters):
        for _ in range(NUM_MICROBATCHES):
            per_rank = [next(it) for it in iterators]  # forward_backward_func: one next() per micro-batch
            for batch in per_rank:
                loss = F.cross_entropy(model(batch["tokens"]).transpose(1, 2), batch["labels"], reduction="none")
                (loss * batch["loss_mask"]).mean().backward()
            rows = [samples(b) for b in per_rank]
            for j in range(max(len(r) for r in rows)):  # rank r holds positions r, r + dp, ...: stream order
                seen += [r[j] for r in rows if j < len(r)]
        optimizer.step()
        optimizer.zero_grad()
        if iteration + 1 in save_at:
            for rank, it in enumerate(iterators):
                save_like_megatron(it, out / "dataloader", iteration + 1, rank)
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and check the resume")
    parser.add_argument("--iters", type=int, default=20)
    add_resume_args(parser, unit="iteration", out_help="where the dataloader states go")
    args = parser.parse_args(argv)
    if not args.tiny:
        if not args.domains or not args.weights or not args.out:
            parser.error("give --domains, --weights and --out, or --tiny")
        seen = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len, iters=args.iters,
                     out=Path(args.out), num_workers=args.num_workers, dp=args.dp, resume=args.resume,
                     save_at=tuple(int(s) for s in args.save_at.split(",") if s))
        return finish_phase(args, seen)

    from _tiny import TINY_WEIGHTS, make_tiny_stores, result

    per_pass = -(-100 // (MICRO_BATCH * NUM_MICROBATCHES))  # 100 sequences: a pass is 12.5 iterations
    points = ((3, 0, 1), (per_pass, 2, 1), (15, 0, 2))  # (iteration, workers, data-parallel ranks)
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--domains", str(make_tiny_stores(Path(tmp) / "stores")), "--weights", json.dumps(TINY_WEIGHTS),
                  "--budget-tokens", str(100 * 49), "--seq-len", "49", "--iters", str(args.iters), "--out", tmp]
        full, report, ok = check_resumes(__file__, common, points, per_step=MICRO_BATCH * NUM_MICROBATCHES,
                                         num_workers=args.num_workers, unit="iteration")
    ok = ok and len(full) == args.iters * MICRO_BATCH * NUM_MICROBATCHES
    result(example="megatron_external", ok=ok, samples=len(full), resumes=report, megatron_core=megatron.core.__version__)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Example (f): PyTorch Lightning with ``MixtureDataModule``; ``Trainer.fit(ckpt_path=...)`` resumes the data exactly.

The datamodule's ``state_dict`` (the data position after the last step trained on) goes into every
Lightning checkpoint, and ``fit(ckpt_path=...)`` restores it::

    from autoscale_data.integrations.lightning import MixtureDataModule

    dm = MixtureDataModule("stores/", weights, budget_tokens=N, seq_len=1024, batch_size=8, num_workers=2)
    trainer = L.Trainer(max_steps=steps, callbacks=[ModelCheckpoint(every_n_train_steps=500, save_top_k=-1)])
    trainer.fit(model, datamodule=dm)
    # later, in a new process (any number of devices):
    trainer.fit(model, datamodule=MixtureDataModule(...same args...), ckpt_path="path/to.ckpt")

Run: ``python examples/lightning_train.py --tiny``: trains ``--steps`` steps (across a pass
boundary) with a checkpoint after every step (its loader hides ``len()``, so Lightning reads a
batch ahead of each step), then resumes from three of them, each in a new
process with another worker count, and checks that every resumed run trains on exactly the
batches (tokens and domains) the uninterrupted run trained on after that step, with the same losses,
bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from _tiny import add_data_args, check_two_to_one, compare_resumes  # examples/_tiny.py
from lightning.pytorch.callbacks import ModelCheckpoint
from plain_pytorch import TinyLM
from torch.nn import functional as F

from autoscale_data.dataset import DomainLossMeter
from autoscale_data.integrations.lightning import MixtureDataModule


def batch_record(batch: dict[str, Any]) -> dict[str, Any]:
    """What a step trained on: its domains, sequence ids and a digest of its tokens."""
    tokens = batch["input_ids"].to(torch.int64).cpu().numpy().tobytes()
    return {"domain": batch["domain"].tolist(), "seq_index": batch["seq_index"].tolist(),
            "tokens": hashlib.sha256(tokens).hexdigest()}


class LitTinyLM(pl.LightningModule):
    """``TinyLM`` trained with Lightning; keeps a record of every batch it trains on."""

    def __init__(self, vocab_size: int, domain_names: list[str], lr: float = 3e-3) -> None:
        super().__init__()
        self.model = TinyLM(vocab_size)
        self.lr = lr
        self.seen: list[dict[str, Any]] = []
        self.domain_loss = DomainLossMeter(domain_names)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        self.seen.append({"step": self.global_step, **batch_record(batch)})
        ids = batch["input_ids"].long()
        per_token = F.cross_entropy(self.model(ids[:, :-1]).transpose(1, 2), ids[:, 1:], reduction="none")
        self.domain_loss.update(per_token, batch["domain"])
        loss = per_token.mean()
        self.seen[-1]["loss"] = loss.item()  # the resumes compare it too, bit for bit
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class _Unsized:
    """The loader without ``len()``: Lightning then reads one batch ahead of the step it trains."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self) -> Any:
        return iter(self.loader)


def fit(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, steps: int, out: Path,
        num_workers: int, ckpt_path: str | None = None, batch_size: int = 8, vocab_size: int = 257,
        unsized: bool = False, devices: int = 1, record: str | None = None) -> list[dict]:
    """Train (or resume) to ``steps`` steps, a checkpoint after each; returns the batches trained on.

    With ``devices > 1`` Lightning starts one process per device (DDP over gloo on the CPU); each
    rank writes its batches to ``RECORD.rank<r>.json``.
    """
    pl.seed_everything(0, verbose=False)
    dm = MixtureDataModule(domains, weights, budget_tokens, seq_len, seed=1, batch_size=batch_size,
                           num_workers=num_workers)
    if unsized:  # an instance attribute: the checkpoint key (the class name) stays the same
        dm.train_dataloader = lambda: _Unsized(MixtureDataModule.train_dataloader(dm))  # type: ignore[method-assign]
    model = LitTinyLM(vocab_size, sorted(weights))
    checkpoints = ModelCheckpoint(dirpath=out / "ckpt", filename="{step}", every_n_train_steps=1, save_top_k=-1)
    trainer = pl.Trainer(max_steps=steps, max_epochs=-1, accelerator="cpu", devices=devices, logger=False,
                         strategy="ddp" if devices > 1 else "auto", callbacks=[checkpoints],
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, datamodule=dm, ckpt_path=ckpt_path)
    if record:  # written whole, then renamed: the launching process may exit before rank 1 is done
        path = Path(f"{record}.rank{trainer.global_rank}.json")
        path.with_suffix(".tmp").write_text(json.dumps(model.seen))
        path.with_suffix(".tmp").replace(path)
    return model.seen


def samples_of(record: dict[str, Any]) -> list[Any]:
    """A step's samples ``(domain, sequence id)``."""
    return list(zip(record["domain"], record["seq_index"], strict=True))


def _wait_for(path: Path, timeout: float = 120.0) -> Path:
    """``path`` once it exists (a DDP rank other than 0 may finish after the launching process)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise FileNotFoundError(f"{path} did not appear within {timeout} s")
        time.sleep(0.2)
    return path


def _self(args: list[str]) -> Any:
    """Run this script in a new process; returns its ``PHASE`` output (``None`` with ``--record``)."""
    from _tiny import run_phase

    return run_phase(__file__, args, quiet_ok="--record" in args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and check the resume")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--out", help="checkpoint directory (a temporary one by default)")
    parser.add_argument("--resume", help="a checkpoint to resume from")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)  # one fit, print its record
    parser.add_argument("--unsized", action="store_true", help=argparse.SUPPRESS)  # hide len(): Lightning prefetches
    parser.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)  # >1: DDP over gloo
    parser.add_argument("--record", help=argparse.SUPPRESS)  # each rank writes RECORD.rank<r>.json
    args = parser.parse_args(argv)
    if args.phase:
        seen = fit(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len, steps=args.steps,
                   out=Path(args.out), num_workers=args.num_workers, ckpt_path=args.resume, unsized=args.unsized,
                   devices=args.devices, record=args.record)
        if not args.record:  # with --record every rank writes a file (DDP ranks share stdout)
            print("PHASE " + json.dumps(seen), flush=True)
        return 0
    if not args.tiny:
        if not args.domains or not args.weights:
            parser.error("give --domains and --weights, or --tiny")
        with tempfile.TemporaryDirectory() as tmp:
            seen = fit(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len,
                       steps=args.steps, out=Path(args.out or tmp), num_workers=args.num_workers, ckpt_path=args.resume)
        print(f"trained {len(seen)} steps")
        return 0

    from _tiny import TINY_WEIGHTS, make_tiny_stores, result

    with tempfile.TemporaryDirectory() as tmp:
        data = ["--domains", str(make_tiny_stores(Path(tmp) / "stores")), "--weights", json.dumps(TINY_WEIGHTS),
                "--budget-tokens", str(100 * 48), "--seq-len", "48", "--phase"]
        common = [*data, "--steps", str(args.steps)]
        # the uninterrupted run: its loader has no len(), so Lightning's fetcher holds the next batch
        # at every checkpoint; the module must count only the batches trained on
        full = _self([*common, "--out", f"{tmp}/full", "--num-workers", str(args.num_workers), "--unsized"])
        per_pass = -(-100 // 8)  # 100 sequences, batches of 8: the pass ends after step 13
        resumes = {}
        for k, workers, unsized in ((5, 0, []), (per_pass, 2, ["--unsized"]), (per_pass + 3, 1, [])):
            ckpt = Path(tmp) / "full" / "ckpt" / f"step={k}.ckpt"
            resumes[k] = _self([*common, "--out", f"{tmp}/resume{k}", "--num-workers", str(workers),
                                "--resume", str(ckpt), *unsized])
        # two DDP processes (gloo) checkpoint at step 4; one process resumes the global stream
        _self([*data, "--steps", "6", "--out", f"{tmp}/two", "--num-workers", "1", "--devices", "2", "--record", f"{tmp}/two"])
        two = [json.loads(_wait_for(Path(f"{tmp}/two.rank{r}.json")).read_text()) for r in range(2)]
        after_two = _self([*data, "--steps", "8", "--out", f"{tmp}/after_two",
                           "--num-workers", "0", "--resume", f"{tmp}/two/ckpt/step=4.ckpt"])
    ok = len(full) == args.steps and [r["step"] for r in full] == list(range(args.steps))
    report, resumed_ok = compare_resumes(full, resumes, steps=args.steps, rows=samples_of)
    two_to_one, elastic = check_two_to_one(two, after_two, rows=samples_of, label="2 DDP processes checkpointed")
    ok = ok and resumed_ok and elastic
    result(example="lightning_train", ok=ok, two_to_one=two_to_one, steps=len(full), batches_per_pass=per_pass,
           resumes=report, lightning=pl.__version__)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

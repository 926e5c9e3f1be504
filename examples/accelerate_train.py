"""Example (g): HF Accelerate; ``accelerator.save_state`` / ``load_state`` resume the data exactly.

:func:`~autoscale_data.integrations.accelerate.prepare_mixture_loader` builds the loader on
``accelerator.device`` and registers it for checkpointing; ``accelerator.prepare`` hands it back
unchanged (the mixture already gives each process its own slice)::

    from autoscale_data.integrations.accelerate import prepare_mixture_loader

    accelerator = Accelerator()
    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024, batch_size=8)
    loader = prepare_mixture_loader(accelerator, ds, num_workers=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.load_state("ckpt/step_1000")        # when resuming
    for batch in loader:
        ...                                        # forward, accelerator.backward, optimizer.step
        accelerator.save_state(f"ckpt/step_{step}")  # now and then

Run: ``python examples/accelerate_train.py --tiny``: trains ``--steps`` steps (across a pass
boundary) saving the state at three steps, then resumes from each in a new process with another
worker count, and checks that every resumed run trains on exactly the batches (tokens and domains)
the uninterrupted run trained on after that step, with the same losses, bit for bit. Then two processes (``torchrun``, gloo) train and
save, and one process resumes: it reads exactly what the two would have read next, in stream order.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import accelerate
import torch
from _tiny import add_data_args, check_two_to_one, compare_resumes  # examples/_tiny.py
from accelerate import Accelerator
from accelerate.utils import set_seed
from plain_pytorch import TinyLM
from torch.nn import functional as F

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.integrations.accelerate import prepare_mixture_loader


def batch_record(batch: dict[str, Any], step: int) -> dict[str, Any]:
    """What a step trained on: per sample, its domain, sequence id and a digest of its tokens."""
    rows = [[d, q, hashlib.sha256(ids.to(torch.int64).cpu().numpy().tobytes()).hexdigest()[:16]]
            for d, q, ids in zip(batch["domain"].tolist(), batch["seq_index"].tolist(), batch["input_ids"],
                                 strict=True)]
    return {"step": step, "samples": rows}


def samples_of(record: dict[str, Any]) -> list[Any]:
    """A step's samples ``[domain, sequence id, token digest]``."""
    return record["samples"]


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, steps: int, out: Path,
          num_workers: int, save_at: tuple[int, ...] = (), resume: str | None = None, batch_size: int = 8,
          vocab_size: int = 257) -> list[dict[str, Any]]:
    """Train (or resume) to ``steps`` steps; returns the batches trained on."""
    accelerator = Accelerator(cpu=True)  # under torchrun: one process per rank, gloo
    set_seed(0)
    ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens, seq_len, seed=1, batch_size=batch_size)
    loader = prepare_mixture_loader(accelerator, ds, num_workers=num_workers)
    model = TinyLM(vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer, prepared = accelerator.prepare(model, optimizer, loader)
    if prepared is not loader:
        raise RuntimeError("accelerator.prepare replaced the mixture loader")
    step = 0
    if resume:
        accelerator.load_state(resume)
        step = json.loads((Path(resume) / "step.json").read_text())["step"]
    seen = []
    while step < steps:
        for batch in loader:
            seen.append(batch_record(batch, step))
            ids = batch["input_ids"].long()
            loss = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:])
            accelerator.backward(loss)
            seen[-1]["loss"] = loss.item()  # the resumes compare it too, bit for bit
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step in save_at:
                accelerator.save_state(str(out / f"step_{step}"))
                if accelerator.is_main_process:
                    (out / f"step_{step}" / "step.json").write_text(json.dumps({"step": step}))
            if step >= steps:
                break
    return seen


def _self(args: list[str], record: Path, processes: int = 1) -> list[list[dict[str, Any]]]:
    """Run this script in new process(es) (``torchrun`` for several); returns each rank's records."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"),
                                                                     str(Path(__file__).parent)])))
    launch = [sys.executable]
    if processes > 1:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
                  "--master_port", str(port)]
    proc = subprocess.run([*launch, __file__, *args, "--record", str(record)], capture_output=True, text=True,
                          env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return [json.loads(Path(f"{record}.rank{r}.json").read_text()) for r in range(processes)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and check the resume")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--out", help="state directory (a temporary one by default)")
    parser.add_argument("--save-at", default="", help="comma-separated steps to save the state at")
    parser.add_argument("--resume", help="a saved state directory to resume from")
    parser.add_argument("--record", help=argparse.SUPPRESS)  # write each rank's batches to RECORD.rank<r>.json
    args = parser.parse_args(argv)
    save_at = tuple(int(s) for s in args.save_at.split(",") if s)
    if not args.tiny:
        if not args.domains or not args.weights:
            parser.error("give --domains and --weights, or --tiny")
        with tempfile.TemporaryDirectory() as tmp:
            seen = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len,
                         steps=args.steps, out=Path(args.out or tmp), num_workers=args.num_workers, save_at=save_at,
                         resume=args.resume)
        if args.record:
            Path(f"{args.record}.rank{int(os.environ.get('RANK', 0))}.json").write_text(json.dumps(seen))
        print(f"trained {len(seen)} steps", flush=True)
        return 0

    from _tiny import TINY_WEIGHTS, make_tiny_stores, result

    per_pass = -(-100 // 8)  # 100 sequences, batches of 8: the pass ends after step 13
    points = ((5, 0), (per_pass, 2), (per_pass + 3, 1))
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--domains", str(make_tiny_stores(Path(tmp) / "stores")), "--weights", json.dumps(TINY_WEIGHTS),
                  "--budget-tokens", str(100 * 48), "--seq-len", "48"]
        full = _self([*common, "--steps", str(args.steps), "--out", f"{tmp}/full", "--num-workers",
                      str(args.num_workers), "--save-at", ",".join(str(k) for k, _ in points)], Path(tmp) / "full")[0]
        resumes = {k: _self([*common, "--steps", str(args.steps), "--out", f"{tmp}/resume{k}", "--num-workers",
                             str(workers), "--resume", f"{tmp}/full/step_{k}"], Path(tmp) / f"resume{k}")[0]
                   for k, workers in points}
        # two processes (torchrun, gloo) save at step 4; one process resumes: the global stream continues
        two = _self([*common, "--steps", "6", "--out", f"{tmp}/two", "--num-workers", "1", "--save-at", "4"],
                    Path(tmp) / "two", processes=2)
        after_two = _self([*common, "--steps", "8", "--out", f"{tmp}/after_two", "--num-workers", "0",
                           "--resume", f"{tmp}/two/step_4"], Path(tmp) / "after_two")[0]
    ok = [r["step"] for r in full] == list(range(args.steps))
    report, resumed_ok = compare_resumes(full, resumes, steps=args.steps, rows=samples_of)
    two_to_one, elastic = check_two_to_one(two, after_two, rows=samples_of, label="2 processes saved")
    ok = ok and resumed_ok and elastic
    result(example="accelerate_train", ok=ok, steps=len(full), batches_per_pass=per_pass, resumes=report,
           two_to_one=two_to_one, accelerate=accelerate.__version__)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

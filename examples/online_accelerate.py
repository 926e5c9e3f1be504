"""Example: online mixing under HF Accelerate; ``save_state`` / ``load_state`` carry the controller too.

Build the :class:`~autoscale_data.dataset.online.OnlineMixture` before
:func:`~autoscale_data.integrations.accelerate.prepare_mixture_loader`: the loader's checkpointed
state is the dataset's, which holds the segment log, the controller's state and the loss window::

    accelerator = Accelerator()
    ds = ScaleAwareMixtureDataset("stores/", ODM(names).initial_weights(), N, 1024, batch_size=8)
    online = OnlineMixture(ds, ODM(ds.domain_names), every=50)
    loader = prepare_mixture_loader(accelerator, ds, num_workers=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.load_state("ckpt/step_1000")        # when resuming: data position, log, controller
    for step, batch in enumerate(loader, start=first_step):
        ...                                          # forward, accelerator.backward, optimizer.step
        online.meter.update(per_token.detach(), batch["domain"])
        if online.due(step):
            online.update(step)                      # one all-reduce over the processes
        accelerator.save_state(f"ckpt/step_{step}")  # now and then (on every process)

Run: ``python examples/online_accelerate.py --tiny``: trains 12 steps with ODM saving at step 6,
resumes from there in a fresh process state with another worker count, and checks the resumed run
trains on the same batches with the same losses (bit for bit) and decides the same segments as the
uninterrupted one.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import torch
from _tiny import make_tiny_stores, result
from accelerate import Accelerator
from accelerate.utils import set_seed
from plain_pytorch import TinyLM
from torch.nn import functional as F

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.integrations.accelerate import prepare_mixture_loader
from autoscale_data.online import ODM

NAMES = ["books", "code", "web"]


def train(stores: str, out: Path, *, steps: int, workers: int, save_at: int | None = None,
          resume: str | None = None) -> dict[str, Any]:
    accelerator = Accelerator(cpu=True)
    set_seed(0)
    ds = ScaleAwareMixtureDataset(stores, ODM(NAMES).initial_weights(), 96 * 48, 48, seed=1, batch_size=4,
                                  max_epochs=4)
    online = OnlineMixture(ds, ODM(ds.domain_names), every=2)
    loader = prepare_mixture_loader(accelerator, ds, num_workers=workers)
    model = TinyLM(257)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    first = 1
    if resume is not None:
        accelerator.load_state(resume)
        first = int(Path(resume).name.split("_")[-1]) + 1  # the step saved in the folder's name
    seen, losses = [], []
    for step, batch in enumerate(loader, start=first):
        ids = batch["input_ids"]
        per_token = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:], reduction="none")
        loss = per_token.mean()
        accelerator.backward(loss)
        losses.append(loss.item())
        optimizer.step()
        optimizer.zero_grad()
        online.meter.update(per_token.detach(), batch["domain"])
        if online.due(step):
            online.update(step)
        seen.append(list(zip(batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True)))
        if step == save_at:
            accelerator.save_state(str(out / f"step_{step}"))
        if step == steps:
            break
    return {"seen": seen, "losses": losses, "log": online.segment_log(), "controller": online.controller.state_dict(), "first": first}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="train, save, resume and compare on tiny stores")
    args = parser.parse_args(argv)
    if not args.tiny:
        parser.error("this example runs with --tiny")
    with tempfile.TemporaryDirectory() as tmp:
        stores = str(make_tiny_stores(Path(tmp) / "stores"))
        full = train(stores, Path(tmp), steps=12, workers=2, save_at=6)
        rest = train(stores, Path(tmp), steps=12, workers=0, resume=str(Path(tmp) / "step_6"))
    same_batches = rest["seen"] == full["seen"][6:]
    same_losses = rest["losses"] == full["losses"][6:]  # bit for bit
    same_log = rest["log"] == full["log"] and rest["controller"] == full["controller"]
    ok = same_batches and same_losses and same_log
    result(example="online_accelerate", ok=ok, same_batches=same_batches, same_losses=same_losses,
           same_log=same_log, resumed_at=rest["first"] - 1, segments=len(full["log"]["weights"]))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Example: online mixing in a plain PyTorch loop: ADO (or ODM) chooses the weights during training.

The 20 lines that matter (``train`` below)::

    ds = ScaleAwareMixtureDataset("stores/", ADO(names, prior).initial_weights(), N, 1024, batch_size=8)
    online = OnlineMixture(ds, ADO(ds.domain_names, prior), every=50)        # k = 50 steps per segment
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    for step, batch in enumerate(loader, start=1):
        per_token = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:], reduction="none")
        per_token.mean().backward(); opt.step(); opt.zero_grad()
        online.meter.update(per_token.detach(), batch["domain"])
        if online.due(step):
            online.update(step)                     # one all-reduce; the next segment's weights
        if step % 500 == 0:
            torch.save({"model": ..., "data": ds.state_dict(step=step)}, "ckpt.pt")   # the global step

``ds.state_dict(...)`` holds the segment log, the controller's state and the loss window; on resume
build the same dataset and OnlineMixture, ``ds.load_state_dict(ckpt["data"])``, and start the loop
at the saved step (``enumerate(loader, start=ckpt["data"]["step"] + 1)``): the state records its
step, so ``state_dict(step=step)`` takes the global step before and after a resume. ``--tiny`` trains a small GRU on three tiny stores, stops at step 7, resumes in a
fresh dataset/controller (with another number of workers) and checks that the resumed run reads the
same batches, computes the same losses (bit for bit) and makes the same decisions as an uninterrupted one.

Run: ``python examples/online_mixing.py --tiny [--controller odm]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

import torch
from _tiny import make_tiny_stores, result
from torch import nn
from torch.utils.data import DataLoader

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.online import ADO, ODM


def controller(kind: str, names: list[str]) -> Any:
    return ADO(names, warmup=0, fit_after=4) if kind == "ado" else ODM(names)


def train(stores: str, kind: str, *, steps_every: int = 2, workers: int = 2, stop: int | None = None,
          resume: dict | None = None, seq_len: int = 48, budget_sequences: int = 160) -> dict[str, Any]:
    names = sorted(["books", "code", "web"])
    ds = ScaleAwareMixtureDataset(stores, controller(kind, names).initial_weights(), budget_sequences * seq_len,
                                  seq_len, batch_size=4, max_epochs=4)
    online = OnlineMixture(ds, controller(kind, ds.domain_names), every=steps_every)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(257, 32), nn.GRU(32, 32, batch_first=True))
    head = nn.Linear(32, 257)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=3e-3)
    step0 = 0
    if resume is not None:
        ds.load_state_dict(resume["data"])  # the segment log, the controller, the loss window
        model.load_state_dict(resume["model"])
        head.load_state_dict(resume["head"])
        opt.load_state_dict(resume["opt"])
        step0 = resume["step"]
    batches, losses = [], []
    for step, batch in enumerate(DataLoader(ds, batch_size=None, num_workers=workers), start=step0 + 1):
        ids = batch["input_ids"]
        per_token = nn.functional.cross_entropy(head(model(ids[:, :-1])[0]).transpose(1, 2), ids[:, 1:],
                                                reduction="none")
        opt.zero_grad()
        loss = per_token.mean()
        loss.backward()
        losses.append(loss.item())
        opt.step()
        online.meter.update(per_token.detach(), batch["domain"])
        if online.due(step):
            online.update(step)
        batches.append(list(zip(batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True)))
        if step == stop:
            return {"batches": batches, "losses": losses, "checkpoint": {"data": ds.state_dict(step=step),
                                                       "model": model.state_dict(), "head": head.state_dict(),
                                                       "opt": opt.state_dict(), "step": step}}
    return {"batches": batches, "losses": losses, "log": online.segment_log(), "controller": online.controller.state_dict()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="train a tiny model, stop, resume, compare")
    parser.add_argument("--controller", choices=("ado", "odm"), default="ado")
    args = parser.parse_args(argv)
    if not args.tiny:
        parser.error("this example runs with --tiny; copy train() into your loop for real data")
    with tempfile.TemporaryDirectory() as tmp:
        stores = str(make_tiny_stores(tmp))
        full = train(stores, args.controller)
        first = train(stores, args.controller, stop=7)
        saved = json.loads(json.dumps(first["checkpoint"]["data"]))  # the data state is plain JSON
        rest = train(stores, args.controller, workers=0,
                     resume={**first["checkpoint"], "data": saved})
    same_batches = first["batches"] + rest["batches"] == full["batches"]
    same_losses = first["losses"] + rest["losses"] == full["losses"]  # bit for bit
    same_log = rest["log"] == full["log"] and rest["controller"] == full["controller"]
    weights = full["log"]["weights"]
    moved = len({tuple(round(x, 9) for x in w) for w in weights}) > 1
    ok = same_batches and same_losses and same_log and moved
    result(example="online_mixing", ok=ok, controller=args.controller, steps=len(full["batches"]),
           segments=len(weights), same_batches=same_batches, same_losses=same_losses, same_log=same_log,
           first_weights=weights[0], last_weights=weights[-1])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

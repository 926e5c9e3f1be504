"""Example (d): mid-epoch resume with torchdata's ``StatefulDataLoader``.

``StatefulDataLoader`` asks every worker's dataset for ``state_dict()`` and restores it with
``load_state_dict()``; :class:`ScaleAwareMixtureDataset` implements both, so saving and resuming
a loader with workers is::

    loader = StatefulDataLoader(ds, batch_size=8, num_workers=2)
    ...                                  # train some steps
    torch.save({"loader": loader.state_dict(), "model": ...}, "ckpt.pt")
    # later, in a new process
    loader = StatefulDataLoader(ScaleAwareMixtureDataset(...same args...), batch_size=8, num_workers=2)
    loader.load_state_dict(torch.load("ckpt.pt")["loader"])   # continues with the next batch

Run: ``python examples/stateful_dataloader.py --tiny``: reads a whole pass, then reads it again
stopping after ``--stop-after`` batches, saves, resumes in a fresh loader, and checks that the
resumed batches are exactly the rest of the uninterrupted pass.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from _tiny import add_data_args  # examples/_tiny.py: the options every example shares
from torchdata.stateful_dataloader import StatefulDataLoader

from autoscale_data.dataset import ScaleAwareMixtureDataset


def batch_ids(batch: dict[str, Any]) -> list[tuple[int, int]]:
    """``(domain, seq_index)`` of each sample of a batch."""
    return list(zip(batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True))


def resume_check(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *,
                 stop_after: int, ckpt: Path, batch_size: int = 8, num_workers: int = 2) -> dict[str, Any]:
    """Uninterrupted pass vs. stop-save-resume; returns both streams' sample ids."""
    def make_loader() -> StatefulDataLoader:
        ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens=budget_tokens, seq_len=seq_len, seed=1)
        return StatefulDataLoader(ds, batch_size=batch_size, num_workers=num_workers)

    full = [batch_ids(b) for b in make_loader()]

    loader = make_loader()
    first_part = []
    for step, batch in enumerate(loader):
        first_part.append(batch_ids(batch))
        if step + 1 == stop_after:
            break
    torch.save({"loader": loader.state_dict(), "step": stop_after}, ckpt)
    del loader

    saved = torch.load(ckpt, weights_only=False)
    resumed_loader = make_loader()
    resumed_loader.load_state_dict(saved["loader"])
    resumed = [batch_ids(b) for b in resumed_loader]
    return {"full": full, "first_part": first_part, "resumed": resumed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and check the resume")
    parser.add_argument("--stop-after", type=int, default=5, help="batches before the simulated interruption")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            from _tiny import TINY_WEIGHTS, make_tiny_stores

            domains, weights, budget, seq_len = str(make_tiny_stores(tmp)), TINY_WEIGHTS, 100 * 48, 48
        elif args.domains and args.weights:
            domains, weights, budget, seq_len = args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len
        else:
            parser.error("give --domains and --weights, or --tiny")
        out = resume_check(domains, weights, budget, seq_len, stop_after=args.stop_after, ckpt=Path(tmp) / "ckpt.pt")
    k = args.stop_after
    ok = out["first_part"] == out["full"][:k] and out["resumed"] == out["full"][k:]
    print(f"uninterrupted pass: {len(out['full'])} batches; stopped after {k}, resumed with "
          f"{len(out['resumed'])} batches; resumed stream {'==' if ok else '!='} the rest of the pass")
    if args.tiny:
        from _tiny import result

        result(example="stateful_dataloader", ok=ok, batches_full=len(out["full"]), stop_after=k,
               batches_resumed=len(out["resumed"]), first_resumed=out["resumed"][0] if out["resumed"] else None,
               expected_first=out["full"][k] if len(out["full"]) > k else None)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

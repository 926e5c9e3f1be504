"""Example (a): swap the dataset behind an existing DataLoader in a plain PyTorch training loop.

Before::

    train_ds = MyTokenDataset("data/train.bin", seq_len=1024)
    loader = DataLoader(train_ds, batch_size=8, shuffle=True, num_workers=2)

After (the loop below is unchanged, apart from the optional per-domain loss)::

    train_ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024)
    loader = DataLoader(train_ds, batch_size=8, num_workers=2)   # no shuffle: the stream is the order

Run: ``python examples/plain_pytorch.py --domains stores/ --weights '{"web": 0.7, "code": 0.3}'
--budget-tokens 2e6`` or ``python examples/plain_pytorch.py --tiny``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter

import torch
from _tiny import add_data_args  # examples/_tiny.py: the options every example shares
from torch import nn
from torch.utils.data import DataLoader

from autoscale_data.dataset import DomainLossMeter, ScaleAwareMixtureDataset


class TinyLM(nn.Module):
    """A next-token model small enough for CPU: embedding, one GRU layer, output projection."""

    def __init__(self, vocab_size: int, width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.out = nn.Linear(width, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embed(ids))
        return self.out(hidden)


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, *, batch_size: int = 8,
          num_workers: int = 2, lr: float = 3e-3, seed: int = 0) -> dict[str, object]:
    """Train ``TinyLM`` for one pass over the mixture; returns a summary."""
    torch.manual_seed(seed)
    train_ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens=budget_tokens, seq_len=seq_len, seed=seed)
    loader = DataLoader(train_ds, batch_size=batch_size, num_workers=num_workers)
    vocab = 257  # the bytes tokenizer; read it from a store's manifest for real data
    model = TinyLM(vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    seen: Counter[str] = Counter()
    meter = DomainLossMeter(train_ds.domain_names)  # running per-domain training loss (token-weighted)
    window = DomainLossMeter(train_ds.domain_names)  # the same, over the last 20 steps
    losses = []
    for step, batch in enumerate(loader):
        ids = batch["input_ids"]
        logits = model(ids[:, :-1])
        per_token = nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = per_token.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        meter.update(per_token, batch["domain"])  # add all_reduce=True to compute() under torchrun
        window.update(per_token, batch["domain"])
        seen.update(train_ds.domain_names[d] for d in batch["domain"].tolist())
        if step % 20 == 0:
            per_domain = "  ".join(f"{n} {v:.3f}" for n, v in window.compute().items())
            print(f"step {step:4d}  loss {loss.item():.3f}  per domain: {per_domain}")
            window.reset()
    return {
        "steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
        "sequences_seen": dict(seen), "sequences_planned": train_ds.sequences_per_domain,
        "domain_loss": meter.compute(), "domain_tokens": meter.tokens(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=2e6, tiny_help="generate a tiny store and train a few steps")
    parser.add_argument("--num-workers", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            from _tiny import TINY_WEIGHTS, make_tiny_stores, result

            summary = train(str(make_tiny_stores(tmp)), TINY_WEIGHTS, budget_tokens=64 * 48, seq_len=48,
                            num_workers=args.num_workers)
            ok = summary["sequences_seen"] == summary["sequences_planned"] and summary["last_loss"] < summary["first_loss"]
            ok = ok and summary["domain_tokens"] == {n: k * 47 for n, k in summary["sequences_seen"].items()}
            result(example="plain_pytorch", ok=ok, **summary)
            return 0 if ok else 1
        if not args.domains or not args.weights:
            parser.error("give --domains and --weights, or --tiny")
        summary = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len,
                        num_workers=args.num_workers)
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

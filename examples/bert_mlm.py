"""Example (g): a masked LM (BERT) trained on the mixture in an own loop, stopped and resumed exactly.

The mixture's samples carry ``labels`` = ``input_ids``; a masked LM needs masked inputs and labels at
the masked positions only, or it learns to copy. :class:`~autoscale_data.dataset.MaskedLMCollator` is
the runner's BERT masking (80% ``[MASK]``, 10% random, 10% kept, of 15% of the positions) as a
``collate_fn``, each sample's mask seeded by ``(seed, domain, seq_index)``::

    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=128, seed=0)
    loader = DataLoader(ds, batch_size=8, collate_fn=MaskedLMCollator(vocab_size=V, seed=0))
    model = BertForMaskedLM(BertConfig(vocab_size=V + 1, ...))   # + 1: [MASK] is id V
    for batch in loader:
        loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss

Exact resume: save the model, the optimizer, ``ds.state_dict(step=step, samples_per_step=batch_size)`` and
``torch.get_rng_state()`` (dropout draws from it). To resume, build everything again, load them, call
``iter(loader)`` and only then ``torch.set_rng_state(saved)``: creating the DataLoader iterator draws
a seed from torch's global RNG, which the uninterrupted run did before its first step. The masks are
a function of each sample, so the resumed steps see the same masked batches and the losses match the
uninterrupted run's bit for bit.

Run: ``python examples/bert_mlm.py --tiny`` (a 2-layer BERT built from its config, no download): trains
a whole pass saving at ``--save-at`` steps, resumes from there in a new process, and checks the
losses. With own data: ``python examples/bert_mlm.py --domains stores/ --weights '{"web": 0.7,
"code": 0.3}' --vocab-size 32000 --out ckpt/`` (and ``--resume STEP`` to continue).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from _tiny import add_data_args, run_phase  # examples/_tiny.py: the options and helpers every example shares
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForMaskedLM

from autoscale_data.dataset import MaskedLMCollator, ScaleAwareMixtureDataset


def train(domains: str, weights: dict[str, float], budget_tokens: int, seq_len: int, out: Path, *,
          vocab_size: int = 257, batch_size: int = 8, save_at: int | None = None, resume: int | None = None,
          seed: int = 0) -> dict[str, Any]:
    """Train a tiny BERT on the masked mixture; save at step ``save_at``, or continue from step ``resume``."""
    torch.manual_seed(seed)
    ds = ScaleAwareMixtureDataset(domains, weights, budget_tokens=budget_tokens, seq_len=seq_len, seed=seed)
    loader = DataLoader(ds, batch_size=batch_size, collate_fn=MaskedLMCollator(vocab_size, seed=seed))
    config = BertConfig(vocab_size=vocab_size + 1, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=seq_len)
    model = BertForMaskedLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step, rng = 0, None
    if resume is not None:
        saved = torch.load(out / f"step{resume}.pt", weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        ds.load_state_dict(saved["dataset"])
        step, rng = saved["step"], saved["rng"]
    batches = iter(loader)  # draws a seed from torch's global RNG ...
    if rng is not None:
        torch.set_rng_state(rng)  # ... so restore the saved RNG after it
    losses, masked_share = [], []
    for batch in batches:
        loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        losses.append(loss.item())
        masked_share.append(float((batch["labels"] != -100).float().mean()))
        if step == save_at:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                        "dataset": ds.state_dict(step=step, samples_per_step=batch_size), "rng": torch.get_rng_state()},
                       out / f"step{step}.pt")
    return {"steps": step, "losses": losses, "masked_share": sum(masked_share) / max(1, len(masked_share))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate tiny stores, train, resume and compare")
    parser.add_argument("--vocab-size", type=int, default=257, help="the stores' tokenizer vocabulary size")
    parser.add_argument("--out", help="where the checkpoints go")
    parser.add_argument("--save-at", type=int, help="save a checkpoint after this many steps")
    parser.add_argument("--resume", type=int, help="continue from the checkpoint of this step")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny and not args.phase:
        from _tiny import TINY_WEIGHTS, make_tiny_stores, result

        with tempfile.TemporaryDirectory() as tmp:
            stores = str(make_tiny_stores(f"{tmp}/stores"))
            common = [__file__, ["--domains", stores, "--weights", json.dumps(TINY_WEIGHTS), "--budget-tokens",
                                 str(40 * 8 * 48), "--seq-len", "48", "--out", tmp, "--phase"]]
            full = run_phase(common[0], [*common[1], "--save-at", "16"])
            resumed = run_phase(common[0], [*common[1], "--resume", "16"])
        same = resumed["losses"] == full["losses"][16:]
        learned = sum(full["losses"][-5:]) / 5 < sum(full["losses"][:5]) / 5
        ok = same and learned and full["steps"] == resumed["steps"] == 40 and 0.1 < full["masked_share"] < 0.2
        print(f"resumed at step 16: {len(resumed['losses'])} steps, losses {'==' if same else '!='} the "
              f"uninterrupted run's; masked share {full['masked_share']:.3f}")
        result(example="bert_mlm", ok=ok, full=full, resumed=resumed, same=same)
        return 0 if ok else 1
    if not args.domains or not args.weights or not args.out:
        parser.error("give --domains, --weights and --out, or --tiny")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    summary = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len, Path(args.out),
                    vocab_size=args.vocab_size, save_at=args.save_at, resume=args.resume)
    print(("PHASE " if args.phase else "") + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

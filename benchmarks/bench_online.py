"""Cost of online mixing per training step, as a ratio to one training step of the demo model.

The demo model is the runner's ``gpt2-tiny`` (2 layers × 128, vocabulary 257) on the demo's
batches (8 × 128 tokens), one CPU thread, forward + backward + AdamW step. Online mixing adds, per
step, ``online.meter.update`` (the per-domain loss sums), and per update (every ``k`` steps) the
all-reduce (absent in one process), the controller's ``update`` and the new segment (carried
counts, one row of the shared table, one interleave tree). Per update it is timed on a real
:class:`~autoscale_data.dataset.online.OnlineMixture` (7 domains, ``--updates`` updates; ADO
refits its 7 laws at every update, the worst case), then amortised over ``k``. All timings are
CPU times of this process (``time.process_time``, robust to other load on the machine): the
step's median, the update's mean over ``--updates`` updates (so refits are amortised) and its
largest (the stall of one update).

    python benchmarks/bench_online.py [--steps 30] [--updates 40] [--every 10 50 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.online import ADO, ODM
from autoscale_data.store import StoreWriter
from autoscale_data.store.tokenizers import ByteTokenizer

DOMAINS = [f"d{i}" for i in range(7)]


def _stores(root: Path, seq_len: int) -> Path:
    info = ByteTokenizer().info
    rng = np.random.default_rng(0)
    for name in DOMAINS:
        with StoreWriter(root / name, name, info, holdout={"rule": "synthetic"}, source={"bench": True}) as w:
            w.add_tokens("train", rng.integers(0, 256, 4000 * seq_len).astype(np.uint16), num_documents=4000)
    return root


def step_time(steps: int, batch: int, seq_len: int) -> tuple[float, torch.Tensor]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=257, n_positions=seq_len,
                                      bos_token_id=256, eos_token_id=256))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 257, (batch, seq_len))
    times = []
    per_token = None
    for _ in range(steps + 2):
        t = time.process_time()
        logits = model(input_ids=ids[:, :-1]).logits
        per_token = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        opt.zero_grad()
        per_token.mean().backward()
        opt.step()
        times.append(time.process_time() - t)
    assert per_token is not None
    return statistics.median(times[2:]), per_token.detach()


def update_time(root: Path, controller: object, updates: int, every: int, batch: int, seq_len: int) -> tuple[float, float]:
    """Mean (amortised: refits included) and largest CPU seconds of one ``update``."""
    ds = ScaleAwareMixtureDataset(root, dict.fromkeys(DOMAINS, 1 / 7), (updates + 4) * every * batch * seq_len,
                                  seq_len, batch_size=batch, verify="size", max_epochs=50)
    online = OnlineMixture(ds, controller, every=every)
    rng = np.random.default_rng(0)
    times = []
    for u in range(1, updates + 1):
        tokens = np.full(7, every * batch * seq_len / 7)
        losses = (3.0 + 2.0 * (u * every) ** -0.3 + rng.normal(0, 0.01, 7)) * tokens
        t = time.process_time()
        online.update(u * every, losses, tokens)
        times.append(time.process_time() - t)
    return statistics.mean(times), max(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--every", type=int, nargs="+", default=[10, 50, 100])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    step_s, per_token = step_time(args.steps, args.batch, args.seq_len)
    domain = torch.arange(args.batch) % 7
    meter_t = []
    from autoscale_data.dataset import DomainLossMeter

    meter = DomainLossMeter(DOMAINS)
    for _ in range(200):
        t = time.process_time()
        meter.update(per_token, domain)
        meter_t.append(time.process_time() - t)
    meter_s = statistics.median(meter_t)
    print(f"demo-model step (gpt2-tiny, {args.batch} x {args.seq_len}, 1 thread, CPU time): {step_s * 1e3:.1f} ms")
    print(f"meter.update per step: {meter_s * 1e6:.1f} us ({meter_s / step_s:.5f} of a step)")
    print("| controller | k (steps per update) | update: mean / largest | per step, amortised + meter | ratio to a step |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = _stores(Path(tmp), args.seq_len)
        for every in args.every:
            for name, make in (("ADO (refit every update)", lambda: ADO(DOMAINS, refit_every=1)),
                               ("ADO (refit every 5)", lambda: ADO(DOMAINS, refit_every=5)),
                               ("ODM", lambda: ODM(DOMAINS))):
                upd, worst = update_time(root, make(), args.updates, every, args.batch, args.seq_len)
                per_step = upd / every + meter_s
                print(f"| {name} | {every} | {upd * 1e3:.2f} / {worst * 1e3:.1f} ms | {per_step * 1e3:.3f} ms | "
                      f"{per_step / step_s:.4f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

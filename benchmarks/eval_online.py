"""Online mixing on a corpus of controlled learnability: ADO and ODM against uniform and natural.

Four synthetic domains whose learnability is known by construction (byte tokens, documents of one
sequence each):

- ``periodic``: a random pattern of period 2–8 repeated (learnable in context: loss -> ~0);
- ``markov``: an order-2 Markov chain over 32 symbols, each context with 3 possible successors
  (one fixed chain for the whole domain: learnable down to its entropy, about 1 nat);
- ``copy``: a random 16-token string, then copied three times (learnable in context after 16 tokens);
- ``noise``: uniform over 64 symbols (unlearnable: its loss cannot go below ln 64 = 4.16).

Domain sizes differ (noise is the largest, as junk web text is), so the *natural* mix (token
shares) puts most weight on noise. Each method trains the demo model (GPT-2, 2 layers × 128) from
the same seed on the same budget through :class:`~autoscale_data.dataset.online.OnlineMixture`
(uniform and natural as a fixed schedule), then measures each domain's held-out loss. Seeds are
paired: seed ``s`` gives every method the same initialisation and data order seed.

    nice python benchmarks/eval_online.py --seeds 5 --out /tmp/eval_online.json   (about 25 runs x 20 s of CPU)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from autoscale_data.dataset import MixtureValidationDataset, ScaleAwareMixtureDataset
from autoscale_data.dataset.online import OnlineMixture
from autoscale_data.online import ADO, ODM, PresetWeights
from autoscale_data.store import StoreWriter
from autoscale_data.store.tokenizers import ByteTokenizer

DOMAINS = ("copy", "markov", "noise", "periodic")  # the stream's (sorted) order
SIZES = {"copy": 3000, "markov": 6000, "noise": 12000, "periodic": 3000}  # sequences of each domain
SEQ_LEN = 64
VAL = 128  # held-out sequences per domain


def _periodic(rng: np.random.Generator, n: int) -> np.ndarray:
    out = np.empty((n, SEQ_LEN), dtype=np.int64)
    for i in range(n):
        pattern = rng.integers(0, 64, int(rng.integers(2, 9)))
        out[i] = np.resize(pattern, SEQ_LEN)
    return out


def _markov(rng: np.random.Generator, n: int) -> np.ndarray:
    chain = np.random.default_rng(12345)  # one chain for the domain, whatever the split
    successors = chain.integers(0, 32, (32, 32, 3))
    probs = np.array([0.6, 0.3, 0.1])
    out = np.empty((n, SEQ_LEN), dtype=np.int64)
    for i in range(n):
        seq = list(rng.integers(0, 32, 2))
        picks = rng.choice(3, SEQ_LEN, p=probs)
        for t in range(2, SEQ_LEN):
            seq.append(int(successors[seq[-2], seq[-1], picks[t]]))
        out[i] = seq
    return out


def _copy(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.tile(rng.integers(0, 64, (n, 16)), (1, SEQ_LEN // 16))


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 64, (n, SEQ_LEN))


MAKERS = {"copy": _copy, "markov": _markov, "noise": _noise, "periodic": _periodic}


def write_corpus(root: Path, seed: int = 0) -> Path:
    """One store per domain: ``SIZES[d]`` training and ``VAL`` held-out sequences of ``SEQ_LEN`` byte tokens."""
    info = ByteTokenizer().info
    for d, name in enumerate(DOMAINS):
        rng = np.random.default_rng([seed, d])
        with StoreWriter(root / name, name, info, holdout={"rule": "synthetic"},
                         source={"synthetic": "controlled learnability", "seed": seed}) as writer:
            for split, n in (("train", SIZES[name]), ("val", VAL)):
                tokens = MAKERS[name](rng, n).astype(np.uint16).reshape(-1)
                writer.add_tokens(split, tokens, document_lengths=np.full(n, SEQ_LEN))
    return root


def natural() -> dict[str, float]:
    total = sum(SIZES.values())
    return {n: SIZES[n] / total for n in DOMAINS}


def controller(method: str) -> Any:
    if method == "uniform":
        return PresetWeights(DOMAINS, [(0, dict.fromkeys(DOMAINS, 0.25))])
    if method == "natural":
        return PresetWeights(DOMAINS, [(0, natural())])
    if method == "ado":  # the paper's prior: the natural distribution
        return ADO(DOMAINS, natural(), warmup=2, refit_every=2)
    if method == "ado-uniform":  # the same policy from a uniform prior
        return ADO(DOMAINS, None, warmup=2, refit_every=2)
    if method == "odm":
        return ODM(DOMAINS)
    raise ValueError(f"unknown method {method!r}")


def model(seed: int) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=257, n_positions=SEQ_LEN,
                                      bos_token_id=256, eos_token_id=256))


def token_losses(net: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = net(input_ids=ids[:, :-1]).logits
    return F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")


def train(root: Path, method: str, seed: int, steps: int, batch: int, every: int, lr: float) -> dict[str, Any]:
    ds = ScaleAwareMixtureDataset(root, controller(method).initial_weights(), steps * batch * SEQ_LEN, SEQ_LEN,
                                  seed=seed, batch_size=batch, verify="size", max_epochs=4)
    online = OnlineMixture(ds, controller(method), every=every, lookahead=1)
    net = model(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    control_s, step_s = 0.0, 0.0
    for step, b in enumerate(ds, 1):
        t0 = time.perf_counter()
        per_token = token_losses(net, b["input_ids"])
        opt.zero_grad()
        per_token.mean().backward()
        opt.step()
        online.meter.update(per_token.detach(), b["domain"])
        t1 = time.perf_counter()
        if online.due(step):
            online.update(step)
        control_s += time.perf_counter() - t1
        step_s += t1 - t0
    net.eval()
    val = MixtureValidationDataset(root, SEQ_LEN)
    sums, counts = np.zeros(len(DOMAINS)), np.zeros(len(DOMAINS))
    with torch.no_grad():
        for sample in val:
            loss = token_losses(net, sample["input_ids"][None])
            sums[sample["domain"]] += float(loss.sum())
            counts[sample["domain"]] += loss.numel()
    held_out = dict(zip(DOMAINS, (sums / counts).tolist(), strict=True))
    log = online.segment_log()
    shares = np.asarray(log["counts"]).sum(axis=0) / ds.total_sequences
    return {"method": method, "seed": seed, "held_out": held_out, "mean": float(np.mean(list(held_out.values()))),
            "mean_learnable": float(np.mean([v for k, v in held_out.items() if k != "noise"])),
            "shares": dict(zip(DOMAINS, shares.round(4).tolist(), strict=True)),
            "final_weights": dict(zip(DOMAINS, np.round(log["weights"][-1], 4).tolist(), strict=True)),
            "train_s": round(step_s, 1), "controller_s": round(control_s, 3)}


def summarize(rows: list[dict[str, Any]], methods: list[str]) -> str:
    lines = ["| method | mean held-out loss (4 domains) | learnable 3 | noise share | per seed (mean held-out) |",
             "|---|---|---|---|---|"]
    for m in methods:
        rs = [r for r in rows if r["method"] == m]
        means = [r["mean"] for r in rs]
        learn = [r["mean_learnable"] for r in rs]
        noise = [r["shares"]["noise"] for r in rs]
        sd = statistics.stdev(means) if len(means) > 1 else 0.0
        sd_l = statistics.stdev(learn) if len(learn) > 1 else 0.0
        lines.append(f"| {m} | {statistics.mean(means):.4f} ± {sd:.4f} | {statistics.mean(learn):.4f} ± {sd_l:.4f} | "
                     f"{statistics.mean(noise):.3f} | {', '.join(f'{x:.4f}' for x in means)} |")
    if "uniform" in methods:
        base = {r["seed"]: r["mean"] for r in rows if r["method"] == "uniform"}
        for m in methods:
            if m != "uniform":
                diffs = [r["mean"] - base[r["seed"]] for r in rows if r["method"] == m and r["seed"] in base]
                wins = sum(d < 0 for d in diffs)
                lines.append(f"- {m} − uniform, paired: {statistics.mean(diffs):+.4f} (better on {wins}/{len(diffs)} seeds)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--methods", default="uniform,natural,ado,ado-uniform,odm")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    methods = args.methods.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_corpus(Path(tmp) / "stores")
        for seed in range(args.seeds):
            for m in methods:
                r = train(root, m, seed, args.steps, args.batch, args.every, args.lr)
                rows.append(r)
                print(json.dumps(r), flush=True)
                if args.out:
                    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                    "rows": rows}, indent=1))
    print(summarize(rows, methods))
    assert all(math.isfinite(r["mean"]) for r in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

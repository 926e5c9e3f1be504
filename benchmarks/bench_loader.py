"""Loader benchmark: ScaleAwareMixtureDataset against a raw numpy-memmap baseline, in one run.

    python benchmarks/bench_loader.py [--quick]

Writes 7 synthetic domain stores (LLaMA-1 weights, seq_len 2048, uint16 tokens) to a temp dir and
measures, in the same process and page-cache state:

- tokens/s in process: ours (``output="torch"``: int64 tensors) vs a raw loop that picks a domain
  per sample by weight, slices its memmap and converts to an int64 tensor;
- tokens/s through ``DataLoader(num_workers=2)``: ours yielding whole compact batches
  (``batch_size=8, output="compact"``, loader ``batch_size=None``) vs the raw int64 samples with
  ``DataLoader(batch_size=8)``; also ours per sample (int64) through the same loader;
- time to first batch (from ``iter(loader)``), and dataset construction time;
- resume at early/middle/late positions of a 10B-token budget: ``load_state_dict`` + first sample
  on an already-constructed dataset (the index build is reported separately);
- index memory per sequence and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.store import StoreWriter, TokenizerInfo

LLAMA1 = {"commoncrawl": 0.67, "c4": 0.15, "github": 0.045, "wikipedia": 0.045, "books": 0.045,
          "arxiv": 0.025, "stackexchange": 0.02}
SEQ_LEN = 2048
VOCAB = 32000


def write_stores(root: Path, total_tokens: int) -> dict[str, Path]:
    """One single-shard uint16 store per domain, sized by weight (at least 2M tokens)."""
    info = TokenizerInfo("synthetic-32000", hashlib.sha256(b"bench-tokenizer").hexdigest(), VOCAB, VOCAB - 1)
    rng = np.random.default_rng(0)
    out = {}
    for name, w in LLAMA1.items():
        n = max(2_000_000, int(w * total_tokens))
        with StoreWriter(root / name, name, info, shard_tokens=1 << 30) as writer:
            writer.add_tokens("train", rng.integers(0, VOCAB, size=n, dtype=np.uint16), num_documents=1)
            writer.add_tokens("val", rng.integers(0, VOCAB, size=SEQ_LEN * 4, dtype=np.uint16), num_documents=1)
        out[name] = root / name
    return out


class RawMemmap(IterableDataset):
    """The baseline: per-sample weighted domain pick, random sequence, memmap slice, int64 tensor."""

    def __init__(self, stores: dict[str, Path], num_samples: int, seed: int = 0) -> None:
        self.files = [next(p.glob("train-*.bin")) for p in stores.values()]
        self.weights = np.asarray(list(LLAMA1.values()))
        self.num_samples = num_samples
        self.seed = seed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        maps = [np.memmap(f, dtype=np.uint16, mode="r") for f in self.files]
        nseq = np.asarray([m.shape[0] // SEQ_LEN for m in maps])
        rng = np.random.default_rng(self.seed + wid)
        n = len(range(wid, self.num_samples, nw))
        picks = rng.choice(len(maps), size=n, p=self.weights)
        seqs = (rng.random(n) * nseq[picks]).astype(np.int64)
        for d, s in zip(picks.tolist(), seqs.tolist(), strict=False):
            x = torch.from_numpy(maps[d][s * SEQ_LEN : (s + 1) * SEQ_LEN].astype(np.int64))
            yield {"input_ids": x, "labels": x, "domain": d, "seq_index": s}


def _rate(iterable: Any, tokens_of: Any, limit: int) -> tuple[float, float]:
    """(tokens/s after the first item, seconds to the first item)."""
    t0 = time.perf_counter()
    it = iter(iterable)
    first = next(it)
    t1 = time.perf_counter()
    tokens = 0
    count = 1
    for item in it:
        tokens += tokens_of(item)
        count += 1
        if count >= limit:
            break
    t2 = time.perf_counter()
    del first
    return tokens / (t2 - t1), t1 - t0


def _sample_tokens(x: dict[str, Any]) -> int:
    return int(x["input_ids"].numel())


def best(fn: Any, reps: int) -> tuple[float, float]:
    runs = [fn() for _ in range(reps)]
    return max(r[0] for r in runs), min(r[1] for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller stores and fewer samples")
    parser.add_argument("--budget", type=float, default=10e9, help="tokens of the resume test budget")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    store_tokens = 30_000_000 if args.quick else 120_000_000
    samples = 6_000 if args.quick else 20_000
    batches = 600 if args.quick else 2_000
    rows: list[tuple[str, str, str, str]] = []
    notes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        t = time.perf_counter()
        stores = write_stores(Path(tmp), store_tokens)
        notes["store_write_s"] = time.perf_counter() - t
        for p in stores.values():  # warm the page cache for both contenders
            for f in p.glob("*.bin"):
                np.fromfile(f, dtype=np.uint16).sum()
        budget = samples * SEQ_LEN * 4
        t = time.perf_counter()
        ds = ScaleAwareMixtureDataset(stores, LLAMA1, budget, SEQ_LEN, seed=0, verify="size", max_epochs=10)
        notes["construct_small_s"] = time.perf_counter() - t

        # ---------------------------------------------------------------- in process
        raw_r, raw_first = best(lambda: _rate(RawMemmap(stores, samples), _sample_tokens, samples), 3)
        our_r, our_first = best(lambda: _rate(ds, _sample_tokens, samples), 3)
        rows.append(("in process, int64 samples", f"{our_r / 1e6:.1f}M", f"{raw_r / 1e6:.1f}M", f"{our_r / raw_r:.2f}x"))

        # --------------------------------------------------------- through DataLoader
        def loader_rate(dataset: Any, batch_size: int | None) -> tuple[float, float]:
            loader = DataLoader(dataset, batch_size=batch_size, num_workers=2)
            return _rate(loader, _sample_tokens, batches)

        raw_dl, raw_dl_first = best(lambda: loader_rate(RawMemmap(stores, batches * 8 + 64), 8), 2)
        dsb = ScaleAwareMixtureDataset(stores, LLAMA1, budget, SEQ_LEN, seed=0, verify="size", max_epochs=10,
                                       batch_size=8, output="compact")
        our_dl, our_dl_first = best(lambda: loader_rate(dsb, None), 2)
        our_dl64, our_dl64_first = best(lambda: loader_rate(ds, 8), 2)
        rows.append(("DataLoader(2 workers), 8x2048 batches: ours compact batches vs raw int64",
                     f"{our_dl / 1e6:.1f}M", f"{raw_dl / 1e6:.1f}M", f"{our_dl / raw_dl:.2f}x"))
        rows.append(("DataLoader(2 workers), 8x2048 batches: ours int64 samples vs raw int64",
                     f"{our_dl64 / 1e6:.1f}M", f"{raw_dl / 1e6:.1f}M", f"{our_dl64 / raw_dl:.2f}x"))
        rows.append(("time to first batch, DataLoader(2 workers) (ours compact / raw)",
                     f"{our_dl_first * 1e3:.0f} ms", f"{raw_dl_first * 1e3:.0f} ms", ""))
        rows.append(("time to first sample, in process (ours / raw)",
                     f"{our_first * 1e3:.2f} ms", f"{raw_first * 1e3:.2f} ms", ""))
        ds = dsb = None  # free the small datasets before the 10B-token one
        gc.collect()

        # ------------------------------------------------------------- 10B resume
        import psutil

        proc = psutil.Process()
        rss0 = proc.memory_info().rss
        budget_tokens = int(args.budget)
        t = time.perf_counter()
        big = ScaleAwareMixtureDataset(stores, LLAMA1, budget_tokens, SEQ_LEN, seed=0, verify="size",
                                       max_epochs=100_000)
        construct = time.perf_counter() - t
        rss1 = proc.memory_info().rss
        total = big.total_sequences
        resume_ms = {}
        states = {label: json.dumps(big.state_dict(consumed=int(frac * total)))
                  for label, frac in (("early", 0.01), ("middle", 0.5), ("late", 0.99))}
        for label, text in states.items():
            state = json.loads(text)
            times = []
            for _ in range(5):
                t = time.perf_counter()
                big.load_state_dict(state)
                x = next(iter(big))
                times.append(time.perf_counter() - t)
                assert x["input_ids"].shape == (SEQ_LEN,)
            resume_ms[label] = min(times) * 1e3
        rows.append((f"{budget_tokens / 1e9:.0f}B-token budget ({total:,} seqs): index build (once)",
                     f"{construct:.2f} s", "", ""))
        rows.append(("resume: load_state_dict + first sample, early / middle / late",
                     " / ".join(f"{v:.2f}" for v in resume_ms.values()) + " ms", "", ""))
        rows.append(("index memory per sequence (arrays / process RSS growth)",
                     f"{big.index_nbytes / total:.2f} B / {(rss1 - rss0) / total:.2f} B", "", ""))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("peak RSS of the benchmark process", f"{peak:.0f} MiB", "", ""))

    print(f"# bench_loader  {time.strftime('%Y-%m-%d')}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"python {sys.version.split()[0]}  torch {torch.__version__}")
    print(f"# stores: 7 domains, LLaMA-1 weights, {store_tokens / 1e6:.0f}M+ tokens (uint16), seq_len {SEQ_LEN}; "
          f"written in {notes['store_write_s']:.1f} s; small-budget dataset built in "
          f"{notes['construct_small_s'] * 1e3:.0f} ms")
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | {'ours':>18} | {'raw memmap':>11} | ratio")
    print(f"{'-' * width}-|-{'-' * 18}-|-{'-' * 11}-|------")
    for name, ours, raw, ratio in rows:
        print(f"{name.ljust(width)} | {ours:>18} | {raw:>11} | {ratio}")
    print("(tokens/s; throughput is the best of 2-3 runs after the first item; resume is the best of 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

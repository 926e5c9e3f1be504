"""Loader benchmark: ScaleAwareMixtureDataset against a raw numpy-memmap baseline, in one run.

    python benchmarks/bench_loader.py [--quick] [--reps 5]

Writes 7 synthetic domain stores (LLaMA-1 weights, seq_len 2048, uint16 tokens) to a temp dir and
measures, in the same process and page-cache state, with the contenders run interleaved (order
rotated each repetition; medians reported, with the range) because the machine is shared:

- tokens/s in process: ours per sample and in batches of 8, int64 (``output="torch"``) and compact
  (``uint16``), vs the raw baseline: a loop that picks a domain per sample by weight, slices its
  memmap and converts to an int64 tensor;
- tokens/s through ``DataLoader(num_workers=2)``: the raw int64 samples with
  ``DataLoader(batch_size=8)`` (default collate; as sample dicts like ours, and as bare
  ``input_ids`` tensors, the cheapest thing to collate and ship) vs ours yielding whole batches of 8
  (``batch_size=8``, loader ``batch_size=None``; compact and int64; they cross from the workers as
  raw bytes, see ``autoscale_data/dataset/_batch.py``) and ours per sample (int64 and compact,
  loader ``batch_size=8``);
- time to first batch (from ``iter(loader)``), and dataset construction time;
- resume at early/middle/late positions of a 10B-token budget: ``load_state_dict`` + first sample
  on an already-constructed dataset (construction is reported separately);
- index memory per sequence (the closed-form stream holds none; see ``bench_index.py``) and the
  process's peak RSS.
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

    def __init__(self, stores: dict[str, Path], num_samples: int, seed: int = 0, bare: bool = False) -> None:
        self.bare = bare  # yield the bare input_ids tensor (no dict: the cheapest thing a loader can ship)
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
            yield x if self.bare else {"input_ids": x, "labels": x, "domain": d, "seq_index": s}


def resume_seconds(ds: Any, reps: int = 5) -> dict[str, float]:
    """Best of ``reps`` times to load a JSON round-tripped state early / middle / late in ``ds``'s stream
    and read the first sample after it (seconds)."""
    total = ds.total_sequences
    states = {label: json.dumps(ds.state_dict(samples_taken=int(frac * total)))
              for label, frac in (("early", 0.01), ("middle", 0.5), ("late", 0.99))}
    out = {}
    for label, text in states.items():
        state = json.loads(text)
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            ds.load_state_dict(state)
            x = next(iter(ds))
            times.append(time.perf_counter() - t)
            assert x["input_ids"].shape[-1] == ds.seq_len
        out[label] = min(times)
    return out


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


def _sample_tokens(x: dict[str, Any] | torch.Tensor) -> int:
    return int((x if isinstance(x, torch.Tensor) else x["input_ids"]).numel())


def interleaved(contenders: dict[str, Any], reps: int) -> dict[str, list[tuple[float, float]]]:
    """Run every contender once per repetition, rotating the order each time (shared machine)."""
    names = list(contenders)
    out: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for rep in range(reps):
        for name in names[rep % len(names):] + names[: rep % len(names)]:
            out[name].append(contenders[name]())
            gc.collect()
    return out


def med(runs: list[tuple[float, float]], which: int = 0) -> float:
    return float(np.median([r[which] for r in runs]))


def spread(runs: list[tuple[float, float]]) -> str:
    v = sorted(r[0] / 1e6 for r in runs)
    return f"{v[0]:.1f}-{v[-1]:.1f}"


def ratio_rows(runs: dict[str, list[tuple[float, float]]], baseline: str, names: tuple[str, ...],
               label: str) -> list[tuple[str, str, str, str, str]]:
    """Table rows: each contender's median tokens/s against ``baseline``'s (``label`` formats the name)."""
    base = med(runs[baseline])
    return [(label.format(name), f"{med(runs[name]) / 1e6:.1f}M", f"{base / 1e6:.1f}M", f"{med(runs[name]) / base:.2f}x",
             f"{spread(runs[name])} / {spread(runs[baseline])}") for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller stores and fewer samples")
    parser.add_argument("--budget", type=float, default=10e9, help="tokens of the resume test budget")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (medians are reported)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    store_tokens = 30_000_000 if args.quick else 120_000_000
    samples = 6_000 if args.quick else 20_000
    batches = 400 if args.quick else 1_500
    rows: list[tuple[str, str, str, str, str]] = []
    notes: dict[str, Any] = {"load_start": os.getloadavg()}
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

        def mixture(**kw: Any) -> ScaleAwareMixtureDataset:
            return ScaleAwareMixtureDataset(stores, LLAMA1, budget, SEQ_LEN, seed=0, verify="size", max_epochs=10,
                                            **kw)

        ds_c = mixture(output="compact")
        dsb = mixture(batch_size=8, output="compact")
        dsb64 = mixture(batch_size=8)

        # ---------------------------------------------------------------- in process
        inproc = interleaved({
            "raw": lambda: _rate(RawMemmap(stores, samples), _sample_tokens, samples),
            "int64 samples": lambda: _rate(ds, _sample_tokens, samples),
            "compact samples": lambda: _rate(ds_c, _sample_tokens, samples),
            "int64 batches": lambda: _rate(dsb64, _sample_tokens, samples // 8),
            "compact batches": lambda: _rate(dsb, _sample_tokens, samples // 8),
        }, args.reps)
        rows += ratio_rows(inproc, "raw", ("int64 samples", "compact samples", "int64 batches", "compact batches"),
                           "in process: ours {} vs raw int64 samples")

        # --------------------------------------------------------- through DataLoader
        def loader_rate(dataset: Any, batch_size: int | None) -> tuple[float, float]:
            loader = DataLoader(dataset, batch_size=batch_size, num_workers=2)
            return _rate(loader, _sample_tokens, batches)

        dl = interleaved({
            "raw": lambda: loader_rate(RawMemmap(stores, batches * 8 + 64), 8),
            "raw bare": lambda: loader_rate(RawMemmap(stores, batches * 8 + 64, bare=True), 8),
            "compact batches": lambda: loader_rate(dsb, None),
            "int64 batches": lambda: loader_rate(dsb64, None),
            "int64 samples": lambda: loader_rate(ds, 8),
            "compact samples": lambda: loader_rate(ds_c, 8),
        }, args.reps)
        rows += ratio_rows(dl, "raw", ("compact batches", "int64 batches", "int64 samples", "compact samples"),
                           "DataLoader(2 workers), 8x2048: ours {} vs raw int64 samples")
        rows += ratio_rows(dl, "raw bare", ("compact batches", "int64 batches"),
                           "DataLoader(2 workers), 8x2048: ours {} vs raw bare int64 tensors")
        rows.append(("time to first batch, DataLoader(2 workers) (ours compact batches / raw)",
                     f"{med(dl['compact batches'], 1) * 1e3:.0f} ms", f"{med(dl['raw'], 1) * 1e3:.0f} ms", "", ""))
        rows.append(("time to first sample, in process (ours int64 / raw)",
                     f"{med(inproc['int64 samples'], 1) * 1e3:.2f} ms", f"{med(inproc['raw'], 1) * 1e3:.2f} ms",
                     "", ""))
        notes["load_after_throughput"] = os.getloadavg()
        import psutil

        mem = psutil.Process().memory_info()  # file-backed (memmap) pages count as "shared"
        notes["anon_mib"] = (mem.rss - mem.shared) / 2**20
        notes["file_mib"] = mem.shared / 2**20
        ds = ds_c = dsb = dsb64 = None  # free the small datasets before the 10B-token one
        gc.collect()

        # ------------------------------------------------------------- 10B resume
        proc = psutil.Process()
        rss0 = proc.memory_info().rss
        budget_tokens = int(args.budget)
        t = time.perf_counter()
        big = ScaleAwareMixtureDataset(stores, LLAMA1, budget_tokens, SEQ_LEN, seed=0, verify="size",
                                       max_epochs=100_000)
        construct = time.perf_counter() - t
        rss1 = proc.memory_info().rss
        total = big.total_sequences
        resume_ms = {label: s * 1e3 for label, s in resume_seconds(big).items()}
        rows.append((f"{budget_tokens / 1e9:.0f}B-token budget ({total:,} seqs): dataset construction (once)",
                     f"{construct:.2f} s", "", "", ""))
        rows.append(("resume: load_state_dict + first sample, early / middle / late",
                     " / ".join(f"{v:.2f}" for v in resume_ms.values()) + " ms", "", "", ""))
        rows.append(("index memory per sequence (arrays / process RSS growth)",
                     f"{big.index_nbytes / total:.2f} B / {(rss1 - rss0) / total:.2f} B", "", "", ""))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("peak RSS of the benchmark process (includes mapped store pages, once per map)",
                 f"{peak:.0f} MiB", "", "", ""))
    rows.append(("RSS after the throughput runs: anonymous / file-backed (stores mapped by 6 readers)",
                 f"{notes['anon_mib']:.0f} / {notes['file_mib']:.0f} MiB", "", "", ""))

    print(f"# bench_loader  {time.strftime('%Y-%m-%d')}  {platform.machine()}  {os.cpu_count()} CPUs  "
          f"python {sys.version.split()[0]}  torch {torch.__version__}")
    print(f"# stores: 7 domains, LLaMA-1 weights, {store_tokens / 1e6:.0f}M+ tokens (uint16), seq_len {SEQ_LEN}; "
          f"written in {notes['store_write_s']:.1f} s; small-budget dataset built in "
          f"{notes['construct_small_s'] * 1e3:.0f} ms")
    la, lb, lc = notes["load_start"][0], notes["load_after_throughput"][0], os.getloadavg()[0]
    print(f"# load average (1 min): {la:.1f} at start, {lb:.1f} after the throughput runs, {lc:.1f} at end")
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)} | {'ours':>18} | {'raw memmap':>11} | ratio | range, M tokens/s (ours / raw)")
    print(f"{'-' * width}-|-{'-' * 18}-|-{'-' * 11}-|-------|-------")
    for name, ours, raw, ratio, rng in rows:
        print(f"{name.ljust(width)} | {ours:>18} | {raw:>11} | {ratio:>5} | {rng}")
    print(f"(tokens/s after the first item: median of {args.reps} interleaved repetitions, order rotated each "
          "repetition; time to first item: median; resume: best of 5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Remote stores: first sample without downloading the store, and cached reads as fast as local ones.

    python benchmarks/bench_remote.py [--gib 1] [--shard-tokens 8388608] [--reps 3]

Writes a synthetic ``uint16`` store (``--gib`` GiB, shards of ``--shard-tokens`` tokens), serves it
over HTTP on 127.0.0.1 (stdlib ``ThreadingHTTPServer``) and measures, in one run:

1. time to first sample of ``ScaleAwareMixtureDataset`` over the URL, from ``open_store`` to the
   first sample, each repetition into an empty cache: lazily (the dataset reads through the store's
   ``TokenSplit``, so only the shard holding the first sample is fetched) vs downloading the whole
   store first (``open_store(url, prefetch=True)``, which is what the dataset did before it read
   through the store's own reader). Both verify what they download (SHA-256 against the manifest).
   The two are run interleaved, order alternating; medians are reported with the range;
2. random 2049-token sequence reads and the dataset's tokens/s, from the remote store's cache vs
   from the local store, interleaved, medians.

Prints the ratios measured in this run (no absolute targets).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.store import StoreWriter, TokenizerInfo, TokenStore, cache_usage_bytes
from autoscale_data.store.remote import open_store

SEQ_LEN = 2049


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def _serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _write_store(path: Path, tokens: int, shard_tokens: int) -> None:
    tok = TokenizerInfo(spec="synthetic", fingerprint="bench-remote", vocab_size=32000, eos_id=31999)
    rng = np.random.default_rng(0)
    block = 1 << 24
    with StoreWriter(path, "web", tok, shard_tokens=shard_tokens) as w:
        for a in range(0, tokens, block):
            w.add_tokens("train", rng.integers(0, 32000, min(block, tokens - a), dtype=np.uint16), num_documents=1)


def _mixture(store: TokenStore | str, sequences: int, **kw: object) -> ScaleAwareMixtureDataset:
    return ScaleAwareMixtureDataset({"web": store}, {"web": 1.0}, budget_tokens=sequences * SEQ_LEN,
                                    seq_len=SEQ_LEN, seed=0, **kw)


def _first_sample(url: str, cache: Path, *, prefetch: bool) -> tuple[float, int]:
    """Seconds from opening the URL to the dataset's first sample, and the bytes then in the cache."""
    shutil.rmtree(cache, ignore_errors=True)
    t = time.perf_counter()
    store = open_store(url, cache_dir=cache, prefetch=prefetch)
    ds = _mixture(store, store.num_sequences(SEQ_LEN))
    next(iter(ds))
    seconds = time.perf_counter() - t
    return seconds, cache_usage_bytes(cache)


def _random_reads(store: TokenStore, n: int, seed: int) -> float:
    split = store.train
    idx = np.random.default_rng(seed).integers(0, split.num_sequences(SEQ_LEN), n)
    t = time.perf_counter()
    total = 0
    for k in idx.tolist():
        total += int(split.sequence(k, SEQ_LEN).astype(np.int64)[0])
    return n * SEQ_LEN / (time.perf_counter() - t)


def _dataset_rate(store: TokenStore, n: int) -> float:
    ds = _mixture(store, n, verify="size")
    t = time.perf_counter()
    count = sum(1 for _ in ds)
    return count * SEQ_LEN / (time.perf_counter() - t)


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="store size in GiB (uint16 tokens)")
    parser.add_argument("--shard-tokens", type=int, default=1 << 23, help="tokens per shard (16 MiB default)")
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    tokens = int(args.gib * 2**30) // 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        _write_store(root / "srv" / "web", tokens, args.shard_tokens)
        written = time.perf_counter() - t
        local = TokenStore(root / "srv" / "web")
        with _serve(root / "srv") as base:
            url = f"{base}/web"
            lazy: list[float] = []
            full: list[float] = []
            lazy_bytes = full_bytes = 0
            for rep in range(args.reps):
                for prefetch in ((False, True) if rep % 2 == 0 else (True, False)):
                    seconds, nbytes = _first_sample(url, root / ("full" if prefetch else "lazy"), prefetch=prefetch)
                    if prefetch:
                        full.append(seconds)
                        full_bytes = nbytes
                    else:
                        lazy.append(seconds)
                        lazy_bytes = nbytes
            shutil.rmtree(root / "lazy", ignore_errors=True)
            remote = open_store(url, cache_dir=root / "full", prefetch=True)  # cached by the last full run
            local.verify()  # both checked and mapped before the timed reads (first-read hashing excluded)
            remote.verify()
            rates: dict[str, list[float]] = {"local": [], "remote": [], "ds_local": [], "ds_remote": []}
            n = min(args.reads, local.num_sequences(SEQ_LEN))
            for rep in range(args.reps):
                for name, store in (("local", local), ("remote", remote))[:: 1 if rep % 2 == 0 else -1]:
                    rates[name].append(_random_reads(store, args.reads, rep))
                    rates["ds_" + name].append(_dataset_rate(store, n))
    mib = tokens * 2 / 2**20
    shards = -(-tokens // args.shard_tokens)
    print(f"store: {tokens:,} uint16 tokens ({mib:,.0f} MiB) in {shards} shards of {args.shard_tokens:,} tokens "
          f"({args.shard_tokens * 2 / 2**20:.0f} MiB), written in {written:.1f} s, served on 127.0.0.1; "
          f"{args.reps} interleaved repetitions")
    ratio = statistics.median(full) / statistics.median(lazy)
    print("| time to first sample over HTTP, empty cache | seconds: median (range) | downloaded |")
    print("|---|---|---|")
    print(f"| lazy: the dataset reads through the store, fetching on first touch | {_med(lazy)} | "
          f"{lazy_bytes / 2**20:,.0f} MiB |")
    print(f"| full download first (`prefetch=True`) | {_med(full)} | {full_bytes / 2**20:,.0f} MiB |")
    print(f"| ratio (full / lazy) | {ratio:.0f}× | |")
    med = {k: statistics.median(v) for k, v in rates.items()}
    print()
    print("| reader | random 2049-token reads, tokens/s (× local) | ScaleAwareMixtureDataset, tokens/s (× local) |")
    print("|---|---|---|")
    for name in ("local", "remote"):
        print(f"| {name} store | {med[name] / 1e6:.0f}M ({med[name] / med['local']:.2f}×) | "
              f"{med['ds_' + name] / 1e6:.0f}M ({med['ds_' + name] / med['ds_local']:.2f}×) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

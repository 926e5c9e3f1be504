"""Remote stores once cached read as fast as local ones: ``python benchmarks/bench_remote.py``.

Serves a synthetic store over HTTP on 127.0.0.1, then, with interleaved repetitions, measures
(1) the first open of the URL (manifest + download + verification of every shard), (2) random
2049-token sequence reads from the local store and (3) from the remote store's cache, and the
mixture dataset over each. Prints ratios to the local store measured in the same run.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from autoscale_data.store import StoreWriter, TokenizerInfo, TokenStore
from autoscale_data.store.remote import open_store

SEQ_LEN = 2049


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _random_reads(store: TokenStore, n: int, seed: int) -> float:
    split = store.train
    idx = np.random.default_rng(seed).integers(0, split.num_sequences(SEQ_LEN), n)
    t = time.perf_counter()
    total = 0
    for k in idx.tolist():
        total += int(split.sequence(k, SEQ_LEN).astype(np.int64)[0])
    return n * SEQ_LEN / (time.perf_counter() - t)


def _dataset_rate(store: TokenStore, n: int) -> float:
    from autoscale_data.dataset import ScaleAwareMixtureDataset

    ds = ScaleAwareMixtureDataset({"web": store}, {"web": 1.0}, budget_tokens=n * SEQ_LEN, seq_len=SEQ_LEN)
    t = time.perf_counter()
    count = sum(1 for _ in ds)
    return count * SEQ_LEN / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=40_000_000)
    parser.add_argument("--shard-tokens", type=int, default=1 << 23)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tok = TokenizerInfo(spec="synthetic", fingerprint="bench-remote", vocab_size=32000, eos_id=31999)
        rng = np.random.default_rng(0)
        with StoreWriter(root / "srv" / "web", "web", tok, shard_tokens=args.shard_tokens) as w:
            for a in range(0, args.tokens, 1 << 22):
                w.add_tokens("train", rng.integers(0, 32000, min(1 << 22, args.tokens - a)), num_documents=1)
        handler = functools.partial(_Quiet, directory=str(root / "srv"))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/web"
            t = time.perf_counter()
            remote = open_store(url, cache_dir=root / "cache", prefetch=True)
            first_open = time.perf_counter() - t
            t = time.perf_counter()
            open_store(url, cache_dir=root / "cache", prefetch=True)
            warm_open = time.perf_counter() - t
            local = TokenStore(root / "srv" / "web")
            rates: dict[str, list[float]] = {"local": [], "remote": [], "ds_local": [], "ds_remote": []}
            for rep in range(args.reps):
                for name, store in (("local", local), ("remote", remote))[:: 1 if rep % 2 == 0 else -1]:
                    rates[name].append(_random_reads(store, args.reads, rep))
                    rates["ds_" + name].append(_dataset_rate(store, min(args.reads, store.num_sequences(SEQ_LEN))))
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
    mb = args.tokens * 2 / 2**20
    print(f"store: {args.tokens} uint16 tokens ({mb:.0f} MB) in shards of {args.shard_tokens} tokens, "
          f"served on 127.0.0.1; median of {args.reps} interleaved repetitions")
    print(f"first open over HTTP (download + sha256 of every shard): {first_open:.2f} s ({mb / first_open:.0f} MB/s); "
          f"open again from the cache: {warm_open:.2f} s")
    med = {k: statistics.median(v) for k, v in rates.items()}
    print("| reader | random 2049-token reads, tokens/s (× local) | ScaleAwareMixtureDataset, tokens/s (× local) |")
    print("|---|---|---|")
    for name in ("local", "remote"):
        print(f"| {name} store | {med[name] / 1e6:.0f}M ({med[name] / med['local']:.2f}×) | "
              f"{med['ds_' + name] / 1e6:.0f}M ({med['ds_' + name] / med['ds_local']:.2f}×) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Opening a Megatron dataset read in place: a 10B-token ``.bin``/``.idx`` opens in well under 1 s beyond its ``.idx``.

    python benchmarks/bench_inplace.py [--tokens 10_000_000_000] [--doc-tokens 2000]
                                       [--register-tokens 1_000_000_000] [--reps 5] [--dir DIR]

No 20 GB of real data is written: the ``.bin`` is a *sparse* file of the right size (all token ids
0, which reads as zeros without disk I/O) and the ``.idx`` is written by a small numpy writer that
follows Megatron's documented layout (header ``MMIDIDX``, version 1, dtype code 8 = uint16, one
sequence per document of ``--doc-tokens`` tokens: 5M documents, a 100 MB index); when megatron-core
is installed its ``IndexedDataset`` opens the same files, as a check and as a second baseline.

Measured, in one run (medians of ``--reps``, page cache warm):

1. the baseline: reading the ``.idx`` (``read_megatron_index``: every array read) and megatron-core's
   ``IndexedDataset(prefix)`` (which memory-maps the arrays);
2. ``TokenStore(store_dir)`` of the registered 10B-token store (the manifest is read and every
   shard file stat-ed; the ``.idx`` is not read), and ``ScaleAwareMixtureDataset`` over it up to
   its first sample (``verify="size"``: no hashing);
3. the first read of a shard with ``verify="checksum"``: it hashes that one shard (2^27 = 134M tokens);
4. registration (``register_in_place(..., format="megatron")``: reads and hashes every token once), on a
   ``--register-tokens`` sparse dataset; the 10B store's manifest is built by the same cut into
   134M-token ranges but with placeholder digests (hashing 20 GB would only measure SHA-256).

The budget: (2) minus nothing — opening does not read the ``.idx`` at all — must be <= 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.store import (
    DEFAULT_SHARD_TOKENS,
    ByteTokenizer,
    Manifest,
    ShardInfo,
    SplitInfo,
    TokenStore,
    megatron_source,
    read_megatron_index,
    register_in_place,
    write_manifest,
)

SEQ_LEN = 2048


def write_sparse_megatron(prefix: Path, tokens: int, doc_tokens: int) -> None:
    """A uint16 Megatron dataset: a sparse ``.bin`` of ``tokens`` zeros and its ``.idx`` (numpy writer)."""
    n_docs = -(-tokens // doc_tokens)
    lengths = np.full(n_docs, doc_tokens, dtype=np.int32)
    lengths[-1] = tokens - doc_tokens * (n_docs - 1)
    pointers = np.zeros(n_docs, dtype=np.int64)
    np.cumsum(lengths[:-1].astype(np.int64) * 2, out=pointers[1:])
    documents = np.arange(n_docs + 1, dtype=np.int64)
    with open(f"{prefix}.idx", "wb") as fh:
        fh.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n_docs, n_docs + 1))
        for arr in (lengths, pointers, documents):
            fh.write(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
    with open(f"{prefix}.bin", "wb") as fh:
        fh.truncate(tokens * 2)


def manifest_without_hashing(prefix: Path, store_dir: Path) -> None:
    """The manifest ``register_in_place`` would write (same 2^27-token ranges), digests left as placeholders."""
    src = megatron_source(prefix)
    seg = src.segments[0]
    ends = np.cumsum(seg.doc_lengths)
    n = int(ends[-1])
    shards = []
    for a in range(0, n, DEFAULT_SHARD_TOKENS):
        b = min(a + DEFAULT_SHARD_TOKENS, n)
        docs = int(np.searchsorted(ends, b, side="right") - np.searchsorted(ends, a, side="right"))
        shards.append(ShardInfo(seg.file, b - a, docs, "0" * 64, a * 2, seg.file_bytes))
    store_dir.mkdir(parents=True, exist_ok=True)
    tok = ByteTokenizer()
    write_manifest(store_dir, Manifest("web", "uint16", tok.info,
                                       {"train": SplitInfo(tuple(shards), "..")},
                                       source={"format": "megatron", "note": "placeholder digests"}))


def median_s(fn, reps: int) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=10_000_000_000)
    parser.add_argument("--doc-tokens", type=int, default=2000)
    parser.add_argument("--register-tokens", type=int, default=1_000_000_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        big = root / "data" / "web_text_document"
        big.parent.mkdir()
        write_sparse_megatron(big, args.tokens, args.doc_tokens)
        idx_mb = Path(f"{big}.idx").stat().st_size / 1e6
        print(f"{args.tokens / 1e9:g}B tokens, {-(-args.tokens // args.doc_tokens):,} documents, "
              f".idx {idx_mb:.0f} MB, sparse .bin {args.tokens * 2 / 1e9:.0f} GB")

        t_idx = median_s(lambda: read_megatron_index(f"{big}.idx"), args.reps)
        print(f"baseline: read the .idx (every array)            {t_idx[0] * 1e3:8.1f} ms  "
              f"[{t_idx[1] * 1e3:.1f}, {t_idx[2] * 1e3:.1f}]")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from megatron.core.datasets.indexed_dataset import IndexedDataset
        except ImportError:
            print("megatron-core is not installed: its IndexedDataset baseline is skipped")
        else:
            ds = IndexedDataset(str(big))
            assert len(ds) == -(-args.tokens // args.doc_tokens) and ds[0].size == args.doc_tokens
            t_meg = median_s(lambda: IndexedDataset(str(big)), args.reps)
            print(f"baseline: megatron-core IndexedDataset(prefix)   {t_meg[0] * 1e3:8.1f} ms  "
                  f"[{t_meg[1] * 1e3:.1f}, {t_meg[2] * 1e3:.1f}]")

        store_dir = root / "data" / "web.store"  # beside the data: data_dir ".."
        manifest_without_hashing(big, store_dir)
        t_open = median_s(lambda: TokenStore(store_dir), args.reps)
        shards = TokenStore(store_dir).train.num_shards
        print(f"TokenStore(store) ({shards} shards)               {t_open[0] * 1e3:8.1f} ms  "
              f"[{t_open[1] * 1e3:.1f}, {t_open[2] * 1e3:.1f}]")

        def first_sample() -> None:
            ds = ScaleAwareMixtureDataset({"web": store_dir}, {"web": 1.0}, min(10**9, args.tokens // 2), SEQ_LEN,
                                          verify="size")
            next(iter(ds))

        t_ds = median_s(first_sample, args.reps)
        print(f"open + ScaleAwareMixtureDataset + first sample   {t_ds[0] * 1e3:8.1f} ms  "
              f"[{t_ds[1] * 1e3:.1f}, {t_ds[2] * 1e3:.1f}]  (budget {min(10**9, args.tokens // 2) / 1e9:g}B tokens, seq_len {SEQ_LEN})")
        verdict = "within" if t_open[0] <= 1.0 else "OVER"
        print(f"budget: opening takes {t_open[0]:.3f} s and reads no .idx -> {verdict} the 1 s budget")

        small = root / "data" / "small_text_document"
        write_sparse_megatron(small, args.register_tokens, args.doc_tokens)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zeros do not end with EOS; the warning says so
            t = time.perf_counter()
            register_in_place(small, root / "stores" / "small", "bytes", format="megatron")
            t_reg = time.perf_counter() - t
        print(f"register_in_place, {args.register_tokens / 1e9:g}B tokens (hash + id check)  {t_reg:8.1f} s  "
              f"= {args.register_tokens / t_reg / 1e6:.0f}M tokens/s")
        store = TokenStore(root / "stores" / "small")  # checksums checked on first read
        t = time.perf_counter()
        store.train.sequence(0, SEQ_LEN)
        t_first = time.perf_counter() - t
        t = time.perf_counter()
        store.train.sequence(1, SEQ_LEN)
        t_next = time.perf_counter() - t
        first = store.manifest.splits["train"].shards[0].num_tokens
        print(f"first read of a {first / 1e6:.0f}M-token shard (hashes it)         {t_first * 1e3:8.1f} ms"
              f"; the next sequence {t_next * 1e6:.0f} us")


if __name__ == "__main__":
    main()

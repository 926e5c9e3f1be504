"""Synthetic token stores for tests (shared by every test module; keep this API stable).

    from helpers_store import write_synthetic_store
    store = write_synthetic_store(tmp_path, "web", num_tokens=10_000)   # -> tmp_path/"web"

A synthetic store is written with :class:`StoreWriter` exactly as ``prepare`` writes one: random
documents, each ending with EOS, in a ``train`` split of exactly ``num_tokens`` tokens and a
``val`` split of exactly ``val_tokens`` tokens. Content depends only on ``(seed, name)``, so two
domains of one test differ and a re-run gives byte-identical files. With the default
``vocab_size=257`` the tokenizer info is that of the built-in ``bytes`` tokenizer (ids 0..255 plus
EOS 256), so synthetic stores mix with each other and with stores prepared with ``bytes``; any
other ``vocab_size`` gives a synthetic tokenizer (spec ``synthetic-V``, EOS ``V-1``).
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from autoscale_data.store import StoreWriter, TokenizerInfo, TokenStore
from autoscale_data.store.tokenizers import ByteTokenizer

__all__ = ["synthetic_tokenizer_info", "write_synthetic_store", "write_synthetic_stores"]


def synthetic_tokenizer_info(vocab_size: int = 257) -> TokenizerInfo:
    """The tokenizer info of synthetic stores: the ``bytes`` tokenizer's for ``vocab_size=257``."""
    if vocab_size == 257:
        return ByteTokenizer().info
    digest = hashlib.sha256(f"synthetic tokenizer, vocab {vocab_size}".encode()).hexdigest()
    return TokenizerInfo(f"synthetic-{vocab_size}", digest, vocab_size, vocab_size - 1)


def _documents(rng: np.random.Generator, num_tokens: int, eos: int, mean_doc_tokens: int) -> tuple[np.ndarray,
                                                                                                     np.ndarray]:
    """Random tokens with EOS closing each document; exactly ``num_tokens`` long; also the lengths."""
    if num_tokens == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lengths = []
    total = 0
    while total < num_tokens:
        n = int(min(rng.integers(1, 2 * mean_doc_tokens), num_tokens - total))
        lengths.append(n)
        total += n
    tokens = rng.integers(0, eos, size=num_tokens)  # never EOS inside a document
    ends = np.cumsum(lengths) - 1
    tokens[ends] = eos
    return tokens, np.asarray(lengths, dtype=np.int64)


def write_synthetic_store(
    path: str | os.PathLike[str],
    name: str,
    num_tokens: int,
    vocab_size: int = 257,
    seed: int = 0,
    val_tokens: int | None = None,
    *,
    shard_tokens: int = 1 << 14,
    mean_doc_tokens: int = 64,
) -> TokenStore:
    """Write a synthetic domain store at ``path/name`` and open it.

    Args:
        path: the root directory (like a ``prepare`` output directory); the store goes in ``path/name``.
        name: the domain name.
        num_tokens: exact number of train tokens.
        vocab_size: token ids lie in ``[0, vocab_size)``; EOS is ``vocab_size - 1`` (256 for 257).
        seed: with ``name``, determines the content.
        val_tokens: exact number of held-out tokens (default ``num_tokens // 10``; 0 for none).
        shard_tokens: tokens per shard file (small values give multi-shard stores).
        mean_doc_tokens: mean document length.

    Returns:
        The opened :class:`TokenStore` (checksums verified).
    """
    info = synthetic_tokenizer_info(vocab_size)
    val_tokens = num_tokens // 10 if val_tokens is None else val_tokens
    rng = np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])
    store_dir = Path(path) / name
    with StoreWriter(store_dir, name, info, shard_tokens=shard_tokens,
                     holdout={"rule": "synthetic"}, source={"synthetic": True, "seed": seed}) as writer:
        for split, count in (("train", num_tokens), ("val", val_tokens)):
            tokens, lengths = _documents(rng, count, info.eos_id, mean_doc_tokens)
            if count:
                writer.add_tokens(split, tokens, document_lengths=lengths)
    return TokenStore(store_dir)


def write_synthetic_stores(path: str | os.PathLike[str], sizes: Mapping[str, int], **kwargs: object) -> Path:
    """Write one synthetic store per ``name -> num_tokens`` under ``path``; return ``path``.

    Extra keyword arguments go to :func:`write_synthetic_store` (the same for every domain).
    """
    for name, num_tokens in sizes.items():
        write_synthetic_store(path, name, num_tokens, **kwargs)  # type: ignore[arg-type]
    return Path(path)

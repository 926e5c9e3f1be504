"""Tokenizing documents in batches, in this process or a process pool, in input order (for ``prepare``)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Executor, Future

import numpy as np

from .tokenizers import Tokenizer

__all__ = ["encoded_batches", "init_worker"]

_BATCH_CHARS = 1 << 20
_BATCH_DOCS = 1024

_WORKER_TOKENIZER: Tokenizer | None = None


def init_worker(tokenizer: Tokenizer) -> None:
    """Process-pool initializer: keep the tokenizer for :func:`_encode_in_worker`."""
    global _WORKER_TOKENIZER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # processes give the parallelism
    _WORKER_TOKENIZER = tokenizer


def _encode_in_worker(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    assert _WORKER_TOKENIZER is not None, "worker was not initialised"  # internal invariant
    return _encode(_WORKER_TOKENIZER, texts)


def _encode(tokenizer: Tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode ``texts``; return all tokens (each document followed by EOS) and each one's length."""
    ids = tokenizer.encode_batch(texts)
    lengths = np.fromiter((a.size + 1 for a in ids), dtype=np.int64, count=len(ids))
    dtype = np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32
    eos = np.array([tokenizer.eos_id], dtype=dtype)
    return np.concatenate([part for a in ids for part in (a, eos)], dtype=dtype, casting="unsafe"), lengths


def _batches(docs: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    chars = 0
    for text in docs:
        if not text:
            continue
        batch.append(text)
        chars += len(text)
        if chars >= _BATCH_CHARS or len(batch) >= _BATCH_DOCS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def encoded_batches(tokenizer: Tokenizer, pool: Executor | None, docs: Iterator[str],
             ahead: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Encoded batches in input order; up to ``ahead`` batches in flight in the pool."""
    if pool is None:
        for batch in _batches(docs):
            yield _encode(tokenizer, batch)
        return
    pending: deque[Future[tuple[np.ndarray, np.ndarray]]] = deque()
    try:
        for batch in _batches(docs):
            pending.append(pool.submit(_encode_in_worker, batch))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()

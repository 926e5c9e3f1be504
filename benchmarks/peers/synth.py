"""The synthetic 7-domain token corpus shared by every reader in the peer benchmark.

Stdlib + numpy only: this module is imported both by the driver (our venv) and by the workers
that run in the peers' virtualenv.

Domains follow RedPajama-1T's token counts (relative sizes) and LLaMA-1's sampling weights. Every
token of domain ``d`` lies in ``[d*SPAN, (d+1)*SPAN)``, so any reader's output tells its domain
from its first token, and the first two tokens of each 2049-token sequence encode its index inside
the domain (``k = (t0 % SPAN) * SPAN + t1 % SPAN``): proportions and repeats are measured from the
tokens alone, identically for every reader.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DOMAINS",
    "LLAMA_WEIGHTS",
    "REDPAJAMA_TOKENS_B",
    "SEQ_LEN",
    "SPAN",
    "decode",
    "domain_sequences",
    "make_sequences",
    "target_counts",
]

SEQ_LEN = 2049
SPAN = 4096
# RedPajama-1T token counts in billions (its data card) and LLaMA-1's sampling proportions (Table 1)
REDPAJAMA_TOKENS_B = {"arxiv": 28.0, "books": 26.0, "c4": 175.0, "commoncrawl": 878.0, "github": 59.0,
                      "stackexchange": 20.0, "wikipedia": 24.0}
LLAMA_WEIGHTS = {"arxiv": 0.025, "books": 0.045, "c4": 0.15, "commoncrawl": 0.67, "github": 0.045,
                 "stackexchange": 0.02, "wikipedia": 0.045}
DOMAINS = sorted(REDPAJAMA_TOKENS_B)


def domain_sequences(total_sequences: int) -> dict[str, int]:
    """Sequences per domain for a corpus of about ``total_sequences``, in RedPajama proportions."""
    total_b = sum(REDPAJAMA_TOKENS_B.values())
    return {d: max(1, round(total_sequences * REDPAJAMA_TOKENS_B[d] / total_b)) for d in DOMAINS}


def make_sequences(domain_index: int, start: int, count: int, seed: int = 0) -> np.ndarray:
    """Sequences ``start .. start+count`` of a domain as a ``[count, SEQ_LEN]`` uint16 array."""
    rng = np.random.default_rng([seed, domain_index, start])
    base = domain_index * SPAN
    out = rng.integers(base, base + SPAN, size=(count, SEQ_LEN), dtype=np.uint16)
    k = np.arange(start, start + count, dtype=np.int64)
    out[:, 0] = base + (k // SPAN)
    out[:, 1] = base + (k % SPAN)
    return out


def decode(first_two: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(domain, index)`` arrays from an ``[n, 2]`` array of each sequence's first two tokens."""
    t = np.asarray(first_two, dtype=np.int64)
    return t[:, 0] // SPAN, (t[:, 0] % SPAN) * SPAN + t[:, 1] % SPAN


def target_counts(weights: dict[str, float], total: int) -> dict[str, int]:
    """Largest-remainder split of ``total`` sequences by ``weights`` (the exact per-domain totals)."""
    names = sorted(weights)
    w = np.array([weights[n] for n in names], dtype=np.float64)
    ideal = w / w.sum() * total
    counts = np.floor(ideal).astype(np.int64)
    order = np.argsort(-(ideal - counts), kind="stable")
    counts[order[: total - int(counts.sum())]] += 1
    return {n: int(c) for n, c in zip(names, counts, strict=True)}

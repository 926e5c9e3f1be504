"""Reference losses of the held-out data: what a model must beat before "which mix won" means anything.

For each domain, on the very tokens the runner scores (the first ``eval.heldout_tokens_per_domain`` held-out
tokens, cut into ``seq_len`` sequences; for a causal model every position but each sequence's first), a
:class:`~.report_types.ReferenceLoss`: the unigram loss, that of the best context-free predictor of these
tokens (a model above it predicts worse than token frequencies alone), and a uniform guess's (where an
untrained model starts). The runner writes them once per output folder (``OUT/reference_losses.json``); the
report prints them under the target losses and warns for every target mix and domain that does not beat
``unigram``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .. import layout
from .report_types import ReferenceLoss

__all__ = ["not_beating_unigram", "reference_losses", "unigram_entropy", "write_reference_losses"]


def unigram_entropy(counts: np.ndarray) -> float:
    """Entropy in nats of the frequencies ``counts`` (zero counts ignored)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    p = c / c.sum()
    return float(-(p * np.log(p)).sum())


def reference_losses(paths: Mapping[str, str | os.PathLike[str]], *, seq_len: int,
                     heldout_tokens_per_domain: int,
                     vocab_size: int, family: str, mlm_probability: float = 0.15,
                     mlm_passes: int = 1) -> dict[str, ReferenceLoss]:
    """Each domain's :class:`ReferenceLoss` on the held-out sequences the runner evaluates.

    Args:
        paths: domain -> store directory (the runner's domains).
        seq_len, heldout_tokens_per_domain: as in the runner's config (``eval.heldout_tokens_per_domain``).
        vocab_size: the tokenizer's vocabulary.
        family: ``"gpt2"`` (each sequence's first token is never predicted) or ``"bert"``.
        mlm_probability, mlm_passes: a masked LM's masked share and evaluation passes (the scored count).
    """
    from ...dataset import MixtureValidationDataset

    if family not in ("gpt2", "bert"):
        raise ValueError(f"family = {family!r} is invalid: expected 'gpt2' or 'bert'")
    per_domain = max(1, heldout_tokens_per_domain // seq_len)
    val = MixtureValidationDataset(dict(paths), seq_len, max_sequences_per_domain=per_domain, rank=0,
                                   world_size=1, output="numpy", verify="size")
    counts = {d: np.zeros(vocab_size, dtype=np.int64) for d in val.domain_names}
    for item in val:
        ids = item["input_ids"][1:] if family == "gpt2" else item["input_ids"]
        counts[val.domain_names[item["domain"]]] += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    out = {}
    for d, c in counts.items():
        n = int(c.sum())
        scored = float(n) if family == "gpt2" else n * mlm_probability * mlm_passes
        out[d] = ReferenceLoss(unigram=unigram_entropy(c), uniform=math.log(vocab_size), tokens=n,
                               scored_tokens=scored)
    return out


def write_reference_losses(out_dir: str | os.PathLike[str], losses: Mapping[str, ReferenceLoss]) -> None:
    """``OUT/reference_losses.json`` (atomically)."""
    from ..._io import atomic_write_json
    from ..._records import to_json

    atomic_write_json(Path(out_dir) / layout.REFERENCE_LOSSES, to_json(dict(losses)))


def not_beating_unigram(losses: Mapping[str, Mapping[str, float]],
                        reference: Mapping[str, ReferenceLoss]) -> dict[str, list[str]]:
    """Mix label -> the domains whose final validation loss is not below the domain's unigram loss.

    ``losses`` maps a mix to its per-domain final losses; mixes that beat every reference are left out.
    """
    out = {}
    for label, per_domain in losses.items():
        worse = [d for d, v in per_domain.items() if d in reference and v >= reference[d].unigram]
        if worse:
            out[label] = worse
    return out

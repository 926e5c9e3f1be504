"""Prepared token stores built from the embedded synthetic corpus.

The demo and the small example configs (``examples/tiny-cpu.yaml``) read these stores; the runner
only ever sees a directory of prepared stores and knows nothing about where they came from.
``autoscale-data demo --stores DIR`` calls :func:`prepare_synthetic_stores`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..store import prepare
from .corpus import DEMO_DOMAINS, generate_corpus

__all__ = ["STORES_DOMAINS", "prepare_synthetic_stores"]

#: The domains ``autoscale-data demo --stores`` builds by default (those of the ``--quick`` preset).
STORES_DOMAINS: tuple[str, ...] = ("encyclopedia", "code", "web")


def prepare_synthetic_stores(
    out_dir: str | os.PathLike[str],
    *,
    domains: Sequence[str] = DEMO_DOMAINS,
    bytes_per_domain: int = 1_000_000,
    seed: int = 0,
    tokenizer: str | os.PathLike[str] = "bytes",
    holdout_every: int = 20,
    corpus_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> Path:
    """Generate the synthetic corpus and prepare one token store per domain (each step reused).

    Args:
        out_dir: the prepared-store directory (one sub-directory per domain), what a runner
            config's ``domains`` points at.
        domains: which of :data:`~autoscale_data.demo.corpus.DEMO_DOMAINS` to build.
        bytes_per_domain: text bytes generated per domain.
        seed: the corpus generator's seed (the same seed gives byte-identical text).
        tokenizer: a ``prepare`` tokenizer spec (``"bytes"`` or a tokenizer path).
        holdout_every: every k-th document goes to the held-out split.
        corpus_dir: where the JSONL text goes (default: ``<out_dir>.corpus`` next to the stores).
        progress: show ``prepare``'s progress bar.

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: an unknown domain, a non-positive size or a bad ``holdout_every`` (from
            ``generate_corpus`` and ``prepare``).
    """
    out = Path(out_dir)
    text_dir = Path(corpus_dir) if corpus_dir is not None else out.with_name(out.name + ".corpus")
    paths = generate_corpus(text_dir, bytes_per_domain=bytes_per_domain, seed=seed, domains=tuple(domains))
    prepare({d: os.fspath(p) for d, p in paths.items()}, out, os.fspath(tokenizer), workers=1,
            holdout_every=holdout_every, progress=progress)
    return out

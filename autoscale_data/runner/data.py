"""The runner's view of the prepared stores, and the optional built-in synthetic demo corpus."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ..store import MANIFEST_NAME, TokenStore
from .config import RunnerConfig
from .plan import DomainInfo

__all__ = ["SYNTHETIC_KEYS", "ensure_data", "inspect_domains"]

#: Keys of ``data.synthetic``: the demo generator's options plus how to prepare its output.
SYNTHETIC_KEYS = ("bytes_per_domain", "domains", "holdout_every", "seed", "tokenizer")


def _store_dir_missing(config: RunnerConfig) -> bool:
    if not isinstance(config.domains, str):
        return any(not (config.resolve(p) / MANIFEST_NAME).is_file() for p in config.domains.values())
    root = config.resolve(config.domains)
    return not root.is_dir() or not any((p / MANIFEST_NAME).is_file() for p in root.iterdir())


def ensure_data(config: RunnerConfig, *, progress: bool = False) -> list[str]:
    """Build the synthetic demo stores into ``domains`` if the config asks for it and they are missing.

    Uses the demo generator (:mod:`autoscale_data.demo.corpus`) and ``prepare``; the text goes to
    ``<domains>.corpus/`` next to the stores. Does nothing when the stores exist or no
    ``data.synthetic`` section is given.

    Returns:
        Human-readable lines describing what was done (empty when nothing was).

    Raises:
        ValueError: unknown ``data.synthetic`` keys, or ``domains`` is not a single directory.
    """
    options = config.data.synthetic
    if options is None or not _store_dir_missing(config):
        return []
    unknown = sorted(set(options) - set(SYNTHETIC_KEYS))
    if unknown:
        raise ValueError(f"config data.synthetic has unknown keys {unknown}; expected some of {list(SYNTHETIC_KEYS)}")
    if not isinstance(config.domains, str):
        raise ValueError("data.synthetic needs 'domains' to be one prepared-store directory, not a mapping")
    from ..demo.corpus import DEMO_DOMAINS, generate_corpus
    from ..store.prepare import prepare

    out = config.resolve(config.domains)
    corpus_dir = out.with_name(out.name + ".corpus")
    names = tuple(options.get("domains", DEMO_DOMAINS))
    paths = generate_corpus(corpus_dir, bytes_per_domain=int(options.get("bytes_per_domain", 1_000_000)),
                            seed=int(options.get("seed", 0)), domains=names)
    kwargs: dict[str, Any] = {"workers": 1, "progress": progress}
    if "holdout_every" in options:
        kwargs["holdout_every"] = int(options["holdout_every"])
    prepare({d: os.fspath(p) for d, p in paths.items()}, out, options.get("tokenizer", "bytes"), **kwargs)
    return [f"generated the synthetic demo corpus ({', '.join(names)}) in {os.fspath(corpus_dir)} and prepared "
            f"it into {os.fspath(out)}"]


def _domain_paths(config: RunnerConfig) -> dict[str, Path]:
    if isinstance(config.domains, str):
        root = config.resolve(config.domains)
        if not root.is_dir():
            raise FileNotFoundError(
                f"prepared-store directory {os.fspath(root)!r} (config 'domains') does not exist: run "
                f"`autoscale-data prepare --out {os.fspath(root)} ...` first, or add a data.synthetic section")
        from ..store.prepare import find_domain_stores

        return {name: Path(p).resolve() for name, p in sorted(find_domain_stores(root).items())}
    return {name: config.resolve(p) for name, p in sorted(config.domains.items())}


def inspect_domains(config: RunnerConfig) -> DomainInfo:
    """Open every store (sizes checked) and describe them for the plan.

    Raises:
        FileNotFoundError: a store is missing.
        ValueError: fewer than two domains, or stores tokenized differently.
    """
    paths = _domain_paths(config)
    if len(paths) < 2:
        raise ValueError(f"AutoScale needs at least 2 domains, the config gives {sorted(paths)}")
    stores = {name: TokenStore(p, verify="size") for name, p in paths.items()}
    tokenizers = {name: s.manifest.tokenizer for name, s in stores.items()}
    first = next(iter(tokenizers.values()))
    odd = sorted(n for n, t in tokenizers.items() if t.fingerprint != first.fingerprint)
    if odd:
        raise ValueError(f"domains {odd} were tokenized differently from {next(iter(tokenizers))!r} "
                         f"({first.spec!r}); prepare every domain with the same tokenizer")
    fingerprints = {name: hashlib.sha256((p / MANIFEST_NAME).read_bytes()).hexdigest()[:16] for name, p in paths.items()}
    return DomainInfo(
        names=tuple(paths), paths={n: os.fspath(p) for n, p in paths.items()},
        train_tokens={n: s.train.num_tokens for n, s in stores.items()},
        val_tokens={n: s.val.num_tokens for n, s in stores.items()},
        fingerprints=fingerprints, vocab_size=first.vocab_size, eos_id=first.eos_id, tokenizer=first.spec)

"""The runner's view of the prepared stores: where they are, how large, and their tokenizer."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...mixing import largest_remainder
from ...store import TokenStore, check_compatible, find_domain_stores, megatron_hint, store_fingerprint
from ..config import RunnerConfig

__all__ = ["DomainInfo", "batch_sequences", "ddo_base_counts", "inspect_domains", "mix_counts"]


@dataclass(frozen=True)
class DomainInfo:
    """What the plan needs to know about the prepared stores."""

    names: tuple[str, ...]
    paths: dict[str, str]
    train_tokens: dict[str, int]
    val_tokens: dict[str, int]
    fingerprints: dict[str, str]
    vocab_size: int
    eos_id: int
    tokenizer: str
    """The tokenizer's spec (``bytes``, ``gpt2`` or where its file lay, as the stores record it)."""
    tokenizer_fingerprint: str = ""
    """Its content's fingerprint, what a mixture plan records (empty in a ``domains.json`` written before
    2026-11-28)."""

    def natural_weights(self) -> dict[str, float]:
        """Each domain's share of the training tokens."""
        total = sum(self.train_tokens.values())
        return {d: self.train_tokens[d] / total for d in self.names}


def _domain_paths(config: RunnerConfig) -> dict[str, Path]:
    if isinstance(config.domains, str):
        root = config.resolve(config.domains)
        hint = megatron_hint(root)
        if hint:  # a Megatron prefix, or a folder of .bin/.idx pairs, not yet registered
            raise FileNotFoundError(f"config 'domains' = {os.fspath(root)!r} is not a prepared-store "
                                    f"directory{hint}")
        if not root.is_dir():
            raise FileNotFoundError(
                f"prepared-store directory {os.fspath(root)!r} (config 'domains') does not exist: run "
                f"`autoscale-data prepare --out {os.fspath(root)} ...` first (`autoscale-data demo --stores "
                f"{os.fspath(root)}` builds the built-in synthetic corpus there)")
        return {name: Path(p).resolve() for name, p in sorted(find_domain_stores(root).items())}
    return {name: config.resolve(p) for name, p in sorted(config.domains.items())}


def inspect_domains(config: RunnerConfig) -> DomainInfo:
    """Open every store (sizes checked) and describe them for the plan.

    Raises:
        FileNotFoundError: a store is missing.
        ValueError: fewer than two domains, stores tokenized differently, or DDO settings these domains cannot
            meet (:meth:`~autoscale_data.runner.config.sections.DDOConfig.check_domains`).
    """
    paths = _domain_paths(config)
    if len(paths) < 2:
        raise ValueError(f"AutoScale needs at least 2 domains, the config gives {sorted(paths)}")
    config.ddo.check_domains(list(paths))
    stores = {name: TokenStore(p, verify="size") for name, p in paths.items()}
    first = check_compatible(stores)
    return DomainInfo(
        names=tuple(paths), paths={n: os.fspath(p) for n, p in paths.items()},
        train_tokens={n: s.train.num_tokens for n, s in stores.items()},
        val_tokens={n: s.val.num_tokens for n, s in stores.items()},
        fingerprints={n: store_fingerprint(p, stores[n].manifest) for n, p in paths.items()},
        vocab_size=first.vocab_size,
        eos_id=first.eos_id, tokenizer=first.spec, tokenizer_fingerprint=first.fingerprint)


def batch_sequences(config: RunnerConfig, budget_tokens: int) -> int:
    """Whole global batches of sequences in ``budget_tokens`` (``ValueError`` under one batch)."""
    per_batch = config.global_batch_size
    batches = budget_tokens // (config.seq_len * per_batch)
    if batches < 1:
        raise ValueError(f"budget {budget_tokens} tokens is less than one global batch "
                         f"({per_batch} x {config.seq_len} tokens)")
    return batches * per_batch


def ddo_base_counts(config: RunnerConfig, domains: DomainInfo, budget: int) -> dict[str, int]:
    """Sequences per domain of the DDO base run at ``budget`` (uniform or configured base weights)."""
    base = config.ddo.base_weights
    if base == "uniform":
        weights = {d: 1.0 for d in domains.names}
    else:
        missing = sorted(set(domains.names) - set(base))
        extra = sorted(set(base) - set(domains.names))
        if missing or extra:
            raise ValueError(f"ddo.base_weights must name exactly the domains {list(domains.names)}: "
                             f"missing {missing}, unknown {extra}")
        weights = {d: float(base[d]) for d in domains.names}
    if any(w <= 0 for w in weights.values()):
        raise ValueError(f"ddo.base_weights must all be positive (a domain with no base data cannot be "
                         f"perturbed): {weights}")
    counts = largest_remainder(weights, batch_sequences(config, budget))
    empty = [d for d, n in counts.items() if n == 0]
    if empty:
        raise ValueError(f"ddo budget {budget} gives no sequence to domains {empty}: raise ddo.budgets")
    return counts


def mix_counts(domains: DomainInfo, weights: Mapping[str, float], total: int) -> dict[str, int]:
    """``total`` sequences shared by ``weights`` over the stores' domains (missing ones get 0; largest
    remainders)."""
    return largest_remainder({d: max(0.0, float(weights.get(d, 0.0))) for d in domains.names}, total)

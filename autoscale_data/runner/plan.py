"""The plan as data: every training run, its tokens per domain, seed, role and content-hash id.

A run's id hashes everything that determines its result (model fields, optimiser, batch shape,
sequence counts per domain, seed, the stores' manifests, evaluation settings, backend and
precision) and nothing else, so changing one part of a config changes only the affected ids, and
two roles that need the very same run (say, a reference mix equal to uniform) share one training.

Token counts are whole sequences, and every run's total is a whole number of global batches, so
the trainer consumes exactly the planned data. For a DDO perturbation the perturbed domain's count
is rounded to the nearest value that keeps the total a multiple of the global batch (the fit uses
the tokens actually trained, so this rounding changes the effective multiplier, never the fit).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .config import RunnerConfig, config_to_dict

__all__ = [
    "DomainInfo",
    "RunSpec",
    "ddo_base_counts",
    "ddo_proxy_specs",
    "describe_plan",
    "largest_remainder",
    "run_fingerprint",
    "target_spec",
]

_PLAN_VERSION = 1


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

    def natural_weights(self) -> dict[str, float]:
        """Each domain's share of the training tokens."""
        total = sum(self.train_tokens.values())
        return {d: self.train_tokens[d] / total for d in self.names}


@dataclass(frozen=True)
class RunSpec:
    """One training run of the plan.

    Attributes:
        run_id: content hash (hex, 16 chars) of everything that determines the result.
        kind: ``"proxy"`` (DDO) or ``"target"``.
        scale: the nominal budget this run belongs to (N1, N2 or the target budget).
        label: e.g. ``"base"``, ``"code x3"``, ``"code /3"``, ``"autoscale"``, ``"uniform"``.
        sequences: whole sequences per domain (tokens = sequences x seq_len).
        seed: model-initialisation and data-order seed.
        eval_points: how many evaluations along the run (the last is at the end).
        perturbed: the perturbed domain of a DDO run (``None`` for base and target runs).
        multiplier: the planned multiplier of the perturbed domain.
        settings: the hashed training settings (model, optimiser, batches, backend, stores).
    """

    run_id: str
    kind: str
    scale: int
    label: str
    sequences: dict[str, int]
    seq_len: int
    seed: int
    eval_points: int
    perturbed: str | None = None
    multiplier: float = 1.0
    settings: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def total_sequences(self) -> int:
        return sum(self.sequences.values())

    @property
    def total_tokens(self) -> int:
        return self.total_sequences * self.seq_len

    @property
    def tokens(self) -> dict[str, int]:
        """Planned training tokens per domain."""
        return {d: n * self.seq_len for d, n in self.sequences.items()}

    @property
    def weights(self) -> dict[str, float]:
        """The mixture weights that give exactly :attr:`sequences` at :attr:`total_tokens`."""
        total = self.total_sequences
        return {d: n / total for d, n in self.sequences.items()}

    @property
    def name(self) -> str:
        """Human-readable name: ``proxy@40000 code x3 s0``."""
        return f"{self.kind}@{self.scale} {self.label} s{self.seed}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RunSpec:
        return cls(**dict(obj))


def largest_remainder(weights: Mapping[str, float], total: int) -> dict[str, int]:
    """Integer counts summing to ``total`` in proportion to ``weights`` (largest-remainder rounding)."""
    names = list(weights)
    w = np.asarray([float(weights[d]) for d in names])
    if w.sum() <= 0:
        raise ValueError(f"weights {dict(weights)} have no positive entry")
    exact = w / w.sum() * total
    counts = np.floor(exact).astype(np.int64)
    short = int(total - counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:short]] += 1
    return {d: int(c) for d, c in zip(names, counts, strict=True)}


def _training_settings(config: RunnerConfig, domains: DomainInfo) -> dict[str, Any]:
    from .models import model_config_dict

    model = model_config_dict(config.model.preset, config.model.overrides, vocab_size=domains.vocab_size,
                              seq_len=config.seq_len, dropout=config.dropout)
    settings: dict[str, Any] = {
        "version": _PLAN_VERSION,
        "model": {"preset": config.model.preset, "fields": model},
        "optimizer": config_to_dict(config.optimizer),
        "seq_len": config.seq_len,
        "micro_batch_size": config.micro_batch_size,
        "global_batch_size": config.global_batch_size,
        "procs": config.procs,
        "backend": config.backend,
        "precision": config.precision,
        "stores": {d: domains.fingerprints[d] for d in domains.names},
        "heldout_tokens_per_domain": config.eval.heldout_tokens_per_domain,
    }
    if config.model.family == "bert":
        settings["model"]["mlm_probability"] = config.model.mlm_probability
    if config.backend == "deepspeed":
        settings["deepspeed"] = {"zero_stage": config.deepspeed.zero_stage,
                                 "extra": config.deepspeed.extra}
    return settings


def run_fingerprint(settings: Mapping[str, Any], sequences: Mapping[str, int], seed: int, eval_points: int) -> str:
    """The run id: SHA-256 (first 16 hex digits) of the canonical JSON of what determines the result."""
    blob = json.dumps({"settings": settings, "sequences": dict(sorted(sequences.items())), "seed": seed,
                       "eval_points": eval_points}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _make(config: RunnerConfig, domains: DomainInfo, *, kind: str, scale: int, label: str,
          sequences: dict[str, int], seed: int, perturbed: str | None = None, multiplier: float = 1.0) -> RunSpec:
    settings = _training_settings(config, domains)
    points = config.eval.proxy_points if kind == "proxy" else config.eval.target_points
    steps = sum(sequences.values()) // config.global_batch_size
    points = max(1, min(points, steps))
    return RunSpec(run_fingerprint(settings, sequences, seed, points), kind, int(scale), label, dict(sequences),
                   config.seq_len, int(seed), points, perturbed, float(multiplier), settings)


def _batch_sequences(config: RunnerConfig, budget_tokens: int) -> int:
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
    counts = largest_remainder(weights, _batch_sequences(config, budget))
    empty = [d for d, n in counts.items() if n == 0]
    if empty:
        raise ValueError(f"ddo budget {budget} gives no sequence to domains {empty}: raise ddo.budgets")
    return counts


def _perturbed_count(n: int, factor: float, others: int, batch: int, up: bool) -> int:
    want = n * factor
    lo = math.floor((others + want) / batch) * batch - others
    candidates = [c for c in (lo - batch, lo, lo + batch, lo + 2 * batch) if c >= 1 and (c > n if up else c < n)]
    if not candidates:
        raise ValueError(f"a DDO perturbation of {n} sequences by {'x' if up else '/'}"
                         f"{factor if up else 1 / factor:g} cannot keep whole global batches of {batch}: "
                         f"raise ddo.budgets or lower global_batch_size")
    return min(candidates, key=lambda c: (abs(c - want), -c))


def ddo_proxy_specs(config: RunnerConfig, domains: DomainInfo, budget: int) -> list[RunSpec]:
    """The 2m+1 DDO runs at one budget, for every seed: base, then each domain up and down."""
    base = ddo_base_counts(config, domains, budget)
    specs: list[RunSpec] = []
    batch = config.global_batch_size
    up, down = config.ddo.multiplier_up, config.ddo.multiplier_down
    for seed in config.seeds:
        specs.append(_make(config, domains, kind="proxy", scale=budget, label="base", sequences=base, seed=seed))
        for d in domains.names:
            others = sum(base.values()) - base[d]
            for is_up, factor, tag in ((True, up, f"x{up:g}"), (False, 1.0 / down, f"/{down:g}")):
                counts = dict(base)
                counts[d] = _perturbed_count(base[d], factor, others, batch, is_up)
                specs.append(_make(config, domains, kind="proxy", scale=budget, label=f"{d} {tag}",
                                   sequences=counts, seed=seed, perturbed=d, multiplier=factor))
    return specs


def target_spec(config: RunnerConfig, domains: DomainInfo, label: str, weights: Mapping[str, float],
                seed: int) -> RunSpec:
    """One run at the target budget with the given mixture ``weights`` (missing domains get 0)."""
    unknown = sorted(set(weights) - set(domains.names))
    if unknown:
        raise ValueError(f"mix {label!r} names unknown domains {unknown}; the stores hold {list(domains.names)}")
    full = {d: max(0.0, float(weights.get(d, 0.0))) for d in domains.names}
    counts = largest_remainder(full, _batch_sequences(config, config.target.budget))
    return _make(config, domains, kind="target", scale=config.target.budget, label=label, sequences=counts,
                 seed=seed)


def describe_plan(specs: Sequence[RunSpec]) -> dict[str, Any]:
    """Totals of a list of runs (unique ids counted once)."""
    unique = {s.run_id: s for s in specs}
    return {"runs": len(unique), "tokens": sum(s.total_tokens for s in unique.values())}

"""``MixturePlan``: AutoScale weights for any budget, accepted by the dataset as ``weights=``.

A plan holds the Theorem-1 path fitted on optimal allocations at two or more budgets (see
:mod:`.projection`). ``allocation_for_budget(N)`` follows that path for every N, also below the smallest
fitted budget (the same path run backwards), so per-domain allocations are non-decreasing in N and sum to
N; a budget below :attr:`MixturePlan.min_budget` (where a domain that does not grow would get fewer tokens
than at the smallest budget) raises ``ValueError``.

Theorem 1 rules out a domain whose optimal allocation shrinks as the budget grows, but noisy DDO optima at
small budgets can show one: such a plan needs ``allow_decreasing=True`` and then answers from ``min_budget``
(the smallest total on the path) up; the dataset's anytime schedule follows its monotone envelope
(:func:`autoscale_data.mixing.anytime.allocation_path`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._io import atomic_write_json
from .._records import Record, required
from .allocation_path import AllocationPath, as_scales, cap_warnings, fit_path
from .ddo import token_caps_array

__all__ = ["MixturePlan", "PlanScale"]

_FORMAT = "autoscale_data.MixturePlan"
_VERSION = 1
_CACHE_SIZE = 4096


@dataclass(frozen=True)
class PlanScale(Record):
    """One budget a plan was fitted on (an item of :attr:`MixturePlan.scales`)."""

    budget_tokens: float
    allocation_tokens: dict[str, float]


@dataclass(frozen=True, repr=False, kw_only=True)
class MixturePlan(Record):
    """AutoScale mixture weights as a function of the token budget (a codec record: its fields are its JSON
    keys).

    Build with :meth:`from_scales`; use as ``ScaleAwareMixtureDataset(weights=plan, budget_tokens=N)``.
    Reading refits :attr:`path` from :attr:`scales`, so that a hand-edited file cannot give a path its scales
    do not.
    """

    format: str = required(default=_FORMAT)
    version: int = _VERSION
    scales: list[PlanScale] = field(default_factory=list)
    """The ``(budget_tokens, allocation_tokens)`` the plan was fitted on."""
    tokenizer: str | None = None
    """The tokenizer the underlying runs used (spec or fingerprint), or None."""
    token_caps: dict[str, float] | None = None
    """Per-domain token caps (tokens available x epoch cap), or None."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free JSON-able information (objective, run ids, ...)."""
    allow_decreasing: bool = False
    """Whether domains whose allocation falls with the budget are accepted."""
    domains: tuple[str, ...] = ()
    """Domain names, in the order of the path's arrays (empty: the first scale's order)."""
    path: AllocationPath = field(init=False, compare=False)
    """The fitted :class:`~.allocation_path.AllocationPath` (written, refitted when read)."""

    def __post_init__(self) -> None:
        if self.format != _FORMAT:
            raise ValueError(f"not a MixturePlan JSON object (format {self.format!r})")
        if self.version != _VERSION:
            raise ValueError(f"unsupported MixturePlan version {self.version!r} (expected {_VERSION})")
        if self.tokenizer is not None and not isinstance(self.tokenizer, str):
            raise ValueError("tokenizer must be a string (spec or fingerprint) or None, got "
                             f"{self.tokenizer!r}")
        rank = {d: k for k, d in enumerate(self.domains)}  # the written order (a file's keys are sorted)
        budgets, domains, allocs = as_scales([(s.budget_tokens, dict(sorted(
            s.allocation_tokens.items(), key=lambda kv: rank.get(kv[0], len(rank))))) for s in self.scales])
        pairs = [(float(n), dict(zip(domains, a.tolist(), strict=True)))
                 for n, a in zip(budgets, allocs, strict=True)]
        path = fit_path(pairs)
        if path.decreasing and not self.allow_decreasing:
            raise ValueError(
                f"allocations of {path.decreasing} decrease as the budget grows; an AutoScale plan "
                "needs non-decreasing allocations (check the DDO fits / use project() to inspect, or pass "
                "allow_decreasing=True to accept them)"
            )
        caps = self.token_caps
        for name, value in (("scales", [PlanScale(n, a) for n, a in pairs]), ("domains", path.domains),
                            ("path", path),
                            ("token_caps",
                             None if caps is None else {d: float(caps[d]) for d in path.domains}),
                            ("metadata", dict(self.metadata or {})),
                            ("allow_decreasing", bool(self.allow_decreasing)),
                            ("_cache", {})):
            object.__setattr__(self, name, value)

    @property
    def min_budget(self) -> float:
        """The smallest budget the plan answers: 0 unless some allocation decreases or stays the same between
        the budgets (below it, it raises ``ValueError``: never a NaN)."""
        return self.path.min_total

    @classmethod
    def from_scales(cls, scales: Sequence[Any], *, tokenizer: str | None = None,
                    token_caps: Mapping[str, float] | None = None,
                    max_epochs: float | Mapping[str, float] | None = None,
                    metadata: Mapping[str, Any] | None = None, allow_decreasing: bool = False) -> MixturePlan:
        """Fit a plan on optimal allocations at two or more budgets.

        Args:
            scales: ``(budget_tokens, {domain: tokens})`` per budget, DDO results, or dicts with
                ``budget_tokens`` and ``weights``/``allocation_tokens``; budgets increasing.
            token_caps: tokens available per domain, times ``max_epochs`` (:meth:`warnings_for_budget` reports
                budgets that exceed them); the other arguments are recorded as the fields of the same names.

        Raises:
            ValueError: see :func:`~autoscale_data.solver.allocation_path.as_scales`; decreasing domains
                (unless ``allow_decreasing``).
        """
        budgets, domains, allocs = as_scales(scales)
        caps = token_caps_array(domains, token_caps, max_epochs)
        return cls(scales=[PlanScale(float(n), dict(zip(domains, a.tolist(), strict=True)))
                           for n, a in zip(budgets, allocs, strict=True)], tokenizer=tokenizer,
                   token_caps=None if caps is None else dict(zip(domains, caps.tolist(), strict=True)),
                   metadata=dict(metadata or {}), allow_decreasing=allow_decreasing)

    # ------------------------------------------------------------ queries
    def allocations_for_budgets(self, budgets: Sequence[float] | np.ndarray) -> np.ndarray:
        """Allocations (tokens) for many budgets at once, shape ``(len(budgets), m)``."""
        return self.path.allocations(np.asarray(budgets, dtype=np.float64))

    def allocation_for_budget(self, budget_tokens: float) -> dict[str, float]:
        """Optimal tokens per domain for ``budget_tokens`` (sums to it; cached).

        Raises:
            ValueError: ``budget_tokens`` <= 0, or not above :attr:`min_budget`.
        """
        n = float(budget_tokens)
        row = self._cache.get(n)
        if row is None:
            row = self.path.allocations(n)[0]
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[n] = row
        return {d: float(v) for d, v in zip(self.domains, row, strict=False)}

    def weights_for_budget(self, budget_tokens: float) -> dict[str, float]:
        """Mixture weights for ``budget_tokens``: ``allocation_for_budget(N) / N``."""
        n = float(budget_tokens)
        return {d: v / n for d, v in self.allocation_for_budget(n).items()}

    def warnings_for_budget(self, budget_tokens: float) -> list[str]:
        """Warnings for a budget: domains needing more tokens than their cap."""
        caps = None if self.token_caps is None else np.array([self.token_caps[d] for d in self.domains])
        alloc = np.array(list(self.allocation_for_budget(budget_tokens).values()))
        return cap_warnings(self.domains, alloc, caps)

    # --------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the plan as JSON (atomically)."""
        atomic_write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MixturePlan:
        """Read a plan written by :meth:`save`.

        Raises:
            FileNotFoundError: no such file.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"plan file not found: {path}")
        with open(path, encoding="utf-8") as fh:
            return cls.from_json(json.load(fh), "plan")

    def __repr__(self) -> str:
        budgets = ", ".join(f"{s.budget_tokens:.3g}" for s in self.scales)
        return f"MixturePlan(domains={list(self.domains)}, budgets=[{budgets}], tokenizer={self.tokenizer!r})"

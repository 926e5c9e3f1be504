"""Baseline mixtures behind one interface: runs and/or token counts in, weights out.

``baseline_weights(name, runs=..., token_counts=..., **options)`` with ``name`` in
:data:`BASELINES`:

* ``uniform`` — equal weights.
* ``natural`` — each domain's share of the available tokens.
* ``reference`` — user weights (``weights=``) or a named preset (``preset="llama1"``), renormalised
  over the domains present; ``mapping=`` renames preset keys to your domain names.
* ``temperature`` — ``w ∝ share^(1/T)`` (T = 1 natural, T → ∞ uniform).
* ``regmix`` — regression of the objective on the weights of random-mixture runs, then a search of
  the simplex (see :mod:`.regression`).
* ``mixing_law`` — data-mixing-law fit ``L_i = c_i + k_i exp(Σ_j t_ij w_j)`` per validation domain,
  then its minimum over the simplex (see :mod:`.regression`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np

from .regression import mixing_law_weights, regmix_weights
from .runs import RunTable

__all__ = ["BASELINES", "MIXING_LAW", "NATURAL", "PRESETS", "REFERENCE", "REGMIX", "TEMPERATURE", "UNIFORM",
           "Baseline",
           "baseline_weights", "natural_weights", "reference_weights", "temperature_weights",
           "uniform_weights"]

Baseline = Literal["mixing_law", "natural", "reference", "regmix", "temperature", "uniform"]
"""The baselines :func:`baseline_weights` computes: the one list of their names (the runner's methods of
these names, :mod:`autoscale_data.runner.registry`, take them from here)."""
BASELINES: tuple[Baseline, ...] = get_args(Baseline)
MIXING_LAW, NATURAL, REFERENCE, REGMIX, TEMPERATURE, UNIFORM = BASELINES

PRESETS: dict[str, dict[str, float]] = {
    "llama1": {
        "CommonCrawl": 0.67, "C4": 0.15, "GitHub": 0.045, "Wikipedia": 0.045,
        "Books": 0.045, "ArXiv": 0.025, "StackExchange": 0.02,
    },
}
"""Named reference mixtures (LLaMA-1 sampling proportions over RedPajama's 7 sources)."""


def _domains(domains: Sequence[str] | None, token_counts: Mapping[str, float] | None,
             runs: RunTable | None) -> list[str]:
    if domains is not None:
        out = [str(d) for d in domains]
    elif token_counts is not None:
        out = [str(d) for d in token_counts]
    elif runs is not None:
        out = list(runs.train_domains)
    else:
        raise ValueError("need domains=, token_counts= or runs= to know the domains")
    if not out:
        raise ValueError("no domains")
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate domains in {out}")
    return out


def _counts(token_counts: Mapping[str, float] | None,
            domains: Sequence[str] | None = None) -> dict[str, float]:
    if token_counts is None:
        raise ValueError("this baseline needs token_counts= (tokens available per domain)")
    out = {}
    for d, v in token_counts.items():
        v = float(v)
        if not np.isfinite(v) or v < 0:
            raise ValueError(f"token count of {d!r} must be >= 0, got {v}")
        out[str(d)] = v
    if domains is not None and set(domains) != set(out):
        raise ValueError(f"token_counts domains {sorted(out)} differ from {sorted(domains)}")
    if sum(out.values()) <= 0:
        raise ValueError("token counts sum to 0")
    return out


def uniform_weights(domains: Sequence[str]) -> dict[str, float]:
    """Equal weight per domain."""
    ds = _domains(domains, None, None)
    return {d: 1.0 / len(ds) for d in ds}


def natural_weights(token_counts: Mapping[str, float]) -> dict[str, float]:
    """Each domain's share of all available tokens."""
    c = _counts(token_counts)
    tot = sum(c.values())
    return {d: v / tot for d, v in c.items()}


def temperature_weights(token_counts: Mapping[str, float], temperature: float) -> dict[str, float]:
    """Temperature sampling: ``w_j ∝ (n_j / Σ n)^(1/T)``.

    Raises:
        ValueError: ``temperature <= 0``.
    """
    t = float(temperature)
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"temperature must be > 0, got {temperature}")
    nat = natural_weights(token_counts)
    p = {d: (v ** (1.0 / t) if v > 0 else 0.0) for d, v in nat.items()}
    tot = sum(p.values())
    return {d: v / tot for d, v in p.items()}


def reference_weights(domains: Sequence[str], *, weights: Mapping[str, float] | None = None,
                      preset: str | None = None,
                      mapping: Mapping[str, str] | None = None) -> dict[str, float]:
    """User-given or preset weights, renormalised over ``domains``.

    Args:
        domains: your domain names.
        weights: explicit weights per domain (>= 0).
        preset: a key of :data:`PRESETS` (e.g. ``"llama1"``); matched case-insensitively.
        mapping: preset key -> your domain name.

    Raises:
        ValueError: neither/both of weights and preset, unknown preset, a domain without a weight,
            negative weights.
    """
    ds = _domains(domains, None, None)
    if (weights is None) == (preset is None):
        raise ValueError("give exactly one of weights= or preset=")
    if preset is not None:
        key = preset.lower()
        if key not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
        src = dict(PRESETS[key])
        if mapping:
            unknown = sorted(set(mapping) - set(src))
            if unknown:
                raise ValueError(f"mapping has keys {unknown} not in preset {preset!r} ({sorted(src)})")
            src = {mapping.get(k, k): v for k, v in src.items()}
        lower = {k.lower(): v for k, v in src.items()}
        missing = [d for d in ds if d.lower() not in lower]
        if missing:
            raise ValueError(f"preset {preset!r} has no weight for {missing}; pass mapping= (preset keys: "
                             f"{sorted(src)})")
        raw = {d: lower[d.lower()] for d in ds}
    else:
        missing = [d for d in ds if d not in weights]
        if missing:
            raise ValueError(f"reference weights missing for {missing}")
        raw = {d: float(weights[d]) for d in ds}
    bad = {d: v for d, v in raw.items() if not (np.isfinite(v) and v >= 0)}
    if bad:
        raise ValueError(f"reference weights must be >= 0, got {bad}")
    tot = sum(raw.values())
    if tot <= 0:
        raise ValueError("reference weights sum to 0 over the given domains")
    return {d: v / tot for d, v in raw.items()}


def baseline_weights(name: str, *, runs: RunTable | None = None,
                     token_counts: Mapping[str, float] | None = None,
                     domains: Sequence[str] | None = None, **options: Any) -> dict[str, float]:
    """Weights of a named baseline (see the module doc for names and options).

    Args:
        name: one of :data:`BASELINES`.
        runs: runs (for ``regmix`` and ``mixing_law``; also gives the domains).
        token_counts: tokens available per domain (``natural``, ``temperature``).
        domains: domain names (``uniform``, ``reference``) when neither runs nor counts are given.
        **options: ``temperature=`` / ``weights=``, ``preset=``, ``mapping=`` / options of
            :func:`~autoscale_data.solver.regression.regmix_weights` and
            :func:`~autoscale_data.solver.regression.mixing_law_weights`.

    Raises:
        ValueError: unknown name, missing inputs, bad options.
    """
    if name == UNIFORM:
        return uniform_weights(_domains(domains, token_counts, runs))
    if name == NATURAL:
        return natural_weights(_counts(token_counts, domains))
    if name == TEMPERATURE:
        if "temperature" not in options:
            raise ValueError("temperature baseline needs temperature=")
        return temperature_weights(_counts(token_counts, domains), options.pop("temperature"))
    if name == REFERENCE:
        return reference_weights(_domains(domains, token_counts, runs), **options)
    if name in (REGMIX, MIXING_LAW):
        if runs is None:
            raise ValueError(f"{name} baseline needs runs= (random-mixture runs at one budget)")
        fn = regmix_weights if name == REGMIX else mixing_law_weights
        return fn(runs, **options)
    raise ValueError(f"unknown baseline {name!r}; known: {list(BASELINES)}")

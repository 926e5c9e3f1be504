"""Repetition-matched proxies (``ddo.repetition: match``): each proxy repeats every domain as the target will.

Every DDO proxy at budget ``N`` draws domain ``d`` from a seeded pool of ``round(U_d * S(N) / S(T))``
sequences (``U_d`` the domain's whole training sequences, ``S(N)`` the sequences a run of budget ``N`` trains,
``T`` the target budget; at least one, :func:`repetition_problems`), so it sees its ``n_d`` sequences of the
domain in the epochs the target sees when it trains the domain ``S(T) / S(N)`` times as much, whatever the
mix. Why, and what the dry run, ``fits/repetition.json`` and the report show: docs/runner.md,
"Repetition-matched proxies".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._io import atomic_write_json
from ..._records import Record, omitted
from ...solver.contrib import R_STAR, DomainEpochs, epochs_table
from ...solver.vocabulary import GEOMETRIC, OBSERVED, ROBUST
from .. import layout
from ..config import RunnerConfig
from ..config.sections import REPETITION_MATCH, REPETITION_OFF
from .data import DomainInfo, batch_sequences, ddo_base_counts, mix_counts

__all__ = [
    "DomainRepetition",
    "RepetitionFile",
    "RepetitionLaw",
    "matched",
    "mix_epochs",
    "proxy_pools",
    "repetition_law",
    "repetition_md",
    "repetition_problems",
    "repetition_records",
    "target_epochs",
    "write_mix_epochs",
]


def matched(config: RunnerConfig) -> bool:
    """Whether the proxies are repetition-matched (``ddo.repetition: match``)."""
    return getattr(config.ddo, "repetition", REPETITION_OFF) == REPETITION_MATCH


def _unique(config: RunnerConfig, domains: DomainInfo) -> dict[str, int]:
    return {d: domains.train_tokens[d] // config.seq_len for d in domains.names}


def _exact_pools(config: RunnerConfig, domains: DomainInfo, budget: int) -> dict[str, float]:
    ratio = batch_sequences(config, budget) / batch_sequences(config, config.target.budget)
    return {d: u * ratio for d, u in _unique(config, domains).items()}


def proxy_pools(config: RunnerConfig, domains: DomainInfo, budget: int) -> dict[str, int]:
    """Sequences in each domain's pool for the proxies at ``budget`` (a domain whose pool would be the
    whole domain is left out: it draws from all its sequences). Empty unless ``ddo.repetition: match``.

    Raises:
        ValueError: a pool of less than one sequence (see :func:`repetition_problems`).
    """
    if not matched(config):
        return {}
    unique = _unique(config, domains)
    out = {}
    for d, exact in _exact_pools(config, domains, budget).items():
        size = round(exact)
        if size < 1:
            raise ValueError(f"ddo.repetition match: domain {d!r}'s pool at {budget:,} tokens would hold "
                             f"{exact:.2g} sequences ({unique[d]} sequences x the budget ratio): raise "
                             "ddo.budgets or add data")
        if size < unique[d]:
            out[d] = int(size)
    return out


def _target_counts(config: RunnerConfig, domains: DomainInfo, weights: Mapping[str, float]) -> dict[str, int]:
    """Sequences of each domain in a target run of ``weights``."""
    return mix_counts(domains, weights, batch_sequences(config, config.target.budget))


def target_epochs(config: RunnerConfig, domains: DomainInfo,
                  weights: Mapping[str, float]) -> dict[str, float]:
    """Epochs of each domain in a target run of ``weights`` (its whole training sequences = one epoch)."""
    counts = _target_counts(config, domains, weights)
    unique = _unique(config, domains)
    return {d: (counts[d] / unique[d] if unique[d] else math.inf) for d in domains.names}


@dataclass(frozen=True)
class DomainRepetition(Record):
    """One domain under repetition matching: its target epochs and its proxies' pools.

    Attributes:
        domain: the domain.
        unique_tokens: its training tokens in whole sequences (one epoch at the target).
        target_epochs: epochs at the target budget under the design's base mix.
        pools: budget -> pool sequences of its proxies (absent: the whole domain).
        proxy_epochs: budget -> epochs of the base proxy run at that budget.
        cap: the target's ``max_epochs`` (1 without it).
    """

    domain: str
    unique_tokens: int
    target_epochs: float
    pools: dict[int, int]
    proxy_epochs: dict[int, float]
    cap: float



def repetition_records(config: RunnerConfig, domains: DomainInfo) -> list[DomainRepetition]:
    """Per domain, the target's epochs under the base mix and every proxy budget's pool and base-run
    epochs."""
    unique = _unique(config, domains)
    bases = {n: ddo_base_counts(config, domains, n) for n in config.ddo.budgets}
    first = config.ddo.budgets[0]
    base_total = batch_sequences(config, first)
    epochs = target_epochs(config, domains, {d: n / base_total for d, n in bases[first].items()})
    pools = {n: proxy_pools(config, domains, n) for n in config.ddo.budgets}
    cap = 1.0 if config.max_epochs is None else float(config.max_epochs)
    return [DomainRepetition(domain=d, unique_tokens=unique[d] * config.seq_len, target_epochs=epochs[d],
                             pools={n: p[d] for n, p in pools.items() if d in p},
                             proxy_epochs={n: bases[n][d] / pools[n].get(d, unique[d]) for n in pools},
                             cap=cap)
            for d in domains.names]


def repetition_problems(config: RunnerConfig, domains: DomainInfo) -> list[str]:
    """What makes ``ddo.repetition: match`` impossible, found before any training (empty when all is well,
    and always empty without ``match``): a pool of less than one sequence at a DDO budget, or a domain
    that cannot supply the design's base mix at the target budget even with ``max_epochs``."""
    if not matched(config):
        return []
    lines = []
    for n in config.ddo.budgets:
        try:
            proxy_pools(config, domains, n)
        except ValueError as exc:
            lines.append(str(exc))
    if lines:
        return lines
    for rec in repetition_records(config, domains):
        if rec.target_epochs > rec.cap + 1e-9:
            lines.append(f"ddo.repetition match: domain {rec.domain!r} cannot supply the target even with "
                         f"max_epochs {config.max_epochs}: the design's base mix asks "
                         f"{rec.target_epochs:.3g} epochs of its {rec.unique_tokens:,} tokens at the target "
                         f"budget {config.target.budget:,}, so the proxies would match a repetition the "
                         "target may not train; raise max_epochs, lower its base weight (ddo.base_weights) "
                         "or the target budget, or add data")
    return lines



def mix_epochs(config: RunnerConfig, domains: DomainInfo,
               mixes: Mapping[str, Mapping[str, float]]) -> dict[str, list[DomainEpochs]]:
    """Per target mix, each domain's epochs and effective tokens at the target budget
    (:func:`~autoscale_data.solver.repetition.epochs_table`, within ``max_epochs``)."""
    unique = {d: float(u * config.seq_len) for d, u in _unique(config, domains).items()}
    out = {}
    for label, weights in mixes.items():
        counts = _target_counts(config, domains, weights)
        out[label] = epochs_table({d: counts[d] * config.seq_len for d in domains.names}, unique,
                                  config.max_epochs)
    return out


@dataclass(frozen=True)
class RepetitionFile(Record):
    """Each target mix's epochs and effective tokens per domain, and the flags:
    ``OUT/fits/repetition.json``."""

    r_star: float
    """The repetition constant of the effective-token law (Muennighoff et al. 2023)."""
    matched: bool
    """Whether the proxies were repetition-matched (``ddo.repetition: match``)."""
    max_epochs: float | None
    """The config's ``max_epochs``."""
    mixes: dict[str, list[dict[str, Any]]]
    """Target mix -> one row per domain (the solver's :class:`~autoscale_data.solver.repetition.DomainEpochs`
    JSON)."""
    flags: list[str]
    """Domains that cannot supply a mix's share or that a mix uses up to its epoch cap."""
    proxies: list[DomainRepetition]
    """The matched proxies' pools and epochs per domain (empty unless matched)."""
    law: dict[str, Any] | None = omitted(default=None)
    """``projection.json``'s ``repetition_law`` (:class:`RepetitionLaw`'s JSON) when it was computed."""


def write_mix_epochs(config: RunnerConfig, domains: DomainInfo, mixes: Mapping[str, Mapping[str, float]],
                     fits_dir: Path, log: Any = print) -> dict[str, Any]:
    """Write ``fits/repetition.json`` (each mix's epochs and effective tokens per domain, and the flags) and
    log the flags: a domain that cannot supply a mix's share, or that a mix uses up to its epoch cap
    (the solver's supply bound stopped it there: the mix would ask more of it than the data hold)."""
    table = mix_epochs(config, domains, mixes)
    flags = []
    for label, rows in table.items():
        for row in rows:
            if row.short:
                flags.append(f"{label}: domain {row.domain!r} cannot supply its share: {row.epochs:.3g} "
                             f"epochs of its {row.unique:,.0f} tokens, the cap is {row.cap:g}")
            elif row.at_cap and row.cap > 0:
                flags.append(f"{label}: domain {row.domain!r} is used up to its epoch cap ({row.epochs:.3g} "
                             f"of {row.cap:g} epochs): the data bound, not the fit, set its weight; more of "
                             "it would need more data or a higher max_epochs")
    record = RepetitionFile(r_star=R_STAR, matched=matched(config), max_epochs=config.max_epochs,
                            mixes={label: [r.to_json() for r in rows] for label, rows in table.items()},
                            flags=flags,
                            proxies=repetition_records(config, domains) if matched(config) else [],
                            law=_written_law(fits_dir)).to_json()
    fits_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(fits_dir / layout.REPETITION, record)
    for line in flags:
        log(f"REPETITION: {line}")
    return record


def _written_law(fits_dir: Path) -> dict[str, Any] | None:
    """``fits/projection.json``'s ``repetition_law`` (:func:`repetition_law`), or None (no file, or no law in
    it); a file that is not a projection record (not JSON, a key missing or mistyped) is a ``ValueError``
    naming it."""
    path = fits_dir / layout.PROJECTION
    what = f"{str(path)!r} is not a projection record, so its repetition law cannot be read"
    try:
        projection = layout.read(fits_dir, layout.PROJECTION, where="")
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    if projection is None and path.is_file():
        raise ValueError(f"{what}: it is not valid JSON")
    return None if projection is None or projection.repetition_law is None else dict(projection.repetition_law)


def _law_md(law: Mapping[str, Any]) -> list[str]:
    if not law.get("weights"):
        return [f"- the law in effective tokens could not be used: {law.get('error')}"]

    def mix(weights: Mapping[str, float]) -> str:
        return ", ".join(f"{d} {w:.3f}" for d, w in weights.items())

    what = "sets AutoScale's mix" if law.get("used") else "reported only (plain proxies)"
    capped = (law.get("projection") or {}).get("capped") or []
    return [f"- law in effective tokens ({what}): {mix(law['weights'])}; the raw-token law's: "
            f"{mix(law['raw_law_weights'])}" + ("; held at the epoch cap: "
                                                f"{', '.join(capped)}" if capped else "")]


def repetition_md(record: Mapping[str, Any] | None) -> list[str]:
    """The report's section on repetition (from ``fits/repetition.json``): each target mix's epochs and
    effective tokens per domain, and the flags; nothing when no mix repeats a domain and proxies were
    plain."""
    if not record:
        return []
    mixes = {label: [DomainEpochs.from_json(r) for r in rows]
             for label, rows in record.get("mixes", {}).items()}
    if not record.get("matched") and not any(r.epochs > 1.0 for rows in mixes.values() for r in rows):
        return []
    names = [r.domain for r in next(iter(mixes.values()), [])]
    how = ("repetition-matched (each proxy drew every domain from a pool scaled by its budget over the "
           "target's)"
           if record.get("matched") else "plain (whole domains: under one epoch each)")
    lines = ["", "## Repetition at the target", "",
             f"Proxies: {how}. Each cell: epochs of the domain at the target budget, and its effective "
             f"tokens (Muennighoff et al. 2023, R* = {record.get('r_star', R_STAR):g}) over its tokens.", "",
             "| mix | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, rows in mixes.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{r.epochs:.2f} ep ({r.effective / r.tokens:.0%})" if r.tokens else "0" for r in rows) + " |")
    for rec in (DomainRepetition.from_json(r) for r in record.get("proxies", [])):
        pools = ", ".join(f"{n:,} tokens: {size} sequences ({rec.proxy_epochs[n]:.3g} epochs in the base run)"
                          for n, size in sorted(rec.pools.items()))
        lines.append(f"- proxy pools of {rec.domain}: {pools or 'the whole domain'}")
    lines += _law_md(record["law"]) if record.get("law") else []
    lines += [f"- {flag}" for flag in record.get("flags", [])]
    return lines


@dataclass(frozen=True)
class RepetitionLaw(Record):
    """The DDO laws and the projection in effective tokens (``projection.json``'s ``repetition_law``).

    Attributes:
        used: whether it set the target mix (``ddo.repetition: match``); else it is reported only.
        method: the projection whose path it followed (``joint`` follows the geometric one).
        optima: per proxy budget, the effective-token law's optimum at that raw budget
            (:class:`~autoscale_data.solver.effective.EffectiveOptimum` as JSON).
        projection: the :class:`~autoscale_data.solver.effective.EffectiveProjection` as JSON.
        raw_law_weights: the raw-token law's target mix (bounded), for comparison.
        weights: the effective-token law's target mix with ``ddo.min_weight`` / ``max_weight`` applied.
        error: why it could not be computed (then nothing else is set and the raw-token mix stands).
    """

    used: bool
    method: str
    optima: dict[int, dict[str, Any]]
    projection: dict[str, Any] | None
    raw_law_weights: dict[str, float]
    weights: dict[str, float]
    error: str | None = None


def repetition_law(config: RunnerConfig, domains: DomainInfo, tables: Mapping[int, Any], options: Any,
                   summary: dict[str, Any], *, log: Any = print) -> dict[str, Any]:
    """``summary`` (``projection.json``'s dict) with the effective-token law's ``repetition_law`` added.

    With ``ddo.repetition: match`` it sets the target mix (``weights``; the raw-token law's stay in
    ``repetition_law.raw_law_weights``) unless the selection kept the observed mix (``method="observed"``);
    otherwise it is reported only, and only when the target mix repeats a domain. Each budget's DDO law is
    fitted in effective tokens and optimised at its raw tokens (:func:`_effective_optima`), the configured
    projection's path runs through those optima, and the target's raw allocation is the point of the path that
    costs the target budget with the domains' whole unique tokens
    (:func:`~autoscale_data.solver.effective.project_effective`). A failure is logged and recorded; the
    raw-token mix then stands.
    """
    from ...solver import apply_weight_bounds
    from ...solver.contrib import project_effective

    raw_weights = {d: float(w) for d, w in summary["weights"].items()}
    if not (matched(config)
            or any(e > 1.0 + 1e-9 for e in target_epochs(config, domains, raw_weights).values())):
        return summary  # plain proxies and a target mix that repeats no domain
    method = summary["method"] if summary["method"] in (GEOMETRIC, ROBUST) else GEOMETRIC
    # the selection's observed answer (DDO(N2) as is, ``method="auto"``) stands: the law is then reported only
    used = matched(config) and summary["method"] != OBSERVED
    whole = {d: float(n * config.seq_len) for d, n in _unique(config, domains).items()}
    epochs = 1.0 if config.max_epochs is None else float(config.max_epochs)
    try:
        optima, fits = _effective_optima(config, domains, tables, options, whole, exact_pools=used)
        path = _effective_path(method, [optima[n].scale() for n in sorted(optima)], fits)
        proj = project_effective(path, float(config.target.budget), whole,
                                 {d: u * epochs for d, u in whole.items()})
    except ValueError as exc:
        log(f"REPETITION: the effective-token law could not be fitted or projected ({exc}); "
            + ("the raw-token law's mix stands" if used else "reported only"))
        record = RepetitionLaw(used=False, method=method, optima={}, projection=None,
                               raw_law_weights=raw_weights,
                               weights={}, error=str(exc))
        return {**summary, "repetition_law": record.to_json()}
    bounded = apply_weight_bounds(proj.weights, config.ddo.min_weight, config.ddo.max_weight)
    record = RepetitionLaw(used=used, method=method, optima={n: o.to_json() for n, o in optima.items()},
                           projection=proj.to_json(), raw_law_weights=raw_weights, weights=bounded)
    text = ", ".join(f"{d}={w:.3f} ({proj.epochs[d]:.3g} ep)" for d, w in bounded.items())
    log(f"repetition-aware law (effective tokens, {method} path; "
        f"{'sets the target mix' if used else 'reported only'}): {text}"
        + "".join(f"; {w}" for w in proj.warnings))
    return _with_law(summary, record, proj if used else None)


def _with_law(summary: dict[str, Any], record: RepetitionLaw, proj: Any) -> dict[str, Any]:
    """``summary`` with ``record`` added; with ``proj`` (the law sets the target mix) its bounded weights
    too."""
    out = {**summary, "repetition_law": record.to_json()}
    if proj is not None:
        bounded = record.weights
        out.update(weights=bounded, unbounded_weights=dict(proj.weights),
                   warnings=[*summary.get("warnings", []), *proj.warnings],  # a domain held at its epoch cap
                   bounds_applied={d: [proj.weights[d], bounded[d]] for d in bounded
                                   if abs(proj.weights[d] - bounded[d]) > 1e-9})
    return out


def _effective_optima(config: RunnerConfig, domains: DomainInfo, tables: Mapping[int, Any], options: Any,
                      whole: dict[str, float], *, exact_pools: bool) -> tuple[dict[int, Any], list[Any]]:
    """Each budget's DDO fit on its runs in effective tokens (against the unique tokens they drew from) and
    that fit's optimum at the budget's raw tokens (``exact_pools``: against the pools before their
    rounding)."""
    from dataclasses import replace

    from ...solver import fit_ddo
    from ...solver.contrib import effective_table, optimize_effective, raw_tokens

    seq = config.seq_len
    epochs = 1.0 if config.max_epochs is None else float(config.max_epochs)
    fit_options = replace(options, token_caps=None, max_epochs=None)
    optima, fits = {}, []
    for n, table in sorted(tables.items()):
        pools = proxy_pools(config, domains, n)
        drawn = {d: (pools[d] * seq if d in pools else whole[d]) for d in whole}
        fit = fit_ddo(effective_table(table, drawn), fit_options)
        fits.append(fit)
        # optimised with the pools before rounding to whole sequences, so that every budget's optimum sees
        # the target's repetition scaled to it (a rounded pool of 1 at N1 and 2 at N2 would bend the path)
        exact = {d: min(p * seq, whole[d])
                 for d, p in _exact_pools(config, domains, n).items()} if exact_pools else whole
        optima[n] = optimize_effective(fit, exact,
                                       float(sum(raw_tokens(fit.base_tokens[d], drawn[d]) for d in whole)),
                                       raw_caps={d: u * epochs for d, u in exact.items()})
    return optima, fits


def _effective_path(method: str, scales: list[Any], fits: list[Any]) -> Any:
    """The projection's path through the effective optima ``scales``: tokens -> allocation (robust or
    geometric)."""
    from ...solver import project, robust_project
    from ...solver.contrib import log_share_sd

    if method == ROBUST:
        sd = [log_share_sd(fits[0]), log_share_sd(fits[-1])]
        return lambda e: dict(robust_project(scales, e, sd).allocation_tokens)
    return lambda e: dict(project(scales, e).allocation_tokens)

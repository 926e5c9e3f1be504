"""The typed parts of ``method="auto"``'s decision with three budgets or more (:mod:`.backtest`).

:class:`BacktestScore` is one candidate at the held-back budget, :class:`LawCheck` the joint law fitted
without that budget asked for its runs. Both are records (:mod:`autoscale_data._records`), written inside
``selection`` of ``fits/projection.json`` and ``autoscale-data project --json``. :func:`backtest_rows` and :func:`backtest_lines` read them back from that
JSON (files of every version) for the report, the run log and the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._records import Record
from .vocabulary import OBSERVED

__all__ = [
    "BacktestRow",
    "BacktestScore",
    "LawCheck",
    "SCORE_LAW",
    "SCORE_RUN",
    "SCORE_RUN_BEFORE",
    "SCORING",
    "backtest_lines",
    "backtest_noise_text",
    "backtest_rows",
    "backtest_scoring",
]

SCORE_LAW = "law"  # scored by the held-back budget's DDO law
SCORE_RUN = "run"  # scored by a run of the same total tokens within the distance tolerance
SCORE_RUN_BEFORE = "nearest_run"  # files written before 2026-11-28 (late): the nearest run of any total
SCORING = (SCORE_LAW, SCORE_RUN)


@dataclass(frozen=True)
class BacktestScore(Record):
    """One candidate, computed from all budgets but the largest, scored at that largest budget.

    Every candidate of one backtest is scored one way (``score``), the observed mix included; a candidate
    that cannot be scored that way has ``objective`` None and ``note`` says why (naming the run and the
    distance), and cannot be chosen.
    """

    objective: float | None = None
    """Its score at the held-back budget (None: not scored like with like, see ``note``)."""
    score: str = ""
    """How it was scored: ``"law"`` (the held-back budget's DDO law), ``"run"`` (a run of the same total
    tokens within the distance tolerance), ``""`` (not scored); ``"nearest_run"`` in older files."""
    gain: float | None = None
    """The observed mix's score minus this one's (> 0: better); None for the observed mix or unscored."""
    run: str | None = None
    """The run nearest to it (L1 over the shares) among those of the held-back budget's total."""
    distance: float | None = None
    """That run's L1 distance from it."""
    run_objective: float | None = None
    """That run's objective."""
    law_objective: float | None = None
    """What the held-back budget's DDO law predicts for it (None: not a DDO design, or outside its range)."""
    law_note: str = ""
    """Why the law did not predict it."""
    note: str = ""
    """Why it was not scored like with like; its error where it failed."""
    trust: str = ""
    """Why the trust checks flag its projection at the target (empty: they do not)."""


@dataclass(frozen=True)
class LawCheck(Record):
    """The joint law fitted without the held-back budget's runs, asked to predict them.

    The law passes when its predictions are within the noise of one run: ``chi2 = Σ (y - ŷ)² / σ²`` over the
    ``runs`` has a p-value (``χ²`` with ``runs`` degrees of freedom) of at least the rule's level, and its
    parameters are plausible (:func:`~.trust.parameter_check` on the law fitted to every budget).
    """

    passed: bool
    """Whether the law may vouch for its predicted gains at the target."""
    note: str
    """The verdict in words."""
    runs: int = 0
    """Runs of the held-back budget predicted."""
    rms: float | None = None
    """Root mean square of ``y - ŷ`` over them."""
    noise: float | None = None
    """The noise of one run they were judged against."""
    p_value: float | None = None
    """The chi-square test's p-value (None: not computed)."""


@dataclass(frozen=True)
class BacktestRow:
    """One candidate of the backtest: its objective at the held-back budget (``None``: not scored, see
    ``error``), how it was scored (``score``: ``"law"``, the held-back budget's DDO law, ``"run"``, a run of that
    budget's total within the distance tolerance, or ``"nearest_run"`` in files before 2026-11-28 (late): the
    nearest run of any total), its gain over the observed mix scored the same way (``None`` for the observed mix
    itself), the nearest run and the L1 distance of the shares, why the law did not score it (``law_note``) and
    why the trust checks flag its projection (``trust``)."""

    name: str
    objective: float | None
    gain: float | None
    run: str | None
    distance: float | None
    error: str = ""
    score: str = "nearest_run"
    law_note: str = ""
    trust: str = ""


def backtest_rows(selection: Mapping[str, Any] | None) -> list[BacktestRow]:
    """The candidates of the backtest of ``ddo.projection: auto`` (three budgets or more), in the
    selection's order; empty when it did not backtest (``selection``: ``projection.json``'s ``selection``)."""
    if not selection or selection.get("rule") != "backtest":
        return []
    scores = selection.get("backtest") or {}
    base = (scores.get(OBSERVED) or {}).get("objective")
    rows = []
    for name, score in scores.items():
        y = score.get("objective")
        gain = score.get("gain")  # files before the law score: the difference of the nearest runs' objectives
        if gain is None and "score" not in score:
            gain = None if y is None or base is None or name == OBSERVED else base - y
        error = str(score.get("note") or score.get("error") or "no answer")
        rows.append(BacktestRow(name, y, gain, score.get("run"), score.get("distance"), "" if y is not None else error,
                                str(score.get("score") or "nearest_run"), str(score.get("law_note") or ""),
                                str(score.get("trust") or "")))
    return rows


def backtest_noise_text(selection: Mapping[str, Any]) -> str:
    """The noise the backtest judged gains against, where it came from, and the margin a win had to exceed
    (both where both apply; files written before 2026-11-28 hold no margin: theirs was twice the noise)."""
    noise, law = selection.get("noise"), selection.get("law_noise")
    rows = backtest_rows(selection)

    def bar(sd: float, margin: Any) -> str:
        return f"noise {sd:.4g}, margin " + (f"2 x {sd:.4g}" if margin is None else f"{margin:.4g}")

    parts = []
    if any(r.score == "law" for r in rows):
        parts.append("law scores: no noise estimate, so no projection" if law is None else
                     f"law scores: {bar(law, selection.get('law_margin'))} ({selection.get('law_noise_source')})")
    if any(r.score != "law" for r in rows) or not parts:
        parts.append("run scores: " + ("no noise estimate, so no projection" if noise is None else
                     bar(noise, selection.get("margin")))
                     + f" ({selection.get('noise_source') or 'no source'})")
    return "; ".join(parts)


def backtest_scoring(selection: Mapping[str, Any]) -> list[str]:
    """How the backtest scored its candidates (one way for all) and the law check, in sentences; files written
    before 2026-11-28 (late) hold neither."""
    out = []
    tol = selection.get("tolerance")
    if selection.get("scoring") == "law":
        out.append("every candidate scored by the DDO law fitted at the held-back budget (inside its range)")
    elif selection.get("scoring") == "run":
        out.append(f"every candidate scored by a run of the held-back budget's total within L1 {tol:.3g} of it "
                   f"({selection.get('tolerance_source')})")
    check = selection.get("law_check")
    if check:
        out.append(f"law check: {check.get('note')}")
    return out


def backtest_lines(selection: Mapping[str, Any] | None) -> list[str]:
    """The backtest of :func:`backtest_rows` in plain lines: the held-back budget, the noise and where it
    came from, how the candidates were scored, each candidate's objective there, the law check, the choice;
    empty when the selection did not backtest."""
    rows = backtest_rows(selection)
    if not rows or selection is None:
        return []
    held = selection.get("held_back_tokens")
    at = "the largest budget" if held is None else f"{held:,.0f} tokens"
    lines = [f"backtest at {at} (every candidate refitted without it): {backtest_noise_text(selection)}"]
    lines += backtest_scoring(selection)
    for r in rows:
        trust = f" [trust: {r.trust}]" if r.trust else ""
        if r.objective is None:
            lines.append(f"{r.name}: not scored ({r.error}){trust}")
            continue
        gain = "" if r.gain is None else f", {r.gain:+.4g} vs observed"
        near = (f"nearest run {r.run}, L1 distance "
                f"{r.distance if r.distance is not None else float('nan'):.3f}")
        how = (f"by the DDO law at the held-back budget ({near})" if r.score == "law" else
               f"at the {near}" + (f"; not by the law: {r.law_note}" if r.law_note else ""))
        lines.append(f"{r.name}: objective {r.objective:.4f} {how}{gain}{trust}")
    lines.append(f"chosen: {selection.get('chosen')}")
    return lines

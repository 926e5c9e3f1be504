"""The typed answer of ``method="auto"``: which candidate it chose and why (:class:`Selection`), with its
parts.

:class:`BacktestScore` is one candidate at the held-back budget (three budgets or more), :class:`LawCheck` the
joint law fitted without that budget asked for its runs, :class:`~.gain.GainEstimate` a projection's predicted
gain at the target and :class:`CandidateError` a candidate that failed. All are records
(:mod:`autoscale_data._records`), written as ``selection`` in ``fits/projection.json`` and ``autoscale-data
project --json`` and read back from the files of every version; :meth:`Selection.backtest_lines` and its
neighbours say them in words for the report, the run log and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from .._records import Record, fields_from_json, omitted
from .gain import GainEstimate
from .vocabulary import OBSERVED, PROJECTIONS

__all__ = [
    "BacktestScore",
    "CandidateError",
    "LawCheck",
    "RULES",
    "Rule",
    "SCORE_LAW",
    "SCORE_RUN",
    "SCORE_RUN_BEFORE",
    "SCORING",
    "Scoring",
    "Selection",
]

Scoring = Literal["law", "run"]
"""How every candidate of one backtest is scored: by the held-back budget's DDO law, or by a run of its total
tokens within the distance tolerance."""
SCORE_LAW, SCORE_RUN = SCORING = get_args(Scoring)
SCORE_RUN_BEFORE = "nearest_run"  # files written before 2026-11-28 (late): the nearest run of any total
Rule = Literal["backtest", "gain", "fallback", "trend"]
"""The rule that chose: three budgets or more, two, one budget / nothing fitted; ``"trend"``: the two-budget
rule of files written before 2026-11-27."""
RULES: tuple[Rule, ...] = get_args(Rule)


@dataclass(frozen=True)
class CandidateError(Record):
    """A candidate that failed: the text of its error (and, in ``Selection.predicted``, why the trust checks
    flag its projection)."""

    error: str
    trust: str = omitted(default="")


@dataclass(frozen=True)
class BacktestScore(Record):
    """One candidate, computed from all budgets but the largest, scored at that largest budget.

    Every candidate of one backtest is scored one way (``score``), the observed mix included; a candidate
    that cannot be scored that way has ``objective`` None and ``note`` says why (naming the run and the
    distance), and cannot be chosen.
    """

    objective: float | None = None
    """Its score at the held-back budget (None: not scored like with like, see ``note``)."""
    score: Scoring | Literal["", "nearest_run"] = ""
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
    """What the held-back budget's DDO law predicts for it, or a bound of it (``law_note``); None: not a DDO
    design, or outside its range with no bound from its side."""
    law_note: str = ""
    """Why the law did not predict it; or, where it scored it by a bound (outside the design's range on one
    side: the observed mix from below, a projection from above), which bound and where."""
    note: str = ""
    """Why it was not scored like with like; its error where it failed."""
    trust: str = ""
    """Why the trust checks flag its projection at the target (empty: they do not)."""

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> BacktestScore:
        """The codec's reading; files before 2026-11-28 (late) name a failure ``error`` and may lack ``score``
        (then scored by the nearest run of any total: ``"nearest_run"``)."""
        s = cls(**fields_from_json(cls, data, path))
        if "score" in data:
            return s
        return replace(s, note=s.note or str(data.get("error") or ""),
                       score=SCORE_RUN_BEFORE if s.objective is not None else "")

    @property
    def error(self) -> str:
        """Why it was not scored (empty when it was)."""
        return "" if self.objective is not None else self.note or "no answer"


@dataclass(frozen=True)
class LawCheck(Record):
    """The joint law fitted without the held-back budget's runs, asked to predict them.

    The law passes when it predicts them within what it fits the smaller budgets to: ``rᵀ (σ² I + C)⁻¹ r /
    runs`` (``σ`` the law's residual over the smaller budgets, ``C`` its predictions' covariance) has a
    p-value under ``F(runs, ν)`` (chi-square ``/ runs`` with a given noise where no degree of freedom is left)
    of at least the rule's level (:func:`~.backtest.check_law`), and its parameters are plausible
    (:func:`~.trust.parameter_check` on the law fitted to every budget).
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
    """The predictive test's p-value (None: not computed)."""


def _later(**kwargs: Any) -> Any:
    """A key the files of the old two-budget rule (``"trend"``) lack: left out of theirs."""
    return omitted(when=lambda s: s.rule == "trend", **kwargs)


@dataclass(frozen=True)
class Selection(Record):
    """Which candidate ``method="auto"`` chose, and why (the rules: :mod:`.select` and :mod:`.backtest`).

    A record: ``selection`` in ``fits/projection.json`` and ``autoscale-data project --json``. Files written
    before 2026-11-28 (late) lack ``scoring``, ``tolerance``, ``law_check`` and per-candidate notes; their
    scores read ``"nearest_run"`` (the nearest run of any total) and their margins may be missing (they were
    twice ``noise`` / ``law_noise``). Files of the ``"trend"`` rule hold none of the keys from ``predicted``
    on.
    """

    chosen: str
    """``"observed"`` or a projection."""
    reason: str
    """One sentence: why."""
    rule: Rule
    """``"backtest"`` (three budgets or more), ``"gain"`` (two), ``"fallback"`` (one budget / nothing fitted);
    ``"trend"`` in files written before 2026-11-27 (the old two-budget rule)."""
    backtest: dict[str, BacktestScore] = field(default_factory=dict)
    """Per candidate, its score at the held-back budget (``rule == "backtest"`` only)."""
    held_back_tokens: float | None = None
    """The budget the backtest predicted."""
    noise: float | None = None
    """The noise of one run's objective (from the runs)."""
    noise_source: str = ""
    """How ``noise`` was found."""
    predicted: dict[str, GainEstimate | CandidateError] = _later(default_factory=dict)
    """Per projection, the joint law's predicted gain over the observed mix at the target, or why it could not
    be predicted. Two budgets, and three or more since 2026-11-28 (late)."""
    law_noise: float | None = _later(default=None)
    """The noise of law scores: the larger of ``noise`` and the DDO laws' residual sd at the held-back
    budget."""
    law_noise_source: str = _later(default="")
    """How ``law_noise`` was found."""
    margin: float | None = _later(default=None)
    """The gain a run-scored projection had to exceed (:func:`~.select.backtest_margin`)."""
    law_margin: float | None = _later(default=None)
    """The gain a law-scored projection had to exceed."""
    scoring: Scoring | Literal[""] = _later(default="")
    """How every candidate of the backtest was scored (:mod:`.backtest`)."""
    tolerance: float | None = _later(default=None)
    """The L1 distance within which a run of the held-back budget's total scores a candidate."""
    tolerance_source: str = _later(default="")
    """How ``tolerance`` was found."""
    law_check: LawCheck | None = _later(default=None)
    """The joint law fitted without the held-back budget, asked for its runs
    (:func:`~.backtest.check_law`)."""

    def __post_init__(self) -> None:
        if self.chosen not in (OBSERVED, *PROJECTIONS):
            raise ValueError(f"Selection.chosen must be one of {(OBSERVED, *PROJECTIONS)}, got "
                             f"{self.chosen!r}")
        if self.rule not in RULES:
            raise ValueError(f"Selection.rule must be one of {RULES}, got {self.rule!r}")
        if self.scoring not in ("", *SCORING):
            raise ValueError(f"Selection.scoring must be one of {SCORING} or empty, got {self.scoring!r}")

    @classmethod
    def from_json(cls, data: Any, path: str = "") -> Selection:
        """The codec's reading; the backtest scores of files before the law score (no ``score`` key) get the
        gain over the observed mix those files did not write."""
        sel = cls(**fields_from_json(cls, data, path))
        raw = data.get("backtest") or {}
        base = sel.backtest.get(OBSERVED, BacktestScore()).objective
        old = {n: replace(s, gain=base - s.objective) for n, s in sel.backtest.items()
               if "score" not in raw[n]
               and s.gain is None and n != OBSERVED and s.objective is not None and base is not None}
        return replace(sel, backtest=sel.backtest | old) if old else sel

    def noise_text(self) -> str:
        """The noise the backtest judged gains against, where it came from, and the margin a win had to exceed
        (both where both apply; files written before 2026-11-28 hold no margin: theirs was twice the
        noise)."""
        def bar(sd: float, margin: float | None) -> str:
            return f"noise {sd:.4g}, margin " + (f"2 x {sd:.4g}" if margin is None else f"{margin:.4g}")

        scores, parts = [s.score for s in self.backtest.values()], []
        if SCORE_LAW in scores:
            parts.append("law scores: no noise estimate, so no projection" if self.law_noise is None else
                         f"law scores: {bar(self.law_noise, self.law_margin)} ({self.law_noise_source})")
        if any(s != SCORE_LAW for s in scores) or not parts:
            parts.append("run scores: " + ("no noise estimate, so no projection" if self.noise is None else
                         bar(self.noise, self.margin)) + f" ({self.noise_source or 'no source'})")
        return "; ".join(parts)

    def scoring_text(self) -> list[str]:
        """How the backtest scored its candidates (one way for all) and the law check, in sentences; files
        written before 2026-11-28 (late) hold neither."""
        out = []
        if self.scoring == SCORE_LAW:
            out.append("every candidate scored by the DDO law fitted at the held-back budget (inside its "
                       "range; outside it on one side, the observed mix by a lower bound and a projection by "
                       "an upper one)")
        elif self.scoring == SCORE_RUN:
            out.append(f"every candidate scored by a run of the held-back budget's total within L1 "
                       f"{self.tolerance:.3g} of it ({self.tolerance_source})")
        if self.law_check is not None:
            out.append(f"law check: {self.law_check.note}")
        return out

    def backtest_lines(self) -> list[str]:
        """The backtest in plain lines: the held-back budget, the noise and where it came from, how the
        candidates were scored, each candidate's objective there, the law check, the choice; empty without a
        backtest."""
        if self.rule != "backtest" or not self.backtest:
            return []
        at = "the largest budget" if self.held_back_tokens is None else f"{self.held_back_tokens:,.0f} tokens"
        lines = [f"backtest at {at} (every candidate refitted without it): "
                 f"{self.noise_text()}", *self.scoring_text()]
        for name, s in self.backtest.items():
            trust = f" [trust: {s.trust}]" if s.trust else ""
            if s.objective is None:
                lines.append(f"{name}: not scored ({s.error}){trust}")
                continue
            gain = "" if s.gain is None else f", {s.gain:+.4g} vs observed"
            near = f"nearest run {s.run}, L1 distance {s.distance if s.distance is not None else float('nan'):.3f}"
            how = ("by the DDO law at the held-back budget "
                   f"({near}" + (f"; {s.law_note})" if s.law_note else ")")
                   if s.score == SCORE_LAW else
                   f"at the {near}" + (f"; not by the law: {s.law_note}" if s.law_note else ""))
            lines.append(f"{name}: objective {s.objective:.4f} {how}{gain}{trust}")
        return [*lines, f"chosen: {self.chosen}"]

"""Sentences the report (``report.md``) and the console summary share, written once.

Each function takes the report's parts (the fits' plain JSON, or :mod:`.report_types` objects) and returns text without markup; the markdown
renderer adds its own emphasis around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...solver import BootstrapResult
from ...solver.vocabulary import OBSERVED
from .. import layout

if TYPE_CHECKING:
    from ..records import BootstrapUnavailable, ProjectionFile
    from .report_types import Report, TokensSaved, Verdict

__all__ = [
    "VERDICT_TAGS",
    "BacktestRow",
    "backtest_lines",
    "backtest_margin",
    "backtest_rows",
    "bootstrap_verdict",
    "bounds_moved",
    "comparison_verdict",
    "mlm_coverage",
    "signed_per_seed",
    "stale_runs",
    "unigram_warnings",
    "verdict_tag",
]


def bootstrap_verdict(boot: BootstrapResult | BootstrapUnavailable) -> str:
    """What the bootstrap at one budget says about the DDO weights (a clause, no budget)."""
    if not isinstance(boot, BootstrapResult):
        return f"not available ({boot.reason})"
    if boot.method == "consistent_fits":
        return ("the runs carry no estimate of noise (one run per point): the intervals are the range over the "
                "fits consistent with the data, and no verdict is given")
    verdict = "distinguishable from" if boot.distinguishable_from_base else "NOT distinguishable from"
    return f"the DDO weights are {verdict} the base mix ({boot.method}, {boot.level:.0%} CI)"


@dataclass(frozen=True)
class BacktestRow:
    """One candidate of the backtest: its objective at the held-back budget (``None``: not scored, see
    ``error``), how it was scored (``score``: ``"law"``, the held-back budget's DDO law, or ``"nearest_run"``),
    its gain over the observed mix scored the same way (``None`` for the observed mix itself), the nearest run
    and the L1 distance of the shares, and why the law did not score it (``law_note``)."""

    name: str
    objective: float | None
    gain: float | None
    run: str | None
    distance: float | None
    error: str = ""
    score: str = "nearest_run"
    law_note: str = ""


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
        rows.append(BacktestRow(name, y, gain, score.get("run"), score.get("distance"),
                                "" if y is not None else str(score.get("error", "no answer")),
                                str(score.get("score", "nearest_run")), str(score.get("law_note") or "")))
    return rows


def backtest_margin(selection: Mapping[str, Any]) -> str:
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
    if any(r.score == "nearest_run" for r in rows) or not parts:
        parts.append("nearest-run scores: " + ("no noise estimate, so no projection" if noise is None else
                     bar(noise, selection.get("margin")))
                     + f" ({selection.get('noise_source') or 'no source'})")
    return "; ".join(parts)


def backtest_lines(selection: Mapping[str, Any] | None) -> list[str]:
    """The backtest of :func:`backtest_rows` in plain lines: the held-back budget, the noise and where it
    came from, each candidate's objective there and how it was scored, the choice; empty when the selection
    did not backtest."""
    rows = backtest_rows(selection)
    if not rows or selection is None:
        return []
    held = selection.get("held_back_tokens")
    at = "the largest budget" if held is None else f"{held:,.0f} tokens"
    lines = [f"backtest at {at} (every candidate refitted without it): {backtest_margin(selection)}"]
    for r in rows:
        if r.objective is None:
            lines.append(f"{r.name}: not scored ({r.error})")
            continue
        gain = "" if r.gain is None else f", {r.gain:+.4g} vs observed"
        near = (f"nearest run {r.run}, L1 distance "
                f"{r.distance if r.distance is not None else float('nan'):.3f}")
        how = (f"by the DDO law at the held-back budget ({near})" if r.score == "law" else
               f"at the {near}" + (f"; not by the law: {r.law_note}" if r.law_note else ""))
        lines.append(f"{r.name}: objective {r.objective:.4f} {how}{gain}")
    lines.append(f"chosen: {selection.get('chosen')}")
    return lines


def bounds_moved(proj: ProjectionFile, arrow: str = "->") -> str | None:
    """The sentence on weight bounds applied at the target, or ``None`` when the projection kept them."""
    moved = proj.bounds_applied
    if not moved or not proj.weight_bounds:
        return None
    lo, hi = proj.weight_bounds
    what = ", ".join(f"{d} {a:.3f} {arrow} {b:.3f}" for d, (a, b) in moved.items())
    return (f"the projection left the weight bounds [{lo:g}, {hi:g}] (ddo.min_weight / max_weight; the paper's "
            f"projection is unbounded): the target mix applies them and the other domains keep their ratios: {what}")


def stale_runs(count: int) -> str | None:
    """The note on runs of an earlier config in the folder, or ``None``."""
    if not count:
        return None
    return (f"{count} runs in this folder belong to an earlier config of the experiment and are not reported "
            "(the old config is in config_history.jsonl)")


def signed_per_seed(per_seed: Mapping[str, TokensSaved]) -> str:
    """``"s0 +9.9%, s1 -3.1%"``: the signed saving of each seed (``n/a`` where neither curve reaches the other)."""
    return ", ".join(f"s{seed} " + ("n/a" if s.signed_fraction is None else f"{s.signed_fraction:+.1%}")
                     for seed, s in per_seed.items()) or "–"


def _mix_name(label: str) -> str:
    return "AutoScale" if label == layout.AUTOSCALE else label


#: A paired verdict (:func:`~autoscale_data.runner.reporting.metrics.paired_verdict`) in a few words, as plain as the proxies'.
VERDICT_TAGS = {"better": "better beyond seed noise", "worse": "WORSE beyond seed noise",
                "not_distinguishable": "NOT distinguishable from seed noise",
                "cannot_judge": "CANNOT be judged (one seed: no estimate of seed noise)"}


def verdict_tag(v: Verdict) -> str:
    """The verdict in a few words, as plain as the proxies': ``"NOT distinguishable from seed noise"``."""
    return VERDICT_TAGS.get(v.verdict, v.verdict)


def comparison_verdict(v: Verdict, key: str) -> str:
    """One sentence: the verdict of ``v.method`` against ``v.baseline`` and the paired numbers behind it.

    ``key`` names the objective compared (``mean_loss``). The sentence leads with the verdict, so a
    percentage printed after it reads in its light.
    """
    name, base = _mix_name(v.method), _mix_name(v.baseline)
    d = v.difference
    if v.verdict == "cannot_judge":
        seeds = "no seed in common" if d.n == 0 else (f"one paired seed, final {key} difference {d.mean:+.4f}, "
                                                        "so any tokens-saved percentage is one seed's draw")
        return (f"{name} vs {base} CANNOT be judged against seed noise: {seeds}. Train two or more seeds "
                "(config `target.seeds`) to judge it")
    head = {"better": f"{name} is better than {base} beyond seed noise",
            "worse": f"{name} is WORSE than {base} beyond seed noise",
            "not_distinguishable": f"{name} is NOT distinguishable from {base}"}.get(v.verdict, f"{name} vs {base}")
    holds = "holds 0" if v.verdict == "not_distinguishable" else "leaves out 0"
    return (f"{head}: final {key} difference {d.mean:+.4f} ± {d.std:.4f} over {d.n} paired seeds "
            f"({v.level:.0%} CI [{v.ci_low:+.4f}, {v.ci_high:+.4f}] {holds}; {name} lower on {v.method_wins} "
            f"of {d.n} seeds)")


def unigram_warnings(report: Report) -> list[str]:
    """One sentence per target mix whose final loss does not beat the held-out data's unigram loss."""
    out = []
    for label, domains in report.not_beating_unigram.items():
        t = report.targets.get(label)
        if t is None:
            continue
        what = ", ".join(f"{d} {t.losses[d].mean:.4f} >= {report.reference_losses[d].unigram:.4f}" for d in domains)
        out.append(f"{label} does not beat the unigram loss of the held-out tokens ({what}): on these domains the "
                   "model predicts worse than token frequencies alone, so which mix won there says nothing yet "
                   "(train longer, or a larger model)")
    return out


def mlm_coverage(report: Report) -> list[str]:
    """For a masked LM, the note on how few held-out tokens each evaluation scores (empty for a causal LM)."""
    ref = report.reference_losses
    if not ref or all(r.scored_tokens >= r.tokens for r in ref.values()):
        return []
    scored = ", ".join(f"{d} ~{r.scored_tokens:,.0f} of {r.tokens:,}" for d, r in ref.items())
    return [f"  masked-LM evaluation scores only the masked share of the held-out tokens ({scored} per domain): "
            "raise eval.mlm_passes (more masks over the same tokens) or eval.heldout_tokens_per_domain for "
            "steadier losses"]

"""The report as a console table, printed by ``autoscale-data run``, ``report`` and ``demo``."""

from __future__ import annotations

import os

from .. import layout
from .report import projection_label
from .report_types import AnytimeComparison, Report, TokensSaved
from .wording import (
    bootstrap_verdict,
    bounds_moved,
    comparison_verdict,
    mlm_coverage,
    signed_per_seed,
    stale_runs,
    unigram_warnings,
)

__all__ = ["format_summary"]


def _short(n: float) -> str:
    """``655360 -> "655k"``, ``1.5e6 -> "1.50M"``."""
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.0f}k" if n >= 1e3 else f"{n:.0f}"


def _saved_text(s: TokensSaved) -> str:
    if s.status == "no_data":
        return "no data"
    if s.saved_fraction is not None:
        bound = "at least " if s.status == "at_first_eval" else ""
        return (f"{bound}{s.saved_fraction:+.1%} (AutoScale reached the baseline's final loss "
                f"{s.baseline_final:.4f} after {_short(s.tokens_to_baseline_final)} of "
                f"{_short(s.baseline_tokens)} tokens)")
    back = s.baseline_saved_fraction
    tail = "" if back is None else f"; the baseline reached AutoScale's final loss with {back:.1%} fewer tokens"
    return f"not reached (AutoScale ended at {s.autoscale_final:.4f} > {s.baseline_final:.4f}{tail})"


def _anytime_lines(a: AnytimeComparison | None) -> list[str]:
    if a is None:
        return []
    if not a.available or not a.points:
        return ["", f"Anytime schedule: not available ({a.reason})"]
    lines = ["", "Anytime schedule vs the fixed AutoScale mix along the target run (anytime - fixed mean "
                 "loss; negative = anytime better)"]
    for p in a.points:
        d = p.difference
        spread = f" ± {d.std:.4f}" if d.n > 1 else ""
        lines.append(f"  at {_short(p.tokens):>6} tokens: {d.mean:+.4f}{spread}")
    if a.plan_decreasing:
        lines.append(f"  ({', '.join(a.plan_decreasing)}: DDO allocation decreases from N1 to N2; the "
                     "anytime run followed the plan's monotone envelope)")
    return lines


def _reference_lines(report: Report) -> list[str]:
    """The held-out data's unigram loss under the target table, and a warning per mix that does not beat
    it."""
    ref = report.reference_losses
    if not ref or not all(d in ref for d in report.domains):
        return []
    cells = [f"{ref[d].unigram:>{max(len(d), 8)}.4f}" for d in report.domains]
    lines = [f"{'(unigram ref.)':<17}  " + "  ".join(cells)]
    return lines + [f"  WARNING: {w}" for w in unigram_warnings(report)] + mlm_coverage(report)


def _weights_lines(report: Report) -> list[str]:
    """The weights at each DDO budget, AutoScale's projection and the baselines, with the fits' verdicts."""
    ddo, proj, mixes = report.ddo, report.projection, report.target_mixes or {}
    width = max([len(d) for d in report.domains] + [8])
    scales = sorted(ddo, key=int)
    cols = [f"DDO@{_short(int(s))}" for s in scales] + ([f"AutoScale@{_short(proj.budget_tokens)}"] if proj
                                                        else [])
    extra = [m for m in mixes if m not in layout.FITTED_MIXES]  # anytime ends at AutoScale's
    at = "N1 and N2" if len(scales) <= 2 else f"each of the {len(scales)} budgets"
    lines = [f"Mixture weights (DDO optimum at {at}, AutoScale projection to the target, baselines)",
             f"{'domain':<{width}}  " + "  ".join(f"{c:>14}" for c in cols + extra)]
    for d in report.domains:
        vals = [ddo[s].weights[d] for s in scales] + ([proj.weights[d]] if proj
                                                      else []) + [mixes[m][d] for m in extra]
        lines.append(f"{d:<{width}}  " + "  ".join(f"{v:>14.3f}" for v in vals))
    if proj:
        lines.append(f"  AutoScale: {projection_label(proj)}")
        lines += [f"  {line}" for line in (proj.selection.backtest_lines() if proj.selection else [])]
        if bounds_moved(proj):
            lines.append(f"  {bounds_moved(proj)}")
    for s in scales:
        if ddo[s].identifiability is not None:
            lines.append(f"  at {_short(int(s))}: {ddo[s].identifiability.summary}")
        if s in report.bootstrap:
            lines.append(f"  bootstrap at {_short(int(s))}: {bootstrap_verdict(report.bootstrap[s])}")
    return lines


def _target_lines(report: Report) -> list[str]:
    """The final validation loss per domain of each target mix (AutoScale first), and the unigram
    reference."""
    targets, domains = report.targets, report.domains
    if not targets:
        return []
    tokens = next(iter(targets.values())).tokens
    lines = ["", f"Validation loss at the target budget ({_short(tokens)} tokens, nats/token"
             + (", mean ± std over "
                "seeds" if any(t.objective_value.n > 1 for t in targets.values()) else "") + ")",
             f"{'mix':<17}  " + "  ".join(f"{d:>{max(len(d), 8)}}" for d in domains) + f"  {'mean':>8}"]
    for label in sorted(targets, key=lambda m: (m != layout.AUTOSCALE, m)):
        t = targets[label]
        cells = [f"{t.losses[d].mean:>{max(len(d), 8)}.4f}" for d in domains]
        value = t.objective_value
        spread = f" ± {value.std:.4f}" if value.n > 1 else ""
        lines.append(f"{label:<17}  " + "  ".join(cells) + f"  {value.mean:>8.4f}{spread}")
    return lines + _reference_lines(report)


def _saved_lines(report: Report) -> list[str]:
    """Tokens saved against each baseline (the anytime one aside), each after its verdict against seed
    noise."""
    if not report.tokens_saved:
        return []
    per_seed = report.tokens_saved_per_seed
    several = any(len(v) > 1 for v in per_seed.values())
    lines = ["", "Tokens saved by the AutoScale mix at the target budget, each after its verdict against "
                 "seed noise"
             + (" (seed-mean curves, then each seed's own)" if several else "")]
    for label, s in sorted(report.tokens_saved.items()):
        if label == layout.ANYTIME:  # same final mix: compared along the run below
            continue
        seeds = per_seed.get(label) or {}
        tail = f"\n  {'':<20} per seed: {signed_per_seed(seeds)}" if len(seeds) > 1 else ""
        verdict = report.verdicts.get(label)
        if verdict is not None:
            lines.append(f"  {comparison_verdict(verdict, report.objective_key)}")
        lines.append(f"  vs {label:<17} "
                     f"{'tokens saved ' if verdict is not None else ''}{_saved_text(s)}{tail}")
    return lines


def format_summary(report: Report) -> str:
    """The report as a console table: weights at N1, N2 and the target, target losses per mix, tokens saved.

    ``autoscale-data run``, ``report`` and ``demo`` print it; ``report.md`` holds the same results with
    the proxy tables, intervals and throughput.
    """
    lines = _weights_lines(report) + _target_lines(report) + _saved_lines(report)
    lines += _anytime_lines(report.anytime_vs_fixed)
    if report.missing_targets:
        lines.append(f"  target runs not finished: {', '.join(report.missing_targets)}")
    note = stale_runs(report.stale_runs)
    if note:
        lines.append(f"  ({note})")
    if report.out_dir:
        out = report.out_dir
        lines += ["", f"Report: {os.path.join(out, layout.REPORT_MD)} (plots in "
                      f"{os.path.join(out, layout.PLOTS)})"]
    return "\n".join(lines)

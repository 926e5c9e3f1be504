"""The report as a console table, printed by ``autoscale-data run``, ``report`` and ``demo``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import layout
from .metrics import signed_per_seed
from .report import projection_label
from .wording import bootstrap_verdict, bounds_moved, objective_key, stale_runs

__all__ = ["format_summary"]


def _short(n: float) -> str:
    """``655360 -> "655k"``, ``1.5e6 -> "1.50M"``."""
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    return f"{n / 1e3:.0f}k" if n >= 1e3 else f"{n:.0f}"


def _saved_text(s: Mapping[str, Any]) -> str:
    if s.get("status") == "no_data":
        return "no data"
    if s.get("saved_fraction") is not None:
        bound = "at least " if s["status"] == "at_first_eval" else ""
        return (f"{bound}{s['saved_fraction']:+.1%} (AutoScale reached the baseline's final loss "
                f"{s['baseline_final']:.4f} after {_short(s['tokens_to_baseline_final'])} of "
                f"{_short(s['baseline_tokens'])} tokens)")
    back = s.get("baseline_saved_fraction")
    tail = "" if back is None else f"; the baseline reached AutoScale's final loss with {back:.1%} fewer tokens"
    return f"not reached (AutoScale ended at {s['autoscale_final']:.4f} > {s['baseline_final']:.4f}{tail})"


def _anytime_lines(a: Mapping[str, Any] | None) -> list[str]:
    if a is None:
        return []
    if not a.get("available"):
        return ["", f"Anytime schedule: not available ({a.get('reason')})"]
    lines = ["", "Anytime schedule vs the fixed AutoScale mix along the target run (anytime - fixed mean loss; "
                 "negative = anytime better)"]
    for p in a["points"]:
        d = p["difference"]
        spread = f" ± {d['std']:.4f}" if d["n"] > 1 else ""
        lines.append(f"  at {_short(p['tokens']):>6} tokens: {d['mean']:+.4f}{spread}")
    if a.get("plan_decreasing"):
        lines.append(f"  ({', '.join(a['plan_decreasing'])}: DDO allocation decreases from N1 to N2; the anytime run "
                     "followed the plan's monotone envelope)")
    return lines


def format_summary(report: Mapping[str, Any]) -> str:
    """The report as a console table: weights at N1, N2 and the target, target losses per mix, tokens saved.

    ``autoscale-data run``, ``report`` and ``demo`` print it; ``report.md`` holds the same results with
    the proxy tables, intervals and throughput.

    Args:
        report: :func:`~autoscale_data.runner.report.build_report`'s dict.
    """
    domains = list(report.get("domains") or [])
    ddo = report.get("ddo") or {}
    proj = report.get("projection") or {}
    targets = report.get("targets") or {}
    mixes = report.get("target_mixes") or {}
    lines: list[str] = []
    width = max([len(d) for d in domains] + [8])
    scales = sorted(ddo, key=int)
    cols = [f"DDO@{_short(int(s))}" for s in scales]
    if proj:
        cols.append(f"AutoScale@{_short(proj['budget_tokens'])}")
    extra = [m for m in mixes if m not in layout.FITTED_MIXES]  # anytime ends at AutoScale's
    cols += extra
    lines.append("Mixture weights (DDO optimum at N1 and N2, AutoScale projection to the target, baselines)")
    lines.append(f"{'domain':<{width}}  " + "  ".join(f"{c:>14}" for c in cols))
    for d in domains:
        vals = [ddo[s]["weights"][d] for s in scales]
        if proj:
            vals.append(proj["weights"][d])
        vals += [mixes[m][d] for m in extra]
        lines.append(f"{d:<{width}}  " + "  ".join(f"{v:>14.3f}" for v in vals))
    if proj:
        lines.append(f"  AutoScale: {projection_label(proj)}")
        if bounds_moved(proj):
            lines.append(f"  {bounds_moved(proj)}")
    boot = report.get("bootstrap") or {}
    for s in scales:
        ident = ddo[s].get("identifiability") or {}
        if ident.get("summary"):
            lines.append(f"  at {_short(int(s))}: {ident['summary']}")
        if s in boot:
            lines.append(f"  bootstrap at {_short(int(s))}: {bootstrap_verdict(boot[s])}")
    if targets:
        tokens = next(iter(targets.values()))["tokens"]
        key = objective_key(report.get("objective"))
        lines += ["", f"Validation loss at the target budget ({_short(tokens)} tokens, nats/token"
                  + (", mean ± std over seeds" if any(t[key]["n"] > 1 for t in targets.values()) else "") + ")"]
        lines.append(f"{'mix':<17}  " + "  ".join(f"{d:>{max(len(d), 8)}}" for d in domains) + f"  {'mean':>8}")
        for label in ["autoscale"] + sorted(t for t in targets if t != "autoscale"):
            if label not in targets:
                continue
            t = targets[label]
            cells = []
            for d in domains:
                ms = t["losses"][d]
                cells.append(f"{ms['mean']:>{max(len(d), 8)}.4f}")
            spread = f" ± {t[key]['std']:.4f}" if t[key]["n"] > 1 else ""
            lines.append(f"{label:<17}  " + "  ".join(cells) + f"  {t[key]['mean']:>8.4f}{spread}")
    saved = report.get("tokens_saved") or {}
    if saved:
        per_seed = report.get("tokens_saved_per_seed") or {}
        several = any(len(v) > 1 for v in per_seed.values())
        lines += ["", "Tokens saved by the AutoScale mix at the target budget"
                  + (" (seed-mean curves, then each seed's own)" if several else "")]
        for label, s in sorted(saved.items()):
            if label == layout.ANYTIME:  # same final mix: compared along the run below
                continue
            seeds = per_seed.get(label) or {}
            tail = f"\n  {'':<20} per seed: {signed_per_seed(seeds)}" if len(seeds) > 1 else ""
            lines.append(f"  vs {label:<17} {_saved_text(s)}{tail}")
    lines += _anytime_lines(report.get("anytime_vs_fixed"))
    missing = report.get("missing_targets") or []
    if missing:
        lines.append(f"  target runs not finished: {', '.join(missing)}")
    if stale_runs(report.get("stale_runs", 0)):
        lines.append(f"  ({stale_runs(report['stale_runs'])})")
    out = report.get("out_dir")
    if out:
        lines += ["", f"Report: {os.path.join(out, layout.REPORT_MD)} (plots in {os.path.join(out, layout.PLOTS)})"]
    return "\n".join(lines)

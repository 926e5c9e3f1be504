"""The report's comparison of mixing methods (``fits/methods.json``, see :mod:`.methods`): the paper's table
for the user's own runs, each method's results beside what choosing its mix cost."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ..._records import fields_to_json
from .. import layout
from ..records import RunResult
from .downstream import downstream_cells
from .metrics import mean_std, paired_verdict
from .report_types import Comparison, MethodCost, MethodRow, Report
from .wording import VERDICT_TAGS

__all__ = ["build_comparison", "comparison_markdown"]


def build_comparison(out: Path, results: dict[str, RunResult], targets: dict[str, list[RunResult]],
                     key: str) -> Comparison | None:
    """The comparison from ``fits/methods.json``, every finished run's result by run id and the finished
    target runs by label; ``None`` when the folder has no methods file."""
    records = layout.read(out / layout.FITS, layout.METHODS_FILE)
    config = layout.read(out, layout.CONFIG) or {}
    if not records:
        return None
    walls = [r.wall_time_s for rs in targets.values() for r in rs]
    target_wall = statistics.median(walls) if walls else None
    batch = int(config.get("seq_len", 1)) * int(config.get("global_batch_size", 1))
    target_tokens = int((config.get("target") or {}).get("budget", 0)) // batch * batch
    uniform = {r.seed: r for r in targets.get(layout.UNIFORM, [])}
    order = [layout.AUTOSCALE, *((config.get("target") or {}).get("baselines") or [])]
    rows = {}
    for name, rec in sorted(records.items(),
                            key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)):
        done = [results[i] for i in rec.cost_run_ids if i in results]
        wall = sum(r.wall_time_s for r in done)
        cost = MethodCost(runs=len(rec.cost_run_ids), tokens=rec.cost_tokens, wall_s=wall,
                          tokens_ratio=rec.cost_tokens / target_tokens if target_tokens else None,
                          wall_ratio=wall / target_wall if target_wall else None, flops=rec.cost_flops,
                          flops_ratio=rec.cost_flops / rec.target_flops if rec.cost_flops is not None
                          and rec.target_flops else None)
        rs = targets.get(name, [])
        row: dict[str, Any] = {"source": rec.source, "weights": rec.weights, "cost": cost,
                               "skipped": rec.skipped}
        if rs:
            losses = {d: mean_std([r.losses[d] for r in rs]) for d in rs[0].losses}
            pairs = [(r, uniform[r.seed]) for r in rs if r.seed in uniform]
            versus = None
            if name != layout.UNIFORM and pairs:
                diffs = {str(r.seed): r.value(key) - u.value(key)
                         for r, u in sorted(pairs, key=lambda p: p[0].seed)}
                verdict = paired_verdict(name, {r.seed: r.value(key) for r, _ in pairs}, layout.UNIFORM,
                                         {u.seed: u.value(key) for _, u in pairs})
                versus = {**fields_to_json(verdict, skip=("method", "baseline")), "per_seed": diffs}
            row.update(objective_value=mean_std([r.value(key) for r in rs]),
                       per_seed={str(r.seed): r.value(key) for r in sorted(rs, key=lambda r: r.seed)},
                       losses=losses,
                       worst_domain=max(losses, key=lambda d: losses[d].mean) if losses else None,
                       vs_uniform=versus)
            realised = [r.step_hook["realised"] for r in rs if "realised" in (r.step_hook or {})]
            if realised:  # an online run's mix was chosen during training: its realised mix, mean over seeds
                row["weights"] = {d: statistics.fmean(w[d] for w in realised) for d in realised[0]}
        rows[name] = MethodRow(**row)
    target_flops = next((rec.target_flops for rec in records.values() if rec.target_flops), None)
    return Comparison(target_tokens=target_tokens, target_wall_s=target_wall, rows=rows,
                      target_flops=target_flops)


def _saved(r: Report, name: str) -> str:
    if name == layout.AUTOSCALE:
        return "(reference)"
    s = r.tokens_saved.get(name)
    if s is None or s.status == "no_data":
        return "–"
    if s.saved_fraction is not None:
        return f"{'≥ ' if s.status == 'at_first_eval' else ''}{s.saved_fraction:.1%}"
    back = s.baseline_saved_fraction
    return "not reached" if back is None else f"not reached ({name} {back:.1%} fewer)"


def _verdict(v: dict[str, Any] | None) -> str:
    if v is None:
        return "–"
    seeds = ", ".join(f"s{k} {d:+.4f}" for k, d in v["per_seed"].items())
    mean = v["difference"]["mean"]
    if v["verdict"] == "cannot_judge":
        return f"{mean:+.4f}: **{VERDICT_TAGS['cannot_judge']}**"
    return (f"**{VERDICT_TAGS[v['verdict']]}**: {mean:+.4f} ({v['level']:.0%} CI [{v['ci_low']:+.4f}, "
            f"{v['ci_high']:+.4f}]; {seeds})")


def comparison_markdown(r: Report) -> list[str]:
    """``report.md``'s section "Mixing methods compared" (empty without a comparison)."""
    c = r.comparison
    if c is None or not c.rows:
        return []
    key = r.objective_key
    wall = "n/a" if c.target_wall_s is None else f"{c.target_wall_s:.1f} s"
    lines = ["## Mixing methods compared", "",
             f"Final {key} of each method's target runs ({c.target_tokens:,} tokens; mean ± std over seeds, "
             "and per seed), the tokens the AutoScale mix saved to reach that method's final value, the "
             "method minus uniform paired by seed with the 95% t-interval of the mean difference "
             "(better/worse only when it excludes 0), and the cost of choosing the mix: the runs it needed "
             "before its targets, their tokens and wall time, also as multiples of one target run (median "
             f"target run: {wall}).", "",
             f"| method | {key} | per seed | AutoScale saved | vs uniform | worst domain | proxy runs | "
             "proxy tokens | x target tokens | proxy wall | x target wall |",
             "|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|"]
    # the cost in compute (each run at its own model): a folder that recorded it
    if c.target_flops is not None:
        lines[-4] += (" FLOPs are training FLOPs (6 N D plus attention, each run at its own model; one "
                      f"target run: {c.target_flops:.3g}).")
        lines[-2:] = [lines[-2] + " proxy FLOPs | x target FLOPs |", lines[-1] + "---:|---:|"]
    if r.downstream is not None and r.downstream.rows:  # the zero-shot tasks' means (eval.tasks)
        lines[-2:] = [lines[-2] + " downstream bpb | downstream acc |", lines[-1] + "---:|---:|"]
    lines += [_method_row(r, name, row)
              for name, row in c.rows.items()] + _domain_losses(c.rows, list(r.domains))
    lines += ["", f"- {_against_uniform(c.rows)}.", "- Sources: " + "; ".join(f"{n}: {row.source}"
                                                                      for n, row in c.rows.items()) + "."]
    return lines + [""]


def _method_row(r: Report, name: str, row: MethodRow) -> str:
    """One method's row: its final objective, the tokens AutoScale saved, against uniform, and its cost."""
    cost = row.cost
    ratio = "–" if cost.tokens_ratio is None else f"{cost.tokens_ratio:.2f}"
    wall_ratio = "–" if cost.wall_ratio is None else f"{cost.wall_ratio:.2f}"
    costs = f"{cost.runs} | {cost.tokens:,} | {ratio} | {cost.wall_s:.1f} s | {wall_ratio} |"
    if r.comparison is not None and r.comparison.target_flops is not None:
        costs += (" – | – |" if cost.flops is None or cost.flops_ratio is None
                  else f" {cost.flops:.3g} | {cost.flops_ratio:.2f} |")
    costs += downstream_cells(r, name)
    ms = row.objective_value
    if ms is None:
        return f"| {name} | {f'not trained: {row.skipped}' if row.skipped else 'not finished'} | – | – | – | – | {costs}"
    seeds = ", ".join(f"s{k} {v:.4f}" for k, v in row.per_seed.items())
    worst = f"{row.worst_domain} {row.losses[row.worst_domain].mean:.4f}" if row.worst_domain else "–"
    return f"| {name} | {ms.text()} | {seeds} | {_saved(r, name)} | {_verdict(row.vs_uniform)} | {worst} | {costs}"


def _domain_losses(rows: dict[str, MethodRow], doms: list[str]) -> list[str]:
    """The final loss per domain of each trained method, its worst domain in bold (nothing when none
    trained)."""
    trained = {n: row for n, row in rows.items() if row.losses}
    if not trained:
        return []
    lines = ["", "Final validation loss per domain (mean over seeds); the worst domain of each method in "
                 "bold:", "",
             "| method | weights | " + " | ".join(doms) + " |", "|---|---|" + "---:|" * len(doms)]
    for name, row in trained.items():
        w = ", ".join(f"{(row.weights or {}).get(d, 0.0):.2f}" for d in doms)
        cells = [(f"**{row.losses[d].mean:.4f}**" if d == row.worst_domain else f"{row.losses[d].mean:.4f}")
                 if d in row.losses else "–" for d in doms]
        lines.append(f"| {name} | {w} | " + " | ".join(cells) + " |")
    return lines


def _against_uniform(rows: dict[str, MethodRow]) -> str:
    """Which methods beat uniform beyond seed noise, as a sentence."""
    beats = [n for n, row in rows.items() if row.vs_uniform and row.vs_uniform["verdict"] == "better"]
    if not any(row.vs_uniform and row.vs_uniform["verdict"] != "cannot_judge" for row in rows.values()):
        return "With one target seed the runs carry no noise estimate, so no method is shown to beat uniform"
    return (f"Beyond seed noise, {', '.join(beats)} beat{'s' if len(beats) == 1 else ''} uniform" if beats
            else "No method beats uniform beyond seed noise")

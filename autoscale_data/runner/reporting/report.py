"""The experiment report: ``report.json``, ``report.md`` and PNG plots from an output directory.

Works on a partial directory too (say, proxies finished but no target run yet): every section
reports what exists. ``autoscale-data report OUT_DIR`` calls :func:`write_report`. The report is a
:class:`~.report_types.Report`; ``report.json`` holds its ``to_json()``, and ``report.md`` is rendered from
its fields alone (so it renders the same from a ``report.json`` read back).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from ..._io import atomic_write_json, atomic_write_text
from ...solver import BootstrapResult, CandidateError, Selection
from ...solver.contrib import weight_distance
from ...solver.vocabulary import DEFAULT_OBJECTIVE, GEOMETRIC, JOINT, OBSERVED, ROBUST, objective_key
from .. import layout
from ..config import RunnerConfig
from ..experiment import load_folder_config
from ..planning.repetition import repetition_md
from ..planning.specs import RunSpec
from ..records import ProjectionFile, RunFailure, RunListFile, RunResult
from .comparison import build_comparison, comparison_markdown
from .downstream import build_downstream, downstream_markdown
from .metrics import compare_curves, mean_curve, mean_std, paired_verdict, tokens_saved, tokens_saved_per_seed
from .plots import write_plots
from .reference import not_beating_unigram
from .report_types import (
    AnytimeComparison,
    ExtensionResult,
    FailedRun,
    MixResult,
    Report,
    TargetResult,
    Throughput,
    TrainCurve,
    Verdict,
    VersusUniform,
)
from .wording import (
    bootstrap_verdict,
    bounds_moved,
    comparison_verdict,
    mlm_coverage,
    signed_per_seed,
    stale_runs,
    unigram_warnings,
    verdict_tag,
)

__all__ = ["build_report", "projection_label", "projection_sentence", "target_verdicts", "write_report"]


class _Run(NamedTuple):
    """One run folder as the report reads it."""

    spec: RunSpec
    result: RunResult | None
    failure: RunFailure | None


def _runs(out: Path) -> list[_Run]:
    rows = []
    for run_dir in sorted((out / layout.RUNS).glob("*")):
        spec = layout.read(run_dir, layout.SPEC)
        if spec is not None:
            rows.append(_Run(spec, layout.read(run_dir, layout.RESULT), layout.read(run_dir, layout.FAILURE)))
    return rows


def _current_runs(runs: list[_Run], run_list: RunListFile,
                  config: RunnerConfig | None) -> tuple[list[_Run], int]:
    """The runs of the folder's current plan, and how many runs on disk belong to an earlier config.

    With ``plan.json`` its run ids decide; a folder without one (older versions wrote it only after
    the fits) keeps the runs at the config's DDO budgets and target budget. Extensions of target runs
    (``autoscale-data extend``) are neither: :func:`_extensions` reports them.
    """
    runs = [r for r in runs if r.spec.kind != "extension"]
    ids = run_list.run_ids()
    if ids is None:
        scales = set(config.ddo.budgets) if config else set()
        target = config.target.budget if config else None
        keep = [r for r in runs if (r.spec.kind == "proxy" and (not scales or r.spec.scale in scales))
                or (r.spec.kind != "proxy" and (target is None or r.spec.scale == int(target)))]
    else:
        keep = [r for r in runs if r.spec.run_id in ids]
    return keep, len(runs) - len(keep)


def _folder_config(out: Path) -> RunnerConfig | None:
    """The config the folder was last run with, validated; None without one that this version reads."""
    try:
        return load_folder_config(out)
    except (FileNotFoundError, ValueError, TypeError):
        return None


def _extensions(runs: list[_Run], key: str) -> list[ExtensionResult]:
    """The finished extensions, by label, seed and budget, each beside its parent's final objective."""
    results = {r.spec.run_id: r.result for r in runs if r.result}
    out = []
    for spec, result, _ in runs:
        if spec.kind != "extension" or not result or result.extension is None:
            continue
        ext, parent = result.extension, results.get(result.extension.parent)
        out.append(ExtensionResult(
            run_id=spec.run_id, label=spec.label, seed=spec.seed, parent=ext.parent,
            parent_tokens=ext.parent_tokens, tokens=result.total_tokens, objective_value=result.value(key),
            parent_value=None if parent is None else parent.value(key), lr=ext.lr.schedule))
    return sorted(out, key=lambda e: (e.label, e.seed, e.tokens))


def build_report(out_dir: str | os.PathLike[str]) -> Report:
    """Collect the experiment's results into a :class:`~.report_types.Report` (no files written)."""
    out = Path(out_dir)
    if not (out / layout.LEDGER).exists() and not (out / layout.RUNS).is_dir():
        raise FileNotFoundError(f"{os.fspath(out)!r} is not a runner output directory (no ledger.jsonl)")
    config = _folder_config(out)
    objective = config.ddo.objective if config else DEFAULT_OBJECTIVE
    key = objective_key(objective)
    run_list: RunListFile = layout.read(out, layout.RUN_LIST) or RunListFile()
    every = _runs(out)
    runs, stale = _current_runs(every, run_list, config)
    labels: dict[str, list[str]] = defaultdict(list)  # run id -> target mixes it stands for
    for s in run_list.targets or []:
        labels[s.run_id].append(s.label)
    proxies, targets, failed = _group(runs, labels)
    fits = out / layout.FITS
    curves = {label: mean_curve([r.curve for r in rs], key) for label, rs in targets.items()}
    domains = layout.read(out, layout.DOMAINS)
    finished = [r for r in runs if r.result is not None]
    repetition = layout.read(fits, layout.REPETITION)  # the report holds the file as written
    return Report(
        out_dir=os.fspath(out.resolve()), name=config.name if config else None, objective=objective,
        domains=list(domains.names) if domains is not None else [], failed_runs=failed, stale_runs=stale,
        target_budget=config.target.budget if config else None,
        proxies={scale: {label: MixResult(**_mix_fields(rs, key)) for label, rs in sorted(by_label.items())}
                 for scale, by_label in sorted(proxies.items(), key=lambda kv: int(kv[0]))},
        ddo=_fit_files(fits, layout.DDO), bootstrap=_fit_files(fits, layout.BOOTSTRAP),
        projection=layout.read(fits, layout.PROJECTION),
        target_mixes=layout.read(fits, layout.TARGET_MIXES_FILE),
        targets={label: TargetResult(**_mix_fields(rs, key), weights=rs[0].weights,
                                     curve=curves[label], train_curve=_train_curve(rs))
                 for label, rs in sorted(targets.items())},
        missing_targets=sorted({s.label for s in run_list.targets or []} - set(targets)),
        anytime_vs_fixed=_anytime(out, config, targets, runs, key),
        vs_uniform=_versus_uniform(targets, key),
        tokens_saved={label: tokens_saved(curves[layout.AUTOSCALE], curve)
                      for label, curve in curves.items() if label != layout.AUTOSCALE
                      and layout.AUTOSCALE in curves},
        tokens_saved_per_seed={label: tokens_saved_per_seed(targets[layout.AUTOSCALE], rs, key)
                               for label, rs in targets.items() if label != layout.AUTOSCALE
                               and layout.AUTOSCALE in targets},
        throughput=_throughput([r.result for r in finished]),
        extensions=_extensions(every, key),
        comparison=build_comparison(out, {r.spec.run_id: r.result for r in finished}, targets, key),
        repetition=None if repetition is None else repetition.to_json(),
        verdicts=target_verdicts(targets, key),
        downstream=build_downstream(out, [r.spec for r in finished], labels,
                                    list(config.eval.tasks) if config else []),
        **_references(out, targets))


def _group(runs: list[_Run], labels: dict[str, list[str]]) -> tuple[
        dict[str, dict[str, list[RunResult]]], dict[str, list[RunResult]], list[FailedRun]]:
    """The finished proxies by budget and label, the finished targets by the mixes they stand for (``labels``:
    run id -> its target mixes), and the failed runs."""
    proxies: dict[str, dict[str, list[RunResult]]] = defaultdict(lambda: defaultdict(list))
    targets: dict[str, list[RunResult]] = defaultdict(list)
    failed = []
    for spec, result, failure in runs:
        if result is None:
            if failure is not None:
                failed.append(FailedRun(run_id=spec.run_id, name=f"{spec.kind}@{spec.scale} {spec.label} "
                                                                 f"s{spec.seed}",
                                        reason=failure.reason))
        elif spec.kind == "proxy":
            proxies[str(spec.scale)][spec.label].append(result)
        elif spec.kind == "target":  # a method's own runs (swarm, DoReMi) are in the comparison's costs
            for label in labels.get(spec.run_id) or [spec.label]:
                targets[label].append(result)
    return proxies, targets, failed


def _fit_files(fits: Path, kind: str) -> dict[str, Any]:
    """``fits/<kind>_<N>.json`` of every budget, by budget (a string), read as its record."""
    found = {p.stem.split("_", 1)[1]: layout.read(fits, p.name)
             for p in sorted(fits.glob(layout.per_budget(kind, "*")))}
    return {n: record for n, record in found.items() if record is not None}


def _references(out: Path, targets: dict[str, list[RunResult]]) -> dict[str, Any]:
    """The held-out data's reference losses and the target mixes (seed means) that do not beat the unigram
    one."""
    reference = layout.read(out, layout.REFERENCE_LOSSES) or {}  # {} for a folder of an older version
    finals = {label: {d: statistics.fmean(r.losses[d] for r in rs) for d in rs[0].losses}
              for label, rs in sorted(targets.items())}
    return {"reference_losses": reference, "not_beating_unigram": not_beating_unigram(finals, reference)}


def target_verdicts(targets: dict[str, list[RunResult]], key: str,
                    method: str = layout.AUTOSCALE) -> dict[str, Verdict]:
    """``method`` against every other target mix beyond seed noise (:func:`~.metrics.paired_verdict`), by
    label.

    ``targets`` maps a label to its run results; empty when ``method`` has no runs.
    """
    if method not in targets:
        return {}
    mine = {r.seed: r.value(key) for r in targets[method]}
    return {label: paired_verdict(method, mine, label, {r.seed: r.value(key) for r in rs})
            for label, rs in sorted(targets.items()) if label != method}


def _mix_fields(runs: list[RunResult], key: str) -> dict[str, Any]:
    """The seed-averaged fields of a :class:`~.report_types.MixResult` from one mix's run results."""
    return {"losses": {d: mean_std([r.losses[d] for r in runs]) for d in runs[0].losses},
            key: mean_std([r.value(key) for r in runs]), "tokens": runs[0].total_tokens,
            "seeds": [r.seed for r in runs]}


def _throughput(done: list[RunResult]) -> Throughput:
    return Throughput(
        runs=len(done),
        tokens_per_s_median=statistics.median(r.tokens_per_s for r in done) if done else None,
        data_wait_fraction_median=statistics.median(r.data_wait_fraction for r in done) if done else None,
        data_wait_fraction_max=max(r.data_wait_fraction for r in done) if done else None,
        devices=sorted({r.device for r in done}), train_hours=sum(r.wall_time_s for r in done) / 3600)


def _train_curve(runs: list[RunResult]) -> TrainCurve:
    """Seed-mean per-domain training loss at each evaluation point (``None`` where no seed saw the domain in
    that window; empty for runs that did not record it)."""
    points = [p for p in runs[0].curve if p.train_losses]
    if not points:
        return TrainCurve()

    def mean_seen(d: str, tokens: int) -> float | None:
        seen = [v for r in runs for q in r.curve if q.tokens == tokens
                and (v := q.train_losses.get(d)) is not None]
        return sum(seen) / len(seen) if seen else None

    return TrainCurve(tokens=[p.tokens for p in points],
                      losses={d: [mean_seen(d, p.tokens) for p in points] for d in points[0].train_losses})


def _versus_uniform(targets: dict[str, list[RunResult]], key: str) -> dict[str, VersusUniform]:
    """Each mix minus uniform, paired by seed: along the curve (``compare_curves``), and at the end per domain
    and under ``key``; empty without uniform runs."""
    if layout.UNIFORM not in targets:
        return {}
    base = {r.seed: r for r in targets[layout.UNIFORM]}
    out: dict[str, VersusUniform] = {}
    for label, rs in targets.items():
        pairs = [(r, base[r.seed]) for r in rs if r.seed in base]
        if label == layout.UNIFORM or not pairs:
            continue
        final = {d: mean_std([r.losses[d] - u.losses[d] for r, u in pairs]) for d in pairs[0][0].losses}
        final[key] = mean_std([r.value(key) - u.value(key) for r, u in pairs])
        out[label] = VersusUniform(curve=compare_curves(targets[layout.UNIFORM], rs, key), final=final)
    return out


def _anytime(out: Path, config: RunnerConfig | None, targets: dict[str, list[RunResult]],
             runs: list[_Run], key: str) -> AnytimeComparison | None:
    """The anytime-vs-fixed comparison, the reason it is missing, or ``None`` when it was not asked for."""
    wanted = config is not None and layout.ANYTIME in config.target.baselines
    if layout.ANYTIME in targets and layout.AUTOSCALE in targets:
        comparison = compare_curves(targets[layout.AUTOSCALE], targets[layout.ANYTIME], key)
        points, decreasing = comparison.points, None
        mp = next((r.spec.plan for r in runs if r.spec.schedule == "anytime" and r.spec.plan), None)
        if mp is not None and points:
            points = [dataclasses.replace(p, plan_shares=dict(mp.weights_for_budget(p.tokens)))
                      if p.tokens > mp.min_budget else p for p in points]
            decreasing = list(mp.path.decreasing)
        return AnytimeComparison(
            available=bool(points), objective=key, seeds=comparison.seeds, points=points,
            plan_decreasing=decreasing,
            reason=None if points else "no seed has both an autoscale and an autoscale_anytime run")
    if not wanted and layout.ANYTIME not in targets:
        return None
    error = layout.read(out / layout.FITS, layout.MIXTURE_PLAN_ERROR)
    if error:
        reason = f"no mixture plan could be fitted, so autoscale_anytime was not trained: {error.error}"
    elif layout.ANYTIME not in targets:
        reason = "the autoscale_anytime runs are not finished yet"
    else:
        reason = "the fixed autoscale runs are not finished yet"
    return AnytimeComparison(available=False, reason=reason)


def write_report(out_dir: str | os.PathLike[str]) -> Report:
    """Write ``report.json``, ``report.md`` and ``plots/*.png`` into ``out_dir``; returns the report."""
    out = Path(out_dir)
    report = build_report(out)
    report = dataclasses.replace(report, plots=write_plots(out, report))
    atomic_write_json(out / layout.REPORT_JSON, report.to_json())
    atomic_write_text(out / layout.REPORT_MD, _markdown(report))
    return report


# ------------------------------------------------------------------------------------- markdown
def _markdown(r: Report) -> str:
    """``report.md``: one function per section, in reading order."""
    key = r.objective_key
    sections = (_header_md(r), _proxies_md(r, key), _ddo_md(r), _targets_md(r, key), _saved_md(r),
                comparison_markdown(r), downstream_markdown(r),
                _anytime_markdown(r.anytime_vs_fixed, key), _extensions_md(r, key), _unfinished_md(r),
                _throughput_md(r),
                _plots_md(r), repetition_md(r.repetition))
    return "\n".join(line for section in sections for line in section)


def _extensions_md(r: Report, key: str) -> list[str]:
    if not r.extensions:
        return []
    lines = ["## Extended target runs", "",
             "Finished target runs continued to a larger budget from their final checkpoint and data "
             f"position (`autoscale-data extend`); {key} at the parent's end and at the extension's.", "",
             "| mix | seed | from tokens | to tokens | lr | parent's final | extension's final |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for e in r.extensions:
        parent = "n/a" if e.parent_value is None else f"{e.parent_value:.4f}"
        lines.append(f"| {e.label} | {e.seed} | {e.parent_tokens:,} | {e.tokens:,} | {e.lr} | {parent} | "
                     f"{e.objective_value:.4f} |")
    return lines + [""]


def _header_md(r: Report) -> list[str]:
    lines = [f"# AutoScale report: {r.name or ''}", "",
             f"Domains: {', '.join(r.domains)}. Objective: {r.objective}. Values are means over seeds "
             "(± std where there are several).", ""]
    note = stale_runs(r.stale_runs)
    if note:
        lines += [note + ".", ""]
    return lines


def _proxies_md(r: Report, key: str) -> list[str]:
    lines: list[str] = []
    for scale, rows in r.proxies.items():
        doms = list(next(iter(rows.values())).losses)
        lines += [f"## DDO proxies at {int(scale):,} tokens", "",
                  "| run | tokens | seeds | " + " | ".join(doms) + f" | {key} |",
                  "|---|---:|---|" + "---:|" * (len(doms) + 1)]
        for label, row in rows.items():
            lines.append(f"| {label} | {row.tokens:,} | {row.seeds} | "
                         + " | ".join(row.losses[d].text()
                                      for d in doms) + f" | {row.objective_value.text()} |")
        lines.append("")
    return lines


def _ddo_md(r: Report) -> list[str]:
    if not r.ddo:
        return []
    lines = ["## DDO weights and projection", "", "| budget | " + " | ".join(r.domains) + " | status | AAR |",
             "|---:|" + "---:|" * len(r.domains) + "---|---:|"]
    by_budget = sorted(r.ddo.items(), key=lambda kv: int(kv[0]))
    for scale, fit in by_budget:
        boot = r.bootstrap.get(scale)
        cells = [f"{fit.weights[d]:.3f}" + (f" [{boot.ci_low[d]:.3f}, {boot.ci_high[d]:.3f}]"
                                            if isinstance(boot, BootstrapResult) else "") for d in r.domains]
        lines.append(f"| {int(scale):,} | " + " | ".join(cells) + f" | {fit.status} | {fit.aar:.4f} |")
    proj = r.projection
    if proj:
        lines.append(f"| **{proj.budget_tokens:,.0f}** ({projection_label(proj)}) | "
                     + " | ".join(f"**{proj.weights[d]:.3f}**" for d in r.domains) + " | | |")
        other = next(m for m in (GEOMETRIC, JOINT) if m != proj.method)
        alt = proj.computed(other)
        if alt is not None:
            lines.append(f"| {proj.budget_tokens:,.0f} ({other}, not used) | "
                         + " | ".join(f"{alt.weights[d]:.3f}" for d in r.domains) + " | | |")
    lines.append("")
    if proj:
        lines.append(f"- {projection_sentence(proj)}")
        if bounds_moved(proj):
            lines.append(f"- {bounds_moved(proj, '→').capitalize()}.")
    for scale, boot in sorted(r.bootstrap.items(), key=lambda kv: int(kv[0])):
        verdict = bootstrap_verdict(boot).replace("are NOT", "are **NOT**")
        lines.append(f"- Bootstrap at {int(scale):,}: {verdict}.")
    for scale, fit in by_budget:
        if fit.identifiability is not None:
            lines.append(f"- Identifiability at {int(scale):,}: {fit.identifiability.summary}")
    lines += [f"- Projection warning: {w}" for w in (proj.warnings or [] if proj else [])]
    return lines + [""] + _backtest_md(proj.selection if proj else None) + _predicted_md(proj.selection
                                                                                         if proj else None)


def _backtest_md(selection: Selection | None) -> list[str]:
    """The backtest of ``ddo.projection: auto`` (three DDO budgets or more) as a table; empty otherwise."""
    if selection is None or selection.rule != "backtest" or not selection.backtest:
        return []
    held = selection.held_back_tokens
    lines = [f"### Backtest at {'the largest budget' if held is None else f'{held:,.0f} tokens'}", "",
             "Every candidate fitted again without the largest DDO budget and asked for it, every one scored "
             "the same way: by the DDO law fitted at that budget where the observed mix lies inside the "
             "range of its runs (score `law`), else by a run of that budget's total tokens within a stated "
             "L1 distance of it (score `run`); a candidate that cannot be scored that way cannot be chosen. "
             "A projection sets the target mix if it beats the observed mix by more than the margin (a "
             "one-sided 2.5% test over the projections and the two routes), or if the joint law fitted "
             "without that budget predicts its runs within their noise and the law over every budget "
             "predicts a gain at the target beyond its uncertainty (table below); a projection the trust "
             "checks flag needs a run to vouch for it (docs/solver.md, section 2c).", "",
             "| candidate | score | objective at the held-back budget | gain over observed | nearest run | "
             "L1 distance | trust |", "|---|---|---:|---:|---|---:|---|"]
    for name, r in selection.backtest.items():
        near = [str(r.run), "" if r.distance is None else f"{r.distance:.3f}"]
        cells = ([f"not scored: {r.error}", ""] if r.objective is None else
                 [f"{r.objective:.4f}", "" if r.gain is None else f"{r.gain:+.4f}"]) + near + [r.trust]
        score = "" if r.objective is None else r.score + (f" ({r.law_note})" if r.score != "law"
                                                          and r.law_note else "")
        lines.append(f"| {name} | {score} | " + " | ".join(cells) + " |")
    lines += ["", f"- Noise: {selection.noise_text()}."]
    lines += [f"- {line[0].upper()}{line[1:]}." for line in selection.scoring_text()]
    return lines + [f"- Chosen: **{selection.chosen}**: {selection.reason}.", ""]


def _predicted_md(sel: Selection | None) -> list[str]:
    """The joint law's predicted gains at the target of ``ddo.projection: auto`` as a table; empty without
    them."""
    if sel is None or not sel.predicted or sel.rule not in ("gain", "backtest"):
        return []
    two = sel.rule == "gain"
    lines = ["### Predicted gain at the target "
             f"({'two budgets' if two else 'the law over every budget'})", "",
             "The law fitted jointly to every budget's runs predicts each projection's objective at the "
             "target against the observed mix's (DDO(N2)); with two budgets a projection sets the mix only "
             "if its predicted gain exceeds twice its standard deviation (delta method over the fit; none "
             "where the runs do not determine it) and twice the noise of one run under the "
             "law" + ("." if two else
             "; with three or more, only once the law check above passes, beyond the backtest's one-sided "
             "quantile of its sd."), "",
             "| projection | predicted gain over DDO(N2) | sd | gain / sd | noise of one run | trust |",
             "|---|---:|---:|---:|---:|---|"]

    def cell(v: float, fmt: str) -> str:
        return format(v, fmt) if math.isfinite(v) else "not determined"

    for name, e in sel.predicted.items():
        if isinstance(e, CandidateError):
            lines.append(f"| {name} | not predicted: {e.error} | | | | {e.trust} |")
            continue
        lines.append(f"| {name} | {cell(e.gain, '+.4g')} | {cell(e.sd, '.3g')} | {cell(e.z, '.2f')} | "
                     f"{cell(e.noise, '.3g')} | {e.trust} |")
    return lines + ([""] if not two else ["", f"- Chosen: **{sel.chosen}**: {sel.reason}.", ""])


def _targets_md(r: Report, key: str) -> list[str]:
    if not r.targets:
        return []
    doms = r.domains
    lines = [f"## Target runs at {next(iter(r.targets.values())).tokens:,} tokens", "",
             "| mix | weights | " + " | ".join(doms) + f" | {key} |",
             "|---|---|" + "---:|" * (len(doms) + 1)]
    for label, t in r.targets.items():
        w = ", ".join(f"{t.weights[d]:.2f}" for d in doms)
        lines.append(f"| {label} | {w} | " + " | ".join(t.losses[d].text() for d in doms)
                     + f" | {t.objective_value.text()} |")
    return lines + [""] + _reference_md(r)


def _reference_md(r: Report) -> list[str]:
    """The reference rows under the target table, and a warning for every mix that does not beat them."""
    ref = r.reference_losses
    if not ref or not all(d in ref for d in r.domains):
        return []
    lines = ["Reference losses of the same held-out tokens (nats/token): a model must beat them before the "
             "comparison of mixes means anything.", "",
             "| reference | " + " | ".join(r.domains) + " |", "|---|" + "---:|" * len(r.domains),
             "| unigram (the held-out tokens' own frequencies) | "
             + " | ".join(f"{ref[d].unigram:.4f}" for d in r.domains) + " |",
             "| uniform guess (ln vocab) | " + " | ".join(f"{ref[d].uniform:.4f}" for d in r.domains) + " |",
             "| tokens scored per evaluation | " + " | ".join(f"{ref[d].scored_tokens:,.0f}"
                                                              for d in r.domains)
             + " |", ""]
    notes = ["- **Warning:** "
             f"{w}." for w in unigram_warnings(r)] + [f"- {n.strip()}." for n in mlm_coverage(r)]
    return lines + notes + ([""] if notes else [])


def _saved_md(r: Report) -> list[str]:
    if not r.tokens_saved:
        return []
    lines = ["## Tokens saved by the AutoScale mix", "", *_verdicts_md(r),
             "Tokens AutoScale needed to reach each baseline's final value (interpolated in log-tokens on "
             "its seed-mean curve), as a saving against the baseline's tokens. Per seed: the same on each "
             "seed's own pair of curves, signed (negative: the baseline reached AutoScale's final value with "
             "that many fewer tokens; n/a: neither reached the other's).", "",
             "| baseline | verdict (seed noise) | baseline final | AutoScale tokens to reach it | saved | "
             "per seed |",
             "|---|---|---:|---:|---:|---|"]
    for label, s in r.tokens_saved.items():
        verdict = verdict_tag(r.verdicts[label]) if label in r.verdicts else "–"
        if s.status == "no_data":
            lines.append(f"| {label} | {verdict} | – | – | no data | – |")
            continue
        if s.saved_fraction is not None:
            bound = "≤ " if s.status == "at_first_eval" else ""
            saved = f"{'≥ ' if bound else ''}{s.saved_fraction:.1%}"
            reach = f"{bound}{s.tokens_to_baseline_final:,.0f}"
        else:
            reach = "not reached"
            back = s.baseline_saved_fraction
            saved = ("not reached" if back is None else
                     f"not reached (the baseline reached AutoScale's final value with {back:.1%} fewer "
                     "tokens)")
        lines.append(f"| {label} | {verdict} | {s.baseline_final:.4f} | {reach} | {saved} | "
                     f"{signed_per_seed(r.tokens_saved_per_seed.get(label) or {})} |")
    return lines + [""]


def _verdicts_md(r: Report) -> list[str]:
    """The verdict of every target comparison against seed noise, stated before any percentage."""
    if not r.verdicts:
        return []
    lines = [f"**Verdicts first** (final {r.objective_key} paired by seed, Student-t interval). A saving "
             "below counts only where the verdict is better or WORSE; where it is NOT distinguishable or "
             "CANNOT be judged, the percentage is within seed noise:", ""]
    for v in r.verdicts.values():
        text = comparison_verdict(v, r.objective_key)
        for word in ("NOT", "CANNOT", "WORSE"):
            text = text.replace(f" {word} ", f" **{word}** ", 1)
        lines.append(f"- {text}.")
    return lines + [""]


def _unfinished_md(r: Report) -> list[str]:
    lines = []
    if r.missing_targets:
        lines += [f"Target runs not finished yet: {', '.join(r.missing_targets)}.", ""]
    if r.failed_runs:
        lines += ["## Failed runs (left out of the fits)", ""]
        lines += [f"- {f.name} ({f.run_id}): {f.reason}" for f in r.failed_runs] + [""]
    return lines


def _throughput_md(r: Report) -> list[str]:
    tp = r.throughput
    if not tp.runs:
        return []
    return ["## Throughput", "",
            f"{tp.runs} finished runs on {', '.join(tp.devices)}: median {tp.tokens_per_s_median:,.0f} "
            f"training tokens/s; time waiting for data: median {tp.data_wait_fraction_median:.2%} of step "
            f"time (max {tp.data_wait_fraction_max:.2%}); {tp.train_hours * 60:.1f} min of training.", ""]


def _plots_md(r: Report) -> list[str]:
    if not r.plots:
        return []
    return ["## Plots", ""] + [f"![{p}]({p})" for p in r.plots] + [""]


def _shares(shares: dict[str, float] | None) -> str:
    return ", ".join(f"{d} {v:.2f}" for d, v in shares.items()) if shares else "–"


def _anytime_markdown(a: AnytimeComparison | None, key: str) -> list[str]:
    if a is None:
        return []
    lines = ["## Anytime vs fixed schedule", ""]
    if not a.available or not a.points:
        return lines + [f"Not available: {a.reason}.", ""]
    pts = a.points
    better = sum(p.difference.mean < 0 for p in pts)
    lines += [f"Validation {key} (mean over domains; mean ± std over seeds {a.seeds}) at every evaluation "
              "point of the fixed AutoScale mix and of the anytime schedule on the mixture plan (same "
              "budget, seeds and evaluation points). Difference = anytime − fixed, paired by seed: negative "
              "means the anytime schedule is better at that budget. Mix seen = share of each domain in the "
              "training tokens so far.",
              "",
              "| tokens | autoscale (fixed) | autoscale_anytime | anytime − fixed | anytime mix seen | plan "
              "optimum for these tokens |", "|---:|---:|---:|---:|---|---|"]
    for p in pts:
        d = p.difference
        diff = f"{d.mean:+.4f} ± {d.std:.4f}" if d.n > 1 else f"{d.mean:+.4f}"
        lines.append(f"| {p.tokens:,.0f} | {p.reference.text()} | {p.other.text()} | {diff} | "
                     f"{_shares(p.other_shares)} | {_shares(p.plan_shares)} |")
    lines += ["", f"The anytime schedule has the lower mean at {better} of {len(pts)} evaluation points."]
    if a.plan_decreasing:
        lines.append(f"The DDO allocation of {', '.join(a.plan_decreasing)} decreases from N1 to N2 (Theorem "
                     "1 rules that out; noisy proxies), so the anytime run followed the plan's monotone "
                     "envelope: those domains never run ahead of their final counts.")
    lines.append("")
    return lines


def projection_label(proj: ProjectionFile) -> str:
    """Short tag of the projection used, e.g. ``projected: geometric, t=1.585``."""
    if proj.method == JOINT:
        aar = getattr(proj.computed(JOINT), "aar", None)
        return "projected: joint law" + ("" if aar is None else f", AAR {aar:.4f}")
    if proj.method == ROBUST:
        moved = _robust_moved(proj)
        return "projected: robust" + ("" if moved is None else f", {moved:.3f} from geometric")
    if proj.method == OBSERVED:
        return "not projected: DDO(N2) as is"
    return "projected: geometric" + ("" if proj.t is None else f", t={proj.t:.3f}")


def projection_sentence(proj: ProjectionFile) -> str:
    """One sentence: which projection set the target mix, and how far the other one is from it."""
    method = proj.method
    how = {GEOMETRIC: "the geometric projection (Theorem-1 path through the DDO optima at N1 and N2)",
           JOINT: "the joint projection (one law fitted to the runs of both budgets, optimised at the "
                  "target)",
           ROBUST: "the robust projection (the Theorem-1 path with each domain's N1-to-N2 trend shrunk by "
                     "its uncertainty, the range of the optimum over the fits consistent with the data)",
           OBSERVED: "the DDO optimum at N2, used as is (no projection)"}
    text = f"Target mix from {how[method]}; set by `ddo.projection`."
    if proj.selection is not None and proj.selection.reason:
        text += f" `ddo.projection: auto` chose it: {proj.selection.reason}."
    moved = _robust_moved(proj)
    if moved is not None:
        text += (f" The robust step {'moved' if method == ROBUST else 'would move'} the geometric mix by "
                 f"total variation {moved:.3f}.")
    # the robust step's sentence above already gives its distance to the geometric mix
    other = GEOMETRIC if method in (JOINT, OBSERVED) else JOINT
    chosen, named = proj.computed(method), proj.computed(other)
    if named is not None:
        d = weight_distance(proj.weights if chosen is None else chosen.weights, named.weights)
        text += (f" The {other} projection differs by total variation {d['total_variation']:.3f}"
                 f" (max {d['max_abs']:.3f} per domain).")
    elif proj.failure(other) is not None:
        text += f" The {other} projection failed: {proj.failure(other)}"
    return text


def _robust_moved(proj: ProjectionFile) -> float | None:
    """How far the robust step moved the geometric mix (total variation); None without a robust projection."""
    robust = proj.computed(ROBUST)
    return None if robust is None else robust.moved.get("total_variation")

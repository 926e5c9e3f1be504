"""The report's PNG plots: DDO optima and the projected weight curve, target losses per mix, and the
validation curves of the target runs (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...solver.vocabulary import GEOMETRIC, JOINT, MEAN_PPL, OBSERVED, ROBUST
from .. import layout

if TYPE_CHECKING:
    from .report_types import Report

__all__ = ["write_plots"]


def write_plots(out: Path, report: Report) -> list[str]:
    """Draw ``OUT/plots/{weights,target_losses,curves}.png`` (atomically) from a report; returns the paths
    written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir = out / layout.PLOTS
    plots_dir.mkdir(exist_ok=True)
    written = []
    for name, draw in ((layout.PLOT_WEIGHTS, _plot_weights), (layout.PLOT_TARGET_LOSSES, _plot_losses),
                       (layout.PLOT_CURVES, _plot_curves), (layout.PLOT_TRAIN_DOMAINS, _plot_train_domains),
                       (layout.PLOT_MIXES, _plot_mixes)):
        fig = draw(plt, report)
        if fig is None:
            continue
        tmp = plots_dir / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        plt.close(fig)
        os.replace(tmp, plots_dir / name)
        written.append(f"{layout.PLOTS}/{name}")
    return written


def _reachable(project: Any, pairs: list[tuple[float, Any]], grid: np.ndarray) -> tuple[np.ndarray | None,
                                                                                        list[Any]]:
    """The path's weights at the budgets of ``grid`` it reaches (a domain that decreases between the
    budgets leaves the path no total below some budget); ``None`` when it reaches none."""
    kept, curve = [], []
    for n in grid:
        try:
            curve.append(project(pairs, float(n)).weights)
        except ValueError:
            continue
        kept.append(n)
    return (np.asarray(kept) if kept else None), curve


def _plot_weights(plt: Any, report: Report) -> Any:
    ddo = report.ddo
    if not ddo:
        return None
    from ...solver import BootstrapResult, project

    fig, ax = plt.subplots(figsize=(7, 4.2))
    scales = sorted(ddo, key=int)
    domains = list(ddo[scales[0]].weights)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    boot = [report.bootstrap.get(s) for s in scales]
    # error bars only where every budget's bootstrap ran
    with_ci = all(isinstance(b, BootstrapResult) for b in boot)
    proj = report.projection
    grid = None
    if proj and len(scales) >= 2:
        grid = np.geomspace(float(scales[0]), proj.budget_tokens, 40)
        if proj.method == JOINT:
            law = proj.computed(JOINT)
            curve = [law.weights_at(float(n)) for n in grid]
        elif proj.method == ROBUST:  # the shrunk path: through N2's optimum and the robust target mix
            pairs = [(float(scales[-1]), ddo[scales[-1]].allocation_tokens or {}),
                     (float(proj.budget_tokens), proj.computed(ROBUST).allocation_tokens)]
            grid, curve = _reachable(project, pairs, grid)
        elif proj.method == OBSERVED:  # DDO(N2) as is: constant weights
            curve = [dict(proj.weights) for _ in grid]
        else:
            pairs = [(float(s), ddo[s].allocation_tokens or {}) for s in scales]
            grid, curve = _reachable(project, pairs, grid)
    for k, d in enumerate(domains):
        c = colors[k % len(colors)]
        xs = [int(s) for s in scales]
        ys = [ddo[s].weights[d] for s in scales]
        if with_ci:
            lo = [y - b.ci_low[d] for y, b in zip(ys, boot, strict=True)]  # type: ignore[union-attr]
            hi = [b.ci_high[d] - y for y, b in zip(ys, boot, strict=True)]  # type: ignore[union-attr]
            ax.errorbar(xs, ys, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="o", color=c, capsize=3)
        else:
            ax.plot(xs, ys, "o", color=c)
        if grid is not None:
            ax.plot(grid, [w[d] for w in curve], "-", color=c, label=d)
            ax.plot([proj.budget_tokens], [proj.weights[d]], "*", color=c, markersize=11)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens (budget)")
    ax.set_ylabel("weight")
    method = proj.method if proj else GEOMETRIC
    ax.set_title(f"DDO optima (points{', bootstrap CI' if with_ci else ''}) and AutoScale {method} "
                 "projection (line, * = target)")
    ax.legend(fontsize=8)
    return fig


def _mix_color(plt: Any, label: str) -> str:
    """One colour per target mix in every plot (by its place in ``layout.TARGET_MIXES``)."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    k = layout.TARGET_MIXES.index(label) if label in layout.TARGET_MIXES else len(layout.TARGET_MIXES)
    return cycle[k % len(cycle)]


def _seeds_note(n: int) -> str:
    return "error bars: std over seeds" if n > 1 else "one seed: no error bars"


def _plot_losses(plt: Any, report: Report) -> Any:
    """Per-domain validation loss at the target: each mix minus uniform (paired by seed) when uniform was
    trained, so differences of a few hundredths are not drawn as bars on a cut axis; else the losses
    themselves on an axis from 0."""
    targets = report.targets
    if not targets:
        return None
    key = report.objective_key
    versus = report.vs_uniform
    domains = list(next(iter(targets.values())).losses)
    cols = domains + [key]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(cols) + 2), 4.2))
    x = np.arange(len(cols))
    if versus:
        labels = list(versus)
        n = max(v.final[key].n for v in versus.values())
        values = {label: [versus[label].final[c] for c in cols] for label in labels}
        ylabel = "loss minus uniform's (nats/token; < 0: better than uniform)"
        title = f"validation loss at the target budget, each mix minus uniform, paired by seed ({_seeds_note(n)})"
    else:
        labels = list(targets)
        n = max(t.objective_value.n for t in targets.values())
        values = {label: [targets[label].losses[d] for d in domains] + [targets[label].objective_value]
                  for label in labels}
        ylabel = "validation loss (nats/token)"
        title = f"validation loss at the target budget ({_seeds_note(n)})"
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        ms = values[label]
        yerr = [v.std for v in ms] if n > 1 else None
        ax.bar(x + k * width - 0.4 + width / 2, [v.mean for v in ms], width, yerr=yerr, capsize=2,
               label=label,
               color=_mix_color(plt, label))
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(x, domains + [f"{key} (all)"])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return fig


def _band(plt: Any, ax: Any, label: str, tokens: list[float], mean: np.ndarray, std: np.ndarray,
          n: int) -> None:
    """One mix's line along the run (dashed for the anytime schedule) and its ± std band over ``n`` seeds."""
    color = _mix_color(plt, label)
    ax.plot(tokens, mean, "s--" if label == layout.ANYTIME else "o-", label=label, markersize=3, color=color)
    if n > 1:
        ax.fill_between(tokens, mean - std, mean + std, color=color, alpha=0.2)


def _plot_curves(plt: Any, report: Report) -> Any:
    """Validation vs tokens of every target mix (seed band) and, when uniform was trained, a second panel
    of each mix minus uniform, paired by seed (the curves themselves overlap at this resolution)."""
    targets = report.targets
    if not targets:
        return None
    versus = report.vs_uniform
    fig, axes = plt.subplots(1, 2 if versus else 1, figsize=(13 if versus else 7, 4.2), squeeze=False)
    ax = axes[0][0]
    for label, t in targets.items():
        _band(plt, ax, label, t.curve.tokens, np.asarray(t.curve.mean), np.asarray(t.curve.std), t.curve.n)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation " + ("perplexity (mean over domains)" if report.objective == MEAN_PPL
                                   else "loss (mean over domains)"))
    ax.set_title("validation vs tokens at the target budget")
    ax.legend(fontsize=8)
    if versus:
        dx = axes[0][1]
        n = 0
        for label, v in versus.items():
            pts = v.curve.points
            if not pts:
                continue
            n = max(n, pts[0].difference.n)
            _band(plt, dx, label, [p.tokens for p in pts], np.array([p.difference.mean for p in pts]),
                  np.array([p.difference.std for p in pts]), pts[0].difference.n)
        dx.axhline(0.0, color="black", linewidth=0.8, label="uniform")
        dx.set_xscale("log")
        dx.set_xlabel("training tokens")
        dx.set_ylabel("minus uniform's, paired by seed (< 0: better)")
        band = "band: std over seeds" if n > 1 else "one seed: no band"
        dx.set_title(f"each mix minus uniform ({band})", fontsize=9)
        dx.legend(fontsize=8)
    return fig


def _plot_train_domains(plt: Any, report: Report) -> Any:
    """Per-domain training loss of every target mix along its run (seed means, one panel per domain)."""
    targets = {label: t.train_curve for label, t in report.targets.items() if t.train_curve.tokens}
    if not targets:
        return None
    domains = list(next(iter(targets.values())).losses)
    fig, axes = plt.subplots(1, len(domains), figsize=(3.2 * len(domains) + 1, 3.6), squeeze=False)
    for ax, d in zip(axes[0], domains, strict=True):
        for label, c in targets.items():
            xs = [t for t, v in zip(c.tokens, c.losses[d], strict=True) if v is not None]
            ys = [v for v in c.losses[d] if v is not None]
            if xs:
                ax.plot(xs, ys, "s--" if label == layout.ANYTIME else "o-", label=label, markersize=3,
                        color=_mix_color(plt, label))
        ax.set_xscale("log")
        ax.set_title(d, fontsize=9)
        ax.set_xlabel("training tokens")
    axes[0][0].set_ylabel("training loss since the last evaluation")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("per-domain training loss of each target mix (DomainLossMeter; seed means)", fontsize=10)
    return fig


def _plot_mixes(plt: Any, report: Report) -> Any:
    """Every method's target mix side by side (only when other methods than AutoScale's own were compared)."""
    mixes = report.target_mixes or {}
    if report.comparison is None or not any(m in mixes for m in layout.METHOD_MIXES):
        return None
    labels = [m for m in report.comparison.rows if m in mixes] + [m for m in mixes
                                                                  if m not in report.comparison.rows]
    domains = list(report.domains)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) * max(1, len(domains)) / 2), 4.2))
    width = 0.8 / len(labels)
    x = np.arange(len(domains))
    for k, label in enumerate(labels):
        ax.bar(x + (k - (len(labels) - 1) / 2) * width, [mixes[label].get(d, 0.0) for d in domains], width,
               label=label, color=_mix_color(plt, label))
    ax.set_xticks(x)
    ax.set_xticklabels(domains)
    ax.set_ylabel("weight in the target mix")
    ax.set_title("Target mixes chosen by each method")
    ax.legend(fontsize=8, ncol=2)
    return fig

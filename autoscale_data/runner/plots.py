"""The report's PNG plots: DDO optima and the projected weight curve, target losses per mix, and the
validation curves of the target runs (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["write_plots"]


def write_plots(out: Path, report: dict[str, Any]) -> list[str]:
    """Draw ``OUT/plots/{weights,target_losses,curves}.png`` (atomically) from a report; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    written = []
    for name, draw in (("weights.png", _plot_weights), ("target_losses.png", _plot_losses),
                       ("curves.png", _plot_curves)):
        fig = draw(plt, report)
        if fig is None:
            continue
        tmp = plots_dir / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        plt.close(fig)
        os.replace(tmp, plots_dir / name)
        written.append(f"plots/{name}")
    return written


def _plot_weights(plt: Any, report: dict[str, Any]) -> Any:
    ddo = report["ddo"]
    if not ddo:
        return None
    from ..solver import JointFit, project

    fig, ax = plt.subplots(figsize=(7, 4.2))
    scales = sorted(ddo, key=int)
    domains = list(ddo[scales[0]]["weights"])
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    proj = report.get("projection")
    grid = None
    if proj and len(scales) >= 2:
        grid = np.geomspace(float(scales[0]), proj["budget_tokens"], 40)
        if proj.get("method") == "joint":
            law = JointFit.from_json(proj["joint"])
            curve = [law.weights_at(float(n)) for n in grid]
        else:
            pairs = [(float(s), ddo[s]["allocation_tokens"]) for s in scales]
            curve = [project(pairs, float(n)).weights for n in grid]
    for k, d in enumerate(domains):
        c = colors[k % len(colors)]
        xs = [int(s) for s in scales]
        ys = [ddo[s]["weights"][d] for s in scales]
        boot = [report["bootstrap"].get(s) or {} for s in scales]
        if all(b.get("available") for b in boot):
            lo = [y - b["ci_low"][d] for y, b in zip(ys, boot, strict=True)]
            hi = [b["ci_high"][d] - y for y, b in zip(ys, boot, strict=True)]
            ax.errorbar(xs, ys, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="o", color=c, capsize=3)
        else:
            ax.plot(xs, ys, "o", color=c)
        if grid is not None:
            ax.plot(grid, [w[d] for w in curve], "-", color=c, label=d)
            ax.plot([proj["budget_tokens"]], [proj["weights"][d]], "*", color=c, markersize=11)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens (budget)")
    ax.set_ylabel("weight")
    method = (proj or {}).get("method", "geometric")
    ax.set_title(f"DDO optima (points, bootstrap CI) and AutoScale {method} projection (line, * = target)")
    ax.legend(fontsize=8)
    return fig


def _plot_losses(plt: Any, report: dict[str, Any]) -> Any:
    targets = report["targets"]
    if not targets:
        return None
    labels = list(targets)
    domains = list(next(iter(targets.values()))["losses"])
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(domains) + 2), 4.2))
    width = 0.8 / len(labels)
    x = np.arange(len(domains))
    for k, label in enumerate(labels):
        losses = targets[label]["losses"]
        ax.bar(x + k * width - 0.4 + width / 2, [losses[d]["mean"] for d in domains], width,
               yerr=[losses[d]["std"] for d in domains], capsize=2, label=label)
    lo = min(targets[label]["losses"][d]["mean"] for label in labels for d in domains)
    hi = max(targets[label]["losses"][d]["mean"] for label in labels for d in domains)
    ax.set_ylim(max(0.0, lo - 0.15 * (hi - lo + 1e-9) - 0.05), hi + 0.1 * (hi - lo + 1e-9) + 0.02)
    ax.set_xticks(x, domains)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title("per-domain validation loss at the target budget (error bars: std over seeds)")
    ax.legend(fontsize=8)
    return fig


def _plot_curves(plt: Any, report: dict[str, Any]) -> Any:
    targets = report["targets"]
    if not targets:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, t in targets.items():
        c = t["curve"]
        mean, std = np.asarray(c["mean"]), np.asarray(c["std"])
        style = "s--" if label == "autoscale_anytime" else "o-"
        line, = ax.plot(c["tokens"], mean, style, label=label, markersize=3)
        if c["n"] > 1:
            ax.fill_between(c["tokens"], mean - std, mean + std, color=line.get_color(), alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("validation " + ("perplexity (mean over domains)" if report["objective"] == "mean_ppl"
                                   else "loss (mean over domains)"))
    ax.set_title("validation vs tokens at the target budget")
    ax.legend(fontsize=8)
    return fig

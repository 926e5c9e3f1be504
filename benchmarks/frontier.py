"""The cost–regret frontier of choosing a mix on the published Data Mixing Laws runs.

The published runs (``../shared/external_runs``, read at run time, evaluation only: its PROVENANCE.md)
hold the same mixtures at every model size (70M–410M parameters) and checkpoint (3k–30k steps). This
script asks what a mix chosen at a cheap (model size, step) cell is worth at a larger one, and what
choosing it cost. It prints one markdown table per dataset and writes ``--out/frontier.md``,
``--out/frontier.png`` and ``--out/results.json`` (default ``bench_out/frontier``, git-ignored):

    python benchmarks/frontier.py [--data ../shared/external_runs] [--out bench_out/frontier]
                                  [--workers 2] [--quick]

PROTOCOL (fixed 2026-11-28, before any result was looked at)
------------------------------------------------------------
Mixtures: per dataset those run to 30k steps at every model size (the targets' mixtures); a choosing
design uses those of them run at each of its checkpoints (at least 12, as ``eval_two_budget.py``).

Choosing cells: for each model size s and each checkpoint k <= 30k steps, designs of 1, 2 and 3
checkpoints of size s ending at k, each checkpoint one run table (every run's tokens its shares x step
x 4096 x 256, the target ``pile_weighted_loss``), as ``eval_two_budget.py`` builds them:

- 1 checkpoint: ``(k,)``: the product answers with the best mix observed there;
- 2 checkpoints: ``(a, k)`` with the earliest ``a`` 2k-8k steps before k (the two-budget gaps of
  ``eval_two_budget.py``; the widest such window, as its cost does not depend on ``a``);
- 3 checkpoints: ``(k - 2g, k - g, k)`` with the largest equal gap g of 2k-5k steps (1k grid) whose
  checkpoints exist (the three-budget gaps of ``eval_two_budget.py``).

The mix is the product's answer: ``project_all(tables, 30k steps' tokens, method="auto")``, as the
CLI calls it (each table's per-budget optimum is fitted once and passed to the windows sharing that
table, as the runner passes its DDO fits).

Targets: every size S >= s at 30k steps. Scored as ``eval_two_budget.py`` scores: the run nearest (L1
over the shares) to the answer among the design's mixtures run at the target, its regret the nats above
the best of them. The reference is choosing at the target itself (one checkpoint at (S, 30k): regret 0
by construction); a regret within the checkpoint noise of size S (``eval_published_runs.noise_floor``)
is a tie, beyond it the cell is worse.

COST of a choosing cell, as a multiple of one target run (compute 6·N·D per run; tokens D proportional
to steps, the batch being fixed across the published runs; a design's checkpoints come from one run
per mixture, so it costs one run per mixture to its last checkpoint k):

    cost(s, k | S) = mixtures · 6·N_s·k / (6·N_S·30k) = mixtures · (N_s / N_S) · (k / 30k)

with nominal N = 70M, 160M, 305M, 410M. The table states it against the largest target (410M, 30k);
against a target S multiply by 410M / N_S (``results.json`` holds both). The frontier marks the cells
that no other cell beats on both cost and regret at that largest target (the one target every cell
is scored at).

``--quick``: Pile-5, sizes 70M and 410M, choosing checkpoints 10k, 20k and 30k, designs of 1 and 2
checkpoints (under a minute on one core).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

# the two-budget evaluation first: it sets the BLAS threads to 1 before numpy loads and puts the repository first
from eval_two_budget import DATASETS, EQUAL_GAPS, GAP, LAST_STEP, MIN_MIXTURES, REPO, _regret  # noqa: I001
from eval_published_runs import (
    SIZES,
    TOKENS_PER_STEP,
    _budget,
    data_arguments,
    found_data,
    load_mixinglaws,
    noise_floor,
    write_results,
)

import numpy as np

from autoscale_data._io import atomic_write_text
from autoscale_data.solver.joint import per_budget_optima
from autoscale_data.solver.projections import project_all

DEFAULT_OUT = REPO / "bench_out" / "frontier"
CHECKPOINTS = (1, 2, 3)
COST_FORMULA = "cost = mixtures · 6·N_s·k / (6·N_S·30k) = mixtures · (N_s/N_S) · (k/30k)"


@dataclass(frozen=True)
class Subset:
    """Which datasets, model sizes, choosing checkpoints (None: all) and design sizes a run covers."""

    datasets: tuple[str, ...] = DATASETS
    sizes: tuple[str, ...] = tuple(SIZES)
    steps: tuple[int, ...] | None = None
    checkpoints: tuple[int, ...] = CHECKPOINTS

    def __post_init__(self) -> None:
        if not set(self.datasets) <= set(DATASETS) or not self.datasets:
            raise ValueError(f"datasets must be among {DATASETS}, got {self.datasets}")
        unknown = [s for s in self.sizes if s not in SIZES]
        if unknown or not self.sizes:
            raise ValueError(f"sizes must be among {list(SIZES)}, got {list(self.sizes)}")
        if not set(self.checkpoints) <= set(CHECKPOINTS) or not self.checkpoints:
            raise ValueError(f"checkpoints must be among {CHECKPOINTS}, got {self.checkpoints}")


QUICK = Subset(datasets=("pile5",), sizes=("70M", "410M"), steps=(10_000, 20_000, 30_000), checkpoints=(1, 2))


def cost(mixtures: int, size: str, step: int, target: str) -> float:
    """A design's compute as a multiple of one target run: ``mixtures`` runs of ``size`` to ``step``
    against one run of ``target`` to 30k steps (the module doc's formula)."""
    if mixtures < 1 or step <= 0:
        raise ValueError(f"a design needs >= 1 mixture and a positive step, got mixtures={mixtures}, step={step}")
    return mixtures * (SIZES[size] / SIZES[target]) * (step / LAST_STEP)


def window(available: Sequence[int], k: int, n: int) -> tuple[int, ...] | None:
    """The design of ``n`` checkpoints ending at ``k`` among ``available`` (module doc), or None."""
    have = set(available)
    if k not in have:
        return None
    if n == 1:
        return (k,)
    if n == 2:
        earlier = [a for a in sorted(have) if GAP[0] <= k - a <= GAP[1]]
        return (earlier[0], k) if earlier else None
    if n == 3:
        for g in range(EQUAL_GAPS[1], EQUAL_GAPS[0] - 1, -1_000):
            if k - g in have and k - 2 * g in have:
                return (k - 2 * g, k - g, k)
        return None
    raise ValueError(f"a design has 1, 2 or 3 checkpoints, got {n}")


def target_mixtures(curves: Mapping[str, Mapping[str, Mapping[int, float]]], sizes: Sequence[str]) -> set[str]:
    """The mixtures run to 30k steps at every one of ``sizes``."""
    return set.intersection(*({m for m, c in curves[s].items() if LAST_STEP in c} for s in sizes))


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Whether each (cost, regret) point is beaten on both by no other (<= on both, < on one)."""
    return [not any(c2 <= c and r2 <= r and (c2 < c or r2 < r) for c2, r2 in points) for c, r in points]


class _Optima:
    """Each table's per-budget optimum, fitted once (``None`` when it cannot be fitted alone)."""

    def __init__(self) -> None:
        self._fits: dict[tuple[int, tuple[str, ...]], Any] = {}

    def of(self, steps: Sequence[int], mixes: Sequence[str], tables: Sequence[Any]) -> list[Any] | None:
        for step, table in zip(steps, tables, strict=True):
            key = (step, tuple(mixes))
            if key not in self._fits:
                try:
                    self._fits[key] = per_budget_optima([table])[0]
                except ValueError:
                    self._fits[key] = None
        fits = [self._fits[(step, tuple(mixes))] for step in steps]
        return None if any(f is None for f in fits) else fits


@dataclass(frozen=True)
class Published:
    """One dataset's runs as the benchmark reads them: domains, curves ``{size: {mix: {step: loss}}}``,
    each mix's shares, the targets' mixtures and each size's checkpoint noise."""

    dataset: str
    domains: tuple[str, ...]
    curves: Mapping[str, Mapping[str, Mapping[int, float]]]
    weights: Mapping[str, np.ndarray]
    pool: tuple[str, ...]
    noise: Mapping[str, float]

    def regret(self, answer: Mapping[str, float], target: str, mixes: Sequence[str]) -> float:
        """Nats above the best of ``mixes`` at (``target``, 30k) of the run of ``mixes`` nearest ``answer``."""
        at = _budget(self.curves[target], self.weights, mixes, LAST_STEP)
        return _regret(answer, self.domains, at.weights, at.loss)


def score_cell(runs: Published, size: str, steps: tuple[int, ...], mixes: Sequence[str], targets: Sequence[str],
               optima: _Optima) -> dict[str, Any]:
    """The product's answer from the checkpoints ``steps`` of ``size``, scored at (S, 30k) for each S of ``targets``
    (``regret_all``: against every target mixture, not only the design's, a check added after the protocol)."""
    row: dict[str, Any] = {"dataset": runs.dataset, "size": size, "window": list(steps), "step": steps[-1],
                           "checkpoints": len(steps), "mixtures": len(mixes),
                           "cost": {t: cost(len(mixes), size, steps[-1], t) for t in targets}}
    t0 = time.perf_counter()
    tables = [_budget(runs.curves[size], runs.weights, mixes, k).table(runs.domains) for k in steps]
    fits = optima.of(steps, mixes, tables) if len(steps) > 1 else None
    try:
        p = project_all(tables, LAST_STEP * TOKENS_PER_STEP, method="auto", optima=fits)
    except ValueError as exc:
        row.update(status="refused", reason=str(exc)[:300], seconds=time.perf_counter() - t0)
        return row
    regrets = {t: runs.regret(p.weights, t, mixes) for t in targets}
    row.update(status="answered", chosen=p.used, reason=p.selection.reason, answer=dict(p.weights), regret=regrets,
               regret_all={t: runs.regret(p.weights, t, runs.pool) for t in targets},
               noise={t: runs.noise[t] for t in targets}, worse={t: regrets[t] > runs.noise[t] for t in targets},
               mean_regret=float(np.mean(list(regrets.values()))), seconds=time.perf_counter() - t0)
    return row


def score_size(job: tuple[Path, str, str, Subset]) -> list[dict[str, Any]]:
    """Every choosing cell of one dataset and model size (the subset's), scored at its targets."""
    data, dataset, size, subset = job
    domains, curves, weights, _ = load_mixinglaws(data, dataset)
    t0 = time.perf_counter()
    targets = [t for t in subset.sizes if SIZES[t] >= SIZES[size]]
    runs = Published(dataset, domains, curves, weights, tuple(sorted(target_mixtures(curves, subset.sizes))),
                     {t: noise_floor(curves[t]) for t in targets})
    seen = {k for m in runs.pool for k in curves[size][m] if k <= LAST_STEP}
    available = sorted(k for k in seen if sum(1 for m in runs.pool if k in curves[size][m]) >= MIN_MIXTURES)
    chosen_steps = [k for k in available if subset.steps is None or k in subset.steps]
    optima = _Optima()
    rows = []
    for k in chosen_steps:
        for n in subset.checkpoints:
            steps = window(available, k, n)
            if steps is None:
                continue
            mixes = [m for m in runs.pool if set(steps) <= set(curves[size][m])]
            if len(mixes) >= MIN_MIXTURES:
                rows.append(score_cell(runs, size, steps, mixes, targets, optima))
    print(f"[frontier] {dataset} {size}: {len(rows)} cells ({time.perf_counter() - t0:.0f} s)", file=sys.stderr,
          flush=True)
    return rows


def mark_frontier(rows: Sequence[dict[str, Any]], target: str) -> None:
    """Set ``frontier`` on each answered row of one dataset: on the (cost, regret) Pareto front at ``target``."""
    ok = [r for r in rows if r["status"] == "answered"]
    for r, front in zip(ok, pareto([(r["cost"][target], r["regret"][target]) for r in ok]), strict=True):
        r["frontier"] = front


def _merged(rows: Sequence[Mapping[str, Any]], target: str) -> list[list[Mapping[str, Any]]]:
    """The rows grouped where one size, last checkpoint and mixture set gave the same answer's regrets (the
    designs of 1, 2, 3 checkpoints that agree share a table line), cheapest first."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        key = (r["size"], r["step"], r["mixtures"], r["status"], r.get("chosen"),
               tuple(sorted(r.get("regret", {}).items())))
        groups.setdefault(key, []).append(r)
    return sorted(groups.values(), key=lambda g: (g[0]["cost"][target], SIZES[g[0]["size"]], g[0]["checkpoints"]))


def cheapest(rows: Sequence[Mapping[str, Any]], target: str) -> dict[str, Mapping[str, Any] | None]:
    """The cheapest answered cell overall, with its regret at ``target`` within that size's noise, and at 0."""
    ok = sorted((r for r in rows if r["status"] == "answered"), key=lambda r: r["cost"][target])
    tests = {"any": lambda r: True, "within noise": lambda r: not r["worse"][target],
             "regret 0": lambda r: r["regret"][target] == 0.0}
    return {name: next((r for r in ok if test(r)), None) for name, test in tests.items()}


def _cell(group: Sequence[Mapping[str, Any]]) -> str:
    return f"{group[0]['size']}: " + " · ".join("/".join(f"{k // 1000}k" for k in r["window"]) for r in group)


def format_table(dataset: str, rows: Sequence[Mapping[str, Any]], target: str) -> str:
    """One dataset's markdown table, cheapest cell first, and its cheapest cells."""
    pool = max((r["mixtures"] for r in rows), default=0)
    lines = [f"**{dataset}** (cost and frontier at the target {target}, 30k steps; {COST_FORMULA})", "",
             f"| choosing cell: size: checkpoints of each design | mixtures | cost (x one {target}/30k run) | answer | "
             f"regret at {target} | (against all {pool}) | mean regret at targets S >= s (n) | "
             "worse beyond noise (of n) | frontier |",
             "|---|---:|---:|---|---:|---:|---:|---:|:-:|"]
    for group in _merged(rows, target):
        r = group[0]
        if r["status"] != "answered":
            lines.append(f"| {_cell(group)} | {r['mixtures']} | {r['cost'][target]:.3f} | refused | - | - | - | - | |")
            continue
        n = len(r["regret"])
        lines.append(f"| {_cell(group)} | {r['mixtures']} | {r['cost'][target]:.3f} | {r['chosen']} | "
                     f"{r['regret'][target]:.4f} | {r['regret_all'][target]:.4f} | {r['mean_regret']:.4f} ({n}) | "
                     f"{sum(r['worse'].values())} / {n} | {'**F**' if r['frontier'] else ''} |")
    lines.append("")
    for name, r in cheapest(rows, target).items():
        lines.append(f"- cheapest cell ({name} at {target}): " + ("none" if r is None else (
            f"{r['size']} at {'/'.join(f'{k // 1000}k' for k in r['window'])}, cost {r['cost'][target]:.3f}, "
            f"regret {r['regret'][target]:.4f} (noise {r['noise'][target]:.4f})")))
    return "\n".join(lines)


def plot(rows: Sequence[Mapping[str, Any]], datasets: Sequence[str], target: str, path: Path) -> None:
    """Cost (log) against regret at ``target``, one panel per dataset, the frontier as a line; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, len(datasets), figsize=(6.0 * len(datasets), 4.5), squeeze=False)
    markers = {1: "o", 2: "s", 3: "^"}
    colours = dict(zip(SIZES, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
    for ax, dataset in zip(axes[0], datasets, strict=True):
        ok = [r for r in rows if r["dataset"] == dataset and r["status"] == "answered"]
        for r in ok:
            ax.scatter(r["cost"][target], r["regret"][target], marker=markers[r["checkpoints"]],
                       color=colours[r["size"]], alpha=0.7, s=28)
        front = sorted((r["cost"][target], r["regret"][target]) for r in ok if r["frontier"])
        if front:
            ax.step(*zip(*front, strict=True), where="post", color="black", lw=1, label="frontier")
            ax.scatter(*zip(*front, strict=True), facecolors="none", edgecolors="black", s=90, lw=1.2)
        if ok:
            ax.axhline(ok[0]["noise"][target], color="grey", ls=":", lw=1, label=f"checkpoint noise at {target}")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(f"{dataset}: regret at {target}/30k")
        ax.set_xlabel(f"cost (x one {target}/30k run) = mixtures·(N_s/N_S)·(k/30k)")
        ax.set_ylabel("regret (nats above the best mix there)")
    handles = axes[0][-1].get_legend_handles_labels()[0]
    handles += [plt.Line2D([], [], ls="", marker="o", color=c, label=s) for s, c in colours.items()]
    handles += [plt.Line2D([], [], ls="", marker=m, color="grey", label=f"{n} checkpoint(s)") for n, m in markers.items()]
    axes[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)


def run(data: Path, out: Path | None, subset: Subset = Subset(), workers: int = 1) -> dict[str, Any]:
    """Every choosing cell of ``subset``, scored, the frontier marked, the tables printed and written."""
    t0 = time.perf_counter()
    jobs = [(data, dataset, size, subset) for dataset in subset.datasets for size in subset.sizes]
    if workers > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(workers) as pool:
            done = pool.map(score_size, jobs, chunksize=1)
    else:
        done = [score_size(j) for j in jobs]
    rows = [r for group in done for r in group]
    target = max(subset.sizes, key=SIZES.__getitem__)
    for dataset in subset.datasets:
        mark_frontier([r for r in rows if r["dataset"] == dataset], target)
    seconds = time.perf_counter() - t0
    tables = "\n\n".join(format_table(d, [r for r in rows if r["dataset"] == d], target) for d in subset.datasets)
    print(tables)
    doc = {"date": time.strftime("%Y-%m-%d"), "seconds": seconds, "formula": COST_FORMULA, "target": target,
           "subset": {"datasets": subset.datasets, "sizes": subset.sizes, "steps": subset.steps,
                      "checkpoints": subset.checkpoints}, "rows": rows}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "frontier.md", f"# Cost–regret frontier ({doc['date']}, {seconds:.0f} s)\n\n"
                                               f"{tables}\n")
        plot(rows, subset.datasets, target, out / "frontier.png")
    write_results(out, doc)
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    p = data_arguments(__doc__, DEFAULT_OUT)
    p.add_argument("--workers", type=int, default=1, help="processes (one dataset and model size each)")
    p.add_argument("--quick", action="store_true", help="Pile-5, 70M and 410M, checkpoints 10k/20k/30k, 1-2 per "
                                                        "design (module doc)")
    args = p.parse_args(argv)
    data = found_data(args.data)
    if data is None:
        return 2
    run(data, Path(args.out), QUICK if args.quick else Subset(), args.workers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

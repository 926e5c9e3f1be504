"""The two-budget default scored on every two-checkpoint window of the published Data Mixing Laws runs.

The paper's design, and the runner's default, has proxies at two budgets; there the product's
``auto`` answer cannot be backtested, and this script measures what it costs or gains. Reads the
third-party runs from ``../shared/external_runs`` at run time (evaluation only, never copied into the
repository; its PROVENANCE.md) and writes ``--out/results.json`` (default
``bench_out/two_budget``, git-ignored); prints the table of docs/solver.md:

    python benchmarks/eval_two_budget.py [--data ../shared/external_runs] [--out bench_out/two_budget]
                                         [--limit N] [--workers 2] [--checkpoints 3]

PROTOCOL (fixed before any result was looked at, 2026-11-27)
-----------------------------------------------------------
For each dataset (RedPajama: 7 domains, Pile-5: 5) and model size, the checkpoints up to 30k steps
that at least 12 mixtures reached; every pair ``(a, b)`` of them 2k to 8k steps apart is one window
(the two proxy budgets, as a user writes them: one table per checkpoint, every run's tokens its
shares x step x 4096 x 256, the target ``pile_weighted_loss``), and every later checkpoint ``c`` is a
target. The mixtures used are those run at a, b and c. For each (window, target) the product is
called once, as the CLI and the runner call it: ``project_all([table_a, table_b], tokens_c)`` with its
defaults (a window's per-budget optima are computed by its first call and passed to the others,
as the runner passes its DDO fits; a window whose tables are too small for a fit each is
recomputed every call).

Scored at c, among the mixtures run there (the answer is scored by the run nearest to it, L1 over
the shares): the regret of the default's mix (nats above the best run at c) against the regret of
the best mix observed at b (the observed candidate, the baseline the default must never lose to), and
the same for the two-budget rule that ``auto`` used before 2026-11-27 (robust whenever some share
trend lies beyond 2 sd, :func:`autoscale_data.solver.select.trend_evidence`, recomputed from the same
call's robust projection). A difference within the checkpoint noise of the model size (the median
RMS residual of a power law in steps through each mixture's checkpoints 10k-30k, as
``eval_published_runs.py``) is a tie.

``--checkpoints 3`` (PROTOCOL fixed 2026-11-28, before its results were looked at): the three-budget
design, where ``auto`` backtests. Per dataset and model size, every window of three checkpoints
``a < b < c`` between 10k and 20k steps with equal gaps (``b - a == c - b``, 2k to 5k steps; the
runner's ``extra_budget`` adds one budget below two, this is its analogue on checkpoints), the target
30k steps, the mixtures run at all four. One ``project_all([table_a, table_b, table_c], tokens_30k)``
call each, scored as above against the best mix observed at c; the rows also say how the backtest
scored each candidate (``law`` or ``nearest_run``: the published tables are runs of any mixtures, not
DDO designs, so the nearest run scores them). No rule before exists for three budgets (its columns
are ``-``).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # small matrices: threads only contend
    os.environ.setdefault(_var, "1")

import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from eval_published_runs import (  # noqa: E402
    TOKENS_PER_STEP,
    _budget,
    data_arguments,
    found_data,
    load_mixinglaws,
    nearest,
    noise_floor,
    write_results,
)

from autoscale_data.solver.projections import project_all  # noqa: E402
from autoscale_data.solver.scores import CandidateError  # noqa: E402
from autoscale_data.solver.select import trend_evidence  # noqa: E402
from autoscale_data.solver.vocabulary import OBSERVED, ROBUST  # noqa: E402

DEFAULT_OUT = REPO / "bench_out" / "two_budget"
MIN_MIXTURES = 12
GAP = (2_000, 8_000)
LAST_STEP = 30_000
DATASETS = ("redpajama", "pile5")


def windows(curves: Mapping[str, Mapping[int, float]]) -> list[tuple[int, int, list[int]]]:
    """``[(a, b, [later checkpoints])]`` of one model size (the protocol)."""
    steps = sorted(s for s in {s for c in curves.values() for s in c}
                   if s <= LAST_STEP and sum(1 for c in curves.values() if s in c) >= MIN_MIXTURES)
    out = []
    for i, a in enumerate(steps):
        for b in steps[i + 1:]:
            later = [c for c in steps if c > b]
            if GAP[0] <= b - a <= GAP[1] and later:
                out.append((a, b, later))
    return out


EQUAL_GAPS = (2_000, 5_000)
FIRST_STEP, LAST_FIT, TARGET_3 = 10_000, 20_000, 30_000


def windows3(curves: Mapping[str, Mapping[int, float]]) -> list[tuple[tuple[int, ...], list[int]]]:
    """``[((a, b, c), [target])]`` of one model size (the ``--checkpoints 3`` protocol)."""
    steps = {s for s in {s for c in curves.values() for s in c}
             if sum(1 for c in curves.values() if s in c) >= MIN_MIXTURES}
    if TARGET_3 not in steps:
        return []
    fit = sorted(s for s in steps if FIRST_STEP <= s <= LAST_FIT)
    return [((a, a + g, a + 2 * g), [TARGET_3]) for a in fit for g in range(EQUAL_GAPS[0], EQUAL_GAPS[1] + 1, 1_000)
            if a + g in fit and a + 2 * g in fit]


def _regret(weights: Mapping[str, float], domains: Sequence[str], at_w: np.ndarray, at_y: np.ndarray) -> float:
    w = np.array([float(weights[d]) for d in domains])
    return float(at_y[nearest(w, at_w)] - at_y.min())


def score_window(dataset: str, size: str, domains: Sequence[str], curves: Mapping[str, Mapping[int, float]],
                 weights: Mapping[str, np.ndarray], fit: Sequence[int], targets: Sequence[int],
                 noise: float) -> list[dict[str, Any]]:
    """One product call per target of the window of checkpoints ``fit``, scored at the target (module doc)."""
    rows = []
    optima = None
    for c in targets:
        mixes = sorted(m for m, cv in curves.items() if {*fit, c} <= set(cv))
        if len(mixes) < MIN_MIXTURES:
            continue
        tables = [_budget(curves, weights, mixes, s).table(domains) for s in fit]
        at = _budget(curves, weights, mixes, c)
        t0 = time.perf_counter()
        row: dict[str, Any] = {"dataset": dataset, "size": size, "window": list(fit), "target": c,
                               "mixtures": len(mixes), "noise": noise}
        try:
            p = project_all(tables, c * TOKENS_PER_STEP, optima=optima)
        except ValueError as exc:
            row.update(status="refused", reason=str(exc)[:300])
            rows.append(row)
            continue
        if optima is None and not any("a fit per budget is not possible" in n for n in p.notes):
            optima = list(p.optima)
        observed = _regret(p.observed.weights, domains, at.weights, at.loss)
        default = _regret(p.weights, domains, at.weights, at.loss)
        if len(fit) == 2:
            old = OBSERVED
            if not isinstance(p.robust, (CandidateError, type(None))) and trend_evidence(p.robust)[0]:
                old = ROBUST
            old_regret = _regret(p.robust.weights, domains, at.weights, at.loss) if old == ROBUST else observed
            row.update(old_rule=old, old_regret=old_regret)
        else:
            row.update(rule=p.selection.rule, scores={n: e.score or e.note for n, e in
                                                      p.selection.backtest.items()})
        row.update(status="answered", chosen=p.used, reason=p.selection.reason, predicted={n: e.to_json() for n, e in p.selection.predicted.items()},
                   regret=default, observed_regret=observed,
                   candidates={n: _regret(getattr(p, n).weights, domains, at.weights, at.loss)
                               for n in ("geometric", "joint", "robust") if not isinstance(getattr(p, n), (CandidateError, type(None)))},
                   seconds=time.perf_counter() - t0)
        rows.append(row)
    return rows


def _verdict(diff: float, noise: float) -> str:
    return "tie" if abs(diff) <= noise else ("worse" if diff > 0 else "better")


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean regrets, how often a projection was chosen, and the verdicts against the observed mix."""
    ok = [r for r in rows if r["status"] == "answered"]
    out: dict[str, Any] = {"points": len(rows), "answered": len(ok), "refused": len(rows) - len(ok)}
    if not ok:
        return out
    for key, regret, chosen in (("default", "regret", "chosen"), ("old_rule", "old_regret", "old_rule")):
        if any(regret not in r for r in ok):  # three checkpoints: no rule before
            continue
        diffs = [r[regret] - r["observed_regret"] for r in ok]
        verdicts = [_verdict(d, r["noise"]) for d, r in zip(diffs, ok, strict=True)]
        fired = [r for r in ok if r[chosen] != OBSERVED]
        out[key] = {"mean_regret": float(np.mean([r[regret] for r in ok])),
                    "projection_chosen": len(fired),
                    "gain_when_chosen": (float(np.mean([r["observed_regret"] - r[regret] for r in fired]))
                                         if fired else None),
                    "worse_beyond_noise": verdicts.count("worse"), "better_beyond_noise": verdicts.count("better")}
    out["observed"] = {"mean_regret": float(np.mean([r["observed_regret"] for r in ok]))}
    return out


def format_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The markdown table of docs/solver.md."""
    lines = ["| dataset, size | points | observed (N2's best) | default: regret | chosen projection | worse / better "
             "beyond noise | rule before: regret | its projections | worse / better |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        if "default" not in s:
            lines.append(f"| {name} | {s['points']} | - | - | - | - | - | - | - |")
            continue
        d, o = s["default"], s.get("old_rule")

        def gain(x: Mapping[str, Any]) -> str:
            return f"{x['projection_chosen']}" + ("" if x["gain_when_chosen"] is None
                                                  else f" (gain {x['gain_when_chosen']:+.4f})")

        before = "- | - | -" if o is None else (f"{o['mean_regret']:.4f} | {gain(o)} | {o['worse_beyond_noise']} / "
                                                f"{o['better_beyond_noise']}")
        lines.append(f"| {name} | {s['answered']} | {s['observed']['mean_regret']:.4f} | {d['mean_regret']:.4f} | "
                     f"{gain(d)} | {d['worse_beyond_noise']} / {d['better_beyond_noise']} | {before} |")
    return "\n".join(lines)


def _windows(curves: Mapping[str, Mapping[int, float]], checkpoints: int) -> list[tuple[tuple[int, ...], list[int]]]:
    return windows3(curves) if checkpoints == 3 else [((a, b), later) for a, b, later in windows(curves)]


def score_group(job: tuple[Path, str, str, int | None, int]) -> tuple[str, list[dict[str, Any]]]:
    """Every window of one dataset and model size (at most ``limit``)."""
    data, dataset, size, limit, checkpoints = job
    domains, curves, weights, _ = load_mixinglaws(data, dataset)
    t0 = time.perf_counter()
    found = _windows(curves[size], checkpoints)[:limit]
    noise = noise_floor(curves[size])
    rows = [r for fit, later in found
            for r in score_window(dataset, size, domains, curves[size], weights, fit, later, noise)]
    print(f"[two-budget] {dataset} {size}: {len(found)} windows, {len(rows)} points ({time.perf_counter() - t0:.0f} s)",
          file=sys.stderr, flush=True)
    return f"{dataset} {size}", rows


def run(data: Path, out: Path | None, limit: int | None = None, workers: int = 1,
        checkpoints: int = 2) -> dict[str, Any]:
    """Every window of ``checkpoints`` checkpoints of both datasets (at most ``limit`` windows per model size),
    summarised and written."""
    t0 = time.perf_counter()
    jobs = []
    for dataset in DATASETS:
        _, curves, _, _ = load_mixinglaws(data, dataset)
        jobs += [(data, dataset, size, limit, checkpoints) for size in sorted(curves, key=lambda s: float(s[:-1]) * (
            1e3 if s.endswith("B") else 1)) if _windows(curves[size], checkpoints)]
    if workers > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(workers) as pool:
            done = pool.map(score_group, jobs, chunksize=1)
    else:
        done = [score_group(j) for j in jobs]
    groups = dict(done)
    rows = [r for g in groups.values() for r in g]
    summary = {name: summarise(g) for name, g in groups.items()}
    summary["all"] = summarise(rows)
    doc = {"date": time.strftime("%Y-%m-%d"), "seconds": time.perf_counter() - t0, "checkpoints": checkpoints,
           "summary": summary, "rows": rows}
    print(format_table(summary))
    write_results(out, doc)
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    p = data_arguments(__doc__, DEFAULT_OUT)
    p.add_argument("--limit", type=int, default=None, help="at most this many windows per model size (a quick look)")
    p.add_argument("--workers", type=int, default=1, help="processes (one dataset and model size each)")
    p.add_argument("--checkpoints", type=int, choices=(2, 3), default=2,
                   help="checkpoints per window: 2 (the paper's design) or 3 (a backtest; module doc)")
    args = p.parse_args(argv)
    data = found_data(args.data)
    if data is None:
        return 2
    run(data, Path(args.out), args.limit, args.workers, args.checkpoints)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

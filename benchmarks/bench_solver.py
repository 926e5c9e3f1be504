"""Solver benchmark: DDO fit + optimise (m = 7), projection, 1000 bootstrap fits.

Prints the median of repeated runs for each task, the target from the issue, and a ratio against a
baseline measured in the same run:

* DDO: per-domain ``scipy.optimize.curve_fit`` (unbounded, as the public notebooks) + SLSQP.
* projection: the paper's Algorithm 2 loop (multiply by the ratio^δ, δ = 0.01, until the target).
* bootstrap: 1000 × the per-replicate cost of calling ``fit_ddo`` one replicate at a time.

Run: ``python benchmarks/bench_solver.py`` (about a minute on a 2-core CPU).
"""

from __future__ import annotations

import platform
import statistics
import time
import warnings

import numpy as np
from scipy.optimize import curve_fit, minimize

from autoscale_data.solver import bootstrap_ddo, fit_ddo, project
from autoscale_data.solver.design import read_design, run_objective
from autoscale_data.solver.synthetic import synthetic_ddo_runs

DOMAINS = ["web", "c4", "github", "wiki", "books", "arxiv", "stack"]
BASE = {d: 1e6 for d in DOMAINS}
A = np.array([0.8, 1.6, 2.4, 3.2, 4.0, 4.8, 5.6])
B = np.array([0.3, 0.5, 0.8, 1.0, 0.4, 0.6, 1.2])


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _baseline_ddo(runs) -> np.ndarray:
    design = read_design(runs)
    y = run_objective(runs, "mean_ppl")
    y = y / y[design.base_runs].mean()
    pars = []
    for j in range(len(design.domains)):
        idx = design.domain_points(j)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p, _ = curve_fit(lambda x, a, b, c: (x + a) ** (-b) + c, design.multiplier[idx], y[idx],
                             p0=[1.0, 0.5, 0.0], maxfev=20000)
        pars.append(p)
    a, b = np.array([p[0] for p in pars]), np.array([p[1] for p in pars])
    m = len(a)
    r = minimize(lambda x: np.sum(np.abs(x + a) ** (-b)), np.ones(m), method="SLSQP",
                 bounds=[(0.0, m)] * m, constraints=({"type": "eq", "fun": lambda x: x.sum() - m},),
                 options={"ftol": 1e-12})
    return r.x / m


def _baseline_projection(a1: np.ndarray, a2: np.ndarray, target: float, delta: float = 0.01) -> np.ndarray:
    cur, step = a2.copy(), (a2 / a1) ** delta
    while cur.sum() < target:
        cur = cur * step
    return cur / cur.sum()


def main() -> None:
    runs = synthetic_ddo_runs(BASE, A, B)  # 2m + 1 = 15 runs
    rows = []

    t_ddo = _median_time(lambda: fit_ddo(runs), 15)
    t_ddo_ref = _median_time(lambda: _baseline_ddo(runs), 15)
    rows.append(("DDO fit + optimise, m=7 (15 runs)", t_ddo, 0.100, t_ddo_ref, "curve_fit + SLSQP"))

    r1 = fit_ddo(runs, min_weight=0.02)
    big = {d: 4 * v for d, v in BASE.items()}
    r2 = fit_ddo(synthetic_ddo_runs(big, A / 4, B), min_weight=0.02)
    scales = [r1, r2]
    target = 1e10
    t_proj = _median_time(lambda: project(scales, target), 50)
    a1 = np.array([r1.allocation_tokens[d] for d in DOMAINS])
    a2 = np.array([r2.allocation_tokens[d] for d in DOMAINS])
    t_proj_ref = _median_time(lambda: _baseline_projection(a1, a2, target), 50)
    rows.append(("projection to 1e10 tokens, m=7", t_proj, 0.010, t_proj_ref, "Algorithm 2 loop, delta=0.01"))

    seeds = synthetic_ddo_runs(BASE, A, B, seeds=3, noise=0.01)  # 45 runs
    t_boot = _median_time(lambda: bootstrap_ddo(seeds, n_boot=1000), 3)
    t_one = _median_time(lambda: fit_ddo(seeds), 5)
    rows.append(("1000 bootstrap fits, m=7 (45 runs)", t_boot, 10.0, 1000 * t_one, "1000 x fit_ddo"))

    print(f"solver benchmark — {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"median of repeated runs")
    print(f"{'task':<38} {'median':>10} {'target':>8} {'baseline':>10} {'speed-up':>9}  baseline")
    for name, t, goal, ref, what in rows:
        ok = "ok" if t <= goal else "SLOW"
        print(f"{name:<38} {t * 1e3:8.2f}ms {goal * 1e3:6.0f}ms {ref * 1e3:8.2f}ms {ref / t:8.2f}x  {what}  [{ok}]")


if __name__ == "__main__":
    main()

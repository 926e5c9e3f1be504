"""Every projection and baseline tested on published multi-scale mixture runs (Data Mixing Laws, RegMix).

Reads the third-party runs from ``../shared/external_runs`` (relative to the repository root; see its
PROVENANCE.md: evaluation only, never copied into this repository) and writes ``results.json`` to
``--out`` (default ``bench_out/published_runs``, git-ignored); prints one table per protocol. CPU,
a few minutes (BLAS is kept to one thread):

    python benchmarks/eval_published_runs.py [--data ../shared/external_runs] [--out bench_out/published_runs]

PROTOCOLS (fixed before any result was looked at, 2026-11-25)
------------------------------------------------------------
Target: Data Mixing Laws: the paper's weighted Pile validation loss (``pile_weighted_loss``);
RegMix: the Pile-CC validation loss (RegMix's own target). A run's tokens per domain are its
mixture weights (normalised to sum 1) times its tokens (mixinglaws: steps x 4096 x 256).

* ``budget``: per dataset (redpajama: 7 domains, pile5: 5) and model size (70M, 160M, 305M, 410M),
  fit on the checkpoints from 10k to 18k steps that every mixture has (redpajama: 10k, 12k, 13k, 14k,
  16k, 18k; pile5: no 13k), predict the held-out 27k and 30k checkpoints.
* ``budget-short``: the same, fit on 10k-14k (steps of 1.9-3x to the held-out points).
* ``size``: fit the 30k checkpoints of the smaller models, predict the larger ones at 30k
  ({70M,160M,305M} -> 410M; {70M,160M} -> 305M and 410M). The token laws have no model-size term:
  they are given the budget ``tokens x params / 70M`` (they assume a k-times larger model is worth
  k times the tokens of every domain); the power law of the mixing-laws pipeline is fitted in
  parameters instead of steps.
* ``regmix-60m``: fit the 1M-parameter runs (512 + 256 mixtures, 1B tokens), predict the same 256
  mixtures at 60M parameters (1B tokens).
* ``regmix-1b``: fit the same 1M runs, predict the 64 other mixtures at 1B parameters (25B tokens).
  With a single fitted budget the joint law, the geometric projection and the power law are not
  applicable (reported as n/a).

Only mixtures with every needed checkpoint are used. The product is called once per held-out point,
as a user calls it: ``solver.project_all(tables, heldout_tokens)`` with its defaults (what
``autoscale-data project --runs ...`` and the runner run); this script adds only data loading and
scoring. From that one call:

* ``default``: the mix the product answers with (``method="auto"``: the best mix observed at the
  largest fitted budget or a projection, chosen by the product from the fit points; which and why
  are in results.json; weights only).
* ``joint``: the product's joint law ``L(n) = Σ_i A_i((N0_i + n_i)/s_i)^-γ_i + ℓ`` fitted to all fit
  points; predicts every held-out loss. ``joint-opt``: that law's optimum at the held-out budget.
* ``geometric``: the product's Theorem-1 path (through each fitted budget's optimum: per budget, or
  the joint law's when a budget has too few runs for a fit of its own; a domain an optimum leaves
  out is handled by the product, see docs/solver.md), evaluated at the held-out budget (weights only).
* ``robust``: the product's path with each domain's share trend shrunk by its uncertainty (weights only).

Comparison baselines (not the product; each fitted on the fit points only):

* ``steps``: a power law per mixture in the budget axis, ``L_m(N) = E_m + B_m N^-β`` with one shared
  exponent (the first stage of the Data Mixing Laws pipeline); predicts its own mixtures only.
* ``mixlaw+steps``: that paper's pipeline: per validation domain (the 22 Pile domains of the
  mixinglaws data, weighted as in its ``valid_weight.json``), the power law in steps per mixture
  predicts the held-out loss, the mixing law ``c + k exp(t·w)`` is fitted to those predictions and
  evaluated at every held-out mixture; the target is their weighted sum. RegMix (one fitted budget,
  one target column): the mixing law fitted to the observed Pile-CC losses.
* ``law@last``: the same token law fitted to the largest fitted budget alone
  (:func:`autoscale_data.solver.contrib.fit_budget_law` with its defaults; needs more runs than its
  3m+1 parameters).
* ``regmix``: RegMix-style linear regression of the loss on the weights at the largest fitted budget
  (LightGBM is not a dependency).
* ``best-observed``: the loss observed at the largest fitted budget, used as is (a mixture not run
  there takes its nearest run's loss); the baseline to beat (the product's ``observed`` candidate).
* ``natural``: the default RedPajama mix (run 999 of the mixinglaws data; n/a elsewhere) and
  ``uniform`` (weights only).

Metrics at every held-out point: MAE of the predicted loss over the mixtures (nats), its bias
(predicted - actual), Spearman ρ of predicted vs actual, and the regret of the recommended mix among
the available ones (nats above the best, and its rank, 1 = best). A method that predicts losses
recommends its lowest prediction; a method that only gives weights is scored by the available mixture
nearest to them (L1; marked ``~`` in the tables). Noise: the checkpoint-to-checkpoint noise of the
point's model size, the median over mixtures of the RMS residual of the per-mixture power law fitted
to all of its checkpoints 10k-30k; a regret (or a difference of regrets) at or below it is a tie.
RegMix has no checkpoints: noise 0 there.

``cli``: every window of 2 or 3 consecutive checkpoints in 10k-20k, per dataset and model size, written
as a user writes them (one CSV per checkpoint in a temporary directory, every run at that step with
its raw shares, which sum to 1.02 for run 999) and given to ``autoscale-data project --runs ...
--target-tokens 3.1e10 --json``: answered (and what was chosen), refused (the error) or failed.

Caveat: checkpoints are points inside one run with an unpublished learning-rate schedule, so the loss
at 27k/30k includes the schedule's late drop, which no law in tokens models; the held-out points
are therefore not runs trained for 27k/30k steps, and an absolute-loss error at them mixes both.
"""

from __future__ import annotations

import os

# The fits use small matrices: BLAS threads only contend (one RegMix fit took 9 s single-threaded and
# over 3 minutes with two OpenBLAS threads on the busy 2-core machine). Set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from scipy.optimize import minimize_scalar  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autoscale_data._io import atomic_write_text  # noqa: E402
from autoscale_data.solver.joint import fit_budget_law  # noqa: E402
from autoscale_data.solver.projections import project_all  # noqa: E402
from autoscale_data.solver.regression import fit_mixing_law  # noqa: E402
from autoscale_data.solver.runs import Run, RunTable  # noqa: E402
from autoscale_data.solver.scores import CandidateError  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "external_runs"
DEFAULT_OUT = REPO / "bench_out" / "published_runs"
TOKENS_PER_STEP = 4096 * 256
SIZES = {"70M": 70e6, "160M": 160e6, "305M": 305e6, "410M": 410e6}
FIT_RANGES = {"budget": (10_000, 18_000), "budget-short": (10_000, 14_000)}  # checkpoints used, inclusive
HELDOUT_STEPS = (27_000, 30_000)
NOISE_STEPS = (10_000, 12_000, 13_000, 14_000, 16_000, 18_000, 20_000, 22_000, 24_000, 27_000, 30_000)
BASELINE = "best-observed"
DEFAULT = "default"
WEIGHT_ONLY = (DEFAULT, "joint-opt", "geometric", "robust", "natural", "uniform")
METHODS = (DEFAULT, "joint", "joint-opt", "geometric", "robust", "steps", "mixlaw+steps", "law@last", "regmix", BASELINE,
           "natural", "uniform")


@dataclass
class Budget:
    """The runs of one budget: ids, weights (R, m) and the target loss (R,)."""

    tokens: float
    ids: list[str]
    weights: np.ndarray
    loss: np.ndarray
    axis: float = 0.0  # the power law's variable (steps or parameters); tokens when 0
    per_domain: np.ndarray | None = None  # (R, V) validation losses whose weighted sum is ``loss``

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float64)
        self.weights = self.weights / self.weights.sum(axis=1, keepdims=True)
        self.loss = np.asarray(self.loss, dtype=np.float64)
        if not self.axis:
            self.axis = self.tokens

    def table(self, domains: Sequence[str]) -> RunTable:
        return RunTable([Run(i, dict(zip(domains, (w * self.tokens).tolist(), strict=True)), {"target": y})
                         for i, w, y in zip(self.ids, self.weights, self.loss, strict=True)])


@dataclass
class Case:
    """One held-out point: fit budgets, the held-out budget, noise floor and a default mix."""

    name: str
    protocol: str
    domains: tuple[str, ...]
    fit: list[Budget]
    heldout: Budget
    noise: float
    natural: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)
    val_weights: np.ndarray | None = None  # (V,) weights of the per-domain losses in the target


# ----------------------------------------------------------------------------------------- methods
def step_law(budgets: Sequence[Budget], at: float, all_at: Sequence[float] | None = None) -> dict[str, Any]:
    """Per mixture ``E + B x^-β`` with one shared β over the mixtures run at every budget; predictions at
    ``at`` (or, with ``all_at``, an array of predictions at each of those points per mixture)."""
    common = sorted(set.intersection(*(set(b.ids) for b in budgets)))
    if len(budgets) < 2 or not common:
        raise ValueError("needs >= 2 fitted budgets with the same mixtures")
    x = np.array([b.axis for b in budgets])
    y = np.array([[b.loss[b.ids.index(i)] for b in budgets] for i in common])  # (M, K)
    xs = x / x[0]

    def solve(log_beta: float) -> tuple[float, np.ndarray]:
        f = xs ** -math.exp(log_beta)
        design = np.stack([np.ones_like(f), f], axis=1)
        coef, *_ = np.linalg.lstsq(design, y.T, rcond=None)  # (2, M)
        return float(((design @ coef - y.T) ** 2).sum()), coef

    best = minimize_scalar(lambda lb: solve(lb)[0], bounds=(math.log(0.01), math.log(5.0)), method="bounded",
                           options={"xatol": 1e-6})
    _, coef = solve(float(best.x))
    beta = math.exp(float(best.x))
    if all_at is not None:
        f = (np.asarray(all_at) / x[0]) ** -beta
        return {i: coef[0, k] + coef[1, k] * f for k, i in enumerate(common)}
    pred = coef[0] + coef[1] * (at / x[0]) ** -beta
    return dict(zip(common, pred.tolist(), strict=True))


def nearest(weights: np.ndarray, available: np.ndarray) -> int:
    """Index of the available mixture nearest (L1) to ``weights``."""
    return int(np.argmin(np.abs(available - weights[None]).sum(axis=1)))


_CACHE: dict[tuple[str, int], tuple[Any, Any]] = {}  # fits by the id of their (kept-alive) fit points


def method_outputs(case: Case) -> dict[str, dict[str, Any]]:
    """Each method's predictions (held-out order) and/or weights, or the reason it does not apply."""
    dom, fit, ho = case.domains, case.fit, case.heldout
    last = fit[-1]
    out: dict[str, dict[str, Any]] = {}

    def attempt(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            out[name] = fn()
        except ValueError as exc:
            out[name] = {"error": str(exc).splitlines()[0][:160]}

    # The product's answer and every candidate beside it: one call of solver.project_all with its defaults
    # (what `autoscale-data project --runs ...` and the runner do); nothing of the method is done here.
    product: dict[str, Any] = {}
    try:
        product["p"] = project_all([b.table(dom) for b in fit], ho.tokens)
    except ValueError as exc:
        product["refused"] = str(exc).splitlines()[0][:300]
    except Exception as exc:  # noqa: BLE001 - a failure of the product is counted, not hidden
        product["failed"] = f"{type(exc).__name__}: {exc}"[:300]
    out["_status"] = product

    def answer() -> Any:
        if "p" not in product:
            raise ValueError(product.get("refused") or product.get("failed"))
        return product["p"]

    def part(name: str) -> Any:
        value = getattr(answer(), name)
        if isinstance(value, CandidateError) or value is None:
            raise ValueError(value.error if value else f"{name} not computed")
        return value

    def default() -> dict[str, Any]:
        p = answer()
        return {"weights": np.array([p.weights[d] for d in dom]), "chosen": p.used, "reason": p.selection.reason,
                "rule": p.selection.rule}

    attempt(DEFAULT, default)

    def joint() -> dict[str, Any]:
        j = part("joint")
        pred = np.array([j.predict(dict(zip(dom, w * ho.tokens, strict=True))) for w in ho.weights])
        return {"pred": pred, "identified": j.identifiability.identified,
                "spread": j.identifiability.spread, "aar": j.aar, "floor": j.floor}

    attempt("joint", joint)
    attempt("joint-opt", lambda: {"weights": np.array([part("joint").weights[d] for d in dom])})

    def geometric() -> dict[str, Any]:
        g = part("geometric")
        return {"weights": np.array([g.weights[d] for d in dom]), "t": g.t}

    attempt("geometric", geometric)

    def robust() -> dict[str, Any]:
        r = part("robust")
        return {"weights": np.array([r.weights[d] for d in dom]), "moved": r.moved["total_variation"],
                "mean_shrink": float(np.mean(list(r.shrink.values())))}

    attempt("robust", robust)

    def steps() -> dict[str, Any]:
        pred = step_law(fit, ho.axis)
        missing = [i for i in ho.ids if i not in pred]
        if missing:
            raise ValueError(f"{len(missing)} held-out mixtures were not run at the fitted budgets")
        return {"pred": np.array([pred[i] for i in ho.ids])}

    attempt("steps", steps)

    def mixlaw() -> dict[str, Any]:
        per_domain = case.val_weights is not None and all(b.per_domain is not None for b in fit)
        targets = ([(v, [Budget(b.tokens, b.ids, b.weights, b.per_domain[:, v], b.axis) for b in fit])
                    for v in range(len(case.val_weights))] if per_domain else [(None, fit)])
        total = np.zeros(len(ho.ids))
        for v, budgets in targets:
            if len(budgets) >= 2:
                pred = step_law(budgets, ho.axis)
                ids = sorted(pred)
                w = np.array([last.weights[last.ids.index(i)] for i in ids])
                y = np.array([pred[i] for i in ids])
            else:
                w, y = budgets[-1].weights, budgets[-1].loss
            c, k, t = fit_mixing_law(w, y, n_starts=4)
            p = c + k * np.exp(np.clip(ho.weights @ t, -50, 50))
            total += p if v is None else case.val_weights[v] * p
        return {"pred": total, "per_domain": per_domain}

    attempt("mixlaw+steps", mixlaw)

    def law_last() -> dict[str, Any]:
        key = ("law@last", id(last))
        if key not in _CACHE:
            _CACHE[key] = (last, fit_budget_law(last.table(dom)))
        f = _CACHE[key][1]
        pred = np.array([f.predict(dict(zip(dom, w * last.tokens, strict=True))) for w in ho.weights])
        return {"pred": pred}

    attempt("law@last", law_last)

    def regmix() -> dict[str, Any]:
        if last.weights.shape[0] < len(dom):
            raise ValueError("fewer runs than domains")
        coef, *_ = np.linalg.lstsq(last.weights, last.loss, rcond=None)
        return {"pred": ho.weights @ coef}

    attempt("regmix", regmix)

    def best_observed() -> dict[str, Any]:
        idx = [last.ids.index(i) if i in last.ids else nearest(w, last.weights)
               for i, w in zip(ho.ids, ho.weights, strict=True)]
        return {"pred": last.loss[idx]}

    attempt(BASELINE, best_observed)

    def natural() -> dict[str, Any]:
        if case.natural is None:
            raise ValueError("no default mix published for these runs")
        return {"weights": np.asarray(case.natural, dtype=np.float64)}

    attempt("natural", natural)
    attempt("uniform", lambda: {"weights": np.full(len(dom), 1.0 / len(dom))})
    return out


def score(case: Case, outputs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Metrics of every method at the held-out point (see the module doc)."""
    y = case.heldout.loss
    best = float(y.min())
    rows: dict[str, dict[str, Any]] = {}
    for name, o in outputs.items():
        if name.startswith("_"):
            continue
        if "error" in o:
            rows[name] = {"n/a": o["error"]}
            continue
        row: dict[str, Any] = {}
        if "pred" in o:
            pred = np.asarray(o["pred"], dtype=np.float64)
            row.update(mae=float(np.mean(np.abs(pred - y))), bias=float(np.mean(pred - y)),
                       rho=float(spearmanr(pred, y).statistic) if np.ptp(pred) > 0 else float("nan"))
            rec = int(np.argmin(pred))
            row["scored_by"] = "lowest prediction"
        else:
            rec = nearest(np.asarray(o["weights"]), case.heldout.weights)
            row["scored_by"] = "nearest mixture"
            row["weights"] = [float(v) for v in o["weights"]]
            row["distance_l1"] = float(np.abs(case.heldout.weights[rec] - o["weights"]).sum())
        row.update(recommended=case.heldout.ids[rec], regret=float(y[rec] - best),
                   rank=int(1 + np.sum(y < y[rec])))
        row["tie_with_best"] = bool(row["regret"] <= case.noise)
        for k in ("identified", "spread", "aar", "floor", "t", "moved", "mean_shrink"):
            if k in o:
                row[k] = float(o[k]) if not isinstance(o[k], bool) else o[k]
        for k in ("chosen", "reason", "rule"):
            if k in o:
                row[k] = o[k]
        rows[name] = row
    base = rows.get(BASELINE, {})
    for row in rows.values():
        if "regret" in row and "regret" in base:
            diff = row["regret"] - base["regret"]
            row["vs_baseline"] = "tie" if abs(diff) <= case.noise else ("worse" if diff > 0 else "better")
    return rows


def evaluate(case: Case) -> dict[str, Any]:
    """Fit every method on the case's fit points and score it at the held-out point."""
    t0 = time.perf_counter()
    outputs = method_outputs(case)
    rows = score(case, outputs)
    status = outputs["_status"]
    product = ({"status": "answered", "chosen": status["p"].used} if "p" in status else
               {"status": "refused", "reason": status["refused"]} if "refused" in status else
               {"status": "failed", "reason": status["failed"]})
    y = case.heldout.loss
    return {"name": case.name, "protocol": case.protocol, "domains": list(case.domains),
            "fit_budgets_tokens": [b.tokens for b in case.fit], "heldout_tokens": case.heldout.tokens,
            "mixtures": len(y), "loss_spread": float(np.ptp(y)), "noise": case.noise,
            "best_mixture": case.heldout.ids[int(np.argmin(y))], "methods": rows, "product": product,
            "seconds": time.perf_counter() - t0, **case.info}


def summarise(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method over the held-out points: mean ρ, mean MAE, mean regret, and how often its regret is
    worse than the baseline's by more than the noise (and by how much at most)."""
    out: dict[str, dict[str, Any]] = {}
    for m in METHODS:
        rows = [(r, r["methods"][m]) for r in results if "regret" in r["methods"].get(m, {})]
        if not rows:
            continue
        rhos = [x["rho"] for _, x in rows if "rho" in x and np.isfinite(x["rho"])]
        maes = [x["mae"] for _, x in rows if "mae" in x]
        excess = [x["regret"] - r["methods"][BASELINE]["regret"] for r, x in rows if "regret" in r["methods"][BASELINE]]
        worse = [e for (r, _), e in zip(rows, excess, strict=True) if e > r["noise"]]
        out[m] = {"points": len(rows), "mean_rho": float(np.mean(rhos)) if rhos else None,
                  "mean_mae": float(np.mean(maes)) if maes else None,
                  "mean_regret": float(np.mean([x["regret"] for _, x in rows])),
                  "worse_than_baseline": len(worse), "max_excess_regret": float(max(excess)) if excess else None,
                  "better_than_baseline": sum(1 for (r, _), e in zip(rows, excess, strict=True) if -e > r["noise"])}
    chosen: dict[str, list[float]] = {}
    for r in results:
        row = r["methods"].get(DEFAULT, {})
        if "chosen" in row and "regret" in r["methods"].get(BASELINE, {}):
            chosen.setdefault(row["chosen"], []).append(r["methods"][BASELINE]["regret"] - row["regret"])
    if DEFAULT in out:  # how often the default chose each candidate, and its mean gain over the baseline there
        out[DEFAULT]["chosen"] = {k: {"points": len(v), "mean_gain": float(np.mean(v))} for k, v in chosen.items()}
    return out


def product_status(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the product (``project_all`` with its defaults) answered the held-out points' fit tables."""
    counts = {k: sum(1 for r in results if r["product"]["status"] == k) for k in ("answered", "refused", "failed")}
    reasons = sorted({f"{r['name']}: {r['product']['reason']}" for r in results if "reason" in r["product"]})
    return {**counts, "reasons": reasons}


# ------------------------------------------------------------------------------- CLI on every table
CLI_CHECKPOINTS = (10_000, 12_000, 13_000, 14_000, 16_000, 18_000, 20_000)
CLI_TARGET = 3.1e10


def cli_windows(data: Path, tmp: Path) -> list[tuple[str, list[str]]]:
    """The published runs as a user writes them (one CSV per checkpoint: every run at that step, its raw
    shares x step x 4096 x 256 tokens, ``loss.pile``), and every window of 2 or 3 consecutive checkpoints
    in 10k-20k per dataset and model size: ``[(name, [csv paths])]``."""
    windows = []
    for dataset in ("redpajama", "pile5"):
        with open(data / "mixinglaws" / f"{dataset}_runs_total.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        wcols = [c for c in rows[0] if c.startswith("w_")]
        for size in sorted({r["model"] for r in rows}, key=lambda m: float(m[:-1]) * (1e3 if m[-1] == "B" else 1)):
            paths = []
            for step in CLI_CHECKPOINTS:
                at = [r for r in rows if r["model"] == size and int(r["step"]) == step]
                if not at:
                    continue
                path = tmp / f"{dataset}-{size}-{step // 1000}k.csv"
                with open(path, "w", newline="", encoding="utf-8") as fh:
                    w = csv.writer(fh)
                    w.writerow(["run", *(f"tokens.{c[2:]}" for c in wcols), "loss.pile"])
                    for r in at:
                        w.writerow([r["run_idx"], *(repr(float(r[c]) * step * TOKENS_PER_STEP) for c in wcols),
                                    r["pile_weighted_loss"]])
                paths.append(os.fspath(path))
            for k in (2, 3):
                for i in range(len(paths) - k + 1):
                    names = [Path(x).stem.rsplit("-", 1)[1] for x in paths[i:i + k]]
                    windows.append((f"{dataset} {size} {'+'.join(names)}", paths[i:i + k]))
    return windows


def run_cli(windows: Sequence[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """``autoscale-data project --runs ... --target-tokens 3.1e10 --json`` (the defaults) on each window:
    answered (and what was chosen), refused (the error) or failed (an exception)."""
    import contextlib
    import io

    from autoscale_data.cli import main as cli_main

    out = []
    for name, paths in windows:
        argv = ["project", *(a for x in paths for a in ("--runs", x)), "--target-tokens", f"{CLI_TARGET:g}", "--json"]
        stdout, stderr = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                rc = cli_main(argv)
        except Exception as exc:  # noqa: BLE001 - counted as a failure
            out.append({"name": name, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        row: dict[str, Any] = {"name": name, "seconds": time.perf_counter() - t0}
        if rc == 0:
            res = json.loads(stdout.getvalue())
            row.update(status="answered", chosen=res["method"], reason=(res.get("selection") or {}).get("reason", ""))
        elif rc == 2:
            row.update(status="refused", reason=stderr.getvalue().strip().splitlines()[-1][:300])
        else:
            row.update(status="failed", reason=f"exit status {rc}: {stderr.getvalue().strip()[-300:]}")
        out.append(row)
    return out


def format_cli(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per table window, then the counts."""
    lines = [f"\n== CLI: autoscale-data project --runs (one CSV per checkpoint) --target-tokens {CLI_TARGET:g} =="]
    for r in rows:
        what = r.get("chosen", "") if r["status"] == "answered" else r["reason"]
        lines.append(f"  {r['name']:<34} {r['status']:<9} {what}")
    counts = {k: sum(1 for r in rows if r["status"] == k) for k in ("answered", "refused", "failed")}
    chosen: dict[str, int] = {}
    for r in rows:
        if r["status"] == "answered":
            chosen[r["chosen"]] = chosen.get(r["chosen"], 0) + 1
    lines.append(f"  tables: {len(rows)}; answered {counts['answered']} ({chosen}), refused {counts['refused']}, "
                 f"failed {counts['failed']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ data
def _require(data: Path) -> None:
    if not (data / "mixinglaws").is_dir() or not (data / "regmix").is_dir():
        raise FileNotFoundError(
            f"published runs not found under {data} (expected mixinglaws/ and regmix/; see "
            "../shared/external_runs/PROVENANCE.md). Pass --data DIR.")


def load_mixinglaws(data: Path, dataset: str) -> tuple[tuple[str, ...], dict[str, dict[str, dict[int, float]]],
                                                       dict[str, np.ndarray], np.ndarray | None]:
    """``(domains, {size: {mix id: {step: loss}}}, {mix id: weights}, default mix)`` of one dataset."""
    path = data / "mixinglaws" / f"{dataset}_runs_total.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    wcols = [c for c in rows[0] if c.startswith("w_")]
    domains = tuple(c[2:] for c in wcols)
    curves: dict[str, dict[str, dict[int, float]]] = {}
    weights: dict[str, np.ndarray] = {}
    natural = None
    for r in rows:
        w = np.array([float(r[c]) for c in wcols])
        if r["run_idx"] == "999":
            natural = w / w.sum()
            continue
        if r["run_idx"] == "997":
            continue
        mix = "-".join(f"{v:.6g}" for v in w)
        weights[mix] = w
        curves.setdefault(r["model"], {}).setdefault(mix, {})[int(r["step"])] = float(r["pile_weighted_loss"])
    return domains, curves, weights, natural


def load_long(data: Path, dataset: str, weights: Mapping[str, np.ndarray]) -> tuple[
        tuple[str, ...], np.ndarray, dict[str, dict[str, dict[int, np.ndarray]]]]:
    """Per validation domain losses: ``(val domains, their target weights, {size: {mix: {step: (V,)}}})``."""
    with open(data / "mixinglaws" / "valid_weight.json", encoding="utf-8") as fh:
        vw = json.load(fh)
    with gzip.open(data / "mixinglaws" / f"{dataset}_runs_long.csv.gz", "rt", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    vals = tuple(sorted(vw))
    wcols = [c for c in rows[0] if c.startswith("w_")]
    raw: dict[tuple[str, str, int], dict[str, float]] = {}
    for r in rows:
        if r["run_idx"] in ("997", "999"):
            continue
        mix = "-".join(f"{float(r[c]):.6g}" for c in wcols)
        raw.setdefault((r["model"], mix, int(r["step"])), {})[r["val_domain"]] = float(r["loss"])
    out: dict[str, dict[str, dict[int, np.ndarray]]] = {}
    for (size, mix, step), losses in raw.items():
        if mix in weights and all(v in losses for v in vals):
            out.setdefault(size, {}).setdefault(mix, {})[step] = np.array([losses[v] for v in vals])
    return vals, np.array([vw[v] for v in vals]), out


def noise_floor(curves: Mapping[str, Mapping[int, float]]) -> float:
    """Median over mixtures of the RMS residual of one power law in steps fitted to its checkpoints."""
    res = []
    for c in curves.values():
        steps = [s for s in NOISE_STEPS if s in c]
        if len(steps) < 5:
            continue
        b = [Budget(s * TOKENS_PER_STEP, ["m"], np.ones((1, 1)), np.array([c[s]])) for s in steps]
        law = step_law(b, 0.0, all_at=[s * TOKENS_PER_STEP for s in steps])
        pred = law["m"]
        res.append(float(np.sqrt(np.mean((np.array(pred) - np.array([c[s] for s in steps])) ** 2))))
    return float(np.median(res)) if res else 0.0


def _budget(steps_loss: Mapping[str, Mapping[int, float]], weights: Mapping[str, np.ndarray], mixes: Sequence[str],
            step: int, scale: float = 1.0, axis: float = 0.0,
            long: Mapping[str, Mapping[int, np.ndarray]] | None = None) -> Budget:
    per = None
    if long is not None and all(m in long and step in long[m] for m in mixes):
        per = np.array([long[m][step] for m in mixes])
    return Budget(step * TOKENS_PER_STEP * scale, list(mixes), np.array([weights[m] for m in mixes]),
                  np.array([steps_loss[m][step] for m in mixes]), axis=axis, per_domain=per)


def mixinglaws_cases(data: Path) -> list[Case]:
    """The budget, budget-short and size protocols on both mixinglaws datasets."""
    cases = []
    for dataset in ("redpajama", "pile5"):
        domains, curves, weights, natural = load_mixinglaws(data, dataset)
        _, vweights, long = load_long(data, dataset, weights)
        noise = {size: noise_floor(curves[size]) for size in SIZES if size in curves}
        for protocol, (lo, hi) in FIT_RANGES.items():
            for size in SIZES:
                if size not in curves:
                    continue
                mixes = sorted(m for m, c in curves[size].items() if set(HELDOUT_STEPS) <= set(c))
                common = set.intersection(*(set(curves[size][m]) for m in mixes)) if mixes else set()
                fit_steps = sorted(st for st in common if lo <= st <= hi)
                if len(fit_steps) < 3:
                    continue
                fit = [_budget(curves[size], weights, mixes, s, long=long.get(size)) for s in fit_steps]
                for h in HELDOUT_STEPS:
                    cases.append(Case(f"{dataset} {size} {fit_steps[0] // 1000}-{fit_steps[-1] // 1000}k->{h // 1000}k",
                                      protocol, domains, fit, _budget(curves[size], weights, mixes, h), noise[size],
                                      natural if dataset == "redpajama" else None,
                                      {"dataset": dataset, "size": size}, vweights))
        step = 30_000
        for fit_sizes, targets in ((("70M", "160M", "305M"), ("410M",)), (("70M", "160M"), ("305M", "410M"))):
            for target in targets:
                sizes = (*fit_sizes, target)
                mixes = sorted(set.intersection(*({m for m, c in curves[s].items() if step in c} for s in sizes)))
                fit = [_budget(curves[s], weights, mixes, step, SIZES[s] / SIZES["70M"], SIZES[s], long.get(s))
                       for s in fit_sizes]
                ho = _budget(curves[target], weights, mixes, step, SIZES[target] / SIZES["70M"], SIZES[target])
                cases.append(Case(f"{dataset} {'+'.join(fit_sizes)}->{target} @30k", "size", domains, fit, ho,
                                  noise[target], natural if dataset == "redpajama" else None,
                                  {"dataset": dataset, "size": target}, vweights))
    return cases


def _read_csv(path: Path) -> tuple[list[str], dict[str, list[float]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = {r[0]: [float(v) for v in r[1:]] for r in reader if r}
    return header[1:], rows


def _regmix(data: Path, split: str, size: str, target: str) -> tuple[tuple[str, ...], list[str], np.ndarray, np.ndarray]:
    dcols, mix = _read_csv(data / "regmix" / f"{split}_mixture_{size}.csv")
    lcols, loss = _read_csv(data / "regmix" / f"{split}_pile_loss_{size}.csv")
    ids = sorted(set(mix) & set(loss), key=int)
    col = lcols.index(target)
    return (tuple(c.replace("train_the_pile_", "") for c in dcols), [f"{split}-{i}" for i in ids],
            np.array([mix[i] for i in ids]), np.array([loss[i][col] for i in ids]))


def regmix_cases(data: Path) -> list[Case]:
    """RegMix 1M -> 60M (same mixtures) and 1M -> 1B (other mixtures), Pile-CC target."""
    target = "metric/the_pile_pile_cc_val_loss"
    dom, ids_tr, w_tr, y_tr = _regmix(data, "train", "1m", target)
    _, ids_te, w_te, y_te = _regmix(data, "test", "1m", target)
    fit = Budget(1e9, ids_tr + ids_te, np.vstack([w_tr, w_te]), np.concatenate([y_tr, y_te]), axis=1e6)
    _, ids60, w60, y60 = _regmix(data, "test", "60m", target)
    _, ids1b, w1b, y1b = _regmix(data, "test", "1B", target)
    return [Case("regmix 1M->60M (same 256 mixtures)", "regmix-60m", dom, [fit], Budget(1e9, ids60, w60, y60, axis=60e6),
                 0.0, None, {"dataset": "regmix", "size": "60M"}),
            Case("regmix 1M->1B (64 other mixtures)", "regmix-1b", dom, [fit],
                 Budget(25e9, [f"1B-{i}" for i in ids1b], w1b, y1b, axis=1e9), 0.0, None,
                 {"dataset": "regmix", "size": "1B"})]


# ---------------------------------------------------------------------------------------- tables
def _cell(row: Mapping[str, Any]) -> str:
    if "n/a" in row:
        return "n/a"
    mark = "~" if row["scored_by"] == "nearest mixture" else ""
    rho = f"{row['rho']:+.2f}" if "rho" in row and np.isfinite(row["rho"]) else "  -  "
    mae = f"{row['mae']:.3f}" if "mae" in row else "  -  "
    tie = "=" if row["tie_with_best"] else " "
    return f"{mae} {rho} {row['regret']:.4f}{tie}#{row['rank']}{mark}"


def format_tables(results: Sequence[Mapping[str, Any]], summary: Mapping[str, Mapping[str, Any]]) -> str:
    """Text tables: per protocol, one line per held-out point (cells: MAE ρ regret#rank)."""
    lines = ["cell = MAE(nats) Spearman-ρ regret(nats)[= tie with best]#rank[~ scored by nearest mixture]"]
    for protocol in dict.fromkeys(r["protocol"] for r in results):
        lines.append(f"\n== {protocol} ==")
        for r in (x for x in results if x["protocol"] == protocol):
            lines.append(f"{r['name']}  ({r['mixtures']} mixtures, spread {r['loss_spread']:.3f}, noise {r['noise']:.4f})")
            for m in METHODS:
                if m in r["methods"]:
                    lines.append(f"    {m:>14}: {_cell(r['methods'][m])}")
    lines.append("\n== summary over all held-out points ==")
    lines.append(f"{'method':>14} {'points':>6} {'mean ρ':>7} {'mean MAE':>8} {'mean regret':>11} "
                 f"{'worse than best-observed':>24} {'max excess':>10}")
    for m, s in summary.items():
        if m.startswith("_"):
            continue
        rho = f"{s['mean_rho']:.3f}" if s["mean_rho"] is not None else "-"
        mae = f"{s['mean_mae']:.4f}" if s["mean_mae"] is not None else "-"
        exc = f"{s['max_excess_regret']:+.4f}" if s["max_excess_regret"] is not None else "-"
        lines.append(f"{m:>14} {s['points']:>6} {rho:>7} {mae:>8} {s['mean_regret']:>11.4f} "
                     f"{s['worse_than_baseline']:>24} {exc:>10}")
    if DEFAULT in summary:
        d = summary[DEFAULT]
        lines.append(f"\n{DEFAULT} (project_all with its defaults): better than best-observed beyond the noise at "
                     f"{d['better_than_baseline']} of {d['points']} points, worse at {d['worse_than_baseline']}; chosen: "
                     + ", ".join(f"{k} at {v['points']} (mean gain over best-observed {v['mean_gain']:+.4f})"
                                 for k, v in sorted(d.get("chosen", {}).items())))
    st = product_status(results)
    lines.append(f"product on the fit tables of the held-out points: answered {st['answered']}, refused "
                 f"{st['refused']}, failed {st['failed']}")
    lines += [f"    {x}" for x in st["reasons"]]
    return "\n".join(lines)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def run(cases: Sequence[Case], out: Path | None, cli: Sequence[tuple[str, list[str]]] = ()) -> dict[str, Any]:
    """Evaluate every case (and the CLI on every table window in ``cli``), summarise, print the tables and
    write ``out/results.json``."""
    t0 = time.perf_counter()
    results = [evaluate(c) for c in cases]
    summary = {"all": summarise(results)}
    for group in dict.fromkeys(r["protocol"] for r in results):
        summary[group] = summarise([r for r in results if r["protocol"] == group])
    cli_rows = run_cli(cli)
    doc = {"date": time.strftime("%Y-%m-%d"), "seconds": time.perf_counter() - t0, "summary": summary,
           "product": product_status(results), "results": results, "cli": cli_rows}
    print(format_tables(results, summary["all"]))
    if cli_rows:
        print(format_cli(cli_rows))
    write_results(out, doc)
    return doc


def write_results(out: Path | None, doc: Mapping[str, Any]) -> None:
    """``out/results.json`` (atomic), and a line saying so; nothing when ``out`` is None."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "results.json", json.dumps(_jsonable(doc), indent=1))
        print(f"\nwrote {out / 'results.json'} ({doc['seconds']:.0f} s)")


def data_arguments(doc: str, default_out: Path) -> argparse.ArgumentParser:
    """A parser with ``--data`` (the published runs) and ``--out`` (where results.json goes)."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--data", default=os.fspath(DEFAULT_DATA), help="directory of the published runs")
    p.add_argument("--out", default=os.fspath(default_out), help="output directory for results.json")
    return p


def found_data(path: str) -> Path | None:
    """The published runs' directory, or None after printing why it is not usable."""
    try:
        _require(Path(path))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    return Path(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = data_arguments(__doc__, DEFAULT_OUT)
    p.add_argument("--only", default=None, help="comma-separated protocols to run (default all; 'cli': the CLI on "
                                                "every table window)")
    args = p.parse_args(argv)
    data = found_data(args.data)
    if data is None:
        return 2
    cases = mixinglaws_cases(data) + regmix_cases(data)
    keep = set(args.only.split(",")) if args.only else None
    if keep is not None:
        cases = [c for c in cases if c.protocol in keep]
    import tempfile

    with tempfile.TemporaryDirectory(prefix="published-runs-cli-") as tmp:  # the CSVs never leave this run
        windows = cli_windows(data, Path(tmp)) if keep is None or "cli" in keep else []
        run(cases, Path(args.out), windows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

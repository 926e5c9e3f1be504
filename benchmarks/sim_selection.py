"""The error rates of ``method="auto"``'s selection rule on simulated DDO designs: its size and its power.

Each simulated design is planned by the runner itself (:func:`~autoscale_data.runner.planning.specs.ddo_proxy_specs`
on a config with the runner's defaults: ``seq_len`` 128, global batch 16, uniform base mix): at every budget the
base run and each domain's tokens times and divided by each multiplier, the other domains' tokens fixed (so the
perturbed runs' totals differ from the base's), every count rounded to whole global batches, each run once per
seed. Each run's loss is a known law of its tokens per domain plus Gaussian noise; the tables go, as the runner
passes them, to :func:`~autoscale_data.solver.project_all` with its DDO fits (``method="auto"``, ``direct=True``),
and every candidate's mix is scored by the law at the target (regret: nats above the law's optimum there, found
on the simplex with scipy).

The laws (``S`` = 1M tokens; each design draws its own parameters, from a seeded generator):

* ``null``: ``E + Σ_j A_j (n_j/S + a_j)^(-b)`` with one exponent ``b`` for all domains and offsets
  ``a_j ∝ A_j^(1/(1+b))``: the optimal shares are the same at every budget (DDO(N2)'s true optimum is the
  target's), so a projection can only gain by chance. False positive: ``auto`` chose a projection that is
  worse at the target than DDO(N2) (the observed candidate) by more than the tolerance.
* ``moving``: each domain its own exponent ``b_j`` and offset ``a_j``: the optimum moves with the budget by
  a known amount (column ``shift``: L1 between the true optimal shares at N2 and at the target).
* ``misfit``: ``moving`` with one domain that stops improving past ``K`` tokens (``K`` = 1-4 times its base
  tokens at N2): smoothly (``n K/(n + K)`` tokens count) in even designs, at a hard floor (``min(n, K)``) in
  odd ones; DDO's per-domain law cannot fit either.

The design grid: multipliers ``2m+1`` (x3, /3) and ``4m+1`` (x3, x1.7, /1.7, /3); 3 budgets (the runner's
default ``[500k, 1M, 3M]``) and 4 (``extra_budget: half`` on those: ``[250k, 500k, 1M, 3M]``); 3 and 4
domains; one seed and two (each run twice, independent noise). Target: 16 x N2 = 48M tokens.

Noise: sd 0.005 nats per run (the issue's value; measured replicate sds: the real-text evaluation's proxy
replicates 0.0058, README; the demo's target seeds 0.0029-0.0082, docs/demo-and-evaluation.md). Tolerance
("beyond noise"): that sd, in true loss at the target. Columns: ``gainable``: designs where some projection
truly beats DDO(N2) at the target by more than the tolerance; ``power``: among those, the share where
``auto`` does; ``available gain``: the law's loss at the target of N2's true optimum minus the target's
optimum (what a perfect projection gains over a perfect DDO(N2)).

    python benchmarks/sim_selection.py [--designs 200] [--designs-other 160] [--seed 0] [--quick]
                                       [--noise 0.005] [--workers 1] [--out FILE.md]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # small matrices: threads only contend
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from functools import cache  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autoscale_data._io import atomic_write_text  # noqa: E402
from autoscale_data.solver import CandidateError, DDOOptions, Run, RunTable, fit_ddo, project_all  # noqa: E402
from autoscale_data.solver.synthetic import synthetic_loss  # noqa: E402
from autoscale_data.solver.vocabulary import OBSERVED, PROJECTIONS  # noqa: E402

KINDS = ("null", "moving", "misfit")
SCALE = 1e6  # tokens per unit of the laws
FLOOR = 2.0
BUDGETS = {3: (500_000, 1_000_000, 3_000_000), 4: (250_000, 500_000, 1_000_000, 3_000_000)}
MULTIPLIERS = {"2m+1": [[3.0], [3.0]], "4m+1": [[3.0, 1.7], [3.0, 1.7]]}
TARGET_FACTOR = 16
NOISE = 0.005
STORE_TOKENS = 10**12  # the fake stores' sizes: never a cap


@dataclass(frozen=True)
class Design:
    """One row's DDO design: multipliers (``"2m+1"`` or ``"4m+1"``), number of budgets, domains and seeds."""

    multipliers: str
    budgets: int
    domains: int
    seeds: int

    def __post_init__(self) -> None:
        if self.multipliers not in MULTIPLIERS:
            raise ValueError(f"design multipliers {self.multipliers!r} is invalid: expected one of {list(MULTIPLIERS)}")
        if self.budgets not in BUDGETS:
            raise ValueError(f"design budgets {self.budgets!r} is invalid: expected one of {list(BUDGETS)}")
        if self.domains < 2 or self.seeds < 1:
            raise ValueError(f"a design needs 2 domains or more and 1 seed or more, got {self.domains} and {self.seeds}")

    @property
    def name(self) -> str:
        return f"{self.multipliers}, {self.budgets} budgets, m={self.domains}, {self.seeds} seed{'s' * (self.seeds > 1)}"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"d{j}" for j in range(self.domains))

    @property
    def target(self) -> float:
        return float(TARGET_FACTOR * BUDGETS[self.budgets][-1])


GRID = tuple(Design(mu, nb, m, s) for mu in MULTIPLIERS for nb in BUDGETS for m in (3, 4) for s in (1, 2))
QUICK = (Design("2m+1", 3, 3, 1), Design("4m+1", 4, 4, 2))  # rows of GRID: the same draws as in the full run


@dataclass(frozen=True)
class Law:
    """A loss law of the tokens per domain: ``FLOOR + Σ_j A_j (g_j(n_j)/S + a_j)^(-b_j)``.

    ``g_j(n) = n`` where ``saturation_j`` is infinite; else ``n K/(n + K)`` (``hard=False``) or ``min(n, K)``.
    """

    kind: str
    amplitude: np.ndarray
    offset: np.ndarray
    exponent: np.ndarray
    saturation: np.ndarray
    hard: bool = False

    def __post_init__(self) -> None:
        m = self.amplitude.shape
        if any(v.shape != m for v in (self.offset, self.exponent, self.saturation)):
            raise ValueError(f"law parameters need one value per domain, got shapes {m}, {self.offset.shape}, "
                             f"{self.exponent.shape}, {self.saturation.shape}")
        if np.any(self.amplitude <= 0) or np.any(self.exponent <= 0) or np.any(self.offset < 0):
            raise ValueError(f"law parameters out of range: amplitude {self.amplitude}, exponent {self.exponent}, "
                             f"offset {self.offset}")

    def _counted(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tokens that count (``g``) and their derivative in the tokens."""
        n, k = np.asarray(tokens, dtype=np.float64), self.saturation
        if self.hard:
            return np.minimum(n, k), (n < k).astype(np.float64)
        finite = np.isfinite(k)
        kk = np.where(finite, k, 1.0)
        g = np.where(finite, n * kk / (n + kk), n)
        return g, np.where(finite, (kk / (n + kk)) ** 2, 1.0)

    def loss(self, tokens: np.ndarray) -> np.ndarray:
        """The law's loss for tokens of shape ``(..., m)``."""
        g, _ = self._counted(tokens)
        return synthetic_loss(g / SCALE, self.offset, self.exponent, floor=FLOOR, amplitude=self.amplitude)

    def gradient(self, tokens: np.ndarray) -> np.ndarray:
        g, dg = self._counted(tokens)
        return -self.amplitude * self.exponent * np.power(g / SCALE + self.offset, -self.exponent - 1) * dg / SCALE

    def optimum(self, budget: float) -> np.ndarray:
        """The optimal shares at ``budget`` tokens (SLSQP on the simplex from the uniform mix)."""
        m = self.amplitude.size
        res = minimize(lambda w: float(self.loss(w * budget)), np.full(m, 1.0 / m),
                       jac=lambda w: budget * self.gradient(w * budget), method="SLSQP", bounds=[(0.0, 1.0)] * m,
                       constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(m)}],
                       options={"ftol": 1e-16, "maxiter": 1000})
        w = np.clip(res.x, 0.0, None)
        return w / w.sum()

    def at(self, shares: np.ndarray, budget: float) -> float:
        """The loss of ``shares`` trained for ``budget`` tokens."""
        return float(self.loss(np.asarray(shares) * budget))


def draw_law(kind: str, m: int, rng: np.random.Generator, n2: float, index: int = 0) -> Law:
    """A law of ``kind`` (module doc) over ``m`` domains; ``n2``: the largest proxy budget (the misfit's ``K``);
    ``index``: the design's number (the misfit is smooth in even designs, a hard floor in odd ones)."""
    if kind not in KINDS:
        raise ValueError(f"law kind {kind!r} is invalid: expected one of {KINDS}")
    amplitude = np.exp(rng.uniform(np.log(0.3), np.log(1.5), m))
    saturation = np.full(m, np.inf)
    if kind == "null":
        b = rng.uniform(0.25, 0.6)
        c = amplitude ** (1.0 / (1.0 + b))
        return Law(kind, amplitude, rng.uniform(0.0, 0.3) * c / c.mean(), np.full(m, b), saturation)
    exponent, offset = rng.uniform(0.2, 0.7, m), rng.uniform(0.0, 0.3, m)
    if kind == "misfit":
        saturation[rng.integers(m)] = np.exp(rng.uniform(0.0, np.log(4.0))) * n2 / m
    return Law(kind, amplitude, offset, exponent, saturation, hard=kind == "misfit" and index % 2 == 1)


@dataclass(frozen=True)
class Plan:
    """A design as the runner plans it: the run specs per budget (smallest first) and the tokens of one global
    batch."""

    budgets: tuple[tuple[int, tuple[Any, ...]], ...]
    batch_tokens: int


@cache
def planned_runs(design: Design) -> Plan:
    """The design's runs as the runner plans them (``ddo_proxy_specs`` per budget, the runner's default
    batch shape, fake stores that cap nothing)."""
    from autoscale_data.runner.config import config_from_dict
    from autoscale_data.runner.planning.data import DomainInfo
    from autoscale_data.runner.planning.specs import ddo_proxy_specs

    names = design.names
    paths = {d: f"/simulated/{d}" for d in names}
    up, down = MULTIPLIERS[design.multipliers]
    config = config_from_dict({"domains": paths, "seeds": list(range(design.seeds)),
                               "ddo": {"budgets": list(BUDGETS[design.budgets]), "multipliers": [up, down]},
                               "target": {"budget": int(design.target)}})
    info = DomainInfo(names=names, paths=paths, train_tokens=dict.fromkeys(names, STORE_TOKENS),
                      val_tokens=dict.fromkeys(names, 10**6), fingerprints=dict.fromkeys(names, "simulated"),
                      vocab_size=4096, eos_id=0, tokenizer="simulated")
    return Plan(tuple((int(n), tuple(ddo_proxy_specs(config, info, n))) for n in config.ddo.budgets),
                config.seq_len * config.global_batch_size)


def simulate(design: Design, law: Law, noise: float, rng: np.random.Generator) -> list[RunTable]:
    """One :class:`RunTable` per budget (smallest first): the planned runs, each its law's loss plus noise."""
    tables = []
    for _, specs in planned_runs(design).budgets:
        tokens = np.array([[s.tokens[d] for d in design.names] for s in specs], dtype=np.float64)
        loss = law.loss(tokens) + noise * rng.standard_normal(len(specs))
        tables.append(RunTable([Run(s.run_id, dict(s.tokens), {"all": float(v)}, seed=s.seed, label=s.label)
                                for s, v in zip(specs, loss, strict=True)]))
    return tables


def _shares(weights: dict[str, float], names: Sequence[str]) -> np.ndarray:
    return np.array([float(weights[d]) for d in names])


def one_design(job: tuple[str, Design, int, int, float]) -> dict[str, Any]:
    """Simulate design ``index`` of one row (``job``: kind, design, index, seed, noise), answer it as the runner
    does, and score every candidate by the law at the target."""
    kind, design, index, seed, noise = job
    k = KINDS.index(kind)
    n2, target = float(BUDGETS[design.budgets][-1]), design.target
    law = draw_law(kind, design.domains, np.random.default_rng([seed, k, design.domains, index]), n2, index)
    best_t, best_n2 = law.optimum(target), law.optimum(n2)
    floor_t = law.at(best_t, target)
    row: dict[str, Any] = {"kind": kind, "design": design.name, "shift": float(np.abs(best_t - best_n2).sum()),
                           "available": law.at(best_n2, target) - floor_t}
    tables = simulate(design, law, noise, np.random.default_rng([seed, k, GRID.index(design), index, 1]))
    options = DDOOptions(token_caps=dict.fromkeys(design.names, float(STORE_TOKENS)))  # the runner's defaults
    t0 = time.perf_counter()
    try:
        p = project_all(tables, target, options, method="auto", optima=[fit_ddo(t, options) for t in tables],
                        direct=True)
    except ValueError as exc:
        row.update(error=str(exc)[:300], seconds=time.perf_counter() - t0)
        return row
    regret = {name: law.at(_shares(c.weights, design.names), target) - floor_t
              for name in (*PROJECTIONS, OBSERVED) if not isinstance(c := getattr(p, name), (CandidateError, type(None)))}
    row.update(chosen=p.used, regret=regret, auto=law.at(_shares(p.weights, design.names), target) - floor_t,
               seconds=time.perf_counter() - t0)
    return row


def _mean(values: Sequence[float]) -> str:
    return f"{np.mean(values):.4f}" if values else "-"


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.1f}% ({k})" if n else "-"


def _split(counts: dict[str, int]) -> str:
    return " / ".join(str(counts[n]) for n in PROJECTIONS)


def summarise(rows: Sequence[dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """One table row's counts and means (``tolerance``: what counts as beyond noise, nats at the target)."""
    ok = [r for r in rows if "error" not in r]
    worse = [r for r in ok if r["auto"] - r["regret"][OBSERVED] > tolerance]
    better = [r for r in ok if r["regret"][OBSERVED] - r["auto"] > tolerance]
    gainable = [r for r in ok if any(r["regret"][OBSERVED] - r["regret"][n] > tolerance
                                     for n in PROJECTIONS if n in r["regret"])]
    return {"designs": len(rows), "errors": len(rows) - len(ok), "answered": len(ok),
            "chose": sum(r["chosen"] != OBSERVED for r in ok), "worse": len(worse), "better": len(better),
            "by": {n: sum(r["chosen"] == n for r in ok) for n in PROJECTIONS},
            "worse_by": {n: sum(r["chosen"] == n for r in worse) for n in PROJECTIONS},
            "gainable": len(gainable), "power": sum(r in better for r in gainable),
            "shift": [r["shift"] for r in rows], "available": [r["available"] for r in rows],
            "auto": [r["auto"] for r in ok],
            **{n: [r["regret"][n] for r in ok if n in r["regret"]] for n in (*PROJECTIONS, OBSERVED)},
            "best": [min(r["regret"][n] for n in PROJECTIONS if n in r["regret"]) for r in ok
                     if any(n in r["regret"] for n in PROJECTIONS)],
            "seconds": [r["seconds"] for r in rows]}


HEADER = ("| kind | design | designs (errors) | shift L1 | available gain | chose a projection | which (g / j / r) "
          "| worse than DDO(N2) | which worse (g / j / r) | better | gainable | power | regret: auto | DDO(N2) | geometric | joint | robust | best projection "
          "| s / design |")


def table_line(kind: str, design: str, s: dict[str, Any]) -> str:
    n = s["answered"]
    return (f"| {kind} | {design} | {s['designs']} ({s['errors']}) | {_mean(s['shift'])} | {_mean(s['available'])} | "
            f"{_pct(s['chose'], n)} | {_split(s['by'])} | {_pct(s['worse'], n)} | {_split(s['worse_by'])} | "
            f"{_pct(s['better'], n)} | {_pct(s['gainable'], n)} | "
            f"{_pct(s['power'], s['gainable'])} | {_mean(s['auto'])} | {_mean(s[OBSERVED])} | "
            + " | ".join(_mean(s[p]) for p in PROJECTIONS) + f" | {_mean(s['best'])} | {_mean(s['seconds'])} |")


def run(designs: int, designs_other: int, seed: int = 0, *, quick: bool = False, noise: float = NOISE,
        tolerance: float | None = None, workers: int = 1) -> tuple[str, list[dict[str, Any]]]:
    """Every row of the grid (``quick``: :data:`QUICK`): ``designs`` simulated designs of null laws,
    ``designs_other`` of moving and of misfit laws, each spread evenly over the rows (rounded up). Returns the
    markdown and the designs' rows."""
    if designs < 1 or designs_other < 1:
        raise ValueError(f"designs and designs_other must be >= 1, got {designs} and {designs_other}")
    if not noise > 0:
        raise ValueError(f"noise must be > 0 (an sd in nats), got {noise}")
    tol = noise if tolerance is None else float(tolerance)
    grid = QUICK if quick else GRID
    jobs = [(kind, d, i, seed, noise) for kind in KINDS for d in grid
            for i in range(-(-(designs if kind == "null" else designs_other) // len(grid)))]
    t0 = time.perf_counter()
    if workers > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(workers) as pool:
            rows = pool.map(one_design, jobs, chunksize=4)
    else:
        rows = [one_design(j) for j in jobs]
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    pooled: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        of_kind = [r for r in rows if r["kind"] == kind]
        for name in dict.fromkeys(r["design"] for r in of_kind):
            lines.append(table_line(kind, name, summarise([r for r in of_kind if r["design"] == name], tol)))
        pooled[kind] = summarise(of_kind, tol)
        lines.append(table_line(kind, "**all designs**", pooled[kind]))
    null = pooled["null"]
    lines += ["", f"Noise sd {noise:g} nats per run; tolerance {tol:g} nats at the target (16 x N2); seed {seed}; "
              f"{len(rows)} designs in {time.perf_counter() - t0:.0f} s ({workers} worker{'s' * (workers > 1)}).",
              f"False positives (null laws: a projection chosen and worse than DDO(N2) beyond the tolerance): "
              f"{null['worse']} of {null['answered']} ({_pct(null['worse'], null['answered'])}); goal <= 2.5%."]
    return "\n".join(lines), rows


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--designs", type=int, default=None,
                   help="simulated designs of null laws, spread over the rows (default 200; --quick 12)")
    p.add_argument("--designs-other", type=int, default=None,
                   help="simulated designs of moving and of misfit laws, each (default 160; --quick 12)")
    p.add_argument("--seed", type=int, default=0, help="seed of the laws and the noise")
    p.add_argument("--quick", action="store_true", help=f"two designs only ({', '.join(d.name for d in QUICK)})")
    p.add_argument("--noise", type=float, default=NOISE, help="sd of one run's loss, nats")
    p.add_argument("--tolerance", type=float, default=None, help="beyond noise at the target, nats (default: --noise)")
    p.add_argument("--workers", type=int, default=1, help="processes")
    p.add_argument("--out", default=None, help="also write the table to this markdown file (atomically)")
    args = p.parse_args(argv)
    few = 12 if args.quick else None
    text, _ = run(args.designs or few or 200, args.designs_other or few or 160, args.seed, quick=args.quick,
                  noise=args.noise, tolerance=args.tolerance, workers=args.workers)
    stamp = f"{time.strftime('%Y-%m-%d', time.gmtime())}, commit {_commit()}: python benchmarks/sim_selection.py " \
            + " ".join(sys.argv[1:] if argv is None else argv)
    print(text)
    if args.out:
        atomic_write_text(args.out, f"{stamp}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

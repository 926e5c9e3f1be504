"""The shift case: a positive control in which the best mix moves with the budget by construction.

``autoscale-data demo --case shift --out DIR`` generates the three sources of
:mod:`autoscale_data.demo.sources` (``motifs`` saturates early, ``markov12`` keeps paying, ``markov8``
between), prepares them with the byte-level tokenizer (one symbol, one token) and trains, all through one
runner ledger (runs shared by id are trained once):

- the ground truth: a grid of mixes along the line ``motifs`` <-> ``markov12`` (``markov8`` fixed at its
  uniform share), at N2 and at the target, on every grid seed;
- with ``autoscale=True``, the runner's three-budget design (``ddo.budgets: [N0, N1, N2]``, the default
  ``ddo.projection: auto``) and its target runs: AutoScale, DDO(N2) and uniform.

The ``zipf`` preset trains two other domains instead, ``zipf_fast`` and ``zipf_slow``
(:data:`~autoscale_data.demo.sources.ZIPF_SOURCES`: Zipf vocabularies whose learning curves are power laws
of different exponents), the grid along the line between them, and also the projections ``auto`` did not
choose.

It writes ``DIR/shift_case.json`` (:class:`ShiftCaseResult`) and ``DIR/shift_case.md``
(``shift_case_<preset>`` for a preset other than ``full``): each mix's loss per seed, mean and sd at both
budgets, the best grid mix at each, and whether the target's best beats the N2-best mix there by more than the
seed noise. Presets in one folder share their runs; the runner's report and ``fits/`` are the last preset's.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._records import Record
from ..runner import (
    Ledger,
    MixtureRunner,
    RunnerConfig,
    config_from_dict,
    config_to_dict,
    layout,
    target_spec,
)
from ..solver.vocabulary import GEOMETRIC, JOINT, MEAN_LOSS, PROJECTION_CHOICES
from ._case import write_case
from .corpus import SHIFT_DOMAINS, ZIPF_DOMAINS
from .demo import DemoSettings, demo_config
from .stores import prepare_synthetic_stores

__all__ = ["GridPoint", "SHIFT_PRESETS", "ShiftCase", "ShiftCaseResult", "format_shift_table",
           "run_shift_case",
           "shift_config"]


@dataclass(frozen=True)
class ShiftCase:
    """The sizes of the shift case.

    Attributes:
        domains: the synthetic domains trained (:data:`SHIFT_DOMAINS` or :data:`ZIPF_DOMAINS`).
        saturating, paying: the two ends of the grid's line; every other domain keeps ``1 / len(domains)``.
        grid: the saturating domain's weights trained at N2 and at the target (the paying one gets
            ``2 / len(domains) - w``).
        bytes_per_domain: text bytes generated per domain (one document in 20 held out).
        budgets: the runner's DDO budgets ``(N0, N1, N2)`` in tokens; the grid runs at N2.
        target: the target budget in tokens.
        seeds, target_seeds: proxy seeds and the seeds of every target and grid run.
        model: overrides of ``gpt2-tiny``.
        projection: ``ddo.projection``; ``None`` keeps the runner's default (``auto``).
        train_projections: also train, at the target, the geometric and joint projections the runner did
            not choose (labelled ``<name> (not chosen)``): whether the projection would have paid.
    """

    name: str = "full"
    domains: tuple[str, ...] = SHIFT_DOMAINS
    saturating: str = "motifs"
    paying: str = "markov12"
    grid: tuple[float, ...] = (1 / 15, 3 / 15, 5 / 15, 7 / 15, 9 / 15)
    bytes_per_domain: int = 400_000
    budgets: tuple[int, ...] = (8_192, 16_384, 32_768)
    target: int = 262_144
    seeds: tuple[int, ...] = (0,)
    target_seeds: tuple[int, ...] = (0, 1, 2)
    seq_len: int = 64
    batch_size: int = 8
    lr: float = 3e-3
    heldout_tokens: int = 4_096
    target_points: int = 4
    multipliers: tuple[tuple[float, ...], tuple[float, ...]] = ((3.0,), (3.0,))
    model: dict[str, Any] = field(default_factory=dict)
    projection: str | None = None
    train_projections: bool = False

    def __post_init__(self) -> None:
        if self.projection is not None and self.projection not in PROJECTION_CHOICES:
            raise ValueError(f"projection {self.projection!r} must be one of {sorted(PROJECTION_CHOICES)} or "
                             "None")
        if self.domains not in (SHIFT_DOMAINS, ZIPF_DOMAINS):
            raise ValueError(f"domains {self.domains} must be {SHIFT_DOMAINS} or {ZIPF_DOMAINS}")
        if self.saturating == self.paying or not {self.saturating, self.paying} <= set(self.domains):
            raise ValueError(f"saturating {self.saturating!r} and paying {self.paying!r} must be two of "
                             f"{self.domains}")
        if len(self.budgets) < 2 or list(self.budgets) != sorted(set(self.budgets)) or self.budgets[-1] >= self.target:
            raise ValueError(f"budgets {self.budgets} must rise strictly (two or more) and stay below the "
                             f"target {self.target}")
        if not self.grid or not all(0 < w < self.line_share for w in self.grid):
            raise ValueError(f"grid {self.grid} must hold weights in (0, {self.line_share:.3g})")

    @property
    def n2(self) -> int:
        return self.budgets[-1]

    @property
    def line_share(self) -> float:
        """The share the grid's two ends split: ``2 / len(domains)`` (every other domain keeps its uniform
        share)."""
        return 2 / len(self.domains)

    def grid_mix(self, w: float) -> dict[str, float]:
        """The saturating domain at ``w``, the paying one at ``line_share - w``, the others at ``1 /
        len(domains)``."""
        return {d: w if d == self.saturating
                else (self.line_share - w if d == self.paying else 1 / len(self.domains))
                for d in self.domains}


# : ``full``: the case the docs report (N2 = target / 8); ``late``: the same corpus, target and grid with the
# DDO
# : budgets 4x larger, past the saturating domain's saturation (N2 = target / 2); ``control``: late's DDO
# budgets
#: with a target 8x N2 (1,048,576 tokens), 3x the text per domain so that no target run repeats a domain, the
# : grid cut to uniform and late's N2-best mix, 2 target seeds (what fits a shared 2-core CPU); ``zipf``: the
# two
# : Zipf domains, N2 = 65,536, target 8x N2, the 4m+1 design, 3 target seeds, the projections not chosen
# trained
# : too; ``zipf16``: the same with the DDO budgets halved (target 16x N2; in one folder with ``zipf`` it
# shares the
#: target runs); ``small``: the end-to-end test's.
SHIFT_PRESETS: dict[str, ShiftCase] = {
    "full": ShiftCase(),
    "late": ShiftCase(name="late", budgets=(32_768, 65_536, 131_072)),
    "control": ShiftCase(name="control", budgets=(32_768, 65_536, 131_072), target=1_048_576,
                         bytes_per_domain=1_200_000, grid=(5 / 15, 9 / 15), target_seeds=(0, 1)),
    "zipf": ShiftCase(name="zipf", domains=ZIPF_DOMAINS, saturating="zipf_fast", paying="zipf_slow",
                      grid=(0.125, 0.25, 0.5), bytes_per_domain=1_000_000, budgets=(16_384, 32_768, 65_536),
                      target=524_288,
                      seq_len=32, heldout_tokens=8_192, target_seeds=(0, 1, 2),
                      multipliers=((3.0, 1.7), (3.0, 1.7)),
                      train_projections=True),
    "zipf16": ShiftCase(name="zipf16", domains=ZIPF_DOMAINS, saturating="zipf_fast", paying="zipf_slow",
                        grid=(0.125, 0.25, 0.5), bytes_per_domain=1_000_000, budgets=(8_192, 16_384, 32_768),
                        target=524_288, seq_len=32, heldout_tokens=8_192, target_seeds=(0, 1, 2),
                        multipliers=((3.0, 1.7), (3.0, 1.7)), train_projections=True),
    "small": ShiftCase(name="small", bytes_per_domain=40_000, budgets=(1_024, 2_048), target=4_096,
                       grid=(0.2, 0.4), seq_len=32, batch_size=4, heldout_tokens=256, target_points=1,
                       target_seeds=(0,), model={"n_layer": 1, "n_embd": 32, "n_head": 2}),
}


def shift_config(out_dir: str | os.PathLike[str], case: ShiftCase) -> RunnerConfig:
    """The runner config of the case on the stores under ``OUT/data`` (the demo's model, optimiser, eval)."""
    settings = DemoSettings(mode="full", domains=case.domains, bytes_per_domain=case.bytes_per_domain,
                            budgets=(case.budgets[0], case.n2), target=case.target, seq_len=case.seq_len,
                            batch_size=case.batch_size, lr=case.lr, model=dict(case.model),
                            heldout_tokens=case.heldout_tokens, target_points=case.target_points,
                            seeds=case.seeds,
                            target_seeds=case.target_seeds, multipliers=case.multipliers)
    raw = config_to_dict(demo_config(out_dir, settings=settings))
    raw.pop("base_dir")
    raw["name"] = f"shift-{case.name}"
    raw["ddo"]["budgets"] = list(case.budgets)
    if case.projection is not None:
        raw["ddo"]["projection"] = case.projection
    raw["target"].update(baselines=[layout.UNIFORM, layout.DDO_N2], keep_checkpoints=False)
    return config_from_dict(raw, base_dir=Path(out_dir).resolve())


@dataclass(frozen=True)
class GridPoint(Record):
    """One mix at one budget: its weights and the objective per seed."""

    label: str
    budget: int
    weights: dict[str, float]
    losses: dict[int, float]

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.losses.values())))

    @property
    def sd(self) -> float:
        """The seeds' sample sd (0 with one seed)."""
        values = list(self.losses.values())
        return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


@dataclass(frozen=True)
class ShiftCaseResult(Record):
    """What :func:`run_shift_case` measured (``OUT/shift_case.json``)."""

    case: dict[str, Any]
    grid_n2: list[GridPoint]
    grid_target: list[GridPoint]
    #: AutoScale, DDO(N2) and uniform at the target (empty without the runner's design)
    mixes: list[GridPoint] = field(default_factory=list)
    #: what ``ddo.projection`` chose and why (projection.json's ``selection``)
    chosen: str = ""

    @staticmethod
    def best(points: Sequence[GridPoint]) -> GridPoint:
        return min(points, key=lambda p: p.mean)

    def moved(self) -> tuple[float, float]:
        """At the target: the N2-best mix's mean loss minus the target-best's, and the noise it is judged
        against (twice the standard error of that difference from the seeds' sds; NaN under two seeds)."""
        best_n2 = self.best(self.grid_n2).label
        at_target = {p.label: p for p in self.grid_target}
        a, b = at_target[best_n2], self.best(self.grid_target)
        if min(len(a.losses), len(b.losses)) < 2:
            return a.mean - b.mean, math.nan
        return a.mean - b.mean, 2 * math.sqrt(a.sd ** 2 / len(a.losses) + b.sd ** 2 / len(b.losses))


def _target_at(config: RunnerConfig, budget: int) -> RunnerConfig:
    """``config`` with target runs at ``budget`` (only for their specs: a run's id hashes its training
    settings and sequences, not the DDO design, whose budgets are moved below ``budget`` to keep the config
    valid)."""
    shrink = budget / (2 * config.ddo.largest)
    ddo = replace(config.ddo, budgets=tuple(max(1, int(b * shrink)) for b in config.ddo.budgets))
    return replace(config, ddo=ddo, target=replace(config.target, budget=budget))


def _points(runner: MixtureRunner, config: RunnerConfig, mixes: dict[str, dict[str, float]],
            seeds: Sequence[int], ledger: Ledger) -> list[GridPoint]:
    out = []
    for label, weights in mixes.items():
        losses = {}
        for seed in seeds:
            spec = target_spec(config, runner.domains, label, weights, seed)
            result = ledger.result(spec.run_id)
            if result is None:
                raise ValueError(f"run {label!r} seed {seed} at {config.target.budget} ({spec.run_id}) has "
                                 "no result")
            losses[seed] = result.value(MEAN_LOSS)
        out.append(GridPoint(label, config.target.budget, spec.weights, losses))
    return out


def _unchosen(projection: Any, chosen: str) -> dict[str, dict[str, float]]:
    """The geometric and joint projections' mixes at the target that were not chosen (those computed)."""
    out = {}
    for name in (GEOMETRIC, JOINT):
        candidate = getattr(projection, name, None)
        weights = getattr(candidate, "weights", None)
        if name != chosen and isinstance(weights, dict) and weights:
            out[f"{name} (not chosen)"] = {d: float(v) for d, v in weights.items()}
    return out


def run_shift_case(out_dir: str | os.PathLike[str], case: ShiftCase | None = None, *, autoscale: bool = True,
                   log: Callable[[str], None] = print) -> ShiftCaseResult:
    """Train the case (see the module docstring) in ``out_dir`` and write ``shift_case.json`` / ``.md``.

    Args:
        autoscale: also run the runner's three-budget design and its target runs; without it only the grid.
    """
    case = case or SHIFT_PRESETS["full"]
    out = Path(out_dir)
    prepare_synthetic_stores(out / "data", domains=case.domains, bytes_per_domain=case.bytes_per_domain,
                             corpus_dir=out / "corpus")
    config = shift_config(out, case)
    at_n2 = _target_at(config, case.n2)
    # presets in one folder share the target grid's runs (the same run ids in one ledger)
    runner = MixtureRunner(config, out, log=log, progress=False, allow_config_change=True)
    grid = {f"{case.saturating} {w:.3f}": case.grid_mix(w) for w in case.grid}
    runner.train_runs([target_spec(cfg, runner.domains, label, w, seed) for cfg in (at_n2, config)
                       for label, w in grid.items() for seed in case.target_seeds])
    mixes: dict[str, dict[str, float]] = {}
    chosen = ""
    if autoscale:
        runner.run()
        fitted = layout.read(out / layout.FITS, layout.TARGET_MIXES_FILE)
        mixes = {name: fitted[name] for name in (layout.AUTOSCALE, layout.DDO_N2, layout.UNIFORM)}
        projection = layout.read(out / layout.FITS, layout.PROJECTION)
        selection = projection.selection
        chosen = f"{selection.chosen}: {selection.reason}" if selection else ""
        if case.train_projections:
            extra = _unchosen(projection, selection.chosen if selection else projection.method)
            runner.train_runs([target_spec(config, runner.domains, label, w, seed)
                               for label, w in extra.items()
                               for seed in case.target_seeds])
            mixes.update(extra)
    ledger = Ledger(out, lock=False)
    result = ShiftCaseResult(case=json.loads(json.dumps(asdict(case))),
                             grid_n2=_points(runner, at_n2, grid, case.target_seeds, ledger),
                             grid_target=_points(runner, config, grid, case.target_seeds, ledger),
                             mixes=_points(runner, config, mixes, case.target_seeds, ledger), chosen=chosen)
    stem = "shift_case" if case.name == "full" else f"shift_case_{case.name}"
    write_case(out, stem, result, format_shift_table(result), log)
    return result


def format_shift_table(result: ShiftCaseResult) -> str:
    """The case as Markdown: every mix's weights, loss per seed, mean and sd at N2 and at the target."""
    domains = list(result.case.get("domains", SHIFT_DOMAINS))
    seeds = sorted({s for p in result.grid_target + result.grid_n2 + result.mixes for s in p.losses})
    head = ("| budget | mix | " + " | ".join(domains) + " | " + " | ".join(f"seed {s}" for s in seeds)
            + " | mean | sd |")
    lines = [head, "|" + "---|" * (4 + len(domains) + len(seeds))]
    for p in result.grid_n2 + result.grid_target + result.mixes:
        lines.append(f"| {p.budget:,} | {p.label} | " + " | ".join(f"{p.weights.get(d, 0.0):.3f}"
                                                                   for d in domains)
                     + " | " + " | ".join(f"{p.losses[s]:.4f}" if s in p.losses else "" for s in seeds)
                     + f" | {p.mean:.4f} | {p.sd:.4f} |")
    gap, noise = result.moved()
    best_n2, best_t = result.best(result.grid_n2), result.best(result.grid_target)
    lines += ["", f"best grid mix at N2 ({best_n2.budget:,}): {best_n2.label}; at the target "
                  f"({best_t.budget:,}): {best_t.label}",
              f"at the target the N2-best mix loses {gap:.4f} to the target-best, against a noise of "
              f"{noise:.4f} (2 standard errors of the difference): " + ("the optimum moves" if gap > noise
                                                                        else
                                                           "one seed cannot tell" if math.isnan(noise) else
                                                           "not beyond noise")]
    if result.chosen:
        lines.append(f"AutoScale chose {result.chosen}")
    return "\n".join(lines)

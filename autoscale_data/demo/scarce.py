"""The scarce-domain case: one small, valuable domain the target repeats many times beside abundant ones.

``python -m autoscale_data.demo.scarce --out DIR`` builds a variant of the synthetic demo corpus in
which ``code`` holds only a few thousand training tokens while ``encyclopedia`` and ``web`` hold
hundreds of thousands, so a target run at the uniform mix repeats ``code`` about 8 times. It then
trains, all through one runner ledger (runs shared by id are trained once):

- the ground truth: target runs over a grid of the scarce domain's weight (the other domains share
  the rest equally), on every target seed;
- AutoScale with plain proxies (``ddo.repetition: off``) and with repetition-matched proxies
  (``match``), each with its DDO(N2) mix, and the uniform and natural baselines; AutoScale under both
  laws where the runner computed both (``match`` sets its mix from the law in effective tokens and
  reports the raw-token law's; ``off`` the reverse, when its mix repeats a domain at the target).

It writes ``DIR/scarce_case.json`` (:class:`ScarceCaseResult`) and ``DIR/scarce_case.md``: each mix's
scarce weight, its epochs of the scarce domain at the target, the loss per seed, the grid's best weight,
each mix's distance to it, and the proxies' tokens against one target run's.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._records import Record
from ..runner import (
    REPETITION_MATCH,
    REPETITION_MODES,
    MixtureRunner,
    RunnerConfig,
    RunResult,
    config_from_dict,
    config_to_dict,
    layout,
    target_spec,
)
from ..solver.vocabulary import MEAN_LOSS, PROJECTION_CHOICES
from ..store import prepare, train_bpe_tokenizer
from ._case import write_case
from .corpus import generate_corpus, generate_documents
from .demo import DemoSettings, demo_config

__all__ = ["SCARCE_PRESETS", "ScarceCase", "ScarceCaseResult", "format_scarce_table", "plan_budgets",
           "prepare_scarce_data", "run_scarce_case", "scarce_config"]


@dataclass(frozen=True)
class ScarceCase:
    """The sizes of the scarce-domain case.

    Attributes:
        scarce: the scarce domain; abundant: the others.
        scarce_bytes: text bytes generated for the scarce domain (half go to its held-out split, so its
            loss is measured on as many tokens as it trains on).
        abundant_bytes: text bytes per abundant domain (one document in 20 held out).
        budgets, target: the DDO budgets (``(N1, N2)``, or ``(N0, N1, N2)`` and more: the runner's
            three-budget design, whose rule backtests every candidate at N2) and the target budget in tokens.
        grid: the scarce domain's weights trained at the target (the ground truth).
        max_epochs: the epoch cap of every run (the target repeats the scarce domain up to it).
        seeds, target_seeds: proxy and target seeds (two or more proxy seeds give the two-budget rule the
            replicate runs it needs before it trusts a projection).
        model: overrides of ``gpt2-tiny``.
        projection: ``ddo.projection`` of both configs; ``None`` keeps the runner's default (``auto``).
    """

    name: str = "full"
    scarce: str = "code"
    abundant: tuple[str, ...] = ("encyclopedia", "web")
    scarce_bytes: int = 60_000
    abundant_bytes: int = 1_500_000
    budgets: tuple[int, ...] = (16_384, 32_768)
    target: int = 262_144
    grid: tuple[float, ...] = (0.05, 0.15, 0.25, 1 / 3, 0.5)
    max_epochs: float = 16.0
    multipliers: tuple[tuple[float, ...], tuple[float, ...]] = ((3.0,), (3.0,))
    seeds: tuple[int, ...] = (0,)
    target_seeds: tuple[int, ...] = (0, 1)
    vocab_size: int = 1024
    seq_len: int = 128
    batch_size: int = 8
    lr: float = 3e-3
    heldout_tokens: int = 8_192
    target_points: int = 4
    model: dict[str, Any] = field(default_factory=dict)
    projection: str | None = None

    def __post_init__(self) -> None:
        if self.projection is not None and self.projection not in PROJECTION_CHOICES:
            raise ValueError(f"projection {self.projection!r} must be one of {sorted(PROJECTION_CHOICES)} or "
                             "None (the default)")
        if self.scarce in self.abundant or len(self.abundant) < 1:
            raise ValueError(f"scarce domain {self.scarce!r} must be apart from the abundant ones "
                             f"{self.abundant}")
        b = tuple(self.budgets)
        if (len(b) < 2 or b[0] <= 0 or any(x >= y for x, y in zip(b[:-1], b[1:], strict=True))
                or b[-1] >= self.target):
            raise ValueError(f"budgets {self.budgets} and target {self.target}: expected two budgets or "
                             "more, increasing, positive and below the target (0 < N1 < N2 < target)")
        if not self.grid or not all(0 < w < 1 for w in self.grid):
            raise ValueError(f"grid {self.grid} must hold weights in (0, 1)")

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(sorted((self.scarce, *self.abundant)))

    def grid_mix(self, w: float) -> dict[str, float]:
        """The scarce domain at ``w``, the abundant ones sharing the rest equally."""
        rest = (1.0 - w) / len(self.abundant)
        return {d: (w if d == self.scarce else rest) for d in self.domains}


#: ``full``: the first case the docs report (about 5M training tokens); ``lean``: the same corpus, target and
#: grid with proxies of 4,096 / 5,120 tokens (0.26 target runs in all); ``small``: the end-to-end test's.
SCARCE_PRESETS: dict[str, ScarceCase] = {
    "full": ScarceCase(),
    "small": ScarceCase(name="small", scarce_bytes=8_000, abundant_bytes=120_000, budgets=(2_048, 4_096),
                        target=16_384, grid=(0.1, 0.4), seq_len=32, batch_size=8, vocab_size=300,
                        heldout_tokens=512, target_points=2,
                        model={"n_layer": 1, "n_embd": 32, "n_head": 2}, target_seeds=(0,)),
    # the full case's corpus and target with the smallest matched design the data allow: a proxy pool holds
    # whole sequences, and a perturbation /2 of a domain needs >= 9 of its sequences in whole global batches
    "lean": ScarceCase(name="lean", budgets=(4_096, 5_120), multipliers=((2.0,), (2.0,))),
}


def prepare_scarce_data(out_dir: str | os.PathLike[str], case: ScarceCase) -> Path:
    """The case's corpus (the demo generator, the scarce domain small), its BPE tokenizer and stores
    (``OUT/data``); each step reused when done."""
    out = Path(out_dir)
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        texts = [doc for d in case.domains for doc in generate_documents(d, 200_000, seed=0)]
        train_bpe_tokenizer(texts, case.vocab_size, tok_dir)
    big = generate_corpus(out / "corpus", bytes_per_domain=case.abundant_bytes, domains=case.abundant)
    small = generate_corpus(out / "corpus_scarce", bytes_per_domain=case.scarce_bytes, domains=(case.scarce,))
    data = out / "data"
    prepare({d: os.fspath(p) for d, p in big.items()}, data, os.fspath(tok_dir), workers=1, holdout_every=20)
    prepare({d: os.fspath(p) for d, p in small.items()}, data, os.fspath(tok_dir), workers=1, holdout_every=2)
    return data


def scarce_config(out_dir: str | os.PathLike[str], case: ScarceCase, repetition: str) -> RunnerConfig:
    """The runner config of the case with ``ddo.repetition: repetition`` (targets identical in both)."""
    if repetition not in REPETITION_MODES:
        raise ValueError(f"repetition must be one of {REPETITION_MODES}, got {repetition!r}")
    settings = DemoSettings(mode="full", domains=case.domains, bytes_per_domain=case.abundant_bytes,
                            budgets=(case.budgets[0], case.budgets[-1]), target=case.target,
                            vocab_size=case.vocab_size,
                            seq_len=case.seq_len, batch_size=case.batch_size, lr=case.lr,
                            model=dict(case.model),
                            heldout_tokens=case.heldout_tokens, target_points=case.target_points,
                            seeds=case.seeds,
                            target_seeds=case.target_seeds, min_weight=0.02, multipliers=case.multipliers)
    # the demo's model, optimiser, eval, executor
    raw = config_to_dict(demo_config(out_dir, settings=settings))
    raw.pop("base_dir")
    raw["name"] = f"scarce-{case.name}-{repetition}"
    raw["max_epochs"] = case.max_epochs
    raw["ddo"]["repetition"] = repetition
    raw["ddo"]["budgets"] = list(case.budgets)
    if case.projection is not None:
        raw["ddo"]["projection"] = case.projection
    raw["target"].update(baselines=[layout.UNIFORM, layout.NATURAL, layout.DDO_N2], keep_checkpoints=False)
    return config_from_dict(raw, base_dir=Path(out_dir).resolve())


@dataclass(frozen=True)
class MixOutcome(Record):
    """One target mix: its scarce weight and epochs, and the objective per target seed."""

    label: str
    scarce_weight: float
    scarce_epochs: float
    losses: dict[int, float]

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.losses.values())))


@dataclass(frozen=True)
class ScarceCaseResult(Record):
    """What :func:`run_scarce_case` measured (``OUT/scarce_case.json``; a record of
    :mod:`autoscale_data._records`)."""

    case: dict[str, Any]
    scarce: str
    grid: list[MixOutcome]
    mixes: list[MixOutcome]
    best_weight: float
    proxy_tokens: dict[str, int]
    target_tokens: int
    #: per proxy design (``plain`` / ``matched``), what ``ddo.projection`` chose and why (projection.json's
    #: ``selection``; empty for a forced projection)
    chosen: dict[str, str] = field(default_factory=dict)

    def errors(self) -> dict[str, float]:
        """Each mix's absolute distance to the grid's best scarce weight."""
        return {m.label: abs(m.scarce_weight - self.best_weight) for m in self.mixes}


def _outcome(runner: MixtureRunner, label: str, weights: dict[str, float], case: ScarceCase,
             results: Callable[[str], RunResult | None]) -> MixOutcome:
    cfg, dom = runner.config, runner.domains
    losses, spec = {}, None
    for seed in case.target_seeds:
        spec = target_spec(cfg, dom, label, weights, seed)
        result = results(spec.run_id)
        if result is None:
            raise ValueError(f"target run {label!r} seed {seed} ({spec.run_id}) has no result")
        losses[seed] = result.value(MEAN_LOSS)
    assert spec is not None
    unique = dom.train_tokens[case.scarce] // cfg.seq_len
    return MixOutcome(label, spec.weights[case.scarce], spec.sequences[case.scarce] / unique, losses)


def _best_weight(grid: Sequence[MixOutcome]) -> float:
    """The grid's best scarce weight: the minimum of a parabola in log-weight through the best point and its
    neighbours (the best grid point itself at an edge of the grid)."""
    pts = sorted(grid, key=lambda m: m.scarce_weight)
    i = int(np.argmin([m.mean for m in pts]))
    if i == 0 or i == len(pts) - 1:
        return pts[i].scarce_weight
    x = np.log([pts[j].scarce_weight for j in (i - 1, i, i + 1)])
    y = np.asarray([pts[j].mean for j in (i - 1, i, i + 1)])
    a, b, _ = np.polyfit(x, y, 2)
    if a <= 0:
        return pts[i].scarce_weight
    return float(np.exp(np.clip(-b / (2 * a), x[0], x[2])))


def _autoscale_mixes(tag: str, trained: dict[str, float], projection: Any) -> dict[str, dict[str, float]]:
    """AutoScale's mix under both laws (``projection.json``'s ``repetition_law``): the one the runner trained
    and the other, reported one (the raw-token law's alone when the effective one was not computed)."""
    law = projection.repetition_law or {}
    if not law.get("weights"):
        return {f"autoscale ({tag}, raw law)": trained}
    if law.get("used"):
        return {f"autoscale ({tag}, effective law)": trained, f"autoscale ({tag}, raw "
                                                              "law)": law["raw_law_weights"]}
    return {f"autoscale ({tag}, raw law)": trained, f"autoscale ({tag}, effective law)": law["weights"]}


def run_scarce_case(out_dir: str | os.PathLike[str], case: ScarceCase | None = None, *,
                    log: Callable[[str], None] = print) -> ScarceCaseResult:
    """Train the case (see the module docstring) in ``out_dir`` and write ``scarce_case.json`` / ``.md``."""
    from ..runner import Ledger

    case = case or SCARCE_PRESETS["full"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prepare_scarce_data(out, case)
    mixes: dict[str, dict[str, float]] = {}
    proxy_tokens: dict[str, int] = {}
    chosen: dict[str, str] = {}
    runner = None
    for mode in REPETITION_MODES:
        runner = MixtureRunner(scarce_config(out, case, mode), out, log=log, progress=False,
                               allow_config_change=True)
        runner.run()
        for name in (layout.REPORT_MD, layout.REPORT_JSON):  # each config's report kept beside the other's
            if (out / name).is_file():
                os.replace(out / name, out / f"{Path(name).stem}_{mode}{Path(name).suffix}")
        fitted = layout.read(out / layout.FITS, layout.TARGET_MIXES_FILE)
        tag = "matched" if mode == REPETITION_MATCH else "plain"
        projection = layout.read(out / layout.FITS, layout.PROJECTION)
        mixes.update(_autoscale_mixes(tag, fitted["autoscale"], projection))
        if projection.selection:
            chosen[tag] = f"{projection.selection.chosen}: {projection.selection.reason}"
        mixes[f"ddo_n2 ({tag})"] = fitted["ddo_n2"]
        mixes.setdefault("uniform", fitted["uniform"])
        mixes.setdefault("natural", fitted["natural"])
        proxy_tokens[tag] = sum(s.total_tokens for specs in runner.proxy_specs().values() for s in specs)
    assert runner is not None
    grid_mixes = {f"grid {w:.3g}": case.grid_mix(w) for w in case.grid}
    # + the reported law's mixes
    runner.train_runs([target_spec(runner.config, runner.domains, label, w, seed)
                       for label, w in (grid_mixes | mixes).items() for seed in case.target_seeds])
    ledger = Ledger(out, lock=False)
    grid = [_outcome(runner, label, w, case, ledger.result) for label, w in grid_mixes.items()]
    outcomes = [_outcome(runner, label, w, case, ledger.result) for label, w in mixes.items()]
    target_tokens = target_spec(runner.config, runner.domains, "uniform", mixes["uniform"], 0).total_tokens
    result = ScarceCaseResult(case=json.loads(json.dumps(asdict(case))), scarce=case.scarce, grid=grid,
                              mixes=outcomes, best_weight=_best_weight(grid), proxy_tokens=proxy_tokens,
                              target_tokens=target_tokens, chosen=chosen)
    write_case(out, "scarce_case", result, format_scarce_table(result), log)
    return result


def format_scarce_table(result: ScarceCaseResult) -> str:
    """The case as a Markdown table: every mix's scarce weight, epochs, loss per seed and error."""
    seeds = sorted({s for m in result.grid + result.mixes for s in m.losses})
    head = (f"| mix | {result.scarce} weight | {result.scarce} epochs | "
            + " | ".join(f"loss seed {s}" for s in seeds) + " | mean | abs. error vs grid best |")
    lines = [head, "|" + "---|" * (5 + len(seeds))]
    errors = result.errors()
    for m in result.grid + result.mixes:
        err = f"{errors[m.label]:.3f}" if m.label in errors else ""
        lines.append(f"| {m.label} | {m.scarce_weight:.3f} | {m.scarce_epochs:.2f} | "
                     + " | ".join(f"{m.losses[s]:.4f}" for s in seeds) + f" | {m.mean:.4f} | {err} |")
    lines.append("")
    lines.append(f"grid's best {result.scarce} weight: {result.best_weight:.3f} (parabola in log-weight "
                 "through the best grid point and its neighbours)")
    for tag, tokens in result.proxy_tokens.items():
        lines.append(f"proxy tokens ({tag}): {tokens:,} = {tokens / result.target_tokens:.2f} target runs of "
                     f"{result.target_tokens:,} tokens")
    for tag, why in result.chosen.items():
        lines.append(f"AutoScale ({tag}) chose {why}")
    return "\n".join(lines)


def plan_budgets(text: str, case: ScarceCase) -> tuple[int, ...]:
    """The DDO budgets ``--budgets`` asks for: ``2`` or ``3`` (the preset's ``N1, N2``, with ``N0 = N1 / 2``
    added for 3, the runner's ``extra_budget: half``) or the budgets in tokens, comma-separated (two or more).

    Raises:
        ValueError: naming the value and what was expected (the budgets themselves are checked by
            :class:`ScarceCase`).
    """
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--budgets {text!r}: expected 2, 3 or comma-separated budgets in tokens") from None
    if len(values) == 1 and values[0] in (2, 3):
        n1, n2 = case.budgets[-2:]
        return (n1 // 2, n1, n2) if values[0] == 3 else (n1, n2)
    if len(values) < 2:
        raise ValueError(f"--budgets {text!r}: expected 2, 3 or two budgets in tokens or more")
    return tuple(values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m "
                                          "autoscale_data.demo.scarce", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory (reused: finished runs are kept)")
    parser.add_argument("--preset", choices=sorted(SCARCE_PRESETS), default="full")
    parser.add_argument("--proxy-seeds", default=None,
                        help="comma-separated proxy seeds (default: the preset's; two give the two-budget "
                             "rule replicates)")
    parser.add_argument("--budgets", default=None,
                        help="DDO budgets: 3 adds N0 = N1 / 2 below the preset's N1, N2 (the runner's "
                             "three-budget design), or comma-separated budgets in tokens (default: the "
                             "preset's two)")
    parser.add_argument("--projection", choices=sorted(PROJECTION_CHOICES), default=None,
                        help="ddo.projection of both configs (default: the runner's, auto)")
    args = parser.parse_args(argv)
    case = SCARCE_PRESETS[args.preset]
    if args.proxy_seeds is not None:
        case = replace(case, seeds=tuple(int(s) for s in args.proxy_seeds.split(",")))
    if args.projection is not None:
        case = replace(case, projection=args.projection)
    if args.budgets is not None:
        try:
            case = replace(case, budgets=plan_budgets(args.budgets, case))
        except ValueError as exc:
            parser.error(str(exc))
    run_scarce_case(args.out, case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The demo pipeline: synthetic corpus -> prepare -> the runner's full AutoScale experiment -> a table.

``run_demo(out_dir, quick=False)`` generates the embedded synthetic corpus
(:mod:`autoscale_data.demo.corpus`), trains a small byte-level BPE tokenizer on it and prepares the
token stores (``prepare``), then builds a :class:`~autoscale_data.runner.RunnerConfig` in code and
hands it to :class:`~autoscale_data.runner.MixtureRunner`; nothing here trains a model. The runner
trains the DDO proxies at N1 and N2, fits DDO at both, projects the mix to the target budget, trains
the target runs (AutoScale, uniform, DDO(N2)) and writes the report (``report.md``,
``report.json``, ``plots/``). Every step is reused when its output exists and every run goes
through the runner's ledger, so running the demo again trains nothing that already finished.

Why BPE and not bytes: a tiny GPT needs several hundred thousand byte tokens before it gets past
character statistics, which is more than a 10-minute CPU demo can afford for 2m+1 proxies at two
budgets. With a 1024-token BPE trained on the synthetic corpus (2.6-4 bytes per token) the model
reaches each domain's own structure within the demo's budgets, where the domains' losses saturate
at clearly different rates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._checks import check_int, check_number
from .._io import atomic_write_json
from ..runner import MixtureRunner, Report, RunnerConfig, config_from_dict, format_summary, layout
from ..solver.vocabulary import AUTO, MEAN_LOSS
from ..store import train_bpe_tokenizer
from .corpus import DEMO_DOMAINS, DOMAIN_DESCRIPTIONS, SHIFT_DOMAINS, ZIPF_DOMAINS, generate_documents
from .stores import prepare_synthetic_stores

__all__ = ["DEMO_PRESETS", "DemoSettings", "demo_config", "format_demo_table", "prepare_demo_data",
           "run_demo"]


@dataclass(frozen=True)
class DemoSettings:
    """One demo size: corpus, model, budgets and evaluation.

    Attributes:
        mode: ``"full"`` or ``"quick"`` (recorded in the output directory).
        domains: synthetic domains to generate.
        bytes_per_domain: text bytes generated per domain.
        vocab_size: size of the byte-level BPE trained on the synthetic corpus.
        budgets: the DDO budgets ``(N1, N2)`` in tokens.
        target: the target budget in tokens.
        seq_len: context length of the tiny GPT.
        batch_size: sequences per optimizer step.
        lr: peak AdamW learning rate.
        model: overrides of the ``gpt2-tiny`` preset (2 layers x 128 wide).
        heldout_tokens: held-out tokens per domain used for every evaluation.
        target_points: evaluations along each target run (the curve behind "tokens saved").
        seeds: training seeds of the proxy runs.
        target_seeds: training seeds of every target run (two or more give the seed spread).
        anytime: also train the AutoScale plan with the anytime schedule (``autoscale_anytime``).
        min_weight: lower bound on every DDO weight.
        multipliers: the DDO design, ``(up, down)`` multipliers (``ddo.multipliers``); more points per
            domain than the law has parameters, so the design can identify the law.
        meaningful: whether the budgets are large enough for the weights to mean something;
            when ``False`` the demo says that it only shows the procedure.
    """

    mode: str
    domains: tuple[str, ...]
    bytes_per_domain: int
    budgets: tuple[int, int]
    target: int
    vocab_size: int = 1024
    seq_len: int = 128
    batch_size: int = 8
    lr: float = 3e-3
    model: dict[str, Any] = field(default_factory=dict)
    heldout_tokens: int = 16_384
    target_points: int = 8
    seeds: tuple[int, ...] = (0,)
    target_seeds: tuple[int, ...] = (0,)
    anytime: bool = False
    min_weight: float = 0.05
    multipliers: tuple[tuple[float, ...], tuple[float, ...]] = ((3.0, 1.7), (3.0, 1.7))
    meaningful: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("full", "quick"):
            raise ValueError(f"demo mode {self.mode!r} is invalid: expected 'full' or 'quick'")
        unknown = sorted(set(self.domains) - set(DEMO_DOMAINS + SHIFT_DOMAINS + ZIPF_DOMAINS))
        if unknown or len(self.domains) < 2:
            raise ValueError(f"demo domains {list(self.domains)} are invalid: expected >= 2 of "
                             f"{DEMO_DOMAINS + SHIFT_DOMAINS + ZIPF_DOMAINS}")
        if not 0 < self.budgets[0] < self.budgets[1] < self.target:
            raise ValueError(f"demo budgets {self.budgets} and target {self.target} must satisfy 0 < N1 < N2 "
                             "< target")
        for name in ("bytes_per_domain", "vocab_size", "seq_len", "batch_size", "heldout_tokens",
                     "target_points"):
            check_int(f"demo {name}", getattr(self, name))
        check_number("demo lr", self.lr)


#: The two demo sizes. Budgets were chosen so that the full demo finishes in about 8 minutes on two
#: CPU cores and --quick in about 2 (see the README for the measured times). Both use designs with
#: spare points (4m+1 and 3m+1 runs a budget), so the design can identify each domain's law.
DEMO_PRESETS: dict[str, DemoSettings] = {
    # 86,016 = 84 batches of 8 x 128 tokens: every domain's 168 base sequences divide by 3 exactly, so
    # whole batches keep every multiplier of the 4m+1 design within 5%.
    "full": DemoSettings(mode="full", domains=DEMO_DOMAINS, bytes_per_domain=2_000_000,
                         budgets=(86_016, 172_032), target=524_288, target_seeds=(0, 1), anytime=True),
    "quick": DemoSettings(mode="quick", domains=("encyclopedia", "code", "web"), bytes_per_domain=400_000,
                          budgets=(16_384, 32_768), target=98_304, heldout_tokens=4_096, target_points=6,
                          anytime=True,
                          multipliers=((3.0, 1.7), (3.0,)), batch_size=4, meaningful=False),
}


def demo_config(out_dir: str | os.PathLike[str], *, quick: bool = False,
                settings: DemoSettings | None = None) -> RunnerConfig:
    """The runner config the demo runs on the prepared stores under ``OUT/data`` (see
    :func:`prepare_demo_data`).

    Args:
        out_dir: the demo's output directory.
        quick: use the ``quick`` preset instead of ``full``.
        settings: explicit settings (overrides ``quick``).

    Returns:
        A validated :class:`~autoscale_data.runner.RunnerConfig`.
    """
    s = settings or DEMO_PRESETS["quick" if quick else "full"]
    out = Path(out_dir).resolve()
    raw = {
        "name": f"autoscale-demo-{s.mode}",
        "domains": "data",
        "model": {"preset": "gpt2-tiny", "overrides": dict(s.model)},
        "seq_len": s.seq_len,
        "micro_batch_size": s.batch_size,
        "global_batch_size": s.batch_size,
        "optimizer": {"lr": s.lr, "weight_decay": 0.01, "warmup_fraction": 0.1, "betas": [0.9, 0.95]},
        "dropout": 0.0,
        "ddo": {"budgets": list(s.budgets), "multipliers": [list(s.multipliers[0]), list(s.multipliers[1])],
                "base_weights": "uniform",
                "objective": MEAN_LOSS, "min_weight": s.min_weight},
        "target": {"budget": s.target,
                   "baselines": [layout.UNIFORM, layout.DDO_N2] + ([layout.ANYTIME] if s.anytime else []),
                   "seeds": list(s.target_seeds)},
        "seeds": list(s.seeds),
        "eval": {"heldout_tokens_per_domain": s.heldout_tokens, "proxy_points": 1,
                 "target_points": s.target_points, "batch_size": 32},
        "backend": "torch",
        "checkpoint_every": 500,
        "cpu_threads": 1,
        "executor": {"max_parallel": AUTO},  # one one-thread run per core (two at once on 2 cores)
    }
    return config_from_dict(raw, base_dir=out)


def prepare_demo_data(out_dir: str | os.PathLike[str], settings: DemoSettings, *,
                      log: Callable[[str], None] = print) -> Path:
    """Generate the synthetic corpus, train its BPE tokenizer and prepare the stores (each step reused).

    Writes ``OUT/corpus/<domain>.jsonl``, ``OUT/tokenizer/tokenizer.json`` and one store per domain
    under ``OUT/data``.

    Returns:
        The prepared-store directory ``OUT/data``.
    """
    out = Path(out_dir)
    tok_file = out / "tokenizer" / "tokenizer.json"
    if not tok_file.is_file():
        # A fixed, seeded sample of every domain (not the corpus files), so the tokenizer is the
        # same whatever the corpus size.
        texts = [doc for d in settings.domains for doc in generate_documents(d, 200_000, seed=0)]
        train_bpe_tokenizer(texts, settings.vocab_size, out / "tokenizer")
        log(f"trained a {settings.vocab_size}-token byte-level BPE on the synthetic corpus: "
            f"{os.fspath(tok_file)}")
    return prepare_synthetic_stores(out / "data", domains=settings.domains,
                                    bytes_per_domain=settings.bytes_per_domain,
                                    tokenizer=out / "tokenizer", holdout_every=20, corpus_dir=out / "corpus")


def _check_mode(out: Path, mode: str) -> None:
    marker = out / "demo.json"
    try:
        previous = json.loads(marker.read_text()).get("mode")
    except (FileNotFoundError, ValueError):
        previous = None
    if previous is not None and previous != mode:
        raise ValueError(f"output directory {os.fspath(out)!r} holds a {previous!r} demo; the {mode!r} demo "
                         f"needs its own directory: pass a different --out")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(marker, {"mode": mode, "domains": {d: DOMAIN_DESCRIPTIONS[d] for d in DEMO_DOMAINS}})


def run_demo(out_dir: str | os.PathLike[str] = "autoscale-demo", *, quick: bool = False,
             log: Callable[[str], None] = print, progress: bool | None = False,
             settings: DemoSettings | None = None) -> Report:
    """Run the whole demo through the runner and log the summary table.

    Args:
        out_dir: output directory (stores, ledger, runs, fits, ``report.md``, ``plots/``).
        quick: the small ``quick`` preset (a smoke run: the procedure, not meaningful weights).
        log: where progress lines and the final table go.
        progress: show per-run progress bars.
        settings: explicit settings (overrides ``quick``).

    Returns:
        The runner's report (as written to ``OUT/report.json``).
    """
    s = settings or DEMO_PRESETS["quick" if quick else "full"]
    out = Path(out_dir)
    _check_mode(out, s.mode)
    prepare_demo_data(out, s, log=log)
    config = demo_config(out, settings=s)
    report = MixtureRunner(config, out, log=log, progress=progress).run()
    log("")
    log(format_demo_table(report, s))
    return report


def format_demo_table(report: Report, settings: DemoSettings | None = None) -> str:
    """The runner's summary table (:func:`~autoscale_data.runner.format_summary`) plus the demo's notes.

    Args:
        report: the runner's report.
        settings: the demo settings (to say whether the run is statistically meaningful).
    """
    lines = [format_summary(report)]
    if settings is not None and not settings.meaningful:
        lines += ["", "Note: --quick runs tiny budgets to show the procedure end to end; its weights and "
                      "savings are within seed noise and mean nothing. Run the full demo for the real "
                      "comparison."]
    domains = list(report.domains)
    width = max([len(d) for d in domains] + [8])
    lines += ["", "Domains (all synthetic, generated in-package; no downloads):"]
    lines += [f"  {d:<{width}}  {DOMAIN_DESCRIPTIONS[d]}" for d in domains if d in DOMAIN_DESCRIPTIONS]
    return "\n".join(lines)

"""Today's design against a smaller proxy model on the demo corpus: proxy cost, the chosen mix, its loss at the target.

One command trains (or reuses) two designs through the runner on the demo's synthetic corpus
(:mod:`autoscale_data.demo`) and prints one table:

- **today**: the demo itself (``demo_config``: target-sized proxies, separate runs, two budgets, the
  demo's proxy seeds); ``--out`` is a demo folder, so ``autoscale-data demo --out DIR`` followed by this
  script on ``DIR`` trains nothing again for it. Its target runs: AutoScale, uniform, DDO(N2).
- **proxy P** (one per ``--proxy-model``): the same config with ``ddo.proxy_model: P`` (every DDO proxy
  trains P, the target runs train the demo's model), in ``OUT/proxy-<tag>``. Its target runs: AutoScale
  and DDO(N2) of its own proxies; uniform is today's (the same runs: a target id does not depend on the
  proxy model).

For every mix: the proxies' cost (runs, FLOPs, and FLOPs as target runs, as the dry run prices them:
``planning.estimate.run_flops``), its weights, its final mean validation loss at the target per target seed,
and two paired-by-seed verdicts (``reporting.metrics.paired_verdict``, 95% Student-t): against today's
DDO(N2) and against uniform. Results: ``OUT/cheap_design.md`` and ``OUT/cheap_design.json``.

Run (the full demo's sizes; about 7 min of the demo on 2 idle cores plus two small-proxy designs):

    nice -n 5 python benchmarks/cheap_design.py --out runs/demo
    nice -n 5 python benchmarks/cheap_design.py --out runs/cheap-rt --real-text ../corpus   # code, tech, books
    nice -n 5 python benchmarks/cheap_design.py --out /tmp/cheap-quick --quick   # tiny sizes (the test's)

``--real-text CORPUS`` sets today's design up as ``benchmarks/eval_real_text.py`` does (a 4,096-token BPE on
the first ``--max-mb`` MB of each domain, GPT-2 2 x 128, multipliers 3 and 1.7, lr 1e-3), at budgets
``--budgets`` (32,768, 65,536) and target ``--target`` (262,144), one proxy seed and target seeds 0 and 1.

``--quick`` runs the structure at toy sizes (2 target seeds, 1-layer GPTs on 32-token contexts): its numbers
mean nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_PROXIES", "QUICK_PROXIES", "REAL_TEXT_PROXIES", "MixRow", "demo_today", "design_cost", "main",
           "markdown", "quick_settings", "real_text_today", "run_designs", "verdicts"]

#: The proxy models of the full run: gpt2-tiny at half the demo's width, 2 x 64 (3.1x fewer training FLOPs per
#: token than the demo's 2 x 128 at its 1,024-token vocabulary and 128-token context: the dry run's cheap design,
#: ``planning.cheap``), and at half its depth too, 1 x 64 (4.5x).
DEFAULT_PROXIES: tuple[dict[str, Any], ...] = (
    {"preset": "gpt2-tiny", "overrides": {"n_layer": 2, "n_embd": 64, "n_head": 2}},
    {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 64, "n_head": 2}},
)
#: ``--real-text``: at the 4,096-token vocabulary the output layer weighs more in the 2 x 128 target's FLOPs:
#: half the width, 2 x 64, is 2.5x smaller (the dry run's cheap design), 1 x 32 with one head 6.4x.
REAL_TEXT_PROXIES: tuple[dict[str, Any], ...] = (
    {"preset": "gpt2-tiny", "overrides": {"n_layer": 2, "n_embd": 64, "n_head": 2}},
    {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 32, "n_head": 1}},
)
#: ``--quick``: a 1 x 16 proxy for a 2 x 32 target.
QUICK_PROXIES: tuple[dict[str, Any], ...] = (
    {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 16, "n_head": 2}},
)


def quick_settings() -> Any:
    """``--quick``: the demo's quick preset at toy sizes (3 domains, 3m+1 design, 2 target seeds, no anytime run)."""
    from autoscale_data.demo import DEMO_PRESETS

    return dataclasses.replace(DEMO_PRESETS["quick"], bytes_per_domain=60_000, vocab_size=300, seq_len=32,
                               budgets=(4_096, 8_192), target=16_384, heldout_tokens=512, target_points=4,
                               model={"n_layer": 2, "n_embd": 32, "n_head": 2}, target_seeds=(0, 1), anytime=False)


@dataclasses.dataclass(frozen=True)
class MixRow:
    """One target mix of one design: what choosing it cost and how it did at the target.

    Attributes:
        design: ``"today"`` or ``"proxy <tag>"``.
        method: the target run's label (``autoscale``, ``ddo_n2``, ``uniform``).
        proxy_model: the proxies' model as text (``"(the target's)"`` for today).
        flops_per_token_ratio: the target model's training FLOPs per token over the proxy model's.
        budgets: the DDO budgets the mix needed (``()`` for uniform).
        runs: the proxy runs those budgets train (every proxy seed).
        proxy_tokens: their training tokens; proxy_flops: their training FLOPs.
        target_flops: one target run's training FLOPs.
        weights: the target mix.
        losses: final mean validation loss at the target, per target seed.
        choice: for AutoScale, what the projection rule used (``projection.method`` of the report).
    """

    design: str
    method: str
    proxy_model: str
    flops_per_token_ratio: float
    budgets: tuple[int, ...]
    runs: int
    proxy_tokens: int
    proxy_flops: float
    target_flops: float
    weights: dict[str, float]
    losses: dict[int, float]
    choice: str = ""

    def __post_init__(self) -> None:
        if self.target_flops <= 0:
            raise ValueError(f"target_flops = {self.target_flops!r} is invalid: expected a positive number")
        if self.proxy_flops < 0 or self.runs < 0 or self.proxy_tokens < 0:
            raise ValueError(f"proxy cost ({self.runs} runs, {self.proxy_tokens} tokens, {self.proxy_flops} FLOPs) "
                             "is invalid: expected non-negative numbers")

    @property
    def target_runs(self) -> float:
        """The proxies' FLOPs as a multiple of one target run's."""
        return self.proxy_flops / self.target_flops


def design_cost(config: Any, domains: Any, budgets: Sequence[int]) -> tuple[int, int, float, float]:
    """The DDO proxies of ``budgets`` under ``config`` as the runner plans them: ``(runs, tokens, FLOPs,
    one target run's FLOPs)`` (a run shared by two budgets counted once)."""
    from autoscale_data.runner.planning.estimate import run_flops
    from autoscale_data.runner.planning.specs import ddo_proxy_specs, target_run_flops

    specs = list({s.run_id: s for n in budgets for s in ddo_proxy_specs(config, domains, n)}.values())
    return (len(specs), sum(s.total_tokens for s in specs), float(sum(run_flops(s) for s in specs)),
            float(target_run_flops(config, domains)))


def _fpt(config: Any, domains: Any) -> float:
    """The proxies' training FLOPs per token under ``config`` (the target's model when unset)."""
    from autoscale_data.runner.planning.estimate import run_flops
    from autoscale_data.runner.planning.specs import ddo_proxy_specs

    spec = ddo_proxy_specs(config, domains, config.ddo.budgets[-1])[0]
    return run_flops(spec) / spec.total_tokens


def _target_losses(out: Path) -> dict[str, dict[int, float]]:
    """Final mean validation loss of every fixed-schedule target run of the folder's current plan, by label and seed."""
    from autoscale_data.runner import layout

    plan = json.loads((out / layout.RUN_LIST).read_text())
    found: dict[str, dict[int, float]] = {}
    for t in plan["targets"]:
        if t.get("schedule", "fixed") != "fixed":
            continue
        result = out / layout.RUNS / t["run_id"] / layout.RESULT
        if result.is_file():
            found.setdefault(t["label"], {})[int(t["seed"])] = float(json.loads(result.read_text())["mean_loss"])
    return found


def _model_text(proxy: dict[str, Any] | None) -> str:
    if proxy is None:
        return "(the target's)"
    fields = ", ".join(f"{k}={v}" for k, v in proxy.get("overrides", {}).items())
    return f"{proxy['preset']} ({fields})" if fields else proxy["preset"]


def _tag(proxy: dict[str, Any]) -> str:
    o = proxy.get("overrides", {})
    return f"{o['n_layer']}x{o['n_embd']}" if {"n_layer", "n_embd"} <= set(o) else proxy["preset"]


def _rows(design: str, config: Any, domains: Any, out: Path, proxy: dict[str, Any] | None, ratio: float,
          methods: Sequence[str]) -> list[MixRow]:
    from autoscale_data.runner import layout

    report = json.loads((out / layout.REPORT_JSON).read_text())
    losses = _target_losses(out)
    n1, n2 = config.ddo.budgets[-2:]
    needs = {layout.AUTOSCALE: (n1, n2), layout.DDO_N2: (n2,), layout.UNIFORM: ()}
    rows = []
    for method in methods:
        budgets = needs[method]
        runs, tokens, flops, target = design_cost(config, domains, budgets) if budgets else (
            0, 0, 0.0, design_cost(config, domains, (n2,))[3])
        choice = report["projection"].get("method", "") if method == layout.AUTOSCALE else ""
        rows.append(MixRow(design=design, method=method, proxy_model=_model_text(proxy), flops_per_token_ratio=ratio,
                           budgets=tuple(budgets), runs=runs, proxy_tokens=tokens, proxy_flops=flops,
                           target_flops=target, weights=dict(report["target_mixes"][method]),
                           losses=losses.get(method, {}), choice=choice))
    return rows


def run_designs(out: Path, today: Any, proxies: Sequence[dict[str, Any]], *,
                log: Callable[[str], None] = print) -> list[MixRow]:
    """Train (or reuse) today's design ``today`` in ``out`` and each proxy design in ``out/proxy-<tag>``; their rows."""
    from autoscale_data.runner import MixtureRunner, layout

    runner = MixtureRunner(today, out, log=log, progress=False, allow_config_change=True)
    runner.run()
    domains = runner.domains
    base_fpt = _fpt(today, domains)
    rows = _rows("today", today, domains, out, None, 1.0, (layout.AUTOSCALE, layout.DDO_N2, layout.UNIFORM))
    for proxy in proxies:
        cfg = dataclasses.replace(
            today, name=f"{today.name}-proxy-{_tag(proxy)}",
            ddo=dataclasses.replace(today.ddo, proxy_model=proxy),
            target=dataclasses.replace(today.target, baselines=(layout.DDO_N2,)))
        sub = out / f"proxy-{_tag(proxy)}"
        small = MixtureRunner(cfg, sub, log=log, progress=False, allow_config_change=True)
        small.run()
        rows += _rows(f"proxy {_tag(proxy)}", cfg, domains, sub, proxy, base_fpt / _fpt(cfg, domains),
                      (layout.AUTOSCALE, layout.DDO_N2))
    return rows


def demo_today(out: Path, settings: Any, log: Callable[[str], None] = print) -> Any:
    """The demo's config on its prepared stores under ``out`` (prepared when missing): today's design."""
    from autoscale_data.demo import demo_config, prepare_demo_data

    prepare_demo_data(out, settings, log=log)
    return demo_config(out, settings=settings)


def real_text_today(out: Path, corpus: Path, domains: Sequence[str], max_mb: float, budgets: tuple[int, int],
                    target: int) -> Any:
    """Today's design on the real-text corpus, set up as ``benchmarks/eval_real_text.py`` does (its BPE, stores and
    runner config; GPT-2 2 x 128), on the first ``max_mb`` MB of each domain's ``corpus/<domain>.jsonl``; one
    proxy seed (0) and target seeds 0 and 1, as the demo; target baselines uniform and DDO(N2)."""
    from autoscale_data.runner import layout

    sys.path.insert(0, os.fspath(Path(__file__).resolve().parent))
    import eval_real_text as ev

    sub = out / "corpus"
    sub.mkdir(parents=True, exist_ok=True)
    for d in domains:  # a prefix of whole documents: the same text every time
        dest = sub / f"{d}.jsonl"
        if dest.is_file():
            continue
        kept, size = [], 0
        with open(corpus / f"{d}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                kept.append(line)
                size += len(line.encode())
                if size >= max_mb * 1e6:
                    break
        tmp = dest.with_suffix(".part")
        tmp.write_text("".join(kept), encoding="utf-8")
        tmp.replace(dest)
    stores = ev.ensure_stores(out, sub, list(domains), 4096)
    cfg = ev.runner_config(stores, list(budgets), target, [0, 1], 1e-3, multipliers=(3.0, 1.7), max_parallel="auto",
                           heldout_tokens=8192)
    return dataclasses.replace(cfg, seeds=(0,), target=dataclasses.replace(
        cfg.target, baselines=(layout.UNIFORM, layout.DDO_N2), seeds=(0, 1)))


def _ms(values: Sequence[float]) -> str:
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return "n/a"
    return f"{v.mean():.4f} ± {v.std(ddof=1):.4f}" if v.size > 1 else f"{v.mean():.4f}"


def _against(row: MixRow, ref: MixRow) -> str:
    from autoscale_data.runner.reporting.metrics import paired_verdict

    if row is ref:
        return "—"
    v = paired_verdict(row.method, row.losses, ref.method, ref.losses)
    if v.ci_low is None or v.ci_high is None:
        return f"{v.difference.mean:+.4f}, {v.verdict.replace('_', ' ')}"
    return f"{v.difference.mean:+.4f} [{v.ci_low:+.4f}, {v.ci_high:+.4f}], {v.verdict.replace('_', ' ')}"


def verdicts(rows: Sequence[MixRow]) -> list[dict[str, Any]]:
    """Each row against today's DDO(N2) and uniform (paired by target seed, 95% t-interval)."""
    from autoscale_data.runner.reporting.metrics import paired_verdict

    ref = {r.method: r for r in rows if r.design == "today"}
    found = []
    for r in rows:
        entry: dict[str, Any] = {"design": r.design, "method": r.method}
        for name in ("ddo_n2", "uniform"):
            if name in ref and ref[name] is not r:
                entry[f"vs_today_{name}"] = dataclasses.asdict(
                    paired_verdict(r.method, r.losses, name, ref[name].losses))
        found.append(entry)
    return found


def markdown(rows: Sequence[MixRow]) -> str:
    """The comparison table: one row per mix; cost, mix, loss at the target and the two verdicts."""
    ref = {r.method: r for r in rows if r.design == "today"}
    domains = sorted(rows[0].weights)
    seeds = sorted({s for r in rows for s in r.losses})
    lines = ["| design | mix | proxy model (FLOPs/token: target / proxy) | budgets | proxy runs | proxy FLOPs | "
             "cost (target runs) | weights (" + ", ".join(domains) + ") | loss at target per seed ("
             + ", ".join(map(str, seeds)) + ") | mean ± sd | vs today's DDO(N2): diff [95% CI], verdict | "
             "vs uniform: diff [95% CI], verdict |",
             "|---|---|---|---|---:|---:|---:|---|---|---:|---|---|"]
    for r in rows:
        method = r.method + (f" (rule used: {r.choice})" if r.choice else "")
        budgets = ", ".join(f"{n:,}" for n in r.budgets) or "—"
        lines.append(
            f"| {r.design} | {method} | {r.proxy_model} ({r.flops_per_token_ratio:.2f}x) | {budgets} | {r.runs} | "
            f"{r.proxy_flops:.3g} | {r.target_runs:.2f} | " + ", ".join(f"{r.weights[d]:.3f}" for d in domains)
            + " | " + ", ".join(f"{r.losses[s]:.4f}" if s in r.losses else "—" for s in seeds)
            + f" | {_ms(list(r.losses.values()))} | "
            + (_against(r, ref["ddo_n2"]) if "ddo_n2" in ref else "n/a") + " | "
            + (_against(r, ref["uniform"]) if "uniform" in ref else "n/a") + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from autoscale_data._io import atomic_write_json, atomic_write_text
    from autoscale_data.demo import DEMO_PRESETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the demo folder (today's design) and the proxy designs below it")
    ap.add_argument("--quick", action="store_true", help="toy sizes (the test's): the structure, not a result")
    ap.add_argument("--proxy-model", action="append", default=None, metavar="JSON",
                    help='a proxy model, {"preset": ..., "overrides": {...}} (repeatable; default 1 x 64, or 1 x 16 '
                         "with --quick)")
    ap.add_argument("--quiet", action="store_true", help="do not print the runner's progress lines")
    ap.add_argument("--real-text", metavar="CORPUS", default=None,
                    help="the real-text corpus (<domain>.jsonl) instead of the demo's, e.g. /work/corpus")
    ap.add_argument("--domains", default="code,tech,books", help="--real-text: its domains")
    ap.add_argument("--max-mb", type=float, default=3.0, help="--real-text: MB of each domain's file used")
    ap.add_argument("--budgets", default="32768,65536", help="--real-text: N1,N2 in tokens")
    ap.add_argument("--target", type=int, default=262_144, help="--real-text: the target budget in tokens")
    args = ap.parse_args(argv)
    log = (lambda _: None) if args.quiet else print
    out = Path(args.out)
    if args.real_text:
        n1, n2 = (int(b) for b in args.budgets.split(","))
        today = real_text_today(out, Path(args.real_text), [d for d in args.domains.split(",") if d], args.max_mb,
                                (n1, n2), args.target)
        default = REAL_TEXT_PROXIES
        where = f"Real-text corpus ({args.domains}, first {args.max_mb:g} MB each, BPE 4,096)"
    else:
        settings = quick_settings() if args.quick else DEMO_PRESETS["full"]
        today = demo_today(out, settings, log)
        default = QUICK_PROXIES if args.quick else DEFAULT_PROXIES
        where = f"Demo corpus ({'--quick toy sizes' if args.quick else 'full preset'})"
    proxies = [json.loads(p) for p in args.proxy_model] if args.proxy_model else list(default)
    rows = run_designs(out, today, proxies, log=log)
    table = markdown(rows)
    head = (f"{where}: budgets {', '.join(f'{n:,}' for n in today.ddo.budgets)}, target {today.target.budget:,} "
            f"tokens, proxy seeds {list(today.seeds)}, target seeds {list(today.target.seeds)}; loss = mean "
            "validation loss over domains at the end of the target run.\n\n")
    atomic_write_text(out / "cheap_design.md", head + table)
    atomic_write_json(out / "cheap_design.json", {
        "quick": args.quick, "rows": [{**dataclasses.asdict(r), "target_runs": r.target_runs} for r in rows],
        "verdicts": verdicts(rows)})
    print(head + table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

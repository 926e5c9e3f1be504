"""AutoScale on real multi-domain text at CPU scale: DDO fit quality, projection error, tokens saved.

One command builds (or reuses) the real-text corpus with ``../shared/corpus/build_corpus.sh``,
trains a byte-level BPE on it, prepares the token stores and runs the whole pipeline through the
runner (``MixtureRunner``: proxies at N1 and N2 for every seed -> DDO -> projection -> target runs
for AutoScale, uniform, natural share, DDO(N2) and AutoScale on the anytime schedule, whose
cumulative per-domain tokens follow the fitted mixture plan's allocation path). It then trains, through the same runner and
ledger, (a) extra held-out perturbation runs at N2 (multipliers not used by the fit) to measure the
DDO loss model's AAR out of sample, and (b) the DDO runs at a third budget N3 to compare DDO(N3)
with the weights projected from N1 and N2 by both projections: geometric (the Theorem-1 path
through the DDO optima) and joint (one law fitted to the runs of N1 and N2, optimised at N3;
``--projection`` picks the one the runner's AutoScale target runs use). It also tabulates the validation loss at every
intermediate evaluation point of the anytime and the fixed AutoScale runs. Results go to ``OUT/results.md`` and
``OUT/results.json``; every run is resumable (re-running the command reuses finished runs).

Usage (the defaults took 86 minutes on a 2-core CPU, one training thread per run):

    python benchmarks/eval_real_text.py --out runs/real-text
    python benchmarks/eval_real_text.py --out /tmp/rt --max-mb-per-domain 2 --budgets 16384,32768,65536 \\
        --target 131072 --seeds 0,1        # a reduced smoke version (minutes)

``--ddo-budgets 3`` runs the runner's three-budget design instead: ``ddo.budgets: [N1, N2]`` with
``extra_budget: half``, so the proxies run at N0 = N1 / 2, N1 and N2 and the runner's three-budget rule
(``projection: auto``: every candidate refitted without N2 and scored there) sets the AutoScale mix.
``--budgets N1,N2`` (two values) skips the N3 check and the held-out runs; ``--proxy-seeds`` trains the
proxies on fewer seeds than the targets. Every target run's loss (AutoScale, DDO(N2), uniform, natural per
target seed) and what ``auto`` chose go to ``results.md`` either way:

    python benchmarks/eval_real_text.py --out /tmp/rt3 --corpus /work/corpus --domains code,tech,books \\
        --vocab 2048 --budgets 49152,98304 --ddo-budgets 3 --target 393216 --seeds 0,1 --proxy-seeds 0 \\
        --heldout-multipliers ''
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BUILD = REPO.parent / "shared" / "corpus" / "build_corpus.sh"
DEFAULT_DOMAINS = ("code", "tech", "reference", "books", "web")


#: ``--ddo-budgets``: the runner's two-budget design or its three-budget one (``extra_budget: half``)
DDO_BUDGET_CHOICES = (2, 3)


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    from autoscale_data.runner.config.sections import DDOConfig
    from autoscale_data.solver.vocabulary import PROJECTION_CHOICES

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory (corpus, tokenizer, stores, runs, results)")
    p.add_argument("--corpus", default=None, help="an existing corpus directory (<domain>.jsonl); default OUT/corpus")
    p.add_argument("--work", default=None, help="build_corpus.sh work directory (default OUT/corpus-work)")
    p.add_argument("--build-script", default=os.fspath(DEFAULT_BUILD), help="path of build_corpus.sh")
    p.add_argument("--max-mb-per-domain", type=int, default=8)
    p.add_argument("--domains", default=",".join(DEFAULT_DOMAINS), help="comma-separated corpus domains (>= 2)")
    p.add_argument("--vocab", type=int, default=4096, help="BPE vocabulary size")
    p.add_argument("--budgets", default="98304,196608,393216",
                   help="N1,N2,N3 in tokens (N3 checks the projection); N1,N2 alone skips the N3 check")
    p.add_argument("--ddo-budgets", type=int, choices=DDO_BUDGET_CHOICES, default=2,
                   help="proxy budgets of the runner's design: 2 (N1, N2, the default) or 3 (N0 = N1 / 2, N1, N2: "
                        "ddo.extra_budget: half, so the runner's three-budget rule decides)")
    p.add_argument("--target", type=int, default=1_048_576, help="target budget in tokens")
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds (>= 2 for a spread)")
    p.add_argument("--proxy-seeds", default=None,
                   help="comma-separated seeds of the proxies (default: --seeds; the targets always run --seeds)")
    p.add_argument("--multipliers", default="3,1.7",
                   help="DDO multipliers, each applied up (x) and down (/) at every budget; one value is the "
                        "paper's 2m+1 design, which does not identify the 3-parameter law")
    p.add_argument("--heldout-multipliers", default="2",
                   help="extra multipliers at N2 for the held-out AAR ('' for none)")
    p.add_argument("--projection", choices=PROJECTION_CHOICES, default=DDOConfig().projection,
                   help="what sets the AutoScale target mix (ddo.projection; default the runner's); every "
                        "candidate is evaluated at N3 either way")
    p.add_argument("--allow-config-change", action="store_true",
                   help="continue in an OUT whose runner config differs (e.g. another --projection): finished runs "
                        "whose settings still match are reused, only the changed ones train")
    p.add_argument("--no-anytime", action="store_true",
                   help="leave out the autoscale_anytime target runs (two target runs a seed fewer)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--heldout-tokens", type=int, default=16_384,
                   help="held-out validation tokens per domain, evaluated at the end of every proxy run")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per run (1 is robust on a shared 2-core machine)")
    p.add_argument("--max-parallel", default="auto", metavar="N|auto",
                   help="runs at once (default auto: cores // threads, so two one-thread runs on 2 cores)")
    return p.parse_args(argv)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected comma-separated integers") from None
    if not values:
        raise ValueError(f"{what} {text!r}: expected one integer or more")
    return values


def plan_budgets(budgets: str, ddo_budgets: int = 2) -> tuple[list[int], int | None]:
    """The runner's DDO budgets and the N3 check's budget from ``--budgets`` and ``--ddo-budgets``.

    Args:
        budgets: ``"N1,N2,N3"`` or ``"N1,N2"`` (no N3 check), increasing token counts.
        ddo_budgets: 2 (the runner trains proxies at N1 and N2) or 3 (also at N0 = N1 // 2, the runner's
            ``extra_budget: half``).

    Returns:
        ``ddo.budgets`` as the runner will read them, and N3 (``None``: no N3 check).

    Raises:
        ValueError: naming the value and what was expected.
    """
    if ddo_budgets not in DDO_BUDGET_CHOICES:
        raise ValueError(f"--ddo-budgets {ddo_budgets!r}: expected one of {DDO_BUDGET_CHOICES}")
    values = _ints(budgets, "--budgets")
    if len(values) not in (2, 3) or any(v <= 0 for v in values) or any(a >= b for a, b in zip(values[:-1], values[1:], strict=True)):
        raise ValueError(f"--budgets {budgets!r}: expected increasing positive N1,N2 or N1,N2,N3 in tokens")
    if ddo_budgets == 3 and values[0] // 2 < 1:
        raise ValueError(f"--budgets {budgets!r}: N1 must be at least 2 tokens for N0 = N1 / 2")
    from autoscale_data.runner.config.runner_config import with_extra_budget

    ddo = list(with_extra_budget(values[:2], "half" if ddo_budgets == 3 else "none"))
    return ddo, (values[2] if len(values) == 3 else None)


def ensure_corpus(args: argparse.Namespace, out: Path, domains: list[str]) -> Path:
    """The corpus directory, built with build_corpus.sh when a domain file is missing."""
    corpus = Path(args.corpus) if args.corpus else out / "corpus"
    if all((corpus / f"{d}.jsonl").is_file() for d in domains):
        return corpus
    script = Path(args.build_script)
    if not script.is_file():
        raise FileNotFoundError(f"corpus builder {os.fspath(script)!r} not found: pass --build-script or --corpus")
    work = Path(args.work) if args.work else out / "corpus-work"
    cmd = ["bash", os.fspath(script), os.fspath(corpus), os.fspath(work),
           "--max-mb-per-domain", str(args.max_mb_per_domain), "--domains", ",".join(domains)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return corpus


def sample_texts(corpus: Path, domains: list[str], max_chars: int) -> list[str]:
    """Each domain's first documents (``corpus/<domain>.jsonl``) until just over ``max_chars`` characters:
    what the BPE is trained on."""
    texts: list[str] = []
    for d in domains:
        size = 0
        with open(corpus / f"{d}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                texts.append(json.loads(line)["text"])
                size += len(texts[-1])
                if size > max_chars:
                    break
    return texts


def ensure_stores(out: Path, corpus: Path, domains: list[str], vocab: int) -> Path:
    """Train the BPE (once) on a sample of every domain and prepare the stores (reused when done)."""
    from autoscale_data.store.prepare import prepare
    from autoscale_data.store.tokenizers import train_bpe_tokenizer

    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        train_bpe_tokenizer(sample_texts(corpus, domains, 3_000_000), vocab, tok_dir)
    stores = out / "stores"
    prepare({d: os.fspath(corpus / f"{d}.jsonl") for d in domains}, stores, os.fspath(tok_dir), progress=False)
    return stores


def runner_config(stores: Path, budgets: list[int], target: int, seeds: list[int], lr: float,
                  multipliers: tuple[float, ...] = (3.0,), threads: int = 1,
                  max_parallel: int | str = 1, heldout_tokens: int = 16_384, projection: str = "auto",
                  proxy_seeds: list[int] | None = None) -> Any:
    """The GPT-2 (2 x 128) runner config of ENV.md's pilot, at the given budgets (``[N1, N2]`` or ``[N0, N1, N2]``);
    the proxies run on ``proxy_seeds`` (default ``seeds``), the targets on ``seeds``."""
    from autoscale_data.runner import config_from_dict

    raw = {
        "name": "real-text-cpu", "domains": os.fspath(stores),
        "model": {"preset": "gpt2-tiny"}, "seq_len": 128, "micro_batch_size": 16, "global_batch_size": 16,
        "optimizer": {"lr": lr, "weight_decay": 0.01, "warmup_fraction": 0.1, "betas": [0.9, 0.95]},
        "dropout": 0.0,
        "ddo": {"budgets": budgets, "multipliers": [list(multipliers), list(multipliers)], "objective": "mean_loss", "min_weight": 0.02,
                "projection": projection},
        "target": {"budget": target, "baselines": ["uniform", "natural", "ddo_n2", "autoscale_anytime"],
                   "seeds": seeds},
        "seeds": seeds if proxy_seeds is None else proxy_seeds, "eval": {"heldout_tokens_per_domain": heldout_tokens, "target_points": 8, "batch_size": 32},
        "backend": "torch", "checkpoint_every": 500, "cpu_threads": threads,
        "executor": {"max_parallel": max_parallel},
    }
    return config_from_dict(raw)


def table_for(runner: Any, specs: list[Any], seed: int | None = None) -> Any:
    """A solver RunTable of finished runs among ``specs`` (optionally one seed)."""
    from autoscale_data.solver import Run, RunTable

    runs = []
    for s in specs:
        if seed is not None and s.seed != seed:
            continue
        res = json.loads((runner.out / "runs" / s.run_id / "result.json").read_text())
        runs.append(Run(s.run_id, tokens={d: float(v) for d, v in res["tokens"].items()},
                        loss=dict(res["losses"]), seed=s.seed, label=s.label))
    return RunTable(runs)


def projection_errors(tables: dict[int, Any], budgets: tuple[int, int, int],
                      opts: dict[str, Any]) -> tuple[dict[int, Any], dict[str, Any]]:
    """DDO at N1, N2, N3 and both projections from N1, N2 to N3, each with its error against DDO(N3).

    Args:
        tables: the DDO runs (one seed) per budget.
        budgets: N1, N2 and the held-out N3.
        opts: the DDO options (objective, bounds, token caps), shared by the joint fit.

    Returns:
        The DDO results per budget, and the per-seed entry of ``results.json``: DDO weights and fit
        AAR per budget; the geometric (``projected_n3``, ``projection_error_*``) and the joint
        (``joint_projected_n3``, ``joint_projection_error_*``, ``joint_fit_aar``) and the robust
        (``robust_projected_n3``, ``robust_projection_error_*``) projections to N3, and no projection
        at all (``n2_as_is_*``: the N2 optimum used at N3 unchanged, the baseline every projection must beat).
    """
    from autoscale_data.solver import fit_ddo
    from autoscale_data.solver.contrib import compare_projections, weight_distance
    from autoscale_data.solver.projections import project_all
    from autoscale_data.solver.robust import log_share_sd, robust_project

    n1, n2, n3 = budgets
    fits = {n: fit_ddo(tables[n], **opts) for n in budgets}
    both = compare_projections([tables[n1], tables[n2]], n3, heldout=fits[n3], ddo=[fits[n1], fits[n2]], **opts)
    geo, joint = both["heldout"]["geometric"], both["heldout"]["joint"]
    robust = robust_project([fits[n1], fits[n2]], n3, [log_share_sd(fits[n1]), log_share_sd(fits[n2])],
                            token_caps=opts.get("token_caps"), max_epochs=opts.get("max_epochs"))
    rob = weight_distance(robust.weights, fits[n3].weights)
    stay = weight_distance(fits[n2].weights, fits[n3].weights)  # no projection: N2's optimum as is
    auto = project_all([tables[n1], tables[n2]], n3, optima=[fits[n1], fits[n2]], method="auto", **opts)
    chose = weight_distance(auto.weights, fits[n3].weights)  # the default's answer
    return fits, {"weights": {n: fits[n].weights for n in budgets}, "projected_n3": geo["weights"],
                  "projection_error_l1": geo["l1"], "projection_error_max": geo["max_abs"],
                  "joint_projected_n3": joint["weights"], "joint_projection_error_l1": joint["l1"],
                  "joint_projection_error_max": joint["max_abs"], "joint_fit_aar": both["joint"]["aar"],
                  "robust_projected_n3": robust.weights, "robust_projection_error_l1": rob["l1"],
                  "robust_projection_error_max": rob["max_abs"], "n2_as_is_projected_n3": dict(fits[n2].weights),
                  "n2_as_is_projection_error_l1": stay["l1"], "n2_as_is_projection_error_max": stay["max_abs"],
                  "auto_projected_n3": auto.weights, "auto_chosen": auto.used, "auto_reason": auto.selection.reason,
                  "auto_projection_error_l1": chose["l1"], "auto_projection_error_max": chose["max_abs"],
                  "fit_aar": {n: fits[n].aar for n in budgets}}


def _ms(values: list[float]) -> str:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return "n/a"
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if v.size > 1 else f"{v.mean():.3f}"


#: the fixed target mixes whose losses ``results.md`` tabulates per target seed (AutoScale first)
TARGET_MIXES = ("autoscale", "ddo_n2", "uniform", "natural")


def target_losses(runner: Any, seeds: list[int]) -> dict[str, dict[int, float]]:
    """Each fixed target mix's mean validation loss per target seed (a mix whose runs are missing is left out;
    AutoScale's runs are DDO(N2)'s when the default kept the N2 optimum: the same run ids)."""
    from autoscale_data.runner import Ledger, layout, target_spec
    from autoscale_data.solver.vocabulary import MEAN_LOSS

    fitted = layout.read(runner.out / layout.FITS, layout.TARGET_MIXES_FILE)
    ledger = Ledger(runner.out, lock=False)
    losses: dict[str, dict[int, float]] = {}
    for label in (m for m in TARGET_MIXES if m in fitted):
        per = {}
        for seed in seeds:
            result = ledger.result(target_spec(runner.config, runner.domains, label, fitted[label], seed).run_id)
            if result is not None:
                per[seed] = float(result.value(MEAN_LOSS))
        if per:
            losses[label] = per
    return losses


def versus(ours: dict[int, float], theirs: dict[int, float], baseline: str) -> dict[str, Any]:
    """AutoScale against one baseline at the target, paired by seed: the report's seed-noise verdict (a two-sided
    95% t-interval of the per-seed differences) with the differences themselves, and ``same_runs`` when they are
    all 0 (AutoScale's mix was the baseline's)."""
    from autoscale_data.runner.reporting.metrics import paired_verdict

    v = paired_verdict("autoscale", ours, baseline, theirs).to_json()
    diffs = [ours[s] - theirs[s] for s in v["seeds"]]
    return v | {"differences": diffs, "same_runs": bool(diffs) and not any(diffs)}


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    from autoscale_data.runner import MixtureRunner, layout
    from autoscale_data.runner.planning.specs import ddo_proxy_specs
    from autoscale_data.solver.design import run_objective

    t0 = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    domains = [d for d in args.domains.split(",") if d]
    ddo_budgets, n3 = plan_budgets(args.budgets, args.ddo_budgets)
    n1, n2 = ddo_budgets[-2:]
    seeds = _ints(args.seeds, "--seeds")
    proxy_seeds = _ints(args.proxy_seeds, "--proxy-seeds") if args.proxy_seeds is not None else None
    corpus = ensure_corpus(args, out, domains)
    stores = ensure_stores(out, corpus, domains, args.vocab)
    t_data = time.time() - t0

    mults = tuple(float(x) for x in args.multipliers.split(",") if x.strip())
    cfg = runner_config(stores, ddo_budgets, args.target, seeds, args.lr, mults, threads=args.threads,
                        max_parallel=args.max_parallel, heldout_tokens=args.heldout_tokens,
                        projection=args.projection, proxy_seeds=proxy_seeds)
    if args.no_anytime:
        from dataclasses import replace

        kept = tuple(b for b in cfg.target.baselines if b != "autoscale_anytime")
        cfg = replace(cfg, target=replace(cfg.target, baselines=kept))
    runner = MixtureRunner(cfg, out / "run", allow_config_change=args.allow_config_change)
    report = runner.run()
    d = runner.domains
    caps = {k: float(v) for k, v in d.train_tokens.items()}
    opts = {"objective": "mean_loss", "min_weight": 0.02, "token_caps": caps}

    per_seed: dict[int, dict[str, Any]] = {}
    if n3 is not None:
        # (b) DDO at a third budget, same design, same ledger
        specs3 = ddo_proxy_specs(runner.config, d, n3)
        # (a) held-out perturbations at N2 (multipliers the fit never saw)
        held: list[Any] = []
        for m in (float(x) for x in args.heldout_multipliers.split(",") if x.strip()):
            alt = runner_config(stores, ddo_budgets, args.target, seeds, args.lr, multipliers=(m,),
                                threads=args.threads, heldout_tokens=args.heldout_tokens, proxy_seeds=proxy_seeds)
            held += [s for s in ddo_proxy_specs(alt, d, n2) if s.perturbed is not None]
        runner.train_runs(specs3 + held)  # one batch: the executor's slots stay busy across both sets

        specs = runner.proxy_specs()
        for seed in runner.config.seeds:
            tables = {n: table_for(runner, sp, seed) for n, sp in ((n1, specs[n1]), (n2, specs[n2]), (n3, specs3))}
            fits, analysis = projection_errors(tables, (n1, n2, n3), opts)
            rel = []
            if held:
                held_tab = table_for(runner, held, seed)
                for run, y in zip(held_tab.runs, run_objective(held_tab, "mean_loss"), strict=True):
                    dom = next(s.perturbed for s in held if s.run_id == run.run_id)
                    x = run.tokens[dom] / fits[n2].base_tokens[dom]
                    rel.append(abs(float(fits[n2].fits[dom].predict(x)) - y) / y)
            saved = {b: per[str(seed)].to_json() for b, per in report.tokens_saved_per_seed.items()
                     if b in ("uniform", "natural", "ddo_n2") and str(seed) in per}
            per_seed[seed] = {**analysis, "heldout_aar": float(np.mean(rel)) if rel else None, "tokens_saved": saved}

    saved_by_target_seed = {str(seed): {b: per[str(seed)].to_json() for b, per in report.tokens_saved_per_seed.items()
                                        if b in ("uniform", "natural", "ddo_n2") and str(seed) in per}
                            for seed in seeds}
    losses = target_losses(runner, seeds)
    projection = layout.read(runner.out / layout.FITS, layout.PROJECTION)
    pooled = report.to_json()
    results = {"domains": list(d.names), "budgets": [n1, n2] + ([n3] if n3 is not None else []),
               "ddo_budgets": list(ddo_budgets), "target": args.target, "seeds": seeds,
               "proxy_seeds": list(runner.config.seeds), "projection": args.projection,
               "vocab": args.vocab, "max_mb_per_domain": args.max_mb_per_domain, "per_seed": per_seed,
               "selection": projection.selection or {}, "target_losses": losses,
               "versus": {b: versus(losses["autoscale"], losses[b], b) for b in TARGET_MIXES[1:]
                          if "autoscale" in losses and b in losses},
               "tokens_saved": saved_by_target_seed,
               "pooled_report_tokens_saved": pooled["tokens_saved"],
               "anytime_vs_fixed": pooled["anytime_vs_fixed"],
               "pooled_bootstrap": pooled["bootstrap"], "wall_time_s": time.time() - t0,
               "data_time_s": t_data, "median_tokens_per_s": report.throughput.tokens_per_s_median}
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    (out / "results.md").write_text(markdown(results))
    print(markdown(results))
    return 0


def markdown(r: dict[str, Any]) -> str:
    """The results table (mean ± std over seeds; per-seed values in results.json).

    ``r`` is the in-memory results dict of :func:`main` (integer budget keys). With an N3 check
    (``budgets`` of three) it holds the DDO weights, the projections to N3 and their errors; always the
    tokens saved per target seed and, where ``r`` has them, every target mix's loss per seed with AutoScale's
    paired verdicts and what the default chose.
    """
    seeds = r["per_seed"]
    doms = r["domains"]
    ddo = r.get("ddo_budgets") or r["budgets"][:2]
    n1, n2 = r["budgets"][:2]
    n3 = r["budgets"][2] if len(r["budgets"]) > 2 else None
    design = ", ".join(f"N{i + 3 - len(ddo)}={b:,}" for i, b in enumerate(ddo))
    lines = [f"Real text, {len(doms)} domains ({', '.join(doms)}), BPE {r['vocab']}, GPT-2 2x128, "
             f"seeds {r['seeds']}" + (f" (proxies: {r['proxy_seeds']})" if r.get("proxy_seeds", r["seeds"]) != r["seeds"]
                                      else "")
             + f"; budgets {design}" + (f", N3={n3:,}" if n3 is not None else " (no N3 check)")
             + f", target {r['target']:,} tokens; wall time {r['wall_time_s'] / 60:.1f} min; AutoScale target mix "
             f"from the {r.get('projection', 'geometric')} projection.", ""]
    if seeds and n3 is not None:
        lines += ["| quantity | " + " | ".join(doms) + " |", "|---|" + "---:|" * len(doms)]
        for n in (n1, n2, n3):
            lines.append(f"| DDO weight at {n:,} | "
                         + " | ".join(_ms([s["weights"][n][k] for s in seeds.values()]) for k in doms) + " |")
        for name, key in (("geometric projection from N1, N2", "projected_n3"),
                          ("joint projection from N1, N2", "joint_projected_n3"),
                          ("robust projection from N1, N2", "robust_projected_n3"),
                          ("no projection: the N2 optimum as is", "n2_as_is_projected_n3"),
                          ("auto (the default) from N1, N2", "auto_projected_n3")):
            lines.append(f"| {name} to {n3:,} | "
                         + " | ".join(_ms([s[key][k] for s in seeds.values()]) for k in doms) + " |")
        lines += ["", "auto's choice at N3 per seed: " + "; ".join(
            f"seed {k}: {s.get('auto_chosen', '?')} ({s.get('auto_reason', '')})" for k, s in seeds.items())]
    lines += ["", "| metric | mean ± std over seeds |", "|---|---:|"]
    if seeds and n3 is not None:
        lines += [f"| DDO fit AAR at N2 (in-sample) | {_ms([s['fit_aar'][n2] for s in seeds.values()])} |",
                  f"| (a) DDO loss-model AAR on held-out perturbations at N2 | "
                  f"{_ms([s['heldout_aar'] for s in seeds.values()])} |",
                  f"| joint law fit AAR over N1 and N2 (in-sample) | {_ms([s['joint_fit_aar'] for s in seeds.values()])} |"]
        for name, pre in (("geometric projection", ""), ("joint projection", "joint_"), ("robust projection", "robust_"),
                          ("no projection (N2 optimum as is)", "n2_as_is_"), ("auto (the default)", "auto_")):
            lines += [f"| (b) {name} error at N3: L1 distance of weights | "
                      f"{_ms([s[pre + 'projection_error_l1'] for s in seeds.values()])} |",
                      f"| (b) {name} error at N3: max abs weight difference | "
                      f"{_ms([s[pre + 'projection_error_max'] for s in seeds.values()])} |"]
    saved = r.get("tokens_saved") or {str(k): s["tokens_saved"] for k, s in seeds.items()}
    for b in ("uniform", "natural", "ddo_n2"):
        vals = [per.get(b, {}).get("signed_fraction") for per in saved.values()]
        shown = ", ".join("not reached" if v is None else f"{v:+.1%}" for v in vals)
        lines.append(f"| (c) tokens saved by AutoScale vs {b} at the target (per seed) | {shown} |")
    lines += ["", "Negative savings mean the baseline reached AutoScale's final loss with that many fewer tokens."]
    lines += target_markdown(r)
    lines += anytime_markdown(r.get("anytime_vs_fixed"))
    return "\n".join(lines) + "\n"


def target_markdown(r: dict[str, Any]) -> list[str]:
    """What the runner's default chose, and every fixed mix's loss at the target per seed with AutoScale's
    paired verdicts (nothing when ``r`` predates them)."""
    losses = r.get("target_losses")
    if not losses:
        return []
    lines = [""]
    sel = r.get("selection") or {}
    if sel:
        lines += [f"The runner's `ddo.projection: {r.get('projection', 'auto')}` over {len(r.get('ddo_budgets', []))} "
                  f"budgets chose **{sel.get('chosen', '?')}**: {sel.get('reason', '')}", ""]
    seeds = sorted({int(s) for per in losses.values() for s in per})
    lines += [f"Target runs at {r['target']:,} tokens (mean validation loss over domains):", "",
              "| mix | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std |", "|---|" + "---:|" * (len(seeds) + 1)]
    for label, per in losses.items():
        vals = {int(k): v for k, v in per.items()}
        lines.append(f"| {label} | " + " | ".join(f"{vals[s]:.4f}" if s in vals else "" for s in seeds)
                     + f" | {_ms(list(vals.values()))} |")
    lines.append("")
    for b, v in (r.get("versus") or {}).items():
        diffs = ", ".join(f"{d:+.4f}" for d in v["differences"])
        ci = (f"95% CI [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]" if v.get("ci_low") is not None else "no interval")
        what = "the same runs" if v.get("same_runs") else v["verdict"].replace("_", " ")
        lines.append(f"- AutoScale − {b} per seed: {diffs}; {ci}: {what} (wins on {v['method_wins']} of "
                     f"{len(v['seeds'])} seeds)")
    return lines


def anytime_markdown(a: dict[str, Any] | None) -> list[str]:
    """The table "loss at intermediate budgets: anytime vs fixed" (from the runner report's comparison)."""
    lines = ["", "Loss at intermediate budgets: anytime vs fixed", ""]
    if not a or not a.get("available"):
        return lines + [f"Not available: {(a or {}).get('reason', 'no autoscale_anytime runs')}."]

    def ms(v: dict[str, float], signed: bool = False) -> str:
        mean = f"{v['mean']:+.3f}" if signed else f"{v['mean']:.3f}"
        return f"{mean} ± {v['std']:.3f}" if v["n"] > 1 else mean

    lines += [f"Mean validation loss over domains at each evaluation point, mean ± std over seeds {a['seeds']}; "
              "difference = anytime − fixed, paired by seed (negative: the anytime schedule is better).", "",
              "| tokens | AutoScale fixed mix | AutoScale anytime | anytime − fixed |", "|---:|---:|---:|---:|"]
    for p in a["points"]:
        lines.append(f"| {p['tokens']:,.0f} | {ms(p['reference'])} | {ms(p['other'])} | "
                     f"{ms(p['difference'], signed=True)} |")
    better = sum(p["difference"]["mean"] < 0 for p in a["points"])
    lines += ["", f"The anytime schedule has the lower mean loss at {better} of {len(a['points'])} evaluation points."]
    if a.get("plan_decreasing"):
        lines.append(f"The DDO allocation of {', '.join(a['plan_decreasing'])} decreases from N1 to N2, so the anytime "
                     "run followed the plan's monotone envelope (those domains never run ahead of their final counts).")
    return lines


if __name__ == "__main__":
    sys.exit(main())

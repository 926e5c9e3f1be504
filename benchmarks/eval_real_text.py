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


def _parse() -> argparse.Namespace:
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
    p.add_argument("--budgets", default="98304,196608,393216", help="N1,N2,N3 in tokens (N3 checks the projection)")
    p.add_argument("--target", type=int, default=1_048_576, help="target budget in tokens")
    p.add_argument("--seeds", default="0,1", help="comma-separated seeds (>= 2 for a spread)")
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
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--heldout-tokens", type=int, default=16_384,
                   help="held-out validation tokens per domain, evaluated at the end of every proxy run")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per run (1 is robust on a shared 2-core machine)")
    p.add_argument("--max-parallel", default="auto", metavar="N|auto",
                   help="runs at once (default auto: cores // threads, so two one-thread runs on 2 cores)")
    return p.parse_args()


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
                  max_parallel: int | str = 1, heldout_tokens: int = 16_384, projection: str = "auto") -> Any:
    """The GPT-2 (2 x 128) runner config of ENV.md's pilot, at the given budgets."""
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
        "seeds": seeds, "eval": {"heldout_tokens_per_domain": heldout_tokens, "target_points": 8, "batch_size": 32},
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


def main() -> int:
    args = _parse()
    from autoscale_data.runner import MixtureRunner
    from autoscale_data.runner.planning.specs import ddo_proxy_specs
    from autoscale_data.solver.design import run_objective

    t0 = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    domains = [d for d in args.domains.split(",") if d]
    n1, n2, n3 = (int(b) for b in args.budgets.split(","))
    seeds = [int(s) for s in args.seeds.split(",")]
    corpus = ensure_corpus(args, out, domains)
    stores = ensure_stores(out, corpus, domains, args.vocab)
    t_data = time.time() - t0

    mults = tuple(float(x) for x in args.multipliers.split(",") if x.strip())
    runner = MixtureRunner(runner_config(stores, [n1, n2], args.target, seeds, args.lr, mults, threads=args.threads,
                                         max_parallel=args.max_parallel, heldout_tokens=args.heldout_tokens,
                                         projection=args.projection), out / "run",
                           allow_config_change=args.allow_config_change)
    report = runner.run()
    d = runner.domains
    caps = {k: float(v) for k, v in d.train_tokens.items()}
    opts = {"objective": "mean_loss", "min_weight": 0.02, "token_caps": caps}

    # (b) DDO at a third budget, same design, same ledger
    specs3 = ddo_proxy_specs(runner.config, d, n3)
    # (a) held-out perturbations at N2 (multipliers the fit never saw)
    held: list[Any] = []
    for m in (float(x) for x in args.heldout_multipliers.split(",") if x.strip()):
        alt = runner_config(stores, [n1, n2], args.target, seeds, args.lr, multipliers=(m,),
                            threads=args.threads, heldout_tokens=args.heldout_tokens)
        held += [s for s in ddo_proxy_specs(alt, d, n2) if s.perturbed is not None]
    runner.train_runs(specs3 + held)  # one batch: the executor's slots stay busy across both sets

    specs = runner.proxy_specs()
    per_seed: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        tables = {n: table_for(runner, sp, seed) for n, sp in ((n1, specs[n1]), (n2, specs[n2]), (n3, specs3))}
        fits, analysis = projection_errors(tables, (n1, n2, n3), opts)
        rel = []
        if held:
            held_tab = table_for(runner, held, seed)
            for run, y in zip(held_tab.runs, run_objective(held_tab, "mean_loss"), strict=True):
                dom = next(s.perturbed for s in held if s.run_id == run.run_id)
                x = run.tokens[dom] / fits[n2].base_tokens[dom]
                rel.append(abs(float(fits[n2].fits[dom].predict(x)) - y) / y)
        saved = {b: report.tokens_saved_per_seed[b][str(seed)].to_json() for b in ("uniform", "natural", "ddo_n2")}
        per_seed[seed] = {**analysis, "heldout_aar": float(np.mean(rel)) if rel else None, "tokens_saved": saved}

    pooled = report.to_json()
    results = {"domains": list(d.names), "budgets": [n1, n2, n3], "target": args.target, "seeds": seeds,
               "projection": args.projection,
               "vocab": args.vocab, "max_mb_per_domain": args.max_mb_per_domain, "per_seed": per_seed,
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

    ``r`` is the in-memory results dict of :func:`main` (integer budget keys).
    """
    seeds = r["per_seed"]
    n1, n2, n3 = r["budgets"]
    doms = r["domains"]
    lines = [f"Real text, {len(doms)} domains ({', '.join(doms)}), BPE {r['vocab']}, GPT-2 2x128, "
             f"seeds {r['seeds']}; budgets N1={n1:,}, N2={n2:,}, N3={n3:,}, target {r['target']:,} tokens; "
             f"wall time {r['wall_time_s'] / 60:.1f} min; AutoScale target mix from the "
             f"{r.get('projection', 'geometric')} projection.", "",
             "| quantity | " + " | ".join(doms) + " |", "|---|" + "---:|" * len(doms)]
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
    lines += ["", "| metric | mean ± std over seeds |", "|---|---:|",
              f"| DDO fit AAR at N2 (in-sample) | {_ms([s['fit_aar'][n2] for s in seeds.values()])} |",
              f"| (a) DDO loss-model AAR on held-out perturbations at N2 | {_ms([s['heldout_aar'] for s in seeds.values()])} |",
              f"| joint law fit AAR over N1 and N2 (in-sample) | {_ms([s['joint_fit_aar'] for s in seeds.values()])} |"]
    for name, pre in (("geometric projection", ""), ("joint projection", "joint_"), ("robust projection", "robust_"),
                      ("no projection (N2 optimum as is)", "n2_as_is_"), ("auto (the default)", "auto_")):
        lines += [f"| (b) {name} error at N3: L1 distance of weights | "
                  f"{_ms([s[pre + 'projection_error_l1'] for s in seeds.values()])} |",
                  f"| (b) {name} error at N3: max abs weight difference | "
                  f"{_ms([s[pre + 'projection_error_max'] for s in seeds.values()])} |"]
    for b in ("uniform", "natural", "ddo_n2"):
        vals = [s["tokens_saved"][b].get("signed_fraction") for s in seeds.values()]
        shown = ", ".join("not reached" if v is None else f"{v:+.1%}" for v in vals)
        lines.append(f"| (c) tokens saved by AutoScale vs {b} at the target (per seed) | {shown} |")
    lines += ["", "Negative savings mean the baseline reached AutoScale's final loss with that many fewer tokens."]
    lines += anytime_markdown(r.get("anytime_vs_fixed"))
    return "\n".join(lines) + "\n"


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

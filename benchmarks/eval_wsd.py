"""``ddo.schedule: wsd`` against separate runs, on the CPU: branch losses and per-budget DDO optima.

For each seed the same DDO design (the demo's synthetic stores, a one-layer GPT) is trained three ways, each into
its own folder (:data:`SCHEDULES`): every run on its own with warm-up then linear decay over its budget (today's
``ddo.schedule: separate``); as one trunk per mix with a cooldown branch per budget (``ddo.schedule: wsd``); and
every run on its own with the WSD shape from scratch (``scratch``: warm-up over its own first 10%, the peak, the
same cooldown: the run a branch stands in for; it is the budget's branch of a WSD design ``[N, k x N]`` whose
smallest budget N is). The two schedules differ in their learning rate, not only in sharing a trunk; comparing a
branch with ``scratch`` isolates the sharing, comparing ``scratch`` with ``separate`` the schedule. Every
budget's runs are fitted as the runner fits them (:func:`~autoscale_data.runner.mixes.fitting.fit_all`).
Reported, per budget:

- for each pair (branch vs separate, branch vs scratch, scratch vs separate), ``loss(a) - loss(b)`` over the
  design's mixes, same seed and the same per-domain sequences: its mean, mean and largest size, its sd over the
  mixes seed by seed (a shift common to every mix leaves the DDO optimum where it is), the rank correlation of
  the mixes' losses, and the total-variation distance between the two DDO optima;
- the seed noise of each schedule: the mean ``|loss(seed a) - loss(seed b)|`` of the same mix, and the TV
  between two seeds' DDO optima;
- the trunk where it ends on a smaller budget's very counts (that run at the peak, no cooldown), minus the
  branch and minus the separate run, mean over the mixes and seeds;
- whether every run trained the separate run's very tokens of each domain, and the base mix's learning-rate
  factor (mean over the run's steps, and at every tenth of it; a branch's trunk steps included);
- the target mix each schedule's fits choose (``ddo.projection: auto``) and the TV between them, and the proxy
  tokens each schedule trained (``wsd_of_largest``: the WSD design's against the largest budget's separate runs).

    python benchmarks/eval_wsd.py --stores DIR [--out bench_out/wsd] [--seeds 0 1] [--budgets 16384 32768 65536]

``--stores``: a folder of stores (``autoscale-data demo --stores DIR`` builds the demo's). Writes
``--out/results.json`` and prints a summary; the runs stay in ``--out/<schedule>-s<seed>/``, and a rerun reuses
them (the ledger), so seeds may be trained by separate processes and summarised by one more.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.mixes.fitting import fit_all
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.estimate import run_tokens
from autoscale_data.runner.planning.wsd import with_trunks, wsd_lr_lambda, wsd_plan
from autoscale_data.runner.training.train import lr_lambda

#: The three ways each budget's DDO runs are trained: on their own with warm-up and linear decay (today's
#: ``separate``), as branches of one trunk per mix (``wsd``), and on their own with the WSD shape from scratch
#: (``scratch``: warm-up over 10% of the run's own steps, the peak, then the same cooldown: what a branch replaces).
SCHEDULES = ("separate", "wsd", "scratch")


def _config(stores: str, seed: int, schedule: str, budgets: list[int], cooldown: float, shape: str) -> dict[str, Any]:
    return {
        "name": f"wsd-eval-{schedule}-s{seed}", "domains": stores,
        "model": {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 64, "n_head": 2}},
        "seq_len": 64, "micro_batch_size": 8, "global_batch_size": 8,
        "optimizer": {"lr": 2e-3, "warmup_fraction": 0.1, "betas": [0.9, 0.95]},
        "ddo": {"budgets": budgets, "min_weight": 0.05, "schedule": schedule, "cooldown": cooldown,
                "cooldown_shape": shape},
        "target": {"budget": 4 * budgets[-1], "baselines": ["uniform"]},
        "seeds": [seed],
        "eval": {"heldout_tokens_per_domain": 8192, "proxy_points": 1, "target_points": 1, "batch_size": 32},
        "checkpoint_every": 1000, "cpu_threads": 1,
    }


def _scratch_specs(cfg: dict[str, Any], budget: int, warmup: str = "own") -> tuple[list[Any], list[Any]]:
    """The runs of a WSD run of ``budget`` from scratch, one per design mix: the ``budget`` branches of a WSD design
    whose smallest budget it is (``[budget, k x budget]``: the trunk runs straight to its counts), and the trunk
    stretches they continue. ``warmup``: ``own`` (over ``warmup_fraction`` of the run's own steps) or ``design``
    (``warmup_fraction`` scaled by the smallest budget / ``budget``: the design's trunk's warm-up, to a step).
    Returns ``(branches, every run)``."""
    scale = min(cfg["ddo"]["budgets"]) / budget if warmup == "design" else 1.0
    optimizer = {**cfg["optimizer"], "warmup_fraction": cfg["optimizer"]["warmup_fraction"] * scale}
    for k in (2, 3, 4):  # whole batches may refuse one larger budget (a count that falls): the next one
        try:
            config = config_from_dict({**cfg, "optimizer": optimizer,
                                       "ddo": {**cfg["ddo"], "budgets": [budget, k * budget]}})
            plan = wsd_plan(config, inspect_domains(config))
        except ValueError:
            continue
        return plan.branches[budget], with_trunks(plan.branches[budget], plan.trunks)
    raise ValueError(f"no WSD design [{budget}, k x {budget}] (k = 2, 3, 4) can be planned")


def _lr_area(config: Any, runner: MixtureRunner, schedule: str, budget: int, cfg: dict[str, Any],
             warmup: str) -> dict[str, Any]:
    """The base mix's learning-rate factor at budget ``budget``, step by step (of the whole run: a branch's trunk
    steps included): its mean and its value at every tenth of the run."""
    batch = config.global_batch_size
    if schedule == "separate":
        base = next(s for s in runner.proxy_specs()[budget] if s.label == "base")
        steps = base.total_sequences // batch
        f = lr_lambda(steps, config.optimizer.warmup_fraction, config.optimizer.min_lr_ratio)
        curve = [f(s) for s in range(steps)]
    else:
        branches, runs = (runner.proxy_specs()[budget], runner.wsd_plan().runs) if schedule == "wsd" else \
            _scratch_specs(cfg, budget, warmup)
        spec = next(s for s in branches if s.label == "base")
        by_id = {s.run_id: s for s in runs}
        curve = []
        while spec is not None:  # the chain back to step 0: branch, then its trunk stretches
            offset = spec.parent_sequences // batch
            f = wsd_lr_lambda(spec.wsd, offset, spec.total_sequences // batch - offset, config.optimizer.min_lr_ratio)
            curve = [f(s) for s in range(offset, spec.total_sequences // batch)] + curve
            spec = by_id.get(spec.extension.parent) if spec.extension is not None else None
    return {"steps": len(curve), "mean": statistics.fmean(curve),
            "at_tenths": [round(curve[min(len(curve) - 1, round(k * len(curve) / 10))], 4) for k in range(11)]}


def _train(cfg: dict[str, Any], out: Path, schedule: str, warmup: str) -> dict[str, Any]:
    """Train the proxies of ``cfg`` under ``schedule`` (:data:`SCHEDULES`) into ``out`` (the WSD ones wave by wave)
    and fit them; returns per budget the runs' losses and tokens by label, the DDO optimum and the base mix's
    learning-rate curve, and the tokens trained."""
    config = config_from_dict(cfg)
    runner = MixtureRunner(config, out, log=lambda _: None, progress=False)
    if schedule == "scratch":
        planned = {n: _scratch_specs(cfg, n, warmup) for n in config.ddo.budgets}
        proxies = {n: branches for n, (branches, _) in planned.items()}
        runs = list({s.run_id: s for _, every in planned.values() for s in every}.values())
        by_id = {s.run_id: s for s in runs}

        def depth(s: Any) -> int:
            return 0 if s.extension is None or s.extension.parent not in by_id else 1 + depth(by_id[s.extension.parent])

        waves = [[s for s in runs if depth(s) == k] for k in range(max(map(depth, runs)) + 1)]
    else:
        plan = runner.wsd_plan()
        proxies = runner.proxy_specs()
        waves = plan.waves if plan is not None else [[s for specs in proxies.values() for s in specs]]
        runs = plan.runs if plan is not None else waves[0]
    for wave in waves:
        runner.train_runs(wave)
    with Ledger(out) as ledger:
        fits = fit_all(config, runner.domains, ledger, proxies, out / "fits", log=lambda _: None)
        results = {n: {s.label.split(" (")[0]: ledger.result(s.run_id) for s in specs} for n, specs in proxies.items()}
        # the trunk where it holds a smaller budget's very counts: that budget's run at the peak, without a cooldown
        stretch = {(t.seed, tuple(sorted(t.sequences.items()))): t for t in (plan.trunks if schedule == "wsd" else [])}
        trunk = {str(n): {s.label.split(" (")[0]: ledger.result(t.run_id).mean_loss for s in specs
                          if (t := stretch.get((s.seed, tuple(sorted(s.sequences.items()))))) is not None}
                 for n, specs in proxies.items()}
    return {"losses": {str(n): {k: r.mean_loss for k, r in v.items()} for n, v in results.items()},
            "trunk_losses": {n: v for n, v in trunk.items() if v},
            "domain_tokens": {str(n): {k: r.tokens for k, r in v.items()} for n, v in results.items()},
            "optimum": {str(n): dict(fits.ddo[n].weights) for n in proxies},
            "target": {"method": fits.method, "weights": fits.weights},
            "lr": {str(n): _lr_area(config, runner, schedule, n, cfg, warmup) for n in proxies},
            "tokens": sum(run_tokens(s) for s in {s.run_id: s for s in runs}.values())}


def _shift(got: dict[tuple[str, int], Any], other: str, n: str, seeds: list[int], field: str) -> float | None:
    """The mean of ``loss(trunk at n's end) - loss(other)`` over the mixes and seeds (``None`` at the largest
    budget, where no stretch ends on its counts)."""
    diffs = [loss - got[(other, s)][field][n][k] for s in seeds
             for k, loss in got[("wsd", s)]["trunk_losses"].get(n, {}).items()]
    return statistics.fmean(diffs) if diffs else None


def _compare(got: dict[tuple[str, int], Any], a: str, b: str, n: str, seeds: list[int]) -> dict[str, Any]:
    """``loss(a) - loss(b)`` at budget ``n`` over the design's mixes, seed by seed: its mean, its largest size, its
    sd over the mixes (a shift common to all mixes leaves DDO's optimum where it is) and the rank correlation."""
    labels = sorted(got[(b, seeds[0])]["losses"][n])
    signed = [[got[(a, s)]["losses"][n][k] - got[(b, s)]["losses"][n][k] for k in labels] for s in seeds]
    flat = [x for per_seed in signed for x in per_seed]
    return {
        "mean": statistics.fmean(flat), "abs_mean": statistics.fmean(map(abs, flat)), "abs_max": max(map(abs, flat)),
        "sd_over_mixes": [statistics.stdev(w) for w in signed],
        "rank_correlation": [float(spearmanr([got[(a, s)]["losses"][n][k] for k in labels],
                                             [got[(b, s)]["losses"][n][k] for k in labels]).statistic) for s in seeds],
        "tv_optimum": {str(s): _tv(got[(a, s)]["optimum"][n], got[(b, s)]["optimum"][n]) for s in seeds},
    }


def _tv(a: dict[str, float], b: dict[str, float]) -> float:
    return 0.5 * sum(abs(a[d] - b[d]) for d in a)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", required=True)
    ap.add_argument("--out", default="bench_out/wsd")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budgets", type=int, nargs="+", default=[16384, 32768, 65536])
    ap.add_argument("--cooldown", type=float, default=0.2)
    ap.add_argument("--shape", default="1-sqrt")
    ap.add_argument("--scratch-warmup", choices=("own", "design"), default="own",
                    help="the WSD runs from scratch warm up over their own 10%% (own) or as the design's trunk does "
                         "(design: into scratch-design-s<seed>/ and results-scratch-design.json)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    stores = os.fspath(Path(args.stores).resolve())
    budgets = sorted(args.budgets)
    own = args.scratch_warmup == "own"
    folder = {"separate": "separate", "wsd": "wsd", "scratch": "scratch" if own else "scratch-design"}
    got = {(sch, seed): _train(_config(stores, seed, "separate" if sch == "separate" else "wsd", budgets,
                                       args.cooldown, args.shape), out / f"{folder[sch]}-s{seed}", sch,
                          args.scratch_warmup)
           for sch in SCHEDULES for seed in args.seeds}
    summary: dict[str, Any] = {"budgets": budgets, "seeds": args.seeds, "cooldown": args.cooldown,
                               "shape": args.shape, "scratch_warmup": args.scratch_warmup, "per_budget": {}}
    pairs = list(itertools.combinations(args.seeds, 2))
    for n in map(str, budgets):
        labels = sorted(got[("separate", args.seeds[0])]["losses"][n])
        summary["per_budget"][n] = {
            "branch_vs_separate": _compare(got, "wsd", "separate", n, args.seeds),
            "branch_vs_scratch": _compare(got, "wsd", "scratch", n, args.seeds),
            "scratch_vs_separate": _compare(got, "scratch", "separate", n, args.seeds),
            # the trunk at this budget's end (no cooldown, the same sequences): minus the branch, minus separate
            "trunk_minus_branch_mean": _shift(got, "wsd", n, args.seeds, "losses"),
            "trunk_minus_separate_mean": _shift(got, "separate", n, args.seeds, "losses"),
            "seed_noise_abs_mean": {sch: statistics.fmean(abs(got[(sch, a)]["losses"][n][k] - got[(sch, b)]["losses"][n][k])
                                                          for a, b in pairs for k in labels) if pairs else None
                                    for sch in SCHEDULES},
            "tv_seed_vs_seed": {sch: [_tv(got[(sch, a)]["optimum"][n], got[(sch, b)]["optimum"][n]) for a, b in pairs]
                                for sch in SCHEDULES},
            # a branch trains the separate run's very tokens of each domain (and so does the WSD run from scratch)
            "same_domain_tokens": all(got[(sch, s)]["domain_tokens"][n] == got[("separate", s)]["domain_tokens"][n]
                                      for sch in SCHEDULES for s in args.seeds),
            "optimum": {f"{sch}-s{s}": got[(sch, s)]["optimum"][n] for sch in SCHEDULES for s in args.seeds},
            "base_lr_factor": {sch: got[(sch, args.seeds[0])]["lr"][n] for sch in SCHEDULES},
        }
    # the target mix each schedule's fits choose (ddo.projection: auto), and how far apart they lie
    summary["target"] = {f"{sch}-s{s}": got[(sch, s)]["target"] for sch in SCHEDULES for s in args.seeds}
    summary["target_tv"] = {
        "wsd_vs_separate": [_tv(got[("wsd", s)]["target"]["weights"], got[("separate", s)]["target"]["weights"])
                            for s in args.seeds],
        "wsd_vs_scratch": [_tv(got[("wsd", s)]["target"]["weights"], got[("scratch", s)]["target"]["weights"])
                           for s in args.seeds],
        "seed_vs_seed": {sch: [_tv(got[(sch, a)]["target"]["weights"], got[(sch, b)]["target"]["weights"])
                               for a, b in pairs] for sch in SCHEDULES}}
    summary["tokens"] = {sch: got[(sch, args.seeds[0])]["tokens"] for sch in SCHEDULES}
    largest = sum(sum(t.values()) for t in got[("separate", args.seeds[0])]["domain_tokens"][str(budgets[-1])].values())
    summary["wsd_of_largest"] = summary["tokens"]["wsd"] / largest  # the largest budget's separate runs, one seed
    summary["losses"] = {f"{sch}-s{s}": v["losses"] for (sch, s), v in got.items()}
    out.mkdir(parents=True, exist_ok=True)
    (out / ("results.json" if own else "results-scratch-design.json")).write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=1))


if __name__ == "__main__":
    main()

"""``ddo.schedule: wsd`` against separate runs, on the CPU: branch losses and per-budget DDO optima.

For each seed the same DDO design (the demo's synthetic stores, a one-layer GPT) is trained twice into two
folders: every run on its own (``ddo.schedule: separate``, warm-up then linear decay over its budget) and as one
trunk per mix with a cooldown branch per budget (``ddo.schedule: wsd``). Every budget's runs are then fitted
as the runner fits them (:func:`~autoscale_data.runner.mixes.fitting.fit_all`). Reported:

- per budget, the mean and largest ``|loss(branch) - loss(separate)|`` over the design's mixes (same seed, same
  per-domain sequences), against the seed noise of the separate runs, ``|loss(seed a) - loss(seed b)|`` of
  the same mix (and the same for the WSD branches); the spread of ``loss(branch) - loss(separate)`` over the
  mixes (a shift common to every mix leaves the DDO optimum where it is) and the rank correlation of the two
  schedules' losses over the mixes;
- per budget, the DDO optimum of each schedule and seed, and the total-variation distances between them: WSD
  against separate for the same seed, and seed against seed for each schedule;
- the proxy tokens each schedule trained.

    python benchmarks/eval_wsd.py --stores DIR [--out bench_out/wsd] [--seeds 0 1] [--budgets 32768 65536]

``--stores``: a folder of stores (``autoscale-data demo --stores DIR`` builds the demo's). Writes
``--out/results.json`` and prints a summary; the runs stay in ``--out/<schedule>-s<seed>/``, and a rerun reuses
them (the ledger).
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
from autoscale_data.runner.planning.estimate import run_tokens


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


def _train(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    """Train the proxies of ``cfg`` into ``out`` (the WSD ones wave by wave) and fit them; returns per budget
    the runs' losses by label and the DDO optimum, and the tokens trained."""
    config = config_from_dict(cfg)
    runner = MixtureRunner(config, out, log=lambda _: None, progress=False)
    plan = runner.wsd_plan()
    proxies = runner.proxy_specs()
    waves = plan.waves if plan is not None else [[s for specs in proxies.values() for s in specs]]
    for wave in waves:
        runner.train_runs(wave)
    runs = plan.runs if plan is not None else waves[0]
    with Ledger(out) as ledger:
        fits = fit_all(config, runner.domains, ledger, proxies, out / "fits", log=lambda _: None)
        losses = {n: {s.label.split(" (")[0]: ledger.result(s.run_id).mean_loss for s in specs}
                  for n, specs in proxies.items()}
    return {"losses": {str(n): v for n, v in losses.items()},
            "optimum": {str(n): dict(fits.ddo[n].weights) for n in proxies},
            "tokens": sum(run_tokens(s) for s in {s.run_id: s for s in runs}.values())}


def _tv(a: dict[str, float], b: dict[str, float]) -> float:
    return 0.5 * sum(abs(a[d] - b[d]) for d in a)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stores", required=True)
    ap.add_argument("--out", default="bench_out/wsd")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--budgets", type=int, nargs="+", default=[32768, 65536])
    ap.add_argument("--cooldown", type=float, default=0.2)
    ap.add_argument("--shape", default="1-sqrt")
    args = ap.parse_args(argv)
    out = Path(args.out)
    stores = os.fspath(Path(args.stores).resolve())
    got = {(sch, seed): _train(_config(stores, seed, sch, args.budgets, args.cooldown, args.shape),
                               out / f"{sch}-s{seed}")
           for sch in ("separate", "wsd") for seed in args.seeds}
    summary: dict[str, Any] = {"budgets": args.budgets, "seeds": args.seeds, "cooldown": args.cooldown,
                               "shape": args.shape, "per_budget": {}}
    for n in map(str, args.budgets):
        labels = sorted(got[("separate", args.seeds[0])]["losses"][n])
        branch = [abs(got[("wsd", s)]["losses"][n][k] - got[("separate", s)]["losses"][n][k])
                  for s in args.seeds for k in labels]
        signed = [got[("wsd", s)]["losses"][n][k] - got[("separate", s)]["losses"][n][k]
                  for s in args.seeds for k in labels]
        noise = {sch: [abs(got[(sch, a)]["losses"][n][k] - got[(sch, b)]["losses"][n][k])
                       for a, b in itertools.combinations(args.seeds, 2) for k in labels]
                 for sch in ("separate", "wsd")}
        within = [[got[("wsd", s)]["losses"][n][k] - got[("separate", s)]["losses"][n][k] for k in labels]
                  for s in args.seeds]  # per seed, over the mixes: a shift common to all mixes leaves DDO's optimum
        rank = [float(spearmanr([got[("wsd", s)]["losses"][n][k] for k in labels],
                                [got[("separate", s)]["losses"][n][k] for k in labels]).statistic) for s in args.seeds]
        summary["per_budget"][n] = {
            "branch_minus_separate_sd_over_mixes": [statistics.stdev(w) for w in within],
            "rank_correlation_branch_vs_separate": rank,
            "branch_minus_separate_mean": statistics.fmean(signed),
            "branch_vs_separate_abs_mean": statistics.fmean(branch), "branch_vs_separate_abs_max": max(branch),
            "seed_noise_separate_abs_mean": statistics.fmean(noise["separate"]) if noise["separate"] else None,
            "seed_noise_wsd_abs_mean": statistics.fmean(noise["wsd"]) if noise["wsd"] else None,
            "optimum": {f"{sch}-s{s}": got[(sch, s)]["optimum"][n] for sch in ("separate", "wsd") for s in args.seeds},
            "tv_wsd_vs_separate": {str(s): _tv(got[("wsd", s)]["optimum"][n], got[("separate", s)]["optimum"][n])
                                   for s in args.seeds},
            "tv_seed_vs_seed": {sch: [_tv(got[(sch, a)]["optimum"][n], got[(sch, b)]["optimum"][n])
                                      for a, b in itertools.combinations(args.seeds, 2)]
                                for sch in ("separate", "wsd")},
        }
    summary["tokens"] = {sch: got[(sch, args.seeds[0])]["tokens"] for sch in ("separate", "wsd")}
    summary["losses"] = {f"{sch}-s{s}": v["losses"] for (sch, s), v in got.items()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=1))


if __name__ == "__main__":
    main()

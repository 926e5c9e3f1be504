"""``autoscale-data baseline``: weights of a baseline mixture (uniform, natural, reference, ...)."""

from __future__ import annotations

import argparse
from typing import Any

from ..solver import BASELINES, PRESETS, RunTable, baseline_weights
from ..solver.regression import REGRESSORS
from ..solver.vocabulary import AUTO, DEFAULT_OBJECTIVE, OBJECTIVES
from ._args import add_json_flag, add_verb, parse_tokens, print_json, read_json

__all__ = ["register", "run"]

_EPILOG = f"""\
baselines: {', '.join(BASELINES)}; presets for 'reference': {', '.join(PRESETS)}.
  uniform       --domains a,b,c  (or --tokens / --runs)
  natural       --tokens web=1e9,code=2e8
  temperature   --tokens ... --temperature 2
  reference     --domains ... --preset llama1 [--map CommonCrawl=web ...] | --weights-json FILE
  regmix        --runs RUNS.csv [--model linear|lightgbm]   (runs with random mixtures)
  mixing_law    --runs RUNS.csv
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "baseline", run, help="weights of a baseline mixture",
                 description="Compute the weights of a baseline mixture.", epilog=_EPILOG)
    p.add_argument("name", choices=BASELINES, help="which baseline")
    p.add_argument("--runs", default=None, metavar="RUNS.csv", help="runs table (regmix, mixing_law)")
    p.add_argument("--tokens", action="append", metavar="DOMAIN=TOKENS", help="tokens available per domain")
    p.add_argument("--domains", default=None, metavar="A,B,C", help="domain names")
    p.add_argument("--temperature", type=float, default=None, metavar="T", help="temperature (temperature)")
    p.add_argument("--preset", default=None, choices=sorted(PRESETS), help="named reference weights")
    p.add_argument("--map", action="append", metavar="KEY=DOMAIN", help="rename a preset key to your domain")
    p.add_argument("--weights-json", default=None, metavar="FILE", help="reference weights {domain: w}")
    p.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE,
                   help="objective for regmix/mixing_law")
    p.add_argument("--model", choices=REGRESSORS, default=AUTO, help="regmix regressor")
    p.add_argument("--seed", type=int, default=0, help="RNG seed (regmix, mixing_law)")
    add_json_flag(p, '{"weights": {...}}')


def run(args: argparse.Namespace) -> int:
    runs = RunTable.from_csv(args.runs) if args.runs else None
    counts = parse_tokens(args.tokens)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()] if args.domains else None
    opts: dict[str, Any] = {}
    if args.name == "temperature":
        if args.temperature is None:
            raise ValueError("the temperature baseline needs --temperature")
        opts["temperature"] = args.temperature
    elif args.name == "reference":
        if args.weights_json:
            opts["weights"] = read_json(args.weights_json)
        if args.preset:
            opts["preset"] = args.preset
        if args.map:
            mapping = {}
            for item in args.map:
                k, sep, v = item.partition("=")
                if not sep:
                    raise ValueError(f"--map expects KEY=DOMAIN, got {item!r}")
                mapping[k.strip()] = v.strip()
            opts["mapping"] = mapping
    elif args.name == "regmix":
        opts.update(objective=args.objective, model=args.model, seed=args.seed)
    elif args.name == "mixing_law":
        opts.update(objective=args.objective, seed=args.seed)
    w = baseline_weights(args.name, runs=runs, token_counts=counts, domains=domains, **opts)
    if args.json:
        print_json(args, {"baseline": args.name, "weights": w})
    else:
        for d, v in w.items():
            print(f"{d:>16}: {v:.4f}")
    return 0

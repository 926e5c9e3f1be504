"""``autoscale-data ddo``: fit DDO to the runs of one budget and print the optimal mix."""

from __future__ import annotations

import argparse
from typing import Any

from .._options import field_help
from ..solver import DDOOptions, DDOResult, RunTable, fit_ddo
from ..solver.ddo import FIT_MODES
from ..solver.vocabulary import DEFAULT_LAW, DEFAULT_OBJECTIVE, LAWS, OBJECTIVES
from ._args import (
    add_json_flag,
    add_supply_args,
    add_verb,
    objective_weights_arg,
    parse_tokens,
    print_json,
    weight_float,
)

__all__ = ["format_ddo", "register", "run"]

_EPILOG = """\
RUNS.csv columns: run, tokens.<domain> (one per training domain), loss.<domain> or ppl.<domain>
(one per validation domain), optional seed and label. One base run (or several seeds of it) and
runs that change one domain's tokens each (e.g. x3 and /3).

--fit default: bounded multi-start least squares; where several laws pass exactly through the
points (3 points for 3 parameters), the one with the highest floor c. --fit paper: the authors'
notebook, scipy's curve_fit from a = b = c = 1, unbounded. Either way the output says whether the
data identify the weights and their range over every fit consistent with the data.

examples:
  autoscale-data ddo runs.csv --objective mean_ppl --min-weight 0.02 --json
  autoscale-data ddo examples/data/gpt2-large-1.2b-ddo-runs.csv --min-weight 0.0285714 --fit paper \
      --objective mean_ppl
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "ddo", run, help="fit DDO to proxy runs at one budget and print the optimal "
                                              "weights",
                 description="Fit L_j(x) = (x + a_j)^(-b_j) + c_j per domain and minimise the fitted loss "
                             "exactly.",
                 epilog=_EPILOG)
    p.add_argument("runs", metavar="RUNS.csv", help="runs table")
    p.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE,
                   help=field_help(DDOOptions, "objective"))
    p.add_argument("--min-weight", type=weight_float, default=0.0, metavar="W",
                   help="lower bound on every weight")
    p.add_argument("--max-weight", type=weight_float, default=1.0, metavar="W",
                   help="upper bound on every weight")
    p.add_argument("--law", choices=LAWS, default=DEFAULT_LAW, help=field_help(DDOOptions, "law"))
    p.add_argument("--fit", choices=FIT_MODES, default="default",
                   help="how each law is fitted: ours (default) or the authors' procedure (paper)")
    p.add_argument("--objective-weights", default=None, metavar="D=W,...|JSON",
                   help="objective = weighted sum of these validation domains' losses (or perplexities)")
    p.add_argument("--base-run", default=None, metavar="ID", help="id of a base run if the design is "
                                                                  "ambiguous")
    add_supply_args(p, effect="caps the allocation")
    add_json_flag(p)


def format_ddo(res: DDOResult) -> str:
    """Human-readable summary of a DDO result."""
    lines = [f"DDO at {res.budget_tokens:.4g} tokens ({res.objective}, law {res.law}): status {res.status}, "
             f"AAR {res.aar:.3%}" + ("" if res.loo_aar is None else f", LOO-AAR {res.loo_aar:.3%}")]
    lines.append(f"  {'domain':>16}  {'weight':>7}  {'base':>7}  {'a':>9}  {'b':>8}  {'c':>9}  note")
    for d in res.domains:
        f = res.fits[d]
        base_w = res.base_tokens[d] / sum(res.base_tokens.values())
        note = ",".join(filter(None, [res.bounds_hit.get(d, ""), *f.at_bound]))
        lines.append(f"  {d:>16}  {res.weights[d]:7.4f}  {base_w:7.4f}  {f.a:9.4g}  {f.b:8.4g}  {f.c:9.4g}  "
                     f"{note}")
    if res.identifiability is not None:
        lines.append("  " + res.identifiability.describe())
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    table = RunTable.from_csv(args.runs)
    try:
        res = fit_ddo(table, objective=args.objective, min_weight=args.min_weight, max_weight=args.max_weight,
                      law=args.law, fit=args.fit, base_run=args.base_run,
                      token_caps=parse_tokens(args.available),
                      max_epochs=args.max_epochs, val_domains=objective_weights_arg(args.objective_weights))
    except ValueError as exc:
        if "no base run" not in str(exc):
            raise
        raise ValueError(f"{args.runs}: {exc}. `ddo` reads a DDO design (a base run and runs that change one "
                         "domain's tokens at a time); for runs of any mixtures (a sweep, a grid, random "
                         "mixes) use `autoscale-data project --runs RUNS.csv [--runs RUNS_2.csv ...] "
                         "--target-tokens N` (one file per budget), which fits one law to them") from None
    if args.json:
        out = res.to_json()
        out.pop("diagnostics", None)
        print_json(args, out)
    else:
        print(format_ddo(res))
    return 0

"""``autoscale-data project``: project optimal mixes at two budgets to a target budget."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from .._extras import require
from ..solver.plan import MixturePlan
from ..solver.projection import project
from ._args import add_json_flag, add_supply_args, add_verb, parse_tokens, positive_float, read_json

__all__ = ["plot_weights", "register", "run", "scales_from_json"]

_EPILOG = """\
SCALES.json: {"scales": [{"budget_tokens": N1, "weights": {...}},
                         {"budget_tokens": N2, "weights": {...}}]}   (N1 < N2; more scales allowed)
Each scale may give "allocation_tokens" instead of "weights".

example:
  autoscale-data project scales.json --target-tokens 1e10 --json --plot weights.png
"""


def register(subparsers: Any) -> None:
    """Add the ``project`` sub-command."""
    p = add_verb(subparsers, "project", run, help="project optimal mixes at two budgets to any target budget (AutoScale)",
                 description="N*(t) = N*(N1) (N*(N2)/N*(N1))^t with sum N*(t) = target.", epilog=_EPILOG)
    p.add_argument("scales", metavar="SCALES.json", help="optimal mixes at two or more budgets")
    p.add_argument("--target-tokens", type=positive_float, required=True, metavar="N", help="target budget")
    add_supply_args(p, effect="warns when the projection needs more")
    add_json_flag(p)
    p.add_argument("--plot", default=None, metavar="PNG", help="draw the weights over budgets (stacked area)")
    p.add_argument("--save-plan", default=None, metavar="JSON", help="also write a MixturePlan file")
    p.add_argument("--tokenizer", default=None, metavar="SPEC", help="tokenizer recorded in --save-plan")


def scales_from_json(obj: Any) -> list[dict]:
    """The list of scales of a SCALES.json object (``{"scales": [...]}`` or a bare list)."""
    scales = obj.get("scales") if isinstance(obj, dict) else obj
    if not isinstance(scales, list):
        raise ValueError('SCALES.json must be {"scales": [{"budget_tokens": N, "weights": {...}}, ...]}')
    return scales


def plot_weights(plan: MixturePlan, target: float, path: str) -> None:
    """Stacked-area plot of the plan's weights from the smallest budget to beyond ``target`` (log x)."""
    require("plots", "autoscale-data project --plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo = min(plan.scales[0][0], target) / 2
    hi = max(plan.scales[-1][0], target) * 4
    budgets = np.geomspace(lo, hi, 200)
    w = plan.allocations_for_budgets(budgets) / budgets[:, None]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.stackplot(budgets, w.T, labels=list(plan.domains))
    for n, _ in plan.scales:
        ax.axvline(n, color="k", lw=0.8, ls=":")
    ax.axvline(target, color="k", lw=1.2, ls="--", label=f"target {target:.3g}")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, 1)
    ax.set_xlabel("training budget (tokens)")
    ax.set_ylabel("weight")
    ax.set_title("AutoScale mix over budgets (dotted: fitted budgets)")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run ``project`` from parsed arguments."""
    scales = scales_from_json(read_json(args.scales))
    caps = parse_tokens(args.available)
    res = project(scales, args.target_tokens, token_caps=caps, max_epochs=args.max_epochs)
    if args.plot or args.save_plan:
        plan = MixturePlan.from_scales(scales, tokenizer=args.tokenizer, token_caps=caps, max_epochs=args.max_epochs)
        if args.plot:
            plot_weights(plan, args.target_tokens, args.plot)
        if args.save_plan:
            plan.save(args.save_plan)
    if args.json:
        print(json.dumps(res.to_json(), indent=2))
    else:
        print(f"projected mix at {res.budget_tokens:.4g} tokens (t = {res.t:.4f}, path residual {res.residual:.3g}):")
        for d, w in res.weights.items():
            print(f"  {d:>16}: {w:.4f}  ({res.allocation_tokens[d]:.4g} tokens)")
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0

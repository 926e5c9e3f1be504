"""``autoscale-data project``: project optimal mixes at two budgets to a target budget.

From SCALES.json (the optimal mixes) the projection is the Theorem-1 path; from run tables
(``--runs`` or ``--olmix``, one per budget: DDO designs or runs of any mixtures) every candidate of
:func:`~autoscale_data.solver.projections.project_all` is computed (the geometric path, the joint
law, the robust path and the best mix observed at the largest budget) and ``--method auto`` (the
default) chooses between them from the runs (:mod:`autoscale_data.solver.select`), saying which and why.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from .._extras import require
from .._options import field_help
from ..solver import (
    DDOOptions,
    MixturePlan,
    PlanEvidence,
    Projection,
    ProjectionsRecord,
    RunTable,
    project,
    project_all,
    read_olmix,
)
from ..solver.vocabulary import (
    DEFAULT_OBJECTIVE,
    DEFAULT_PROJECTION,
    GEOMETRIC,
    JOINT,
    OBJECTIVES,
    OBSERVED,
    PROJECTION_CHOICES,
    ROBUST,
)
from ._args import (
    add_json_flag,
    add_supply_args,
    add_verb,
    check_finite_answer,
    objective_weights_arg,
    parse_token_count,
    parse_tokens,
    print_json,
    read_json,
    token_count,
    weight_float,
)

__all__ = ["plot_weights", "register", "run", "scales_from_json"]

_EPILOG = """\
SCALES.json: {"scales": [{"budget_tokens": N1, "weights": {...}},
                         {"budget_tokens": N2, "weights": {...}}]}   (N1 < N2; more scales allowed)
Each scale may give "allocation_tokens" instead of "weights".
--runs RUNS.csv (once per budget) instead of SCALES.json: the runs of one budget each, as for
`autoscale-data ddo` (run, tokens.<domain>, loss.<domain> | ppl.<domain>). A file may hold a DDO
design or runs of any mixtures (random, a grid, a previous sweep); its budget is then the median
of its runs' total tokens. One file per budget: a file mixing budgets is read as one budget.
--olmix RATIOS.csv METRICS.csv TOKENS adds an Olmix ratio/metric pair as one budget's table (TOKENS:
every run's total tokens). Fits each budget's optimum (or, with too few runs per budget for a fit
each, one law over all budgets) and the joint law, and reports every candidate with the joint law's
identifiability (range of the optimum over the fits consistent with the runs).
--method auto (default): the best mix observed at the largest budget, unless the runs show a
projection does better: with >= 3 budgets every candidate is fitted on all budgets but the largest and
scored there one way for all (the largest's DDO law, or a run of its total within a stated L1 distance);
a projection must win that backtest beyond a one-sided 2.5% test, or the joint law fitted without the
largest budget must predict its runs within their noise and the law over every budget predict a gain at
the target beyond its uncertainty; projections beyond the shares run need a run to vouch for them
(the output lists each candidate and how it was scored); with 2 budgets a projection only where the law fitted jointly to both
budgets predicts it beats the observed mix by more than twice the prediction's standard deviation
(delta method over the fit) and twice the noise of one run (`selection.predicted` in --json holds
gain, sd, z and noise per projection). One budget: the observed mix (the projections need two).
--method geometric is the paper's path; observed | joint | robust force that candidate.
With --runs the output ends with `trust:` lines (`trust` in --json): whether the choice can be judged
against the noise of one run, and how many seeds per mix would judge it; a chosen mix on the edge of
the mixes run; implausible parameters of the joint law. --save-plan records the method, the reason
and that evidence in the plan's metadata. Token columns that hold shares, loss columns that differ
between the files, a target the path cannot reach and any NaN in the answer are errors (exit 2).
--objective-weights d1=w1,d2=w2 (or a JSON file {"d1": w1, ...}): the objective is the weighted sum
of those validation domains' losses (mean_loss) or perplexities (mean_ppl) instead of the mean.

examples:
  autoscale-data project scales.json --target-tokens 1e10 --json --plot weights.png
  autoscale-data project --runs runs_1M.csv --runs runs_4M.csv --runs runs_8M.csv --target-tokens 1e10
  autoscale-data project --runs runs_1M.csv --runs runs_4M.csv --target-tokens 1e10 --method joint
  autoscale-data project --runs sweep_1B.csv --runs sweep_3B.csv --method joint --target-tokens 3e10 \
      --objective mean_loss --objective-weights pile_cc=0.7,wiki=0.3 --json
"""


def register(subparsers: Any) -> None:
    """Add the ``project`` sub-command."""
    p = add_verb(subparsers, "project", run, help="project optimal mixes at two budgets to any target budget "
                                                  "(AutoScale)",
                 description="N*(t) = N*(N1) (N*(N2)/N*(N1))^t with sum N*(t) = target.", epilog=_EPILOG)
    p.add_argument("scales", metavar="SCALES.json", nargs="?", default=None,
                   help="optimal mixes at two or more budgets (or give --runs)")
    p.add_argument("--target-tokens", type=token_count, required=True, metavar="N", help="target budget")
    p.add_argument("--runs", action="append", default=None, metavar="RUNS.csv",
                   help="runs of one budget (repeat for each budget) instead of SCALES.json")
    p.add_argument("--olmix", action="append", nargs=3, default=None,
                   metavar=("RATIOS.csv", "METRICS.csv", "TOKENS"),
                   help="an Olmix ratio/metric pair as one budget's runs (TOKENS: every run's total tokens)")
    p.add_argument("--objective-weights", default=None, metavar="D=W,...|JSON",
                   help="weighted sum of validation losses as the objective (with --runs/--olmix)")
    p.add_argument("--method", choices=PROJECTION_CHOICES, default=None,
                   help=f"what gives the weights with --runs: {DEFAULT_PROJECTION} (default: chosen from the "
                        "runs, see below), observed (the largest budget's best mix), geometric (the paper's "
                        "Theorem-1 path; the only method for SCALES.json), joint or robust")
    p.add_argument("--objective", choices=OBJECTIVES, default=DEFAULT_OBJECTIVE,
                   help="objective of the fits to --runs: " + field_help(DDOOptions, "objective"))
    p.add_argument("--min-weight", type=weight_float, default=0.0, metavar="W",
                   help="lower bound on every weight in the fits to --runs")
    p.add_argument("--max-weight", type=weight_float, default=1.0, metavar="W",
                   help="upper bound on every weight in the fits to --runs")
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

    lo = min(plan.scales[0].budget_tokens, target) / 2
    hi = max(plan.scales[-1].budget_tokens, target) * 4
    budgets = np.geomspace(lo, hi, 200)
    w = plan.allocations_for_budgets(budgets) / budgets[:, None]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.stackplot(budgets, w.T, labels=list(plan.domains))
    for scale in plan.scales:
        ax.axvline(scale.budget_tokens, color="k", lw=0.8, ls=":")
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


def _plan(scales: Any, args: argparse.Namespace, caps: dict[str, float] | None,
          evidence: PlanEvidence) -> MixturePlan:
    """The mixture plan through ``scales`` for ``--plot`` / ``--save-plan`` (``metadata``: the evidence); a
    domain left out says so."""
    try:
        return MixturePlan.from_scales(scales, tokenizer=args.tokenizer, token_caps=caps,
                                       max_epochs=args.max_epochs,
                                       metadata=evidence.to_json())
    except ValueError as exc:
        if "allocations must be > 0" not in str(exc):
            raise
        raise ValueError(f"--save-plan/--plot: the answer leaves a domain out ({exc}); a mixture plan "
                         "(weights as a function of the budget) needs every domain above 0 at every budget: "
                         "give --min-weight (e.g. 0.01), or use the mix at the target (printed without "
                         "--save-plan)") from None


def _spread_warnings(table: RunTable, name: str) -> list[str]:
    """Runs whose total tokens are far (> 10%) from the table's median: a table is read as one budget.

    A DDO design's base run and its perturbations (runs that differ from the table's per-domain
    median in at most one domain) are far by design and not named.
    """
    tok = table.tokens_matrix()
    tot = tok.sum(axis=1)
    med = float(np.median(tot))
    base = np.median(tok, axis=0)
    changed = (np.abs(tok - base) > 0.01 * np.maximum(np.abs(base), 1e-12)).sum(axis=1)
    far = [(r.run_id, n / med) for r, n, c in zip(table.runs, tot, changed, strict=True)
           if med > 0 and abs(n / med - 1) > 0.1 and c > 1]
    if not far:
        return []
    shown = ", ".join(f"{rid!r} ({x:.3g}x)" for rid, x in far[:5]) + (f" and {len(far) - 5} "
                                                                      "more" if len(far) > 5 else "")
    return [f"{name}: the tokens of run(s) {shown} sum far from the table's median total ({med:.4g}): the "
            "file is read as one budget; if its columns are shares they should sum to 1 (rounding, e.g. "
            "1.02, is fine)"]


def _tables(args: argparse.Namespace) -> tuple[list[RunTable], list[str], list[str]]:
    """The run tables, a name for each (its file) and warnings about them."""
    tables, names, notes = [], [], []
    for path in args.runs or []:
        try:
            table = RunTable.from_csv(path)
        except ValueError as exc:
            text = str(exc)
            raise ValueError(text if path in text else f"{path}: {text}") from None
        tables.append(table)
        names.append(path)
        notes.extend(_spread_warnings(table, path))
    for ratios, metrics, tokens in args.olmix or []:
        total = float(parse_token_count(tokens, what="--olmix TOKENS"))
        tables.append(read_olmix(ratios, metrics, total_tokens=total))
        names.append(ratios)
    return tables, names, notes


def _from_runs(args: argparse.Namespace,
               caps: dict[str, float] | None) -> tuple[ProjectionsRecord, list[Any], PlanEvidence]:
    """Every candidate from the run tables: the answer, the scales of the chosen one's plan and the
    evidence."""
    options = DDOOptions(objective=args.objective, min_weight=args.min_weight, max_weight=args.max_weight,
                         token_caps=caps, max_epochs=args.max_epochs,
                         val_domains=objective_weights_arg(args.objective_weights))
    tables, names, notes = _tables(args)
    projections = project_all(tables, args.target_tokens, options, method=args.method or DEFAULT_PROJECTION,
                              labels=names)
    record = projections.record()
    evidence = PlanEvidence.of(projections, tables, objective=args.objective, sources=names)
    return replace(record, warnings=notes + record.warnings), projections.plan_scales(), evidence


def _from_scales(args: argparse.Namespace,
                 caps: dict[str, float] | None) -> tuple[Projection, list[Any], PlanEvidence, str]:
    """The geometric path through SCALES.json's optima: the answer, the scales, the evidence and its title."""
    scales = scales_from_json(read_json(args.scales))
    res = project(scales, args.target_tokens, token_caps=caps, max_epochs=args.max_epochs)
    text = f"projected mix at {res.budget_tokens:.4g} tokens (t = {res.t:.4f}, path residual {res.residual:.3g}):"
    evidence = PlanEvidence(
        method=GEOMETRIC, requested_method=GEOMETRIC, target_tokens=res.budget_tokens, sources=[args.scales],
        reason="SCALES.json gives the optimal mix at each budget: the geometric (Theorem-1) path through "
               "them",
        budgets=[float(x["budget_tokens"] if isinstance(x, dict) else x[0]) for x in scales])
    return res, scales, evidence, text


def run(args: argparse.Namespace) -> int:
    """Run ``project`` from parsed arguments."""
    has_runs = bool(args.runs or args.olmix)
    if (args.scales is None) == (not has_runs):
        raise ValueError("give either SCALES.json or --runs RUNS.csv / --olmix (one per budget), not both or "
                         "neither")
    if args.method not in (None, GEOMETRIC) and not has_runs:
        raise ValueError(f"--method {args.method} fits the runs themselves: pass --runs RUNS.csv for each "
                         "budget (SCALES.json gives optima: only the geometric path applies)")
    if args.objective_weights is not None and not has_runs:
        raise ValueError("--objective-weights applies to fits of --runs / --olmix, not to SCALES.json")
    caps = parse_tokens(args.available)
    answer: Projection | ProjectionsRecord
    if not has_runs:
        answer, scales, evidence, text = _from_scales(args, caps)
    else:
        answer, scales, evidence = _from_runs(args, caps)
        observed = answer.computed(OBSERVED)
        what = (f"the best mix observed: {observed.description}" if answer.method == OBSERVED
                else f"{answer.method} projection")
        text = f"mix at {answer.budget_tokens:.4g} tokens ({what}):"
    out = answer.to_json()
    check_finite_answer(out, "project")  # before anything is drawn, saved or printed
    if args.plot or args.save_plan:
        plan = _plan(scales, args, caps, evidence)
        if args.plot:
            plot_weights(plan, args.target_tokens, args.plot)
        if args.save_plan:
            check_finite_answer(plan.to_json(), "project --save-plan")
            plan.save(args.save_plan)
    if args.json:
        print_json(args, out)
    else:
        print(text)
        for d, w in answer.weights.items():
            print(f"  {d:>16}: {w:.4f}  ({answer.allocation_tokens[d]:.4g} tokens)")
        if isinstance(answer, ProjectionsRecord):
            _print_candidates(answer)
    for w in answer.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _print_candidates(answer: ProjectionsRecord) -> None:
    """The fits' side of the text answer: which candidate was chosen and why, the other one, the joint law,
    trust."""
    sel = answer.selection
    if sel is not None:
        print(f"chosen: {answer.method} ({sel.reason})")
        for line in sel.backtest_lines()[:-1]:  # each candidate and how it was scored
            print(f"  {line}")
    for note in answer.notes:
        print(f"note: {note}")
    other = {GEOMETRIC: JOINT, JOINT: GEOMETRIC, ROBUST: GEOMETRIC, OBSERVED: ROBUST}[answer.method]
    robust, alt, joint = answer.computed(ROBUST), answer.computed(other), answer.computed(JOINT)
    if robust is not None:
        print("robust projection moves the geometric mix by total variation "
              f"{robust.moved['total_variation']:.4f}")
    if alt is not None:
        tv = answer.disagreement if answer.method in (GEOMETRIC, JOINT) else None
        print(f"{other} projection (not used): " + ", ".join(f"{d}={w:.4f}" for d, w in alt.weights.items())
              + ("" if tv is None else f"; total variation {tv['total_variation']:.4f}"))
    elif sel is None or sel.rule != "fallback":
        print(f"warning: the {other} projection failed: {answer.failure(other)}", file=sys.stderr)
    if joint is not None and joint.identifiability is not None:
        print(f"joint law: {joint.identifiability.summary}")
    for line in answer.trust.messages() if answer.trust is not None else []:
        print(f"trust: {line}")

"""Example (e): use a plan from ``autoscale-data project`` in your own training script.

The command line fits the AutoScale projection on optimal mixes found at two small budgets and
writes a plan (weights as a function of the budget)::

    autoscale-data project scales.json --target-tokens 3e10 --save-plan plan.json

In the training script, load it and hand it to the dataset as ``weights``: the dataset asks the
plan for the weights at *its* budget, so the same plan file serves every target size::

    plan = MixturePlan.load("plan.json")
    ds = ScaleAwareMixtureDataset("stores/", weights=plan, budget_tokens=3e10, seq_len=2048)

Run: ``python examples/use_plan.py --plan plan.json --domains stores/ --budget-tokens 3e10`` or
``python examples/use_plan.py --tiny`` (writes a scales.json for the tiny domains, runs the
``project`` command on it, loads the plan and builds the dataset from it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.solver.plan import MixturePlan

# optimal allocations (tokens per domain) found by DDO at two small budgets; in a real project
# these come from `autoscale-data ddo` at each budget (its JSON output has the same fields)
TINY_SCALES = {"scales": [
    {"budget_tokens": 1000.0, "allocation_tokens": {"books": 300.0, "code": 150.0, "web": 550.0}},
    {"budget_tokens": 3000.0, "allocation_tokens": {"books": 1000.0, "code": 500.0, "web": 1500.0}},
]}


def run_project(scales: Path, target_tokens: float, plan_path: Path) -> None:
    """``autoscale-data project SCALES --target-tokens N --save-plan PLAN`` (the installed command)."""
    verb = ["project", str(scales), "--target-tokens", str(target_tokens), "--save-plan", str(plan_path)]
    exe = shutil.which("autoscale-data")
    print("$ autoscale-data " + " ".join(verb), flush=True)
    subprocess.run(([exe] if exe else [sys.executable, "-m", "autoscale_data.cli"]) + verb, check=True)


def build_dataset(plan_path: Path, domains: str, budget_tokens: int, seq_len: int) -> ScaleAwareMixtureDataset:
    """The dataset with the plan's weights for ``budget_tokens``."""
    plan = MixturePlan.load(plan_path)
    ds = ScaleAwareMixtureDataset(domains, weights=plan, budget_tokens=budget_tokens, seq_len=seq_len,
                                  max_epochs=4.0)
    print(f"plan weights at {budget_tokens:.3g} tokens: "
          + ", ".join(f"{d}={w:.3f}" for d, w in plan.weights_for_budget(budget_tokens).items()))
    print(f"dataset: {ds.total_sequences} sequences of {seq_len} tokens, per domain {ds.sequences_per_domain}")
    return ds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, help="a plan written by `autoscale-data project --save-plan`")
    parser.add_argument("--domains", help="a prepare output dir (one store per domain)")
    parser.add_argument("--budget-tokens", type=float)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--tiny", action="store_true", help="tiny stores, a tiny projection, a few samples")
    args = parser.parse_args(argv)
    if not args.tiny:
        if not (args.plan and args.domains and args.budget_tokens):
            parser.error("give --plan, --domains and --budget-tokens, or --tiny")
        build_dataset(args.plan, args.domains, int(args.budget_tokens), args.seq_len)
        return 0
    from _tiny import make_tiny_stores, result

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        domains = str(make_tiny_stores(root / "stores"))
        (root / "scales.json").write_text(json.dumps(TINY_SCALES))
        budget, seq_len = 9000, 48
        run_project(root / "scales.json", budget, root / "plan.json")
        ds = build_dataset(root / "plan.json", domains, budget, seq_len)
        seen = Counter(ds.domain_names[s["domain"]] for s in ds)
        plan_weights = MixturePlan.load(root / "plan.json").weights_for_budget(budget)
    ok = (dict(seen) == ds.sequences_per_domain
          and all(abs(ds.weights[d] - plan_weights[d]) < 1e-9 for d in plan_weights)
          and all(abs(seen[d] - plan_weights[d] * ds.total_sequences) < 1 for d in plan_weights))
    result(example="use_plan", ok=ok, plan_weights=plan_weights, sequences_seen=dict(seen),
           total_sequences=ds.total_sequences)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``autoscale-data run CONFIG [--out DIR] [--dry-run]``: the whole AutoScale experiment."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import add_verb

__all__ = ["register", "run"]

_EPILOG = """\
Proxies at the two DDO budgets -> DDO fits -> projection to the target budget -> target runs for
the AutoScale mix and the baselines -> report (OUT/report.md, report.json, plots/), then prints the
summary table. Re-running the same command skips finished runs and resumes unfinished ones.

examples:
  autoscale-data run examples/tiny-cpu.yaml --dry-run
  autoscale-data run examples/tiny-cpu.yaml --out runs/tiny
"""


def register(subparsers: Any) -> None:
    """Add the ``run`` sub-command."""
    p = add_verb(subparsers, "run", run, help="run an AutoScale experiment (proxies, fits, targets, report)",
                 description="Run the AutoScale pipeline described by a YAML/JSON config.", epilog=_EPILOG)
    p.add_argument("config", metavar="CONFIG", help="runner config (.yaml/.yml/.json)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory (default: ./runs/<config name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, its total tokens and an estimated time")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    """Execute the ``run`` verb."""
    from ..runner import MixtureRunner, format_summary, load_config

    config = load_config(args.config)
    out = Path(args.out) if args.out else Path("runs") / config.name
    runner = MixtureRunner(config, out, progress=False if args.no_progress else None)
    if args.dry_run:
        print(runner.describe())
        return 0
    report = runner.run()
    print("\n" + format_summary(report))
    return 0

"""``autoscale-data demo [--quick] [--out DIR]``: the whole pipeline on the embedded synthetic corpus."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]

_EPILOG = """\
Generates the embedded synthetic corpus (4 domains, no downloads), prepares it with the byte-level
tokenizer, trains the DDO proxies at N1 and N2 with a tiny GPT on CPU, fits DDO, projects the mix
to the target budget, trains the AutoScale, uniform and DDO(N2) mixes there, prints a summary table
and writes OUT/report.md, report.json and plots/. Running it again resumes: finished runs are reused.

examples:
  autoscale-data demo --quick            # about 2 minutes: shows the procedure
  autoscale-data demo --out my-demo      # about 10 minutes on 2 cores
"""


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command."""
    p = subparsers.add_parser("demo", help="run AutoScale end to end on the built-in synthetic corpus",
                              description="Run the AutoScale pipeline on the embedded synthetic corpus.",
                              epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny budgets (about 2 minutes; shows the procedure only)")
    p.add_argument("--out", default="autoscale-demo", metavar="DIR",
                   help="output directory (default: ./autoscale-demo)")
    p.add_argument("--progress", action="store_true", help="show per-run progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute the ``demo`` verb."""
    from ..demo import run_demo

    run_demo(args.out, quick=args.quick, progress=bool(args.progress))
    return 0

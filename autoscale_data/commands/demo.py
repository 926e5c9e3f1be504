"""``autoscale-data demo [--quick] [--out DIR]``: the whole pipeline on the embedded synthetic corpus.

``autoscale-data demo --case shift`` runs the positive control instead: three sources whose best mix
moves with the budget by construction, a grid of target runs that shows it, and the runner's
three-budget design on them (:mod:`autoscale_data.demo.shift`).

``autoscale-data demo --stores DIR`` only builds the synthetic corpus's token stores (what
``examples/tiny-cpu.yaml`` reads) and stops.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._args import add_verb, positive_int

__all__ = ["register", "run"]

_EPILOG = """\
Generates the embedded synthetic corpus (4 domains, no downloads), prepares it with a byte-level
BPE trained on it, trains the DDO proxies at N1 and N2 with a tiny GPT on CPU, fits DDO, projects the
mix to the target budget, trains the AutoScale, uniform and DDO(N2) mixes there, prints a summary
table and writes OUT/report.md, report.json and plots/. Running it again resumes: finished runs are
reused.

With --stores DIR it only generates the corpus and prepares it with the byte-level tokenizer into
DIR (one store per domain; the text goes to DIR.corpus), for runner configs such as
examples/tiny-cpu.yaml.

With --case shift it runs the positive control: three synthetic sources built so that the best mix
moves with the budget (one saturates early, one keeps paying), a grid of mixes at N2 and at the target
on three seeds (the ground truth), then the runner's three-budget design and its target runs; it
writes OUT/shift_case.md (shift_case_<preset>.md for another preset) beside the report.

examples:
  autoscale-data demo --quick                   # about 2 minutes: shows the procedure
  autoscale-data demo --case shift --out shift  # the positive control (about 40 minutes on one core)
  autoscale-data demo --case shift --out shift --preset late   # then its larger DDO budgets (about 25 more)
  autoscale-data demo --case shift --out shift-control --preset control   # late's budgets, a 1M-token target (about 50 min, 2 shared cores)
  autoscale-data demo --case shift --out shift-zipf --preset zipf   # two Zipf vocabularies, power-law learning curves
  autoscale-data demo --case shift --out shift-zipf --preset zipf16   # then DDO budgets halved: target 16 x N2
  autoscale-data demo --out my-demo             # about 10 minutes on 2 cores
  autoscale-data demo --stores data/tiny-demo   # the stores examples/tiny-cpu.yaml reads (seconds)
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "demo", run, help="run AutoScale end to end on the built-in synthetic corpus",
                 description="Run the AutoScale pipeline on the embedded synthetic corpus.", epilog=_EPILOG)
    p.add_argument("--quick", action="store_true", help="tiny budgets (about 2 minutes; shows the procedure "
                                                        "only)")
    p.add_argument("--out", default="autoscale-demo", metavar="DIR",
                   help="output directory (default: ./autoscale-demo)")
    p.add_argument("--progress", action="store_true", help="show per-run progress bars")
    p.add_argument("--case", choices=("default", "shift"), default="default",
                   help="shift: the positive control whose best mix moves with the budget (--quick: its "
                        "small size)")
    p.add_argument("--grid-only", action="store_true",
                   help="with --case shift: only the grid of target runs, not the runner's design")
    p.add_argument("--preset", choices=("full", "late", "control", "zipf", "zipf16"), default="full",
                   help="with --case shift: full (N2 = target / 8), late (DDO budgets 4x larger, past the "
                        "saturating domain's saturation), control (late's budgets, a target of 8 x N2 = 1M "
                        "tokens) zipf (two Zipf vocabularies whose learning curves are power laws of "
                        "different exponents, target 8 x N2) or zipf16 (the same, target 16 x N2)")
    stores = p.add_argument_group("only build token stores (no training)")
    stores.add_argument("--stores", default=None, metavar="DIR",
                        help="generate the corpus, prepare it with the byte-level tokenizer into DIR, and "
                             "stop")
    stores.add_argument("--domains", default=None, metavar="A,B,C",
                        help="with --stores: which synthetic domains (default: encyclopedia,code,web)")
    stores.add_argument("--bytes-per-domain", type=positive_int, default=400_000, metavar="N",
                        help="with --stores: text bytes generated per domain (default: 400000)")


def run(args: argparse.Namespace) -> int:
    from ..demo import STORES_DOMAINS, prepare_synthetic_stores, run_demo

    if args.case == "shift":
        from ..demo import SHIFT_PRESETS, run_shift_case

        run_shift_case(args.out, SHIFT_PRESETS["small" if args.quick else args.preset],
                       autoscale=not args.grid_only)
        return 0
    if args.stores is None:
        run_demo(args.out, quick=args.quick, progress=bool(args.progress))
        return 0
    domains = [d.strip() for d in args.domains.split(",")
               if d.strip()] if args.domains else list(STORES_DOMAINS)
    out = prepare_synthetic_stores(args.stores, domains=domains, bytes_per_domain=args.bytes_per_domain,
                                   progress=bool(args.progress))
    print(f"synthetic token stores ({', '.join(domains)}; byte-level tokenizer) ready under {os.fspath(out)}")
    return 0

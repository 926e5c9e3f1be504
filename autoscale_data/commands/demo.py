"""``autoscale-data demo [--quick] [--out DIR]``: the whole pipeline on the embedded synthetic corpus.

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

examples:
  autoscale-data demo --quick                   # about 2 minutes: shows the procedure
  autoscale-data demo --out my-demo             # about 10 minutes on 2 cores
  autoscale-data demo --stores data/tiny-demo   # the stores examples/tiny-cpu.yaml reads (seconds)
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "demo", run, help="run AutoScale end to end on the built-in synthetic corpus",
                 description="Run the AutoScale pipeline on the embedded synthetic corpus.", epilog=_EPILOG)
    p.add_argument("--quick", action="store_true", help="tiny budgets (about 2 minutes; shows the procedure only)")
    p.add_argument("--out", default="autoscale-demo", metavar="DIR",
                   help="output directory (default: ./autoscale-demo)")
    p.add_argument("--progress", action="store_true", help="show per-run progress bars")
    stores = p.add_argument_group("only build token stores (no training)")
    stores.add_argument("--stores", default=None, metavar="DIR",
                        help="generate the corpus, prepare it with the byte-level tokenizer into DIR, and stop")
    stores.add_argument("--domains", default=None, metavar="A,B,C",
                        help="with --stores: which synthetic domains (default: encyclopedia,code,web)")
    stores.add_argument("--bytes-per-domain", type=positive_int, default=400_000, metavar="N",
                        help="with --stores: text bytes generated per domain (default: 400000)")


def run(args: argparse.Namespace) -> int:
    from ..demo import STORES_DOMAINS, prepare_synthetic_stores, run_demo

    if args.stores is None:
        run_demo(args.out, quick=args.quick, progress=bool(args.progress))
        return 0
    domains = [d.strip() for d in args.domains.split(",") if d.strip()] if args.domains else list(STORES_DOMAINS)
    out = prepare_synthetic_stores(args.stores, domains=domains, bytes_per_domain=args.bytes_per_domain,
                                   progress=bool(args.progress))
    print(f"synthetic token stores ({', '.join(domains)}; byte-level tokenizer) ready under {os.fspath(out)}")
    return 0

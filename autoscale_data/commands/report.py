"""``autoscale-data report OUT_DIR``: (re)write the report of a runner output directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._args import add_verb

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "report", run, help="write report.md/report.json/plots of an `autoscale-data "
                                                 "run` output",
                 description="Summarise the runs, fits, target curves and tokens saved; print the summary "
                             "table.")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the --out directory of `autoscale-data run`")


def run(args: argparse.Namespace) -> int:
    from ..runner import format_summary, layout, write_report

    report = write_report(args.out_dir)
    out = Path(args.out_dir)
    print(f"wrote {out / layout.REPORT_MD}, {out / layout.REPORT_JSON} and {len(report.plots or [])} plots\n")
    print(format_summary(report))
    return 0

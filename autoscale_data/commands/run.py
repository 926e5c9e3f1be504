"""``autoscale-data run CONFIG [--out DIR] [--dry-run] [--executor KIND] [--max-parallel N|auto]``:
the whole AutoScale experiment."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._runner_names import EXECUTORS, LOCAL
from ._args import add_verb

__all__ = ["register", "run", "with_executor"]

_EPILOG = """\
Proxies at the DDO budgets (two, or three for a backtest) -> DDO fits -> projection to the target
budget -> target runs for the AutoScale mix and the baselines -> report (OUT/report.md, report.json,
plots/), then prints the summary table. Re-running the same command skips finished runs and resumes unfinished ones.

examples:
  autoscale-data run examples/tiny-cpu.yaml --dry-run
  autoscale-data run examples/tiny-cpu.yaml --out runs/tiny
  autoscale-data run examples/tiny-cpu.yaml --out runs/tiny --executor local --max-parallel 2
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "run", run, help="run an AutoScale experiment (proxies, fits, targets, report)",
                 description="Run the AutoScale pipeline described by a YAML/JSON config.", epilog=_EPILOG)
    p.add_argument("config", metavar="CONFIG", help="runner config (.yaml/.yml/.json)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory (default: ./runs/<config name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, its total tokens and an estimated "
                                                          "time")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--executor", choices=EXECUTORS, default=None,
                   help=f"where runs train (default: the config's executor.kind, else {LOCAL})")
    p.add_argument("--max-parallel", default=None, metavar="N|auto",
                   help="runs at once (local: slots of procs GPUs or cpu_threads threads; default: the "
                        "config's)")
    p.add_argument("--allow-config-change", action="store_true",
                   help="continue in an --out folder that was run with another config: finished runs whose "
                        "settings still match are reused, the report covers only this config (without the "
                        "flag such a folder is refused, naming what changed)")
    p.add_argument("--retries", type=int, default=None, metavar="N",
                   help="resubmissions of a run whose job died (default: the config's executor.retries)")


def with_executor(config: Any, *, kind: str | None = None, max_parallel: int | str | None = None,
                  retries: int | None = None) -> Any:
    """``config`` with the executor settings that are not ``None`` replaced (validated again)."""
    import dataclasses

    changes = {k: v for k, v in (("kind", kind), ("max_parallel", max_parallel), ("retries", retries))
               if v is not None}
    if not changes:
        return config
    return dataclasses.replace(config, executor=dataclasses.replace(config.executor, **changes))


def run(args: argparse.Namespace) -> int:
    from ..runner import MixtureRunner, format_summary, load_config

    config = with_executor(load_config(args.config), kind=args.executor, max_parallel=args.max_parallel,
                           retries=args.retries)
    out = Path(args.out) if args.out else Path("runs") / config.name
    runner = MixtureRunner(config, out, progress=False if args.no_progress else None,
                           allow_config_change=args.allow_config_change)
    if args.dry_run:
        print(runner.describe())
        return 0
    report = runner.run()
    print("\n" + format_summary(report))
    return 0

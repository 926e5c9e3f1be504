"""``autoscale-data extend OUT --run LABEL --budget N [--seed S]``: extend a finished target run to a
larger budget from its final checkpoint and data position."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._runner_names import LR_SCHEDULES, REWARM_DECAY
from ._args import add_verb, token_count

__all__ = ["register", "run"]

_EPILOG = """\
Loads OUT/runs/<id>/final_ckpt/ of the finished target run (kept by target.keep_checkpoints, the
default), continues its data stream from where it ended under the mix for the new budget
(autoscale: the mixture plan's weights at N; autoscale_anytime: its plan path; a fixed mix: the same
weights), nothing repeated or skipped, and trains the extra tokens as a new run (its own id, in the
ledger; re-running the command reuses or resumes it). The learning rate re-warms to the peak over
--warmup-fraction of the new steps, then decays again (--lr-schedule constant: holds the peak).

examples:
  autoscale-data extend runs/tiny --run autoscale --budget 65536
  autoscale-data extend runs/tiny --run uniform --budget 65536 --seed 1 --lr-schedule constant
"""


def register(subparsers: Any) -> None:
    p = add_verb(subparsers, "extend", run, help="extend a finished target run to a larger budget",
                 description="Continue a finished target run of an `autoscale-data run` output folder "
                             "(model, optimiser and data position) to a larger token budget.", epilog=_EPILOG)
    p.add_argument("out_dir", metavar="OUT", help="the --out directory of `autoscale-data run`")
    p.add_argument("--run", required=True, metavar="LABEL",
                   help="the target mix (autoscale, uniform, natural, ddo_n2 …) or a run id under OUT/runs/")
    p.add_argument("--budget", required=True, type=token_count, metavar="N",
                   help="the new total budget in tokens (more than the run's; whole global batches)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="the target seed, when the mix was trained with several")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=REWARM_DECAY,
                   help=f"learning rate of the new steps (default {REWARM_DECAY})")
    p.add_argument("--warmup-fraction", type=float, default=None, metavar="F",
                   help="share of the new steps that re-warm (default: the config's "
                        "optimizer.warmup_fraction)")
    p.add_argument("--peak-lr-ratio", type=float, default=1.0, metavar="R",
                   help="re-warmed peak as a multiple of optimizer.lr (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from ..runner import MixtureRunner, load_folder_config

    out = Path(args.out_dir)
    runner = MixtureRunner(load_folder_config(out), out, progress=False if args.no_progress else None)
    run = runner.extend(args.run, args.budget, seed=args.seed, lr_schedule=args.lr_schedule,
                        warmup_fraction=args.warmup_fraction, peak_lr_ratio=args.peak_lr_ratio)
    ext = run.extension
    if ext is None:
        raise ValueError(f"run {run.run_id} is not an extension: its result has no 'extension'")
    print(f"run {run.run_id} ({run.name}): {ext.parent_tokens:,} tokens of run {ext.parent} "
          f"+ {ext.new_tokens:,} new = {run.total_tokens:,} tokens; mean loss {run.mean_loss:.4f}")
    print("tokens per domain: " + ", ".join(f"{d} {n:,}" for d, n in run.tokens.items()))
    return 0

"""A long-lived training worker of the local executor: one per slot, one run after another.

    python -m autoscale_data.runner.executors.worker [--family gpt2|bert]

reads one ``job.json`` path per line on stdin, trains it in this process with its output appended
to the run's ``train.log``, and answers ``exit <code>`` on the stdout it was started with (0 done,
3 diverged, 4 locked, 1 error). Importing torch and transformers once per slot instead of once per
run is what makes many short runs cheap (``--family`` imports the model classes while the worker
waits for its first job). At the end of its input the worker leaves through
:func:`~autoscale_data.runner.training.dist.exit_process` (results are already saved).
"""

from __future__ import annotations

import os
import sys
import traceback

from ..._runner_names import BERT, GPT2, MODEL_FAMILIES
from .. import layout

__all__ = ["main"]


def _redirect(path: str | None) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path if path else os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _warm(family: str | None) -> None:
    if family == GPT2:
        from transformers import GPT2Config, GPT2LMHeadModel  # noqa: F401
    elif family == BERT:
        from transformers import BertConfig, BertForMaskedLM  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Serve jobs from stdin until it closes; returns the exit code."""
    import argparse

    from ..training.train import run_job

    parser = argparse.ArgumentParser(prog="python -m autoscale_data.runner.executors.worker")
    parser.add_argument("--family", choices=MODEL_FAMILIES, default=None, help="model classes to load first")
    _warm(parser.parse_args(argv).family)
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    _redirect(None)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        _redirect(os.path.join(os.path.dirname(path), layout.TRAIN_LOG))
        print(f"$ worker pid {os.getpid()}: {path}", flush=True)
        try:
            code = run_job(path)
        except Exception:  # noqa: BLE001 - reported to the runner as a failed run, the worker lives on
            traceback.print_exc()
            code = 1
        _redirect(None)
        channel.write(f"exit {code}\n")
    return 0


if __name__ == "__main__":
    from ..training.dist import exit_process

    exit_process(main())

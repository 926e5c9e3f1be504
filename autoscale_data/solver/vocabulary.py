"""The solver's closed name sets, each spelt once: objectives, laws and what sets the target mix.

Every other module, the runner's config, the CLI's ``choices=`` and the docs read these names from
here (tests/project/test_architecture.py fails on one of them written as a string elsewhere). Each
set is a ``Literal`` type for the annotations and the tuple of its names for the checks.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "AUTO",
    "DEFAULT_LAW",
    "DEFAULT_OBJECTIVE",
    "DEFAULT_PROJECTION",
    "GEOMETRIC",
    "JOINT",
    "LAWS",
    "LAW_3P",
    "LAW_4P",
    "Law",
    "MEAN_LOSS",
    "MEAN_PPL",
    "OBJECTIVES",
    "OBSERVED",
    "Objective",
    "PROJECTIONS",
    "PROJECTION_CHOICES",
    "ProjectionChoice",
    "ROBUST",
    "check_name",
    "law_parameters",
    "objective_key",
]

Objective = Literal["mean_loss", "mean_ppl"]
"""What a fit minimises: the mean validation loss in nats over the validation domains, or the mean of
their perplexities exp(loss) (the authors' code; divided by the base runs' value where a fit needs a
scale)."""
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)
MEAN_LOSS, MEAN_PPL = OBJECTIVES
DEFAULT_OBJECTIVE: Objective = MEAN_LOSS
"""The objective of every fit by default (library, CLI and runner): the mean validation loss, what
the runner's report and the published evaluations compare (docs/solver.md, "Objective")."""

Law = Literal["3p", "4p"]
"""Each domain's law ``L(x) = A (x + a)^(-b) + c``: ``3p`` with ``A = 1`` (the paper's) or ``4p`` with
the amplitude ``A >= 0`` fitted too (needs 4 distinct multipliers)."""
LAWS: tuple[Law, ...] = get_args(Law)
LAW_3P, LAW_4P = LAWS
DEFAULT_LAW: Law = LAW_3P

ProjectionChoice = Literal["auto", "observed", "geometric", "joint", "robust"]
"""What sets the target mix: ``auto`` (chosen from the runs, :mod:`.select`), ``observed`` (the largest
budget's best mix as is) or one of the :data:`PROJECTIONS`."""
PROJECTION_CHOICES: tuple[ProjectionChoice, ...] = get_args(ProjectionChoice)
AUTO, OBSERVED, GEOMETRIC, JOINT, ROBUST = PROJECTION_CHOICES
DEFAULT_PROJECTION: ProjectionChoice = AUTO
"""``auto`` is also the word of every other setting the library can choose for the user: the
bootstrap's method, RegMix's regressor, the runner's device and ``executor.max_parallel``."""
PROJECTIONS: tuple[ProjectionChoice, ...] = (GEOMETRIC, JOINT, ROBUST)
"""The projections to a target budget: the Theorem-1 path through the per-budget DDO optima
(:func:`~.projection.project`), the optimum of the law fitted jointly to all budgets' runs, or the
Theorem-1 path with each domain's trend shrunk by its uncertainty (:func:`~.robust.robust_project`)."""


def objective_key(objective: str | None) -> Objective:
    """The key that holds the objective's value in a run's result and in the report: ``mean_ppl`` for
    ``mean_ppl``, else ``mean_loss`` (also for None: a record that does not name its objective)."""
    return MEAN_PPL if objective == MEAN_PPL else MEAN_LOSS


def law_parameters(law: str) -> int:
    """How many parameters ``law`` fits per domain: 3 or 4."""
    return 3 if law == LAW_3P else 4


def check_name(what: str, value: object, names: tuple[str, ...]) -> None:
    """``ValueError`` naming ``what``, the value and the accepted names unless ``value`` is one of
    ``names``."""
    if value not in names:
        raise ValueError(f"{what} must be one of {names}, got {value!r}")

"""Extending a finished target run to a larger budget: its parent, its mix and its learning rate.

:meth:`~autoscale_data.runner.MixtureRunner.extend` plans an *extension run* (:func:`plan_extension`) from a
finished run's ``OUT/runs/<id>/final_ckpt/`` (model, optimiser, LR scheduler, RNG; ``final_state.json``: the
dataset state, kept by ``target.keep_checkpoints``): the same model and optimiser go on, and the data stream
continues from the parent's end under the mix for the new budget (:func:`_mix_after`), nothing repeated or
skipped, with a re-warmed learning rate (:func:`extension_lr_lambda`). An extension is its own ledger run
(``kind="extension"``, its id hashing the parent's id, the new budget, the mix and the schedule), resumable
like every run, and can itself be extended. The rules and their reasons: docs/runner.md, "Extend a finished
target run".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..._runner_names import LR_SCHEDULES, PROXY, REWARM_DECAY
from ...mixing import ANYTIME_SCHEDULE
from .. import layout, registry
from ..config import RunnerConfig
from ..ledger import Ledger
from ..planning.data import DomainInfo
from ..planning.specs import ExtensionSpec, LRSchedule, RunSpec, extension_spec
from ..records import FinalState, RunListFile

__all__ = ["LRSchedule", "LR_SCHEDULES", "extension_lr_lambda", "find_parent", "parent_state",
           "plan_extension"]


def extension_lr_lambda(offset: int, steps: int, lr: LRSchedule, min_ratio: float) -> Callable[[int], float]:
    """Multiplier of ``optimizer.lr`` at global step ``s`` (``offset``: the parent's steps; ``steps``: the new
    ones).

    ``lr`` is :meth:`LRSchedule.resolved`: a linear re-warm from ``min_ratio`` (where the parent ended) to
    ``lr.peak_ratio`` over ``lr.warmup_fraction`` of the new steps, then (``rewarm_decay``) a linear decay
    to ``min_ratio`` at the end, or (``constant``) the peak. Steps before ``offset`` get the first new step's
    value.
    """
    warmup = round(float(lr.warmup_fraction or 0.0) * steps)
    peak = float(lr.peak_ratio)
    decay = lr.schedule == REWARM_DECAY

    def factor(step: int) -> float:
        k = max(0, step - offset)
        if k < warmup:
            return min_ratio + (peak - min_ratio) * (k + 1) / warmup
        if not decay:
            return peak
        rest = max(1, steps - warmup)
        return peak + (min_ratio - peak) * min(1.0, (k - warmup) / rest)

    return factor


def parent_state(run_dir: Path) -> FinalState | None:
    """``final_ckpt/final_state.json`` of a finished run (its steps and dataset state), or ``None``."""
    return layout.read(run_dir / layout.FINAL_CHECKPOINT_DIR, layout.FINAL_STATE)


def find_parent(out: Path, run: str, seed: int | None) -> RunSpec:
    """The run ``run`` names: a run id under ``OUT/runs/``, or a target mix label of ``OUT/plan.json``
    (with ``seed`` when the mix was trained with several seeds).

    Raises:
        ValueError: an unknown id or label (the message lists the target runs), a label trained with
            several seeds and no ``seed`` (or a seed it was not trained with), or a proxy run.
    """
    spec: RunSpec | None = (layout.read(out / layout.RUNS / run, layout.SPEC)
                            if run and os.sep not in run and run not in (".", "..") else None)
    if spec is None:
        run_list: RunListFile = layout.read(out, layout.RUN_LIST) or RunListFile()
        targets = run_list.targets or []
        known: dict[str, list[int]] = {}
        for t in targets:
            known.setdefault(t.label, []).append(t.seed)
        shown = ", ".join(f"{label} (seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))})"
                          for label, s in known.items()) or "none yet (run `autoscale-data run` first)"
        matches = [t for t in targets if t.label == run]
        if not matches:
            raise ValueError(f"unknown run {run!r} in {os.fspath(out)!r}: expected a target mix label or a "
                             f"run id under {layout.RUNS}/; the target runs are: {shown}")
        if seed is not None:
            matches = [t for t in matches if t.seed == seed]
            if not matches:
                raise ValueError(f"target mix {run!r} has no run with seed {seed}: its seeds are "
                                 f"{known[run]}")
        elif len(matches) > 1:
            raise ValueError(f"target mix {run!r} was trained with seeds {known[run]}: pick one with --seed "
                             "(seed=...)")
        spec = matches[0]
    elif seed is not None and spec.seed != seed:
        raise ValueError(f"run {run} has seed {spec.seed}, not {seed}")
    if spec.kind == PROXY:
        raise ValueError(f"run {spec.run_id} ({spec.name}) is a proxy run: only target runs (and extensions) "
                         "keep a final checkpoint to extend")
    return spec


def _parent_state(out: Path, ledger: Ledger, parent: RunSpec, where: str) -> FinalState:
    """The final state of ``parent``, which must be a finished run, not an online one, that kept its
    checkpoint."""
    kind = parent.hook.kind if parent.hook is not None else None
    if kind in registry.names(registry.ONLINE):
        raise ValueError(f"run {where} is an online-mixing run ({kind}): its mix was chosen during training "
                         "by a controller, which leaves no mix to continue under, so it cannot be extended; "
                         "train a target run at the larger budget instead (target.budget, with "
                         f"target.baselines: [{kind}])")
    if ledger.result(parent.run_id) is None:
        raise ValueError(f"run {where} has not finished: train it first (`autoscale-data run CONFIG "
                         f"--out {os.fspath(out)}`)")
    state = parent_state(ledger.run_dir(parent.run_id))
    if state is None:
        raise FileNotFoundError(
            f"run {where} kept no final checkpoint "
            f"({os.fspath(ledger.run_dir(parent.run_id) / layout.FINAL_CHECKPOINT_DIR)} is missing): set "
            f"target.keep_checkpoints: true in the config and rerun it (remove its {layout.RESULT}, then "
            f"`autoscale-data run CONFIG --out {os.fspath(out)}`)")
    return state


def _mix_after(out: Path, parent: RunSpec, tokens: int, where: str) -> tuple[str, dict[str, float] | None,
                                                                             Any]:
    """How the mix goes on after ``parent``'s end at ``tokens``: ``(mix, weights, plan)``: an anytime run's
    plan path, an ``autoscale`` run's mixture plan weights at ``tokens``, or a fixed mix's own weights."""
    from ...solver import MixturePlan

    if parent.schedule == ANYTIME_SCHEDULE:  # the parent's plan path, on to the new budget
        return ANYTIME_SCHEDULE, None, parent.plan
    if parent.label == layout.AUTOSCALE or (parent.extension is not None and parent.extension.mix == "plan"):
        path = out / layout.FITS / layout.MIXTURE_PLAN  # the plan's weights for the new budget
        if not path.is_file():
            raise FileNotFoundError(f"extending {where} follows the mixture plan, but {os.fspath(path)} is "
                                    f"missing (see {layout.MIXTURE_PLAN_ERROR} there)")
        return "plan", MixturePlan.load(path).weights_for_budget(tokens), None
    # a fixed mix keeps its weights
    return "same", dict(parent.extension.weights
                        or {}) if parent.extension is not None else parent.weights, None


def plan_extension(config: RunnerConfig, domains: DomainInfo, out: Path, ledger: Ledger, run: str,
                   budget: int,
                   seed: int | None, lr: LRSchedule) -> tuple[RunSpec, str]:
    """The extension run of ``run`` to ``budget`` tokens (module doc), not yet registered or trained.

    Returns:
        The extension's spec and the parent's name as messages show it.

    Raises:
        ValueError: as :meth:`~autoscale_data.runner.MixtureRunner.extend` says (an unknown run, an
            unfinished parent, a budget not above the parent's, stores that cannot supply the mix).
        FileNotFoundError: no kept final checkpoint, or no mixture plan for an ``autoscale`` parent.
    """
    from ...dataset import ScaleAwareMixtureDataset

    parent = find_parent(out, run, seed)
    where = f"{parent.name} ({parent.run_id})"
    state = _parent_state(out, ledger, parent, where)
    seq_len, batch = config.seq_len, config.global_batch_size
    total = budget // (seq_len * batch) * batch
    if total <= parent.total_sequences:
        raise ValueError(f"budget {budget!r} is not above run {where}'s {parent.total_tokens:,} tokens "
                         f"(whole global batches of {batch} x {seq_len} tokens): give a larger budget")
    mix, weights, plan = _mix_after(out, parent, total * seq_len, where)
    ds = ScaleAwareMixtureDataset(domains.paths, plan if plan is not None else weights, total * seq_len,
                                  seq_len,
                                  parent.seed, max_epochs=config.max_epochs, schedule=parent.schedule,
                                  verify="size",
                                  continue_from=state.dataset)
    record = ExtensionSpec(parent=parent.run_id, parent_sequences=parent.total_sequences, mix=mix,
                           weights=weights,
                           lr=lr.resolved(config.optimizer.warmup_fraction))
    return extension_spec(config, domains, parent, budget, ds.sequences_per_domain, record, plan=plan), where

"""The AutoScale pipeline: proxies at the DDO budgets -> DDO at each -> projection -> target runs -> report.

The target mixes come from the registry of mixing methods (:mod:`.methods`): AutoScale and every
``target.baselines`` name, each with the extra runs it needs before its targets (DoReMi's reference and
proxy, RegMix's swarm), trained beside the DDO proxies through the same ledger and executors.

``MixtureRunner(config, out_dir).run()`` is what ``autoscale-data run CONFIG --out DIR`` calls.
Every run goes through the ledger, so calling it again skips finished runs, resumes unfinished
ones from their checkpoints and retrains nothing twice. Fits are recomputed from the finished
runs' results every time (they take milliseconds) and written under ``OUT/fits/``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._checks import check_int
from .._io import atomic_write_json
from .._records import to_json
from .._runner_names import INPROCESS, REWARM_DECAY
from . import layout
from .config import RunnerConfig, config_to_dict
from .config.sections import WSD
from .describe import design_note, rounding_notes
from .experiment import check_config, with_folder_defaults
from .ledger import Ledger
from .mixes.methods import MethodContext, choose_all, cost_lines, selected_methods, selection_stages
from .planning.data import DomainInfo, inspect_domains
from .planning.specs import RunSpec, ddo_proxy_specs, supply_problems, target_spec
from .planning.wsd import WSDPlan, wsd_plan
from .records import RunListFile, RunResult
from .reporting.report_types import Report

__all__ = ["MixtureRunner"]


class MixtureRunner:
    """Drive one AutoScale experiment described by a :class:`RunnerConfig` in ``out_dir``.

    Args:
        config: the validated config.
        out_dir: where the ledger, runs, fits and report go.
        log: where progress lines go (default ``print``).
        progress: show progress bars (``None``: only on a terminal).
        allow_config_change: continue in an ``out_dir`` that was run with another config (finished runs
            whose ids still match are reused; the report covers only this config's plan). Without it such
            a folder raises :class:`~autoscale_data.runner.experiment.ConfigChangedError`.
    """

    def __init__(self, config: RunnerConfig, out_dir: str | os.PathLike[str], *,
                 log: Callable[[str], None] = print, progress: bool | None = None,
                 allow_config_change: bool = False) -> None:
        self.out = Path(out_dir)
        self.config = with_folder_defaults(config, self.out)  # an unset model.activation: the folder's
        self.log = log
        self.progress = progress
        self.allow_config_change = allow_config_change
        self._domains: DomainInfo | None = None
        self._executor: Any = None

    # ------------------------------------------------------------------ plan
    @property
    def domains(self) -> DomainInfo:
        if self._domains is None:
            self._domains = inspect_domains(self.config)
        return self._domains

    def proxy_specs(self) -> dict[int, list[RunSpec]]:
        """The DDO runs of each DDO budget (with ``ddo.schedule: wsd``, the branches of :meth:`wsd_plan`)."""
        plan = self.wsd_plan()
        if plan is not None:
            return plan.branches
        return {n: ddo_proxy_specs(self.config, self.domains, n) for n in self.config.ddo.budgets}

    def wsd_plan(self) -> WSDPlan | None:
        """The trunks and branches of ``ddo.schedule: wsd`` (:mod:`~autoscale_data.runner.planning.wsd`), else
        ``None``."""
        if self.config.ddo.schedule != WSD:
            return None
        return wsd_plan(self.config, self.domains)

    def method_context(self, ledger: Ledger | None = None, fits: Any = None, *,
                       proxies: dict[int, list[RunSpec]] | None = None) -> MethodContext:
        """What the mixing methods read (:class:`~autoscale_data.runner.mixes.methods.MethodContext`);
        ``proxies``: :meth:`proxy_specs` when the caller already has them."""
        return MethodContext(self.config, self.domains, self.out,
                             self.proxy_specs() if proxies is None else proxies,
                             ledger=ledger, fits=fits, log=self.log)

    def selection_specs(self) -> list[list[RunSpec]]:
        """The extra runs of the methods (DoReMi's reference and proxy, RegMix's swarm), stage by stage."""
        return selection_stages(selected_methods(self.config), self.method_context())

    def fixed_target_mixes(self) -> dict[str, dict[str, float]]:
        """Target mixes known before any proxy is trained (uniform, natural, reference)."""
        ctx = self.method_context()
        return {m.name: dict(m.choose(ctx).weights or {}) for m in selected_methods(self.config)
                if not m.after_runs}

    def target_specs(self, mixes: dict[str, dict[str, float]]) -> list[RunSpec]:
        """Fixed-schedule target runs: one per mix and target seed."""
        return [target_spec(self.config, self.domains, label, w, seed)
                for label, w in mixes.items() for seed in self.config.target.seeds]

    def describe(self) -> str:
        """The plan as text (``--dry-run``): every run, its tokens, the totals with an estimated time, and
        what the plan checks before training (:func:`~autoscale_data.runner.describe.run_list_text`)."""
        from .describe import run_list_text
        from .training.downstream import downstream_cost_lines

        plan = self.wsd_plan()
        proxies = (plan.trunks if plan is not None else []) + [s for specs in self.proxy_specs().values()
                                                               for s in specs]
        selection = [s for stage in self.selection_specs() for s in stage]
        text = run_list_text(self.config, self.domains, self.out, proxies + selection,
                         self.target_specs(self.fixed_target_mixes()))
        # AutoScale and each baseline
        targets = (1 + len(self.config.target.baselines)) * len(self.config.target.seeds)
        return text + "\n" + "\n".join(cost_lines(selected_methods(self.config), self.method_context())
                                        + downstream_cost_lines(self.config, self.domains, self.out, targets))

    # ------------------------------------------------------------------- run
    def run(self) -> Report:
        """Train what is missing, fit, project, train the targets and write the report.

        Returns:
            The report (also written to ``OUT/report.json``).

        Raises:
            ValueError: too few finished runs to fit (the message names them), or a solver error.
        """
        from .reporting.report import write_report

        self.out.mkdir(parents=True, exist_ok=True)
        with Ledger(self.out) as ledger, self._executor_scope():
            changed = self._record_inputs()
            proxies, methods, stages = self._plan_proxies_and_selection(ledger, changed)
            first = stages[0] if stages else []
            plan = self.wsd_plan()
            if plan is None:
                self._train_all(ledger, [s for specs in proxies.values() for s in specs] + first)
            else:  # a WSD run's parent (a trunk stretch) trains in an earlier wave
                waves = plan.waves
                for wave in waves[:-1]:
                    self._train_all(ledger, wave)
                self._train_all(ledger, waves[-1] + first)
            for stage in stages[1:]:  # a later stage reads the one before (DoReMi's proxy, its reference)
                self._train_all(ledger, stage)
            targets = self._plan_targets(ledger, proxies, methods, [s for stage in stages for s in stage])
            self._train_all(ledger, targets)
            if self.config.eval.tasks:  # the zero-shot tasks on every finished target run (eval.tasks)
                from .training.downstream import evaluate_targets

                evaluate_targets(self.config, self.domains, self.out, targets, log=self.log)
        report = write_report(self.out)
        self.log(f"report written to {os.fspath(self.out / layout.REPORT_MD)}")
        return report

    def _record_inputs(self) -> list[str]:
        """Record the config (returns its changes) and the stores; the reference losses when either
        changed."""
        changed = self._check_config()
        before = layout.read(self.out, layout.DOMAINS)
        same_data = before is not None and config_to_dict(before) == config_to_dict(self.domains)
        atomic_write_json(self.out / layout.DOMAINS, config_to_dict(self.domains))
        if changed or not same_data or not (self.out / layout.REFERENCE_LOSSES).is_file():
            self._write_references()
        return changed

    def _plan_proxies_and_selection(self, ledger: Ledger, changed: list[str]) -> tuple[
            dict[int, list[RunSpec]], list[Any], list[list[RunSpec]]]:
        """Plan, check and register the runs known before any training (the DDO proxies, the methods' own runs
        and the fixed target mixes); log the plan. Returns the proxies, the methods and the selection
        stages."""
        d = self.domains
        proxies = self.proxy_specs()
        all_proxies = [s for specs in proxies.values() for s in specs]
        methods = selected_methods(self.config)
        ctx = self.method_context(proxies=proxies)
        for method in methods:  # bad input of any method, before anything trains
            method.check(ctx)
        stages = selection_stages(methods, ctx)
        selection = [s for stage in stages for s in stage]
        fixed = self.target_specs(self.fixed_target_mixes())
        problems = supply_problems(self.config, d, all_proxies + selection + fixed)
        if problems:  # before training anything: every domain that cannot supply its runs, by name
            raise ValueError("the stores cannot supply this plan:\n  " + "\n  ".join(problems))
        # the report reads only this plan's runs, from the start; another config's extra runs are not its
        self._write_run_list(proxies, fixed, keep_extra=not changed, selection=selection)
        plan = self.wsd_plan()
        for s in (plan.trunks if plan is not None else []) + all_proxies + selection + fixed:
            ledger.register(s)
        warned = ([] if self.config.ddo.identifies_law
                  else [design_note(self.config)]) + rounding_notes(self.config, d)
        self.log(  # each note once: as a warning, not also in the logged plan
            "\n".join(line for line in self.describe().splitlines() if line not in warned))
        for note in warned:
            warnings.warn(note, UserWarning, stacklevel=3)
        return proxies, methods, stages

    def _plan_targets(self, ledger: Ledger, proxies: dict[int, list[RunSpec]], methods: list[Any],
                      selection: list[RunSpec]) -> list[RunSpec]:
        """Fit the finished proxies, choose every method's target mix (``fits/``) and register the target
        runs."""
        from .mixes.fitting import fit_all
        from .planning.repetition import write_mix_epochs

        fits = fit_all(self.config, self.domains, ledger, proxies, self.out / layout.FITS, log=self.log)
        mixes, targets, records = choose_all(methods, self.method_context(ledger, fits, proxies=proxies))
        atomic_write_json(self.out / layout.FITS / layout.TARGET_MIXES_FILE, mixes)
        atomic_write_json(self.out / layout.FITS / layout.METHODS_FILE, to_json({r.name: r for r in records}))
        write_mix_epochs(self.config, self.domains, mixes, self.out / layout.FITS, log=self.log)
        self._write_run_list(proxies, targets, selection=selection)
        for s in targets:
            ledger.register(s)
        return list(targets)

    def train_runs(self, specs: Sequence[RunSpec]) -> None:
        """Train extra runs (held-out perturbations, another budget …) through this runner's ledger.

        Finished runs are reused and unfinished ones resume, exactly as in :meth:`run`.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        with Ledger(self.out) as ledger, self._executor_scope():
            changed = self._check_config()
            run_list: RunListFile = layout.read(self.out, layout.RUN_LIST) or RunListFile()
            extra = {} if changed else {s.run_id: s for s in run_list.extra or []}
            extra.update({s.run_id: s for s in specs})
            atomic_write_json(self.out / layout.RUN_LIST,
                              replace(run_list, extra=list(extra.values())).to_json())
            for s in specs:
                ledger.register(s)
            self._train_all(ledger, specs)

    def extend(self, run: str, budget: int, *, seed: int | None = None, lr_schedule: str = REWARM_DECAY,
               warmup_fraction: float | None = None, peak_lr_ratio: float = 1.0) -> RunResult:
        """Extend a finished target run to a larger budget from its final checkpoint and data position.

        The extension is its own ledger run (``kind="extension"``; how its data and learning rate go on:
        :mod:`~autoscale_data.runner.training.extension`): a finished one is reused, an interrupted one
        resumes.

        Args:
            run: a target mix label of ``OUT/plan.json`` (``"autoscale"``, ``"uniform"`` …) or a run id
                under ``OUT/runs/`` (a target run or an earlier extension).
            budget: the new total budget in tokens (rounded down to whole global batches); more than the
                run's.
            seed: the target seed, when the mix was trained with several.
            lr_schedule: ``"rewarm_decay"`` (default) or ``"constant"``.
            warmup_fraction: share of the new steps that re-warm (default ``optimizer.warmup_fraction``).
            peak_lr_ratio: the re-warmed peak as a multiple of ``optimizer.lr``.

        Returns:
            The extension's ``result.json`` (``tokens`` counts the parent's prefix too; ``extension`` names
            the parent, its tokens and the new ones).

        Raises:
            ValueError: an unknown label or id (the message lists the target runs), a budget not above the
                run's, an unfinished parent, or a mix the stores cannot supply.
            FileNotFoundError: the run kept no final checkpoint (set ``target.keep_checkpoints: true``
                and train it again), or ``fits/mixture_plan.json`` is missing for an ``autoscale`` run.
        """
        from .training.extension import LRSchedule, plan_extension

        check_int("extend budget", budget)
        lr = LRSchedule(lr_schedule, warmup_fraction, peak_lr_ratio)
        self.out.mkdir(parents=True, exist_ok=True)
        with Ledger(self.out) as ledger, self._executor_scope():
            self._check_config()
            spec, where = plan_extension(self.config, self.domains, self.out, ledger, run, int(budget), seed,
                                         lr)
            ledger.register(spec)
            self.log(f"extending {where} from {spec.parent_sequences * spec.seq_len:,} to "
                     f"{spec.total_tokens:,} tokens as run {spec.run_id} (mix: "
                     f"{spec.extension.mix if spec.extension else '?'}, lr: {lr.schedule})")
            self._train_all(ledger, [spec])
            result = ledger.result(spec.run_id)
        if result is None:
            raise ValueError(f"extension {spec.run_id} of {where} did not finish (see {layout.LEDGER})")
        return result

    def _write_references(self) -> None:
        """``OUT/reference_losses.json``: the held-out data's unigram and uniform-guess losses under this
        config."""
        from .reporting.reference import reference_losses, write_reference_losses

        c = self.config
        write_reference_losses(self.out, reference_losses(
            self.domains.paths, seq_len=c.seq_len, heldout_tokens_per_domain=c.eval.heldout_tokens_per_domain,
            vocab_size=self.domains.vocab_size, family=c.model.family,
            mlm_probability=c.model.mlm_probability,
            mlm_passes=c.eval.mlm_passes))

    def _check_config(self) -> list[str]:
        """Record the config in ``OUT/config.json``; refuse (or log) a change from the folder's config.

        Returns:
            The changed settings (empty for a new folder or the same config).
        """
        changes = check_config(self.out, config_to_dict(self.config), allow_change=self.allow_config_change)
        if changes:
            self.log(f"continuing {os.fspath(self.out)} under a changed config ({'; '.join(changes)}): "
                     "finished runs whose settings still match are reused; the report covers only the new "
                     "plan (the old config is kept in config_history.jsonl)")
        return changes

    def _write_run_list(self, proxies: dict[int, list[RunSpec]], targets: Sequence[RunSpec], *,
                    keep_extra: bool = True, selection: Sequence[RunSpec] = ()) -> None:
        """``OUT/plan.json``: the current plan's runs (the methods' own runs under ``method_runs``), and the
        extra runs of :meth:`train_runs` unless ``keep_extra`` is false (planned under another config)."""
        extra = (layout.read(self.out, layout.RUN_LIST) or RunListFile()).extra if keep_extra else None
        run_list = RunListFile(proxies={str(n): list(specs) for n, specs in proxies.items()},
                               targets=list(targets),
                        method_runs=list(selection) or None, extra=extra or None)
        atomic_write_json(self.out / layout.RUN_LIST, run_list.to_json())

    def _train_all(self, ledger: Ledger, specs: Sequence[RunSpec]) -> None:
        from .executors import make_executor, train_specs

        if self._executor is None:  # one executor (and its warm workers) for every phase of the plan
            self._executor = make_executor(self.config, self.out, progress=self.progress)
        show = sys.stderr.isatty() if self.progress is None else self.progress
        # one live line per executor; in the runner's own process the trainer's bar shows the run instead
        train_specs(self._executor, ledger, specs, self.config, self.domains, log=self.log,
                    progress=show and self._executor.kind != INPROCESS)

    @contextlib.contextmanager
    def _executor_scope(self) -> Iterator[None]:
        try:
            yield
        finally:
            if self._executor is not None:
                self._executor.close()
                self._executor = None

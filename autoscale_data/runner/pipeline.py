"""The AutoScale pipeline: proxies at N1 and N2 -> DDO at both -> projection -> target runs -> report.

``MixtureRunner(config, out_dir).run()`` is what ``autoscale-data run CONFIG --out DIR`` calls.
Every run goes through the ledger, so calling it again skips finished runs, resumes unfinished
ones from their checkpoints and retrains nothing twice. Fits are recomputed from the finished
runs' results every time (they take milliseconds) and written under ``OUT/fits/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .._io import atomic_write_json
from . import layout
from .config import RunnerConfig, config_to_dict
from .data import inspect_domains
from .estimate import estimate_seconds, format_duration, startup_seconds
from .experiment import check_config, config_changes
from .ledger import DONE, Ledger
from .plan import (
    MULTIPLIER_TOLERANCE,
    DomainInfo,
    RunSpec,
    ddo_proxy_specs,
    describe_plan,
    design_rounding,
    faithful_budget,
    supply_problems,
    target_spec,
)

__all__ = ["MixtureRunner"]


def _tag(multiplier: float) -> str:
    return f"x{multiplier:.3g}" if multiplier >= 1 else f"/{1 / multiplier:.3g}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


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
        self.config = config
        self.out = Path(out_dir)
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
        """The DDO runs of each of the two budgets."""
        return {n: ddo_proxy_specs(self.config, self.domains, n) for n in self.config.ddo.budgets}

    def fixed_target_mixes(self) -> dict[str, dict[str, float]]:
        """Target mixes known before any proxy is trained (uniform, natural, reference)."""
        from ..solver import natural_weights, reference_weights, uniform_weights

        d = self.domains
        mixes: dict[str, dict[str, float]] = {}
        for name in self.config.target.baselines:
            if name == layout.UNIFORM:
                mixes[name] = uniform_weights(d.names)
            elif name == layout.NATURAL:
                mixes[name] = natural_weights(d.train_tokens)
            elif name == layout.REFERENCE:
                mixes[name] = reference_weights(d.names, weights=self.config.target.reference_weights)
        return mixes

    def target_specs(self, mixes: dict[str, dict[str, float]]) -> list[RunSpec]:
        """Fixed-schedule target runs: one per mix and target seed."""
        return [target_spec(self.config, self.domains, label, w, seed)
                for label, w in mixes.items() for seed in self.config.target.seeds]

    def anytime_specs(self, plan: Any) -> list[RunSpec]:
        """The ``autoscale_anytime`` target runs (one per target seed) following ``plan``'s path."""
        return [target_spec(self.config, self.domains, layout.ANYTIME, None, seed, plan=plan)
                for seed in self.config.target.seeds]

    def describe(self) -> str:
        """The plan as text: every run, its tokens, and the totals with an estimated time."""
        proxies = [s for specs in self.proxy_specs().values() for s in specs]
        fixed = self.target_specs(self.fixed_target_mixes())
        later = [layout.AUTOSCALE] + [b for b in self.config.target.baselines if b in layout.FITTED_MIXES]
        cfg = self.config
        per_target = (cfg.target.budget // (cfg.seq_len * cfg.global_batch_size)) * cfg.global_batch_size * cfg.seq_len
        n_later = len(later) * len(cfg.target.seeds)
        info = describe_plan(proxies + fixed)
        tokens = info["tokens"] + n_later * per_target
        measured = self._measured_rates()
        seconds = estimate_seconds(proxies + fixed, measured, device=self._device_kind())
        seconds *= tokens / max(1, info["tokens"])
        seconds += startup_seconds(cfg.backend, cfg.procs) * (info["runs"] + n_later)
        at_once = self._runs_at_once()
        seconds /= at_once  # wall time: the executor trains that many runs side by side
        d = self.domains
        lines = [f"plan for {cfg.name}: {len(d.names)} domains ({', '.join(d.names)}), model {cfg.model.preset}, "
                 f"backend {cfg.backend} x{cfg.procs}",
                 f"{'id':16}  {'kind':6} {'budget':>11}  {'run':24} {'seed':>4} {'tokens':>11}  sequences per domain"]
        ledger_state = self._ledger_states()
        for s in proxies + fixed:
            seqs = " ".join(f"{k}={v}" for k, v in s.sequences.items())
            mark = f"  [{ledger_state[s.run_id]}]" if s.run_id in ledger_state else ""
            lines.append(f"{s.run_id:16}  {s.kind:6} {s.scale:>11}  {s.label:24} {s.seed:>4} {s.total_tokens:>11}  "
                         f"{seqs}{mark}")
        for label in later:
            for seed in cfg.target.seeds:
                how = "anytime schedule on the mixture plan" if label == layout.ANYTIME else \
                    "weights from the solver"
                lines.append(f"{'(after the fits)':16}  target {cfg.target.budget:>11}  {label:24} {seed:>4} "
                             f"{per_target:>11}  {how}")
        source = f"median of {len(measured)} finished runs" if measured else "assumed FLOP rate"
        source += f", {at_once} runs at once" if at_once > 1 else ""
        lines.append(f"total: {info['runs'] + n_later} runs, {tokens:,} training tokens, estimated "
                     f"{format_duration(seconds)} ({source})")
        lines += [f"DATA: {p}" for p in supply_problems(cfg, d, proxies + fixed)]
        lines.append(self.design_note())
        lines += self.rounding_notes()
        lines.append(self.projection_note())
        old = _read_json(self.out / layout.CONFIG)
        changes = config_changes(old, config_to_dict(cfg)) if old else []
        if changes:
            lines.append(f"{os.fspath(self.out)} was run with another config (changed: {'; '.join(changes)}): `run` "
                         "refuses it unless --allow-config-change (then runs whose settings still match are reused "
                         "and the report covers only this config), or give a new --out")
        return "\n".join(lines)

    def projection_note(self) -> str:
        """Which projection sets the target mix (``ddo.projection``) and how the weight bounds apply to it."""
        ddo = self.config.ddo
        if ddo.projection == "joint":
            text = ("projection to the target: joint (one law fitted to the runs of both budgets, optimised at the "
                    "target); the geometric projection is reported beside it (ddo.projection)")
        else:
            text = ("projection to the target: geometric (Theorem-1 path through the DDO optima at N1 and N2); the "
                    "joint projection is reported beside it (ddo.projection)")
        if ddo.min_weight > 0 or ddo.max_weight < 1:
            text += (f"; the weight bounds [{ddo.min_weight:g}, {ddo.max_weight:g}] (ddo.min_weight/max_weight) bound "
                     "the DDO optima and the target mix: a projected weight outside them is moved to the bound "
                     "(the others keep their ratios) and the log and report say so")
        return text

    def design_note(self) -> str:
        """One sentence: does the DDO design identify the per-domain law?"""
        ddo = self.config.ddo
        points = ", ".join(f"{x:.3g}" for x in ddo.design_points)
        params = 3 if ddo.law == "3p" else 4
        if ddo.identifies_law:
            return (f"DDO design: {len(ddo.design_points)} multipliers per domain ({points}) for a {params}-parameter "
                    "law: spare points, so the design CAN identify the law; whether these runs DO is known only after "
                    "the fits (noise larger than the domain contrasts can still leave the optimum undetermined: the "
                    "log and report then say 'NOT identified' and how far the weights could move)")
        return (f"DDO design: {len(ddo.design_points)} multipliers per domain ({points}) for a {params}-parameter law: "
                "the law passes through every point, often in more than one way, so the data may not determine "
                "the optimum; use two multipliers each way, e.g. ddo.multipliers: [[3, 1.7], [3, 1.7]]")

    def rounding_notes(self) -> list[str]:
        """One line per DDO budget whose whole global batches move a multiplier by more than 5%."""
        cfg = self.config
        notes = []
        for n in cfg.ddo.budgets:
            moved = design_rounding(cfg, self.domains, n)
            if not moved:
                continue
            groups: dict[tuple[str, str], list[str]] = {}
            for d, planned, trained in moved:
                groups.setdefault((_tag(trained), _tag(planned)), []).append(d)
            what = ", ".join(f"{t} instead of {p} ({'every domain' if len(ds) == len(self.domains.names) else ', '.join(ds)})"
                             for (t, p), ds in groups.items())
            keep = faithful_budget(cfg, self.domains, n)
            hint = (f"a budget of about {keep:,} tokens or more keeps every multiplier within "
                    f"{MULTIPLIER_TOLERANCE:.0%}" if keep else "no budget keeps them within the tolerance")
            notes.append(f"DDO design at {n:,} tokens: runs are whole global batches ({cfg.global_batch_size} x "
                         f"{cfg.seq_len} tokens), so it trains {what} (the fit uses the tokens actually trained); "
                         f"{hint}, or lower global_batch_size")
        return notes

    def _runs_at_once(self) -> int:
        """Runs the configured executor trains side by side (local: its slots; Slurm/Ray: max_parallel)."""
        from .executors.local import resolve_max_parallel

        return max(1, resolve_max_parallel(self.config))

    def _device_kind(self) -> str:
        import torch

        return "cuda" if self.config.device == "cuda" or (self.config.device == "auto" and torch.cuda.is_available()) \
            else "cpu"

    def _ledger_states(self) -> dict[str, str]:
        if not (self.out / layout.LEDGER).exists():
            return {}
        return {k: r.status for k, r in Ledger(self.out, lock=False).records().items()}

    def _measured_rates(self) -> list[float]:
        if not (self.out / layout.LEDGER).exists():
            return []
        ledger = Ledger(self.out, lock=False)
        rates = []
        for run_id, rec in ledger.records().items():
            result = ledger.result(run_id) if rec.status == DONE else None
            if result and result.get("tokens_per_s"):
                rates.append(float(result["tokens_per_s"]))
        return rates

    # ------------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        """Train what is missing, fit, project, train the targets and write the report.

        Returns:
            The report (also written to ``OUT/report.json``).

        Raises:
            ValueError: too few finished runs to fit (the message names them), or a solver error.
        """
        from .report import write_report

        self.out.mkdir(parents=True, exist_ok=True)
        with Ledger(self.out) as ledger, self._executor_scope():
            d = self.domains
            self._check_config()
            atomic_write_json(self.out / layout.DOMAINS, config_to_dict(d))
            proxies = self.proxy_specs()
            all_proxies = [s for specs in proxies.values() for s in specs]
            fixed = self.target_specs(self.fixed_target_mixes())
            problems = supply_problems(self.config, d, all_proxies + fixed)
            if problems:  # before training anything: every domain that cannot supply its runs, by name
                raise ValueError("the stores cannot supply this plan:\n  " + "\n  ".join(problems))
            self._write_plan(proxies, fixed)  # the report reads only this plan's runs, from the start
            for s in all_proxies + fixed:
                ledger.register(s)
            self.log(self.describe())
            if not self.config.ddo.identifies_law:
                warnings.warn(self.design_note(), UserWarning, stacklevel=2)
            for note in self.rounding_notes():
                warnings.warn(note, UserWarning, stacklevel=2)
            self._train_all(ledger, all_proxies)
            from .fitting import fit_all

            fits = fit_all(self.config, d, ledger, proxies, self.out / layout.FITS, log=self.log)
            mixes = {layout.AUTOSCALE: fits["weights"]}
            if layout.DDO_N2 in self.config.target.baselines:
                mixes[layout.DDO_N2] = dict(fits["ddo"][self.config.ddo.budgets[1]].weights)
            mixes.update(self.fixed_target_mixes())
            targets = self.target_specs(mixes)
            if layout.ANYTIME in self.config.target.baselines:
                if fits["plan"] is None:
                    self.log(f"{layout.ANYTIME} is not trained: no mixture plan could be fitted "
                             "(see fits/mixture_plan_error.json)")
                else:
                    anytime = self.anytime_specs(fits["plan"])
                    mixes[layout.ANYTIME] = anytime[0].weights  # the final mix; the path is the plan's
                    targets += anytime
            atomic_write_json(self.out / layout.FITS / layout.TARGET_MIXES_FILE, mixes)
            self._write_plan(proxies, targets)
            for s in targets:
                ledger.register(s)
            self._train_all(ledger, targets)
        report = write_report(self.out)
        self.log(f"report written to {os.fspath(self.out / layout.REPORT_MD)}")
        return report

    def train_runs(self, specs: Sequence[RunSpec]) -> None:
        """Train extra runs (held-out perturbations, another budget …) through this runner's ledger.

        Finished runs are reused and unfinished ones resume, exactly as in :meth:`run`.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        with Ledger(self.out) as ledger, self._executor_scope():
            self._check_config()
            plan = _read_json(self.out / layout.PLAN) or {}
            extra = {s["run_id"]: s for s in plan.get("extra", [])}
            extra.update({s.run_id: s.to_json() for s in specs})
            atomic_write_json(self.out / layout.PLAN, {**plan, "extra": list(extra.values())})
            for s in specs:
                ledger.register(s)
            self._train_all(ledger, specs)

    def _check_config(self) -> None:
        """Record the config in ``OUT/config.json``; refuse (or log) a change from the folder's config."""
        changes = check_config(self.out, config_to_dict(self.config), allow_change=self.allow_config_change)
        if changes:
            self.log(f"continuing {os.fspath(self.out)} under a changed config ({'; '.join(changes)}): finished "
                     "runs whose settings still match are reused; the report covers only the new plan "
                     "(the old config is kept in config_history.jsonl)")

    def _write_plan(self, proxies: dict[int, list[RunSpec]], targets: Sequence[RunSpec]) -> None:
        """``OUT/plan.json``: the current plan's runs (extra runs of :meth:`train_runs` are kept)."""
        old = _read_json(self.out / layout.PLAN) or {}
        plan: dict[str, Any] = {"proxies": {str(n): [s.to_json() for s in specs] for n, specs in proxies.items()},
                                "targets": [s.to_json() for s in targets]}
        if old.get("extra") and not config_changes(old.get("config") or {}, config_to_dict(self.config)):
            plan["extra"] = old["extra"]
        plan["config"] = config_to_dict(self.config)
        atomic_write_json(self.out / layout.PLAN, plan)

    def _train_all(self, ledger: Ledger, specs: Sequence[RunSpec]) -> None:
        from .executors import make_executor, train_specs

        if self._executor is None:  # one executor (and its warm workers) for every phase of the plan
            self._executor = make_executor(self.config, self.out, progress=self.progress)
        show = sys.stderr.isatty() if self.progress is None else self.progress
        # one live line per executor; in the runner's own process the trainer's bar shows the run instead
        train_specs(self._executor, ledger, specs, self.config, self.domains, log=self.log,
                    progress=show and self._executor.kind != "inprocess")

    @contextlib.contextmanager
    def _executor_scope(self) -> Iterator[None]:
        try:
            yield
        finally:
            if self._executor is not None:
                self._executor.close()
                self._executor = None

    def launch_command(self, job: Path) -> list[str]:
        """The command that trains ``job`` in its own process(es) on this machine."""
        from .executors import launch_command

        return launch_command(self.config, job, progress=bool(self.progress))

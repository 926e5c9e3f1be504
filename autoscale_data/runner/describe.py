"""The plan as text (``autoscale-data run --dry-run``, :func:`run_list_text`) and the notes the runner also
logs or warns (:func:`run_list_notes`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..solver.vocabulary import AUTO, GEOMETRIC, JOINT, OBSERVED, PROJECTION_CHOICES, ROBUST, law_parameters
from . import layout, registry
from .config import RunnerConfig, config_to_dict
from .config.sections import ModelConfig, ProxyModelConfig
from .experiment import config_changes
from .ledger import DONE, Ledger
from .planning.cheap import CHEAP_MIN_RATIO, cheap_config, cheap_design
from .planning.data import DomainInfo, batch_sequences
from .planning.estimate import (
    estimate_seconds,
    format_duration,
    format_flops,
    run_flops,
    run_tokens,
    startup_seconds,
)
from .planning.repetition import matched, repetition_records, target_epochs
from .planning.specs import (
    MULTIPLIER_TOLERANCE,
    RunSpec,
    ddo_proxy_specs,
    describe_runs,
    design_rounding,
    faithful_budget,
    supply_problems,
    target_run_flops,
)

__all__ = ["ProxyCost", "cheap_design_note", "design_cost", "design_note", "load_note", "projection_note",
           "proxy_cost_note", "proxy_costs", "rounding_notes", "run_list_text", "wsd_notes"]


def _tag(multiplier: float) -> str:
    return f"x{multiplier:.3g}" if multiplier >= 1 else f"/{1 / multiplier:.3g}"


def run_list_text(config: RunnerConfig, domains: DomainInfo, out: Path, proxies: Sequence[RunSpec],
              fixed: Sequence[RunSpec]) -> str:
    """The plan as text: every run known before the fits (``proxies``, ``fixed`` targets), the runs that
    follow the fits, the totals with an estimated time, and the notes of :func:`run_list_notes`."""
    from .executors.local import resolve_max_parallel

    cfg = config
    later = [layout.AUTOSCALE] + [b for b in cfg.target.baselines
                                  if registry.declaration(b).runs != registry.STORES]
    per_target = (cfg.target.budget // (cfg.seq_len * cfg.global_batch_size)) * cfg.global_batch_size * cfg.seq_len
    n_later = len(later) * len(cfg.target.seeds)
    known = [*proxies, *fixed]
    info = describe_runs(known)
    tokens = sum(run_tokens(s) for s in {s.run_id: s for s in known}.values()) + n_later * per_target
    known_flops = sum(run_flops(s) for s in {s.run_id: s for s in known}.values())
    flops = known_flops + n_later * target_run_flops(cfg, domains)
    ledger_state, measured = _ledger_view(out)
    seconds = estimate_seconds(known, measured, device=_device_kind(cfg))
    seconds *= flops / known_flops if known_flops else 1.0  # the runs after the fits: target runs' FLOPs
    seconds += startup_seconds(cfg.backend, cfg.procs) * (info["runs"] + n_later)
    at_once = max(1, resolve_max_parallel(cfg))  # local: its slots; Slurm/Ray: max_parallel
    seconds /= at_once  # wall time: the executor trains that many runs side by side
    proxy = "" if cfg.ddo.proxy_model is None else f", proxy model {_model_text(cfg.ddo.proxy_model)}"
    proxy += "" if cfg.ddo.proxy_lr is None else f", proxy lr {cfg.ddo.proxy_lr:g}"
    lines = [f"plan for {cfg.name}: {len(domains.names)} domains ({', '.join(domains.names)}), model "
             f"{cfg.model.preset}{proxy}, backend {cfg.backend} x{cfg.procs}",
             f"{'id':16}  {'kind':6} {'budget':>11}  {'run':24} {'seed':>4} {'tokens':>11}  sequences per "
             "domain"]
    for s in known:
        seqs = " ".join(f"{k}={v}" for k, v in s.sequences.items())
        mark = f"  [{ledger_state[s.run_id]}]" if s.run_id in ledger_state else ""
        lines.append(f"{s.run_id:16}  {s.kind:6} {s.scale:>11}  {s.label:24} {s.seed:>4} "
                     f"{s.total_tokens:>11}  {seqs}{mark}")
    for label in later:
        how = "anytime schedule on the mixture plan" if label == layout.ANYTIME else "weights from the solver"
        how = "weights chosen during the run (online mixing)" if label in registry.names(registry.ONLINE) else how
        lines += [f"{'(after the fits)':16}  target {cfg.target.budget:>11}  {label:24} {seed:>4} "
                  f"{per_target:>11}  {how}" for seed in cfg.target.seeds]
    source = f"median of {len(measured)} finished runs" if measured else "assumed FLOP rate"
    source += f", {at_once} runs at once" if at_once > 1 else ""
    lines.append(f"total: {info['runs'] + n_later} runs, {tokens:,} training tokens, estimated "
                 f"{format_duration(seconds)} ({source}); {format_flops(flops)}")
    if _device_kind(cfg) == "cpu":
        lines.append(load_note())
    return "\n".join(lines + run_list_notes(cfg, domains, out, known))


def load_note(load: float | None = None, cores: int | None = None) -> str:
    """The estimate's assumption of an idle machine, with the CPU load now (``os.getloadavg``) when it is not.

    Args:
        load: the 1-minute load average (default: measured now; ``None`` where the system has none).
        cores: CPUs this process may use (default: measured).
    """
    if load is None and hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    text = "the estimate assumes an idle machine"
    if load is None:
        return text + " (the CPU load could not be read here)"
    if load <= cores / 2:
        return text + f" (the 1-minute load average is now {load:.1f} on {cores} CPUs)"
    return (text + f": the 1-minute load average is now {load:.1f} on {cores} CPUs, so the runs share them "
            f"with other work and may take about {max(1.0, (load + 1) / cores):.1f}x as long ((load + 1) / "
            "CPUs)")


def run_list_notes(config: RunnerConfig, domains: DomainInfo, out: Path,
                   specs: Sequence[RunSpec]) -> list[str]:
    """What the plan checks before training: data supply (``DATA:`` lines), the design, the rounding of
    its multipliers, the projection and bounds, and another config in ``out``."""
    notes = [f"DATA: {p}" for p in supply_problems(config, domains, specs)]
    notes += [design_note(config), *rounding_notes(config, domains), projection_note(config),
              *_cost_notes(config, domains)]
    notes += wsd_notes(config, domains)
    notes += repetition_notes(config, domains, specs)
    old = layout.read(out, layout.CONFIG)
    changes = config_changes(old, config_to_dict(config)) if old else []
    if changes:
        notes.append(f"{os.fspath(out)} was run with another config (changed: {'; '.join(changes)}): `run` "
                     "refuses it unless --allow-config-change (then runs whose settings still match are "
                     "reused and the report covers only this config), or give a new --out")
    return notes


@dataclass(frozen=True)
class ProxyCost:
    """The DDO proxies of one design of budgets, against one target run.

    Attributes:
        budgets: the DDO budgets; runs: their proxy runs (every seed); tokens: those runs' training tokens.
        target_tokens: one target run's training tokens (whole global batches).
        flops: the proxies' training FLOPs (:func:`~.planning.estimate.run_flops`, at the proxy model).
        target_flops: one target run's training FLOPs (at the target's model).
    """

    budgets: tuple[int, ...]
    runs: int
    tokens: int
    target_tokens: int
    flops: float
    target_flops: float

    @property
    def target_runs(self) -> float:
        """The proxies' compute in target runs: their FLOPs over one target run's."""
        return self.flops / self.target_flops

    @property
    def token_ratio(self) -> float:
        """The proxies' tokens over one target run's (:attr:`target_runs` when both train the same model)."""
        return self.tokens / self.target_tokens


def proxy_costs(config: RunnerConfig, domains: DomainInfo) -> tuple[ProxyCost, ProxyCost]:
    """The paper's two-budget design ``[N1, N2]`` (the config's two largest budgets) and the three-budget
    one (the config's budgets when it has three or more, else ``[N1 / 2, N1, N2]``, what
    ``ddo.extra_budget: half`` gives), each planned as the runner would (whole global batches).

    Raises:
        ValueError: a budget the planner refuses (e.g. ``N1 / 2`` gives some domain no sequence).
    """
    budgets = config.ddo.budgets
    n1, n2 = budgets[-2:]
    three = budgets if len(budgets) >= 3 else (n1 // 2, n1, n2)
    return design_cost(config, domains, (n1, n2)), design_cost(config, domains, tuple(three))


def design_cost(config: RunnerConfig, domains: DomainInfo, budgets: tuple[int, ...]) -> ProxyCost:
    """The DDO proxies of ``config`` at ``budgets``, planned as the runner would, against one target run.

    Raises:
        ValueError: a budget the planner refuses.
    """
    specs = list({s.run_id: s for n in budgets for s in ddo_proxy_specs(config, domains, n)}.values())
    return ProxyCost(budgets=budgets, runs=len(specs), tokens=sum(s.total_tokens for s in specs),
                     target_tokens=batch_sequences(config, config.target.budget) * config.seq_len,
                     flops=sum(run_flops(s) for s in specs), target_flops=target_run_flops(config, domains))


def _cost_notes(config: RunnerConfig, domains: DomainInfo) -> list[str]:
    """:func:`proxy_cost_note` and :func:`cheap_design_note` from one pricing of the config's designs."""
    try:
        costs = proxy_costs(config, domains)
    except ValueError as exc:
        return [f"proxy cost: not computed ({exc})", cheap_design_note(config, domains)]
    mine = costs[1] if len(config.ddo.budgets) >= 3 else costs[0]  # the design this config runs
    return [proxy_cost_note(config, costs), cheap_design_note(config, domains, mine)]


def proxy_cost_note(config: RunnerConfig, costs: tuple[ProxyCost, ProxyCost]) -> str:
    """The DDO proxies' compute against one target run, in FLOPs (6 N D plus attention; tokens beside): the
    two-budget design, and the three-budget one that lets ``ddo.projection: auto`` backtest its projection
    (which of them this config runs), at the proxy model (``ddo.proxy_model``); ``costs``:
    :func:`proxy_costs`."""
    two, three = costs

    def shown(c: ProxyCost) -> str:
        return (f"[{', '.join(f'{n:,}' for n in c.budgets)}]: {c.runs} runs, {c.tokens:,} tokens "
                f"(x{c.token_ratio:.2f}), {format_flops(c.flops)} = {c.target_runs:.2f} target runs")

    runs_three = len(config.ddo.budgets) >= 3
    how = "this config" if runs_three else "ddo.extra_budget: half, or ddo.budgets: [N0, N1, N2]"
    proxy = config.ddo.proxy_model
    model = (f"proxy model {_model_text(proxy)}, target model "
             f"{_model_text(config.model)}" if proxy is not None
             else f"proxies and target: model {_model_text(config.model)}")
    return (f"proxy cost against one target run ({two.target_tokens:,} tokens, "
            f"{format_flops(two.target_flops)}; {model}): two budgets "
            f"{shown(two)}{'' if runs_three else ' (this config)'}; {len(three.budgets)} budgets "
            f"{shown(three)} ({how}), {three.flops / two.flops:.2f}x the two-budget proxies; with three "
            "budgets or more ddo.projection: auto backtests its projection at N2 (refitted without it) "
            "before it uses one")


def cheap_design_note(config: RunnerConfig, domains: DomainInfo, mine: ProxyCost | None = None) -> str:
    """The cheap design the dry run recommends (:mod:`.planning.cheap`): its proxies' cost against this
    config's (``mine``, priced here when not given), the config lines that select it, and the one line back to
    the paper's design."""
    try:
        design = cheap_design(config, domains)
        mine = design_cost(config, domains, tuple(config.ddo.budgets)) if mine is None else mine
        cheap = design_cost(cheap_config(config, design), domains, design.budgets)
    except ValueError as exc:
        return f"cheap design: not computed ({exc})"
    model = _model_text(design.proxy_model)
    if design.ratio < CHEAP_MIN_RATIO:
        return (f"cheap design: no proxy model {CHEAP_MIN_RATIO:g}x smaller than {_model_text(config.model)} "
                f"(the smallest, {model}, is {design.ratio:.2f}x smaller in FLOPs per token); proxies cost "
                f"{mine.target_runs:.2f} target runs")
    runs = f"{cheap.runs} runs, {format_flops(cheap.flops)} = {cheap.target_runs:.2f} target runs"
    current = config.ddo.proxy_model
    same = (current is not None and current.preset == design.proxy_model.preset
            and dict(current.overrides) == dict(design.proxy_model.overrides)
            and tuple(config.ddo.budgets) == design.budgets)
    if same:
        return (f"cheap design: this config is the cheap design (proxy model {model}, {design.ratio:.2f}x "
                f"fewer training FLOPs per token than the target's; {runs}); the paper's design, proxies at "
                "the target's model: delete ddo.proxy_model")
    lines = [f"cheap design (recommended; docs/runner.md, \"The cheap design\"): proxy model {model}, "
             f"{design.ratio:.2f}x fewer training FLOPs per token than the target's, two budgets "
             f"[{design.budgets[0]:,}, {design.budgets[1]:,}], separate runs: {runs}, against "
             f"{mine.target_runs:.2f} for this config ({len(mine.budgets)} budgets). To use it, set:",
             *(f"    {line}" for line in design.config_lines(from_three=len(config.ddo.budgets) >= 3)),
             "  the paper's design (proxies at the target's model) is the same config without the "
             "proxy_model line"]
    return "\n".join(lines)


def wsd_notes(config: RunnerConfig, domains: DomainInfo) -> list[str]:
    """With ``ddo.schedule: wsd``: the design (trunk, branches, decay) and its tokens against separate runs
    (:func:`~.planning.wsd.wsd_cost`); nothing for separate runs."""
    from .config.sections import WSD
    from .planning.wsd import wsd_cost, wsd_plan

    ddo = config.ddo
    if ddo.schedule != WSD:
        return []
    try:
        plan = wsd_plan(config, domains)
    except ValueError as exc:
        return [f"ddo.schedule: wsd: not planned ({exc})"]
    cost = wsd_cost(config, domains, plan)
    mixes = len(plan.branches[ddo.largest])
    budgets = sorted(ddo.budgets)
    rule = " + ".join(f"{n:,}" for n in budgets[:-1])
    return [f"ddo.schedule: wsd: {mixes} design runs (mixes x seeds) each trained once to {budgets[-1]:,} "
            f"tokens at constant learning rate after warm-up ({len(plan.trunks)} trunk stretches), and every "
            f"budget's run a {ddo.cooldown:g} {ddo.cooldown_shape} decay branched from it: {cost.tokens:,} "
            f"proxy tokens = x{cost.of_largest:.3f} the largest budget's runs (about 1 + {ddo.cooldown:g} x "
            f"({rule}) / {budgets[-1]:,} = {1 + ddo.cooldown * sum(budgets[:-1]) / budgets[-1]:.3f}), "
            f"{cost.of_separate:.2f} of the separate runs' {cost.separate_tokens:,}"]


def _model_text(model: ModelConfig | ProxyModelConfig) -> str:
    """``gpt2-tiny`` or, with overrides, ``gpt2-tiny (n_layer=1, n_embd=64)``."""
    fields = ", ".join(f"{k}={v}" for k, v in model.overrides.items())
    return f"{model.preset} ({fields})" if fields else model.preset


def projection_note(config: RunnerConfig) -> str:
    """Which projection sets the target mix (``ddo.projection``) and how the weight bounds apply to it."""
    ddo = config.ddo
    how = {JOINT: "joint (one law fitted to the runs of both budgets, optimised at the target)",
           ROBUST: "robust (the Theorem-1 path with each domain's trend shrunk by its uncertainty)",
           GEOMETRIC: "geometric (Theorem-1 path through the DDO optima at N1 and N2)",
           OBSERVED: "observed (no projection: the DDO optimum at N2, as is)",
           AUTO: "auto (the DDO optimum at N2 as is, or a projection where the law fitted to both budgets "
                   "predicts it beats that mix by more than twice the prediction's sd and twice the noise of "
                   "one run; the report says which and why)"}[ddo.projection]
    if ddo.projection == AUTO and len(ddo.budgets) >= 3:
        how = (f"auto ({len(ddo.budgets)} budgets: every candidate refitted without N2 and scored there one "
               "way for all, by N2's DDO law or by a run of N2's total near it; a projection is used if it "
               "beats the DDO optimum at N2 beyond a one-sided 2.5% test, or if the joint law fitted "
               "without N2 predicts N2's runs within their noise and predicts a gain at the target beyond "
               "its uncertainty; the report gives the scores, the law check and the choice)")
    text = (f"projection to the target: {how}; the other projections are reported beside it "
            f"(ddo.projection: {' | '.join(PROJECTION_CHOICES)})")
    if ddo.min_weight > 0 or ddo.max_weight < 1:
        text += (f"; the weight bounds [{ddo.min_weight:g}, {ddo.max_weight:g}] (ddo.min_weight/max_weight) "
                 "bound the DDO optima and the target mix: a projected weight outside them is moved to the "
                 "bound (the others keep their ratios) and the log and report say so")
    return text


def design_note(config: RunnerConfig) -> str:
    """One sentence: can the DDO design identify the per-domain law (whether the runs do comes later)?"""
    ddo = config.ddo
    points = ", ".join(f"{x:.3g}" for x in ddo.design_points)
    params = law_parameters(ddo.law)
    if ddo.identifies_law:
        return (f"DDO design: {len(ddo.design_points)} multipliers per domain ({points}) for a "
                f"{params}-parameter law: spare points, so the design CAN identify the law; whether these "
                "runs DO is known only after the fits (noise larger than the domain contrasts can still "
                "leave the optimum undetermined: the log and report then say 'NOT identified' and how far "
                "the weights could move)")
    return (f"DDO design: {len(ddo.design_points)} multipliers per domain ({points}) for a "
            f"{params}-parameter law: the law passes through every point, often in more than one way, so the "
            "data may not determine the optimum; use two multipliers each way, e.g. ddo.multipliers: [[3, "
            "1.7], [3, 1.7]]")


def rounding_notes(config: RunnerConfig, domains: DomainInfo) -> list[str]:
    """One line per DDO budget whose whole global batches move a multiplier by more than 5%."""
    notes = []
    for n in config.ddo.budgets:
        moved = design_rounding(config, domains, n)
        if not moved:
            continue
        groups: dict[tuple[str, str], list[str]] = {}
        for d, planned, trained in moved:
            groups.setdefault((_tag(trained), _tag(planned)), []).append(d)
        what = ", ".join(f"{t} instead of {p} "
                         f"({'every domain' if len(ds) == len(domains.names) else ', '.join(ds)})"
                         for (t, p), ds in groups.items())
        keep = faithful_budget(config, domains, n)
        hint = (f"a budget of about {keep:,} tokens or more keeps every multiplier within "
                f"{MULTIPLIER_TOLERANCE:.0%}"
                if keep else "no budget keeps them within the tolerance")
        notes.append(f"DDO design at {n:,} tokens: runs are whole global batches ({config.global_batch_size} "
                     f"x {config.seq_len} tokens), so it trains {what} (the fit uses the tokens actually "
                     f"trained); {hint}, or lower global_batch_size")
    return notes


def _device_kind(config: RunnerConfig) -> str:
    import torch

    return "cuda" if config.device == "cuda" or (config.device == AUTO
                                                 and torch.cuda.is_available()) else "cpu"


def _ledger_view(out: Path) -> tuple[dict[str, str], list[float]]:
    """Each run's status in ``out``'s ledger and the tokens/s of its finished runs (one read of the
    ledger)."""
    if not (out / layout.LEDGER).exists():
        return {}, []
    ledger = Ledger(out, lock=False)
    records = ledger.records()
    results = [ledger.result(run_id) for run_id, rec in records.items() if rec.status == DONE]
    rates = [r.tokens_per_s for r in results if r is not None and r.tokens_per_s]
    return {k: r.status for k, r in records.items()}, rates


def repetition_notes(config: RunnerConfig, domains: DomainInfo, proxies: Sequence[RunSpec] = ()) -> list[str]:
    """The dry run's lines on repetition: each domain's target epochs and its proxies' pools (with
    ``match``), or, without it, the domains the target would repeat while the proxies do not."""
    if not matched(config):
        epochs = target_epochs(config, domains, domains.natural_weights())
        uniform = target_epochs(config, domains, dict.fromkeys(domains.names, 1.0))
        repeated = [d for d in domains.names if max(epochs[d], uniform[d]) > 1.0 + 1e-9]
        if not repeated:
            return []
        what = ", ".join(f"{d} {uniform[d]:.3g} epochs uniform" for d in repeated)
        return [f"REPETITION: the target repeats {what}, the proxies see under one epoch; ddo.repetition: "
                "match gives each proxy the target's repetition (docs/runner.md)"]
    try:
        records = repetition_records(config, domains)
    except ValueError as exc:
        return [f"REPETITION: {exc}"]
    lines = ["REPETITION matched (ddo.repetition: match): each proxy draws a domain from a pool of its "
             "sequences scaled by the proxy budget over the target's, so every run sees each domain's epochs "
             "of the target run with its tokens scaled to the target budget"]
    for rec in records:
        pools = ", ".join(f"{n:,}: {rec.pools[n]} seq ({rec.proxy_epochs[n]:.3g} ep)" if n in rec.pools
                          else f"{n:,}: whole domain ({rec.proxy_epochs[n]:.3g} "
                               "ep)" for n in config.ddo.budgets)
        lines.append(f"  {rec.domain}: {rec.unique_tokens:,} tokens, target {rec.target_epochs:.3g} epochs "
                     f"at the base mix (cap {rec.cap:g}); proxy pools {pools}")
    over = sorted({(s.label, s.scale) for s in proxies if s.pools and any(
        s.sequences[d] / s.pools.get(d, 1) > (1.0 if config.max_epochs is None else config.max_epochs) + 1e-9
        for d in s.pools)}, key=lambda x: (x[1], x[0]))
    if over:
        lines.append("  beyond max_epochs at the target (measured, the target mix stays within it): "
                     + ", ".join(f"{label} @{n:,}" for label, n in over))
    return lines

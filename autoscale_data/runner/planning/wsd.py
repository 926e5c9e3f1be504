"""One run per mix, with cooldown branches: the DDO proxies of ``ddo.schedule: wsd``.

The paper trains every DDO run on its own: at each budget N, every design mix (the base and each
perturbation) warms up and decays over N tokens. With ``ddo.schedule: wsd`` (warm-up, stable, decay; Hägele et
al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations") each design mix is
trained once, to the largest budget, at the peak learning rate after a linear warm-up: the *trunk*. A budget
N's run is a short *branch*: it starts from the trunk's checkpoint at the step where ``ddo.cooldown`` (default
20%) of N's steps remain and decays the learning rate to ``optimizer.min_lr_ratio`` over them, in the shape
``ddo.cooldown_shape`` (``1-sqrt``, the paper's, or ``linear``). The largest budget is a branch too.

The trunk is a chain of ledger runs (kind ``trunk``), one stretch from one branch point to the next, each
continuing the one before from its kept final checkpoint (as an extension does); every branch (kind ``proxy``,
its budget's DDO run for the fits) continues the stretch that ends at its branch point. Each is its own
ledger run, resumable like any other, so a run killed in the trunk or in a branch resumes from its own
checkpoint and nothing finished trains again. The runs are trained in waves (:attr:`WSDPlan.waves`): a
wave's parents all lie in earlier waves.

**Data.** A budget-N branch trains exactly the separate N-run's sequences per domain, ``c(N)`` (the DDO design
at N: the same counts, multiplier and label, so the fits read it as that run), and per domain the very same
sequences: each domain's seeded order, continued from the trunk, nothing repeated or skipped. A mix's trunk
runs through the anchors ``(T(N), c(N))`` of every budget (``T(N)``: the separate run's total), adding between
two anchors the largest-remainder share of the increment (:func:`_path`); it is cut into stretches at every
branch point and every smaller budget's end, so it holds ``c(N)`` exactly after ``T(N)`` sequences, and the
branch's sequences of each domain are the trunk's first ones. **The bound:** at every position ``t <= T(N)``
the branch's stream (the trunk's, then its own decay) holds within 2 sequences per domain of the largest
budget's stream (the trunk's), because each stretch and branch interleaves its increment with low discrepancy
(tested over shares and budgets, ``tests/runner/planning/test_runner_wsd.py``). Whole global batches round
each budget's design on its own, so a perturbation's multiplier may differ a little between budgets, as it
does for separate runs.

**Cost.** Each mix trains ``N_last`` tokens (trunk and last branch) plus ``cooldown x N`` per smaller budget:
three budgets cost about ``1 + 0.2 (N0 + N1) / N2`` of the largest budget's runs (:func:`wsd_cost`), against
``1 + (N0 + N1) / N2`` for separate runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..._runner_names import CONSTANT, REWARM_DECAY
from ...mixing import largest_remainder
from ..config import RunnerConfig
from ..config.sections import SQRT_COOLDOWN
from .data import DomainInfo
from .estimate import run_tokens
from .specs import (
    WSD_ROLES,
    ExtensionSpec,
    LRSchedule,
    RunSpec,
    WSDSpec,
    _make,
    _perturbations,
    _Role,
    proxy_config,
)

__all__ = ["BRANCH", "TRUNK", "WSDCost", "WSDPlan", "branch_points", "with_trunks", "wsd_cost",
           "wsd_lr_lambda", "wsd_plan"]

#: The run kind of a trunk stretch (and its :attr:`~.specs.WSDSpec.role`); a branch's role.
TRUNK, BRANCH = WSD_ROLES


@dataclass(frozen=True)
class WSDPlan:
    """The runs of the WSD design (:func:`wsd_plan`)."""

    trunks: list[RunSpec]
    """Every mix's trunk stretches, for every seed (kind ``trunk``)."""
    branches: dict[int, list[RunSpec]]
    """Budget -> its DDO runs (kind ``proxy``), as :func:`~.specs.ddo_proxy_specs` gives the separate ones."""

    @property
    def runs(self) -> list[RunSpec]:
        """Every run: the trunks, then the branches."""
        return self.trunks + [s for specs in self.branches.values() for s in specs]

    @property
    def waves(self) -> list[list[RunSpec]]:
        """The runs in the order they can train: every run's parent lies in an earlier wave."""
        by_id = {s.run_id: s for s in self.runs}
        depth: dict[str, int] = {}

        def level(spec: RunSpec) -> int:
            if spec.run_id not in depth:
                parent = None if spec.extension is None else by_id.get(spec.extension.parent)
                depth[spec.run_id] = 0 if parent is None else level(parent) + 1
            return depth[spec.run_id]

        out: dict[int, list[RunSpec]] = {}
        for s in self.runs:
            out.setdefault(level(s), []).append(s)
        return [out[k] for k in sorted(out)]


@dataclass(frozen=True)
class WSDCost:
    """Tokens the WSD design trains against separate runs (:func:`wsd_cost`)."""

    tokens: int
    """Tokens of every trunk stretch and branch (each counted once, its parent's prefix excluded)."""
    separate_tokens: int
    """Tokens of the separate design at the same budgets and mixes."""
    largest_tokens: int
    """Tokens of the separate runs at the largest budget alone (one run per mix and seed)."""

    @property
    def of_largest(self) -> float:
        """:attr:`tokens` as a multiple of the largest budget's runs (about ``1 + cooldown x sum(N_small) /
        N_last``)."""
        return self.tokens / self.largest_tokens

    @property
    def of_separate(self) -> float:
        """:attr:`tokens` as a share of the separate design's."""
        return self.tokens / self.separate_tokens


def branch_points(config: RunnerConfig, sequences: int, warmup: int) -> tuple[int, int]:
    """``(start, decay)`` of the branch of a run of ``sequences`` sequences: the global step at which it
    leaves the trunk and its decay steps (``ddo.cooldown`` of its steps, rounded, at least one).

    Raises:
        ValueError: a branch that would start before the trunk's ``warmup`` steps end.
    """
    steps = sequences // config.global_batch_size
    decay = max(1, round(config.ddo.cooldown * steps))
    start = steps - decay
    if start < max(1, warmup):
        raise ValueError(f"a WSD branch of {steps} steps ({sequences * config.seq_len:,} tokens) would start "
                         f"at step {start}, before the trunk's warm-up of {warmup} steps ends "
                         "(optimizer.warmup_fraction x the smallest budget's steps): raise ddo.budgets or "
                         "lower ddo.cooldown")
    return start, decay


def _path(anchors: list[tuple[int, dict[str, int]]], t: int) -> dict[str, int]:
    """``C(t)``: a mix's sequences per domain after ``t`` sequences of its trunk, through the ``anchors``
    ``(T(N), c(N))`` (the separate runs' totals and counts): from the anchor before ``t``, the
    largest-remainder share of the increment to the next one."""
    before: tuple[int, dict[str, int]] = (0, dict.fromkeys(anchors[0][1], 0))
    for total, counts in anchors:
        if t <= total:
            t0, c0 = before
            if t == t0:
                return dict(c0)
            step = largest_remainder({d: float(counts[d] - c0[d]) for d in counts}, t - t0)
            return {d: c0[d] + step[d] for d in counts}
        before = (total, counts)
    raise ValueError(f"position {t} lies beyond the trunk's end {anchors[-1][0]}")


def _increment_weights(before: Mapping[str, int], after: Mapping[str, int], what: str) -> dict[str, float]:
    """The weights whose largest remainder over ``sum(after - before)`` sequences is that difference
    exactly."""
    new = {d: after[d] - before.get(d, 0) for d in after}
    if min(new.values()) < 0:
        raise ValueError(f"{what}: a domain's count falls from {dict(before)} to {dict(after)} (whole global "
                         "batches round each budget's design on its own): raise ddo.budgets or lower "
                         "global_batch_size")
    total = sum(new.values())
    return {d: n / total for d, n in new.items()}


# a design mix: per budget (increasing), its separate run's (label, counts, perturbed, multiplier)
_Mix = list[tuple[str, dict[str, int], str | None, float]]
_Path = tuple[list[tuple[int, dict[str, int]]], int, list[tuple[int, int]], list[int]]


def _mixes(config: RunnerConfig, domains: DomainInfo) -> list[_Mix]:
    """Per design mix, per budget (increasing): ``(label, counts, perturbed, multiplier)`` of its separate
    run."""
    budgets = sorted(config.ddo.budgets)
    per_budget = [_perturbations(config, domains, n) for n in budgets]
    mixes = [[("base", base, None, 1.0) for base, _ in per_budget]]
    for i in range(len(per_budget[0][1])):
        mixes.append([(ps[i].label, ps[i].counts, ps[i].domain, ps[i].trained) for _, ps in per_budget])
    return mixes


def wsd_plan(config: RunnerConfig, domains: DomainInfo) -> WSDPlan:
    """The trunk stretches and branches of every design mix and seed (module doc), trained on the proxy model
    (:func:`~.specs.proxy_config`).

    A mix's trunk stretches end at each budget's branch point and at each smaller budget's end (so the trunk's
    counts there are the separate run's exactly); a budget-N branch ends on the separate N-run's counts.

    Raises:
        ValueError: a branch point before the warm-up's end (:func:`branch_points`), a budget where whole
            global batches cannot hold the design, or a domain whose count in a design mix falls from one
            budget to the next (whole batches round each budget's design on its own; the trunk cannot pass
            through both).
    """
    proxy = proxy_config(config, domains)
    batch = config.global_batch_size
    budgets = sorted(config.ddo.budgets)
    trunk_lr, branch_lr = LRSchedule(CONSTANT, 0.0, 1.0), LRSchedule(REWARM_DECAY, 0.0, 1.0)
    trunks: list[RunSpec] = []
    keyed: dict[int, dict[tuple[int, int], RunSpec]] = {n: {} for n in config.ddo.budgets}
    for m, mix in enumerate(_mixes(config, domains)):
        anchors, warmup, points, ends = _mix_path(config, mix)
        label, _, perturbed, multiplier = mix[-1]
        for k, seed in enumerate(config.seeds):
            parent: RunSpec | None = None
            stretches: dict[int, RunSpec] = {}
            for end in ends:
                now = _path(anchors, end)
                ext = None if parent is None else ExtensionSpec(
                    parent=parent.run_id, parent_sequences=parent.total_sequences, mix="same",
                    weights=_increment_weights(parent.sequences, now, "the WSD trunk of "
                                                                      f"{label!r}"), lr=trunk_lr)
                role = _Role(TRUNK, end * config.seq_len, label, seed, perturbed=perturbed,
                             multiplier=multiplier)
                parent = _make(proxy, domains, role, now, extension=ext, wsd=WSDSpec(TRUNK, warmup))
                stretches[end] = parent
                trunks.append(parent)
            for n, (_, counts), (start, decay), (here, _, _, trained) in zip(budgets, anchors, points, mix,
                                                                                strict=True):
                stem = stretches[start * batch]
                ext = ExtensionSpec(parent=stem.run_id, parent_sequences=stem.total_sequences, mix="same",
                                    weights=_increment_weights(stem.sequences, counts,
                                                               f"the branch of {here!r}"),
                                    lr=branch_lr)
                role = _Role("proxy", n, here, seed, perturbed=perturbed, multiplier=trained)
                keyed[n][k, m] = _make(proxy, domains, role, counts, extension=ext,
                                       wsd=WSDSpec(BRANCH, warmup, decay, config.ddo.cooldown_shape))
    # seed by seed, each the base then the perturbations, as ddo_proxy_specs orders the separate runs
    branches = {n: [runs[key] for key in sorted(runs)] for n, runs in keyed.items()}
    return WSDPlan(trunks=trunks, branches=branches)


def _mix_path(config: RunnerConfig, mix: _Mix) -> _Path:
    """A design mix's path: its (sequences, counts) at each budget, the trunk's warm-up steps, each budget's
    branch point and decay, and the ends of the trunk's stretches (branch points and smaller budgets'
    ends)."""
    anchors = [(sum(counts.values()), counts) for _, counts, _, _ in mix]
    for (_, a), (_, b) in zip(anchors[:-1], anchors[1:], strict=True):
        _increment_weights(a, b, f"the WSD trunk of {mix[-1][0]!r}")  # the path never falls
    # the smallest separate run's own warm-up (train.lr_lambda: warmup_fraction x its steps, rounded)
    warmup = round(config.optimizer.warmup_fraction * (anchors[0][0] // config.global_batch_size))
    points = [branch_points(config, total, warmup) for total, _ in anchors]
    ends = sorted({start * config.global_batch_size
                   for start, _ in points} | {total for total, _ in anchors[:-1]})
    return anchors, warmup, points, ends


def with_trunks(runs: Sequence[RunSpec], trunks: Sequence[RunSpec]) -> list[RunSpec]:
    """``runs`` and every trunk stretch of ``trunks`` they continue, directly or not (what training them
    takes)."""
    by_id = {s.run_id: s for s in trunks}
    out = {s.run_id: s for s in runs}
    todo = list(runs)
    while todo:
        spec = todo.pop()
        parent = None if spec.extension is None else by_id.get(spec.extension.parent)
        if parent is not None and parent.run_id not in out:
            out[parent.run_id] = parent
            todo.append(parent)
    return list(out.values())


def wsd_cost(config: RunnerConfig, domains: DomainInfo, plan: WSDPlan | None = None) -> WSDCost:
    """The tokens :func:`wsd_plan` trains, against separate runs of the same mixes at the same budgets."""
    plan = wsd_plan(config, domains) if plan is None else plan
    unique = {s.run_id: s for s in plan.runs}
    tokens = sum(run_tokens(s) for s in unique.values())
    # a branch's = its run's
    separate = {n: sum(s.total_tokens for s in specs) for n, specs in plan.branches.items()}
    return WSDCost(tokens=tokens, separate_tokens=sum(separate.values()),
                   largest_tokens=separate[max(separate)])


def wsd_lr_lambda(wsd: WSDSpec, offset: int, steps: int, min_ratio: float) -> Callable[[int], float]:
    """Multiplier of the peak learning rate at global step ``s`` of a WSD run (``offset``: its parent's steps,
    ``steps``: its own).

    The trunk: a linear warm-up over ``wsd.warmup_steps`` from step 0, then the peak. A branch: from the peak
    at its first step, ``1 - (1 - min_ratio) * g(k / decay_steps)`` at its ``k``-th step, ``g(x) = sqrt(x)``
    (``1-sqrt``) or ``x`` (``linear``, the separate runs' decay), so its last step is one step short of
    ``min_ratio`` as a separate run's is.
    """
    warmup = int(wsd.warmup_steps)
    if wsd.role == TRUNK:
        def trunk(step: int) -> float:
            return (step + 1) / warmup if step < warmup else 1.0

        return trunk
    decay = int(wsd.decay_steps)
    shape: Callable[[float], float] = math.sqrt if wsd.shape == SQRT_COOLDOWN else float

    def branch(step: int) -> float:
        x = min(1.0, max(0, step - offset) / decay)
        return 1.0 - (1.0 - min_ratio) * shape(x)

    return branch

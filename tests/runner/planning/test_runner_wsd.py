"""One run per mix with cooldown branches (``ddo.schedule: wsd``): the config and its default (ids unchanged), the
plan (each branch trains the separate run's counts, each stretch's and branch's increment is exactly what its
dataset draws, the waves, the cost), the data bound (a branch's stream against the trunk's, over shares and
budgets), the learning rate, and the dry run."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from runner_helpers import tiny_config, tiny_stores

from autoscale_data import ScaleAwareMixtureDataset
from autoscale_data.mixing import largest_remainder
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import RunSpec, WSDSpec, ddo_proxy_specs
from autoscale_data.runner.planning.wsd import TRUNK, wsd_cost, wsd_lr_lambda, wsd_plan
from autoscale_data.runner.training.train import lr_lambda

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_stores(tmp_path_factory.mktemp("wsd") / "stores", ("a", "b", "c"), num_tokens=60_000)


@pytest.fixture(scope="module")
def domains(stores: Path):
    return inspect_domains(config_from_dict(tiny_config(stores)))


def _cfg(stores: Path, **ddo):
    return config_from_dict(tiny_config(stores, ddo=ddo, target={"budget": 1 << 20}))


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("schedule", "cosine", "one of"), ("cooldown", 0.0, "(0, 1)"), ("cooldown", 1.0, "(0, 1)"),
    ("cooldown", True, "(0, 1)"), ("cooldown_shape", "cosine", "one of")])
def test_bad_wsd_settings_name_the_field(stores: Path, field: str, value, expected: str) -> None:
    with pytest.raises(ValueError, match=rf"ddo\.{field}") as err:
        _cfg(stores, **{"schedule": "wsd", field: value})
    assert expected in str(err.value)


def test_wsd_with_matched_repetition_is_refused(stores: Path) -> None:
    with pytest.raises(ValueError, match=r"ddo\.schedule.*repetition"):
        _cfg(stores, schedule="wsd", repetition="match")


def test_the_default_is_separate_runs_with_the_very_same_ids(stores: Path, domains, tmp_path: Path) -> None:
    plain, separate = _cfg(stores), _cfg(stores, schedule="separate", cooldown=0.3, cooldown_shape="linear")
    assert plain.ddo.schedule == "separate" and plain.ddo.cooldown == 0.2 and plain.ddo.cooldown_shape == "1-sqrt"
    runner = MixtureRunner(separate, tmp_path / "out", log=lambda _: None, progress=False)
    assert runner.wsd_plan() is None
    for n in plain.ddo.budgets:
        ids = [s.run_id for s in ddo_proxy_specs(plain, domains, n)]
        assert ids == [s.run_id for s in ddo_proxy_specs(separate, domains, n)]
        assert ids == [s.run_id for s in runner.proxy_specs()[n]]
        assert all(s.wsd is None and "wsd" not in s.to_json() for s in runner.proxy_specs()[n])


def _check_plan(cfg, domains) -> None:
    """The invariants of a WSD plan (the module doc of planning/wsd.py)."""
    plan = wsd_plan(cfg, domains)
    batch = cfg.global_batch_size
    by_id = {s.run_id: s for s in plan.runs}
    assert len(by_id) == len(plan.runs)  # no two runs share an id
    for n, branches in plan.branches.items():
        separate = ddo_proxy_specs(cfg, domains, n)
        # each branch trains the separate run's counts (so its multiplier and label), a decay of its own steps
        assert [(b.sequences, b.label, b.multiplier, b.perturbed, b.seed) for b in branches] == \
            [(s.sequences, s.label, s.multiplier, s.perturbed, s.seed) for s in separate]
        for b in branches:
            steps = b.total_sequences // batch
            assert b.kind == "proxy" and b.scale == n and b.wsd is not None and b.wsd.role == "branch"
            assert b.wsd.decay_steps == max(1, round(cfg.ddo.cooldown * steps))
            assert b.parent_sequences == (steps - b.wsd.decay_steps) * batch
            assert b.wsd.shape == cfg.ddo.cooldown_shape
    for s in plan.runs:  # every increment is whole batches and exactly what its dataset draws from its weights
        parent = by_id[s.extension.parent] if s.extension is not None else None
        before = parent.sequences if parent is not None else dict.fromkeys(s.sequences, 0)
        assert s.parent_sequences == sum(before.values())
        new = {d: s.sequences[d] - before[d] for d in s.sequences}
        assert min(new.values()) >= 0 and sum(new.values()) % batch == 0 and sum(new.values()) > 0
        weights = s.extension.weights if s.extension is not None else s.weights
        assert largest_remainder(weights, sum(new.values())) == new
        assert parent is None or (parent.kind == TRUNK and parent.keeps_model and parent.seed == s.seed)
        assert s.keeps_model == (s.kind == TRUNK)
    seen: set[str] = set()
    for wave in plan.waves:  # a run's parent trains in an earlier wave
        assert all(s.extension is None or s.extension.parent in seen for s in wave)
        seen |= {s.run_id for s in wave}
    cost = wsd_cost(cfg, domains, plan)
    budgets = sorted(cfg.ddo.budgets)
    rule = 1 + cfg.ddo.cooldown * sum(budgets[:-1]) / budgets[-1]
    # whole batches: each decay is rounded to a step, each budget to whole batches
    slack = len(budgets) * batch * cfg.seq_len / budgets[0] + 0.5 * len(budgets) / (budgets[0] // (batch * cfg.seq_len))
    assert cost.of_largest == pytest.approx(rule, abs=slack)
    assert cost.tokens < cost.separate_tokens


def test_the_plan_of_the_tiny_config(stores: Path, domains) -> None:
    cfg = _cfg(stores, schedule="wsd", budgets=[4096, 8192, 16384])
    _check_plan(cfg, domains)
    plan = wsd_plan(cfg, domains)
    mixes = 1 + 2 * len(domains.names)
    assert len(plan.branches[4096]) == len(plan.branches[16384]) == mixes
    assert {s.label for s in plan.trunks} == {s.label for s in plan.branches[16384]}
    assert wsd_cost(cfg, domains, plan).of_largest == pytest.approx(1 + 0.2 * (4096 + 8192) / 16384, abs=0.02)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shares=st.lists(st.floats(0.15, 1.0), min_size=3, max_size=3),
       steps0=st.integers(20, 60), ratios=st.lists(st.floats(1.3, 3.0), min_size=1, max_size=2),
       cooldown=st.sampled_from([0.1, 0.2, 0.3]), up=st.sampled_from([1.7, 3.0]), seeds=st.sampled_from([[0], [0, 1]]))
def test_plan_invariants_over_shares_and_budgets(stores: Path, domains, shares, steps0, ratios, cooldown, up,
                                                 seeds) -> None:
    step = 8 * 32
    budgets = [steps0 * step]
    for r in ratios:
        budgets.append(int(budgets[-1] * r) // step * step)
    cfg = config_from_dict(tiny_config(stores, seeds=seeds, target={"budget": 1 << 20}, ddo={
        "schedule": "wsd", "budgets": budgets, "cooldown": cooldown, "multipliers": [up, up],
        "base_weights": dict(zip("abc", shares, strict=True))}))
    try:
        _check_plan(cfg, domains)
    except ValueError as exc:  # whole batches made a small domain's count fall between budgets: refused, as it says
        assert "count falls" in str(exc) and "global_batch_size" in str(exc)
        assume(False)


def test_a_falling_count_is_refused_naming_the_way_out(stores: Path, domains) -> None:
    """Whole batches of 8 round c's /3 run up to 6 of 160 sequences at the smaller budget and to 5 of 240 at the
    larger one: no trunk passes through both, and the plan says so."""
    cfg = config_from_dict(tiny_config(stores, target={"budget": 1 << 20}, ddo={
        "schedule": "wsd", "budgets": [20 * 256, 30 * 256], "cooldown": 0.1, "multipliers": [3, 3],
        "base_weights": {"a": 1.0, "b": 1.0, "c": 0.1875}}))
    with pytest.raises(ValueError, match="count falls.*raise ddo.budgets or lower global_batch_size"):
        wsd_plan(cfg, domains)


def _stream(stores: Path, spec: RunSpec, state: dict | None) -> tuple[list[tuple[int, int]], dict]:
    """Every (domain, sequence) ``spec``'s training dataset yields, as the trainer builds it, and its end state."""
    weights = spec.extension.weights if spec.extension is not None else spec.weights
    ds = ScaleAwareMixtureDataset({d: stores / d for d in spec.sequences}, weights, spec.total_tokens, spec.seq_len,
                                  spec.seed, continue_from=state)
    assert ds.sequences_per_domain == spec.sequences
    items = [(int(x["domain"]), int(x["seq_index"])) for x in ds]
    return items, ds.state_dict()


def _counts(items: list[tuple[int, int]], upto: int, m: int) -> list[int]:
    out = [0] * m
    for d, _ in items[:upto]:
        out[d] += 1
    return out


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: each example builds every stream
@given(shares=st.lists(st.floats(0.15, 1.0), min_size=3, max_size=3), steps0=st.integers(12, 30),
       ratio=st.floats(1.5, 3.0))
def test_a_branch_trains_the_trunk_s_prefix_within_two_sequences(stores: Path, domains, shares, steps0,
                                                                 ratio) -> None:
    """The bound of planning/wsd.py: a branch's sequences per domain are the trunk's first ones, the same as the
    separate run's, and at every position its stream holds within 2 sequences per domain of the trunk's."""
    step = 8 * 32
    budgets = [steps0 * step, int(steps0 * step * ratio) // step * step]
    cfg = config_from_dict(tiny_config(stores, target={"budget": 1 << 20}, ddo={"schedule": "wsd", "budgets": budgets,
                                                                              "multipliers": [3, 3],
                                                    "base_weights": dict(zip("abc", shares, strict=True))}))
    try:
        plan = wsd_plan(cfg, domains)
    except ValueError as exc:  # refused, as test_a_falling_count_is_refused_naming_the_way_out shows
        assert "count falls" in str(exc)
        assume(False)
        return
    streams: dict[str, list[tuple[int, int]]] = {}
    states: dict[str, dict] = {}
    for wave in plan.waves:
        for s in wave:
            parent = None if s.extension is None else s.extension.parent
            items, states[s.run_id] = _stream(stores, s, None if parent is None else states[parent])
            streams[s.run_id] = (streams[parent] if parent else []) + items
    m = len(domains.names)
    for n, branches in plan.branches.items():
        separate = {s.label: s for s in ddo_proxy_specs(cfg, domains, n)}
        for b, last in zip(branches, plan.branches[max(plan.branches)], strict=True):  # aligned: mix by mix
            trunk = streams[last.run_id]  # the largest budget's stream: the trunk, then its own decay
            mine, total = streams[b.run_id], b.total_sequences
            assert len(mine) == total
            for d in range(m):  # the same sequences of each domain as the trunk's first `total` positions
                assert sorted(s for dd, s in mine if dd == d) == sorted(s for dd, s in trunk[:total] if dd == d)
            for t in range(0, total + 1, 4):
                ours, theirs = _counts(mine, t, m), _counts(trunk, t, m)
                assert max(abs(x - y) for x, y in zip(ours, theirs, strict=True)) <= 2, (n, b.label, t)
            alone, _ = _stream(stores, separate[b.label], None)  # the separate run: the same sequences per domain
            for d in range(m):
                assert sorted(s for dd, s in mine if dd == d) == sorted(s for dd, s in alone if dd == d)


def test_learning_rate_of_trunk_and_branches() -> None:
    trunk = wsd_lr_lambda(WSDSpec(TRUNK, 4), 0, 40, 0.0)
    assert [trunk(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    later = wsd_lr_lambda(WSDSpec(TRUNK, 4), 40, 10, 0.0)  # a later stretch: the peak, of the global step
    assert later(40) == later(49) == 1.0
    sqrt = wsd_lr_lambda(WSDSpec("branch", 4, 16, "1-sqrt"), 64, 16, 0.1)
    assert sqrt(64) == 1.0 and sqrt(68) == pytest.approx(1 - 0.9 * 0.5) and sqrt(79) == pytest.approx(1 - 0.9 * (15 / 16) ** 0.5)
    linear = wsd_lr_lambda(WSDSpec("branch", 4, 16, "linear"), 64, 16, 0.0)
    assert linear(64) == 1.0 and linear(72) == pytest.approx(0.5) and linear(79) == pytest.approx(1 / 16)
    same = wsd_lr_lambda(WSDSpec("branch", 4, 16, "linear"), 64, 16, 0.1)
    assert all(sqrt(s) <= same(s) + 1e-12 for s in range(64, 80))  # 1-sqrt lies below the line to the same end
    with pytest.raises(ValueError, match="decay_steps"):
        WSDSpec("branch", 4)


def test_the_trunk_warms_up_as_the_smallest_separate_run(stores: Path, domains) -> None:
    """Each mix's trunk warms up over the very steps of its smallest budget's separate run (train.lr_lambda:
    ``round(warmup_fraction x steps)``), so a branch and a separate run differ only after the warm-up. The tiny
    config's base run has 16 steps: 1.6 warm-up steps round to 2 (rounding ``warmup_fraction x sequences`` down
    to whole batches first gave 1)."""
    cfg = _cfg(stores, schedule="wsd", budgets=[4096, 8192, 16384])
    o, batch = cfg.optimizer, cfg.global_batch_size
    plan = wsd_plan(cfg, domains)
    for branch, alone in zip(plan.branches[4096], ddo_proxy_specs(cfg, domains, 4096), strict=True):
        steps = alone.total_sequences // batch
        separate = lr_lambda(steps, o.warmup_fraction, o.min_lr_ratio)
        warm = next(k for k in range(steps) if separate(k) == 1.0) + 1  # its warm-up steps
        trunk = wsd_lr_lambda(WSDSpec(TRUNK, branch.wsd.warmup_steps), 0, steps, o.min_lr_ratio)
        assert [trunk(k) for k in range(warm + 1)] == [separate(k) for k in range(warm + 1)], branch.label
    base = next(b for b in plan.branches[4096] if b.label == "base")
    assert base.wsd.warmup_steps == 2


def test_the_dry_run_shows_the_trunks_and_the_cost(stores: Path, tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, ddo={"schedule": "wsd", "budgets": [4096, 8192, 16384]},
                                       target={"budget": 65536}))
    text = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False).describe()
    assert "ddo.schedule: wsd: 7 design runs" in text and "1-sqrt decay" in text
    assert "about 1 + 0.2 x (4,096 + 8,192) / 16,384 = 1.150" in text
    assert " trunk " in text  # the trunk stretches are listed with the runs
    autoscale = next(line for line in text.splitlines() if line.strip().startswith("autoscale "))
    cost = wsd_cost(cfg, inspect_domains(cfg))
    assert f"{cost.tokens:,} tokens" in autoscale  # the proxies' cost: trunks and branches, each prefix once

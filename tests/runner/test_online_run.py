"""Online-mixing target runs for the runner: the spec (controller config hashed, JSON) and the per-step hook."""

from __future__ import annotations

import json

import pytest
from resume_helper import item_key
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.dataset import ScaleAwareMixtureDataset
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.data import inspect_domains
from autoscale_data.runner.online import OnlineConfig, OnlineRunSpec, online_hook, online_target_spec
from autoscale_data.runner.plan import target_spec


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    stores = tiny_stores(tmp_path_factory.mktemp("online_run") / "stores", ("a", "b", "c"))
    cfg = config_from_dict(tiny_config(stores))
    return cfg, inspect_domains(cfg)


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="online method must be one of"):
        OnlineConfig("doremi")
    with pytest.raises(ValueError, match="online.every must be a positive integer, got 0"):
        OnlineConfig("ado", every=0)
    with pytest.raises(ValueError, match=r"unknown odm option\(s\) \['warmup'\]"):
        OnlineConfig("odm", options={"warmup": 3})
    c = OnlineConfig("ado", every=4, options={"refit_every": 2})
    assert OnlineConfig.from_json(json.loads(json.dumps(c.to_json()))) == c


def test_spec_carries_and_hashes_the_controller(setup) -> None:
    cfg, domains = setup
    odm = online_target_spec(cfg, domains, OnlineConfig("odm", every=2), seed=0)
    fixed = target_spec(cfg, domains, "odm", {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, 0)
    assert odm.sequences == fixed.sequences and odm.run_id != fixed.run_id  # same start, another run
    assert odm.run_id != online_target_spec(cfg, domains, OnlineConfig("odm", every=3), seed=0).run_id
    ado = online_target_spec(cfg, domains, OnlineConfig("ado"), seed=0)
    natural = domains.natural_weights()
    assert ado.weights == pytest.approx(natural, abs=0.02)  # ADO starts at its prior, the natural mix
    back = OnlineRunSpec.from_json(json.loads(json.dumps(odm.to_json())))
    assert back == odm and back.online == {"method": "odm", "every": 2, "lookahead": None, "options": {}}


@pytest.mark.timeout(120)
def test_hook_in_a_training_loop_resumes_after_a_kill(setup) -> None:
    cfg, domains = setup
    spec = online_target_spec(cfg, domains, OnlineConfig("odm", every=2), seed=0)
    gas = cfg.global_batch_size // cfg.micro_batch_size

    def train(state: dict | None, kill_at: int | None) -> tuple[list, dict | None, dict]:
        ds = ScaleAwareMixtureDataset(domains.paths, spec.weights, spec.total_tokens, spec.seq_len, spec.seed,
                                      batch_size=cfg.micro_batch_size, output="compact", verify="size")
        hook = online_hook(ds, spec, domains.natural_weights(), cfg.global_batch_size)
        assert hook is not None
        start = 0
        if state is not None:
            ds.load_state_dict(state)
            start = state["cursor"] // cfg.global_batch_size
        it, seen = iter(ds), []
        for step in range(start, spec.total_sequences // cfg.global_batch_size):
            for _ in range(gas):
                batch = next(it)
                seen.extend(item_key(batch))
                losses = batch["domain"].double()[:, None] * 2 + (batch["seq_index"].double() % 3)[:, None]
                hook.on_tokens(losses.expand(-1, 5), batch["domain"])
            hook.on_step(step + 1)
            if step + 1 == kill_at:  # what the runner's checkpoint holds: the dataset's state
                return seen, json.loads(json.dumps(ds.state_dict(samples_taken=(step + 1 - start) * gas
                                                                 * cfg.micro_batch_size))), hook.summary()
        return seen, None, hook.summary()

    full, _, summary = train(None, None)
    assert len(full) == len(set(full)) == spec.total_sequences
    assert len({tuple(w) for w in summary["weights"]}) > 1  # ODM moved the mix
    for kill in (3, 8):
        first, state, _ = train(None, kill)
        rest, _, resumed = train(state, None)
        assert first + rest == full and resumed == summary
    assert online_hook(ScaleAwareMixtureDataset(domains.paths, spec.weights, spec.total_tokens, spec.seq_len),
                       target_spec(cfg, domains, "uniform", spec.weights, 0), {}, 8) is None

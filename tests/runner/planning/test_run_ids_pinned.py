"""Run ids pinned to the digit: the ids of representative specs (DDO proxies, a fixed and an anytime target,
DoReMi's reference and proxy under a proxy model of their own, an unpadded vocabulary, a BERT model with its
masked-LM settings, the DeepSpeed backend), computed before the run settings became records. A change of how
the settings are built or written that moves any of them breaks every kept output folder's reuse."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import RunSpec, target_spec
from autoscale_data.solver import MixturePlan

SMALL = {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 16, "n_head": 2}}
BERT = {"preset": "bert-tiny", "overrides": {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2,
                                             "intermediate_size": 64}, "mlm_probability": 0.2}
CASES = {
    "plain": {},
    "doremi_proxy_model": {"target": {"baselines": ["uniform", "doremi"]},
                           "ddo": {"proxy_model": SMALL, "proxy_lr": 1e-3}},
    "unpadded": {"train": {"pad_vocab": 1}},
    "bert": {"model": BERT, "eval": {"mlm_passes": 2}},
    "deepspeed": {"backend": "deepspeed", "deepspeed": {"zero_stage": 1}},
}
PINNED = {
    "plain": {"proxy base": "f6c3c1acdd8daec2", "proxy a x3.05 (planned x3)": "faa27a125144ad21",
              "target uniform s0": "6584a6732d735bc2", "target anytime": "1551ae85b16411ee"},
    "doremi_proxy_model": {"proxy base": "9cf4b3af49eec900", "proxy a x3.05 (planned x3)": "e00a3b01f8527c15",
                           "doremi_reference doremi reference": "0936639745e724e9",
                           "doremi_proxy doremi proxy": "55888ae5a1c45951",
                           "target uniform s0": "6584a6732d735bc2", "target anytime": "1551ae85b16411ee"},
    "unpadded": {"proxy base": "9e0cff566efa74bd", "proxy a x3.05 (planned x3)": "921d084922306394",
                 "target uniform s0": "6aaed7312c5d6819", "target anytime": "de9a5c7a8a5f6e82"},
    "bert": {"proxy base": "f1a2863c025588b9", "proxy a x3.05 (planned x3)": "f72b2a3b4c9de7c2",
             "target uniform s0": "11a8435dad9fba7f", "target anytime": "8088c4c2830231cc"},
    "deepspeed": {"proxy base": "e118601b33c77698", "proxy a x3.05 (planned x3)": "89fbd6de2ec5b690",
                  "target uniform s0": "9c071f7c040c26ae", "target anytime": "77b72ae34b2b93c7"},
}
PLAN = MixturePlan.from_scales([(4096, {"a": 2000.0, "b": 1500.0, "c": 596.0}),
                                (8192, {"a": 2600.0, "b": 3000.0, "c": 2592.0})])


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_stores(tmp_path_factory.mktemp("pinned") / "stores", ("a", "b", "c"))


def _specs(stores: Path, overrides: dict) -> dict[str, RunSpec]:
    cfg = config_from_dict(tiny_config(stores, **overrides))
    runner = MixtureRunner(cfg, stores.parent / "out", log=lambda _: None, progress=False)
    proxies = runner.proxy_specs()
    first = proxies[min(proxies)]
    specs = {f"proxy {s.label}": s for s in first[:2]}
    specs |= {f"{s.kind} {s.label}": s for stage in runner.selection_specs() for s in stage}
    specs |= {f"target {s.label} s{s.seed}": s for s in runner.target_specs(runner.fixed_target_mixes())}
    specs["target anytime"] = target_spec(cfg, inspect_domains(cfg), "autoscale_anytime", None, 0, plan=PLAN)
    return specs


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_run_ids_are_the_pinned_ones_and_a_spec_reads_back_to_its_id(stores: Path, case: str) -> None:
    from autoscale_data.runner.planning.specs import run_fingerprint

    specs = _specs(stores, CASES[case])
    assert {name: s.run_id for name, s in specs.items()} == PINNED[case]
    for s in specs.values():  # spec.json read back hashes to its id again
        back = RunSpec.from_json(s.to_json())
        assert back.to_json() == s.to_json()
        assert run_fingerprint(back) == s.run_id

"""The cheap design the dry run recommends (``planning.cheap``): its proxy model by the rule (a preset 2.5-4x smaller
in training FLOPs per token, else the target's model at half width), its cost next to the configured one, config
lines that select exactly it, and no change to any run id or default."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.describe import cheap_design_note, proxy_costs
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.cheap import (
    CHEAP_MAX_RATIO,
    CHEAP_MIN_RATIO,
    cheap_config,
    cheap_design,
    cheap_proxy_model,
)
from autoscale_data.runner.planning.data import DomainInfo, inspect_domains

pytestmark = pytest.mark.timeout(120)

#: The demo's target model (gpt2-tiny as is: 2 layers x 128, 4 heads) on the tiny stores.
TINY = {"preset": "gpt2-tiny", "overrides": {}}


def _hand(layers: int, width: int, vocab: int, seq_len: int) -> int:
    """6 x (12 L d^2 + V d) + 6 L T d (``planning.estimate.flops_per_token``), by hand."""
    return 6 * (12 * layers * width * width + vocab * width) + 6 * layers * seq_len * width


def _gpt2_vocab(count: int) -> DomainInfo:
    names = tuple(f"d{k}" for k in range(count))
    return DomainInfo(names=names, paths={d: d for d in names}, train_tokens=dict.fromkeys(names, 10**12),
                      val_tokens=dict.fromkeys(names, 10**6), fingerprints=dict.fromkeys(names, ""),
                      vocab_size=50257, eos_id=0, tokenizer="")


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


def test_no_preset_in_range_halves_the_targets_width(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, model=TINY))
    d = inspect_domains(cfg)
    model, ratio = cheap_proxy_model(cfg, d)
    assert (model.preset, model.overrides) == ("gpt2-tiny", {"n_layer": 2, "n_embd": 64, "n_head": 2})
    assert ratio == pytest.approx(_hand(2, 128, d.vocab_size, 32) / _hand(2, 64, d.vocab_size, 32))
    assert CHEAP_MIN_RATIO <= ratio <= CHEAP_MAX_RATIO


def _large(stores: Path, preset: str):
    return config_from_dict(tiny_config(stores, model={"preset": preset, "overrides": {}}, seq_len=1024,
                                        micro_batch_size=1, global_batch_size=1))


def test_a_preset_2_5_to_4x_smaller_is_taken_when_there_is_one(stores: Path) -> None:
    d = _gpt2_vocab(3)
    model, ratio = cheap_proxy_model(_large(stores, "gpt2-medium"), d)
    assert (model.preset, model.overrides) == ("gpt2-small", {})
    assert ratio == pytest.approx(_hand(24, 1024, 50257, 1024) / _hand(12, 768, 50257, 1024))
    assert CHEAP_MIN_RATIO <= ratio <= CHEAP_MAX_RATIO
    # gpt2-large: gpt2-medium is 2.2x smaller, gpt2-small 6.2x: neither in range, so half the width
    model, ratio = cheap_proxy_model(_large(stores, "gpt2-large"), d)
    assert (model.preset, model.overrides) == ("gpt2-large", {"n_layer": 36, "n_embd": 640, "n_head": 10})
    assert ratio == pytest.approx(_hand(36, 1280, 50257, 1024) / _hand(36, 640, 50257, 1024))
    assert CHEAP_MIN_RATIO <= ratio <= CHEAP_MAX_RATIO


def test_the_dry_run_recommends_it_with_its_cost_and_lines_that_select_it(stores: Path, tmp_path: Path) -> None:
    raw = tiny_config(stores, model=TINY, ddo={"budgets": [2048, 4096, 8192]})
    cfg = config_from_dict(raw)
    d = inspect_domains(cfg)
    design = cheap_design(cfg, d)
    assert design.budgets == (4096, 8192)  # the two largest
    cheap, _ = proxy_costs(cheap_config(cfg, design), d)
    _, three = proxy_costs(cfg, d)  # this config runs three budgets
    text = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False).describe()
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("cheap design (recommended"))
    head = lines[start]
    assert "proxy model gpt2-tiny (n_layer=2, n_embd=64, n_head=2)" in head
    assert f"{design.ratio:.2f}x fewer training FLOPs per token" in head
    assert f"{cheap.runs} runs, {cheap.flops:.3g} FLOPs = {cheap.target_runs:.2f} target runs" in head
    assert f"against {three.target_runs:.2f} for this config (3 budgets)" in head
    assert cheap.target_runs < three.target_runs / CHEAP_MIN_RATIO * 1.01  # 4x+ fewer FLOPs, fewer runs
    # the printed lines, pasted into the config, select exactly the cheap design
    block = "\n".join(ln[4:] for ln in lines[start + 1:start + 5])
    assert lines[start + 4] == "      extra_budget: none"  # this config ran three budgets
    pasted_ddo = {**raw["ddo"], "extra_budget": "half", **yaml.safe_load(block)["ddo"]}  # as if its file said half
    pasted = config_from_dict({**raw, "ddo": pasted_ddo})
    assert pasted.ddo == cheap_config(cfg, design).ddo
    assert "without the proxy_model line" in lines[start + 5]
    assert cheap_design_note(pasted, d).startswith("cheap design: this config is the cheap design")
    # the recommendation is text: this config's plan (and ids) stay those of the paper's design
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    assert all(s.settings.model.fields["n_layer"] == 2 for specs in runner.proxy_specs().values() for s in specs)


def test_a_target_too_small_to_shrink_says_so(stores: Path) -> None:
    narrow = {"overrides": {"n_layer": 1, "n_embd": 16, "n_head": 1}}  # half its width would be under 16
    cfg = config_from_dict(tiny_config(stores, model=narrow))
    d = inspect_domains(cfg)
    model, ratio = cheap_proxy_model(cfg, d)
    assert model.overrides == narrow["overrides"] and ratio == 1.0
    assert cheap_design_note(cfg, d).startswith("cheap design: no proxy model 2.5x smaller than gpt2-tiny")

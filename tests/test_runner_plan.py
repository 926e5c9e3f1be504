"""Plan as data: exact sequence counts, whole global batches, content-hash ids that change only when
what determines a run changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.data import inspect_domains
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.plan import ddo_proxy_specs, largest_remainder, target_spec


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


@given(st.lists(st.floats(0.0, 10.0), min_size=1, max_size=8).filter(lambda w: sum(w) > 0.01),
       st.integers(0, 10_000))
@settings(max_examples=200, deadline=None)
def test_largest_remainder_is_exact_and_close(weights: list[float], total: int) -> None:
    named = {f"d{i}": w for i, w in enumerate(weights)}
    counts = largest_remainder(named, total)
    assert sum(counts.values()) == total
    s = sum(weights)
    for k, w in named.items():
        assert abs(counts[k] - w / s * total) < 1.0


def test_ddo_design_shape_and_whole_batches(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, seeds=[0, 1]))
    domains = inspect_domains(cfg)
    specs = ddo_proxy_specs(cfg, domains, 4096)
    assert len(specs) == 2 * (2 * 3 + 1)
    base = [s for s in specs if s.label == "base"]
    assert {s.seed for s in base} == {0, 1}
    for s in specs:
        assert s.total_sequences % cfg.global_batch_size == 0
        if s.perturbed:
            changed = [d for d in s.sequences if s.sequences[d] != base[0].sequences[d]]
            assert changed == [s.perturbed]  # the other domains keep their base tokens
            ratio = s.sequences[s.perturbed] / base[0].sequences[s.perturbed]
            assert (ratio > 1) == (s.multiplier > 1)
    assert len({s.run_id for s in specs}) == len(specs)


def test_ids_change_only_with_what_determines_the_run(stores: Path) -> None:
    raw = tiny_config(stores)
    cfg = config_from_dict(raw)
    domains = inspect_domains(cfg)
    ids = {s.label: s.run_id for s in ddo_proxy_specs(cfg, domains, 4096)}
    same = config_from_dict(tiny_config(stores, target={"budget": 32768, "baselines": ["uniform"]},
                                        ddo={"budgets": [4096, 16384]}))
    assert {s.label: s.run_id for s in ddo_proxy_specs(same, domains, 4096)} == ids
    for change in ({"optimizer": {"lr": 1e-3}}, {"precision": "bf16"}, {"seq_len": 64},
                   {"model": {"preset": "gpt2-tiny", "overrides": {"n_layer": 2}}}):
        other = config_from_dict(tiny_config(stores, **change))
        new = {s.label: s.run_id for s in ddo_proxy_specs(other, inspect_domains(other), 4096)}
        assert not set(new.values()) & set(ids.values()), change


def test_equal_mixes_share_one_run(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, target={"budget": 16384, "baselines": ["uniform", "reference"],
                                                       "reference_weights": {"a": 1, "b": 1, "c": 1}}))
    runner = MixtureRunner(cfg, stores.parent / "out")
    specs = runner.target_specs(runner.fixed_target_mixes())
    assert len(specs) == 2 and specs[0].run_id == specs[1].run_id


def test_target_spec_rejects_unknown_domains(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores))
    with pytest.raises(ValueError, match="unknown domains"):
        target_spec(cfg, inspect_domains(cfg), "x", {"a": 0.5, "zzz": 0.5}, 0)


def test_dry_run_lists_runs_tokens_and_time(stores: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from autoscale_data.cli import main

    cfg_path = stores.parent / "c.json"
    import json

    cfg_path.write_text(json.dumps(tiny_config("stores")))
    assert main(["run", str(cfg_path), "--out", str(stores.parent / "out"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "proxy" in out and "a x3" in out and "c /3" in out and "(after the fits)" in out
    assert "training tokens, estimated" in out
    assert not (stores.parent / "out" / "ledger.jsonl").exists()  # a dry run trains and records nothing


def test_missing_store_directory_says_to_prepare(tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="autoscale-data prepare"):
        inspect_domains(cfg)

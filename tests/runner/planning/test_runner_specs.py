"""Plan as data: exact sequence counts, whole global batches, content-hash ids that change only when
what determines a run changes (and never for existing run kinds when an option such as the anytime
schedule is added)."""

from __future__ import annotations

from pathlib import Path

import pytest
from runner_helpers import tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.describe import design_note
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import (
    ddo_proxy_specs,
    design_rounding,
    faithful_budget,
    target_spec,
)


@pytest.fixture
def stores(tmp_path: Path) -> Path:
    return tiny_stores(tmp_path / "stores", ("a", "b", "c"))


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


def test_two_multipliers_each_way_give_4m_plus_1_runs_and_identify_the_law(stores: Path) -> None:
    cfg = config_from_dict(tiny_config(stores, ddo={"budgets": [4096, 8192], "multipliers": [[3, 1.7], [3, 1.7]]}))
    assert cfg.ddo.multiplier_up == (3.0, 1.7) and cfg.ddo.identifies_law
    specs = ddo_proxy_specs(cfg, inspect_domains(cfg), 4096)
    assert len(specs) == 4 * 3 + 1
    planned = {s.label.split("planned ")[-1].rstrip(")") if "planned" in s.label else s.label.split()[-1]
               for s in specs if s.perturbed}
    assert sorted(planned) == ["/1.7", "/3", "x1.7", "x3"]
    note = design_note(cfg)  # can identify, not "did identify"
    assert "the design CAN identify the law; whether these runs DO is known only after the fits" in note
    single = config_from_dict(tiny_config(stores, ddo={"budgets": [4096, 8192], "multipliers": [3, 3]}))
    assert not single.ddo.identifies_law
    # the x3 and /3 runs are the same runs (same ids) in both designs: extending a design reuses them
    assert {s.run_id for s in ddo_proxy_specs(single, inspect_domains(single), 4096)} <= {s.run_id for s in specs}


def test_labels_and_dry_run_show_the_multipliers_actually_trained(stores: Path, tmp_path: Path) -> None:
    raw = tiny_config(stores, seq_len=128, global_batch_size=8, target={"budget": 131072},
                      ddo={"budgets": [16384, 32768], "multipliers": [[3, 1.7], [3, 1.7]]})
    cfg = config_from_dict(raw)
    domains = inspect_domains(cfg)
    specs = ddo_proxy_specs(cfg, domains, 16384)
    base = next(s for s in specs if s.label == "base").sequences
    for s in specs[1:]:
        trained = s.sequences[s.perturbed] / base[s.perturbed]
        assert s.multiplier == pytest.approx(trained)
        if abs(trained * (3 if "planned /3" in s.label else 1) - 1) > 0.005 and "planned /3" in s.label:
            assert s.label == f"{s.perturbed} /{1 / trained:.3g} (planned /3)"
    labels = {s.label for s in specs if s.perturbed == "a"}
    # 1,024 tokens a batch: /3 of 43 sequences cannot be kept; the label says what was trained
    assert f"a /{43 / 11:.3g} (planned /3)" in labels
    moved = design_rounding(cfg, domains, 16384)
    assert ("a", pytest.approx(1 / 3), pytest.approx(11 / 43)) in moved
    keep = faithful_budget(cfg, domains, 16384)
    assert keep is not None and keep > 32768 and not design_rounding(cfg, domains, keep)
    assert keep % (128 * 8) == 0 and design_rounding(cfg, domains, keep - 128 * 8)
    text = MixtureRunner(cfg, tmp_path / "out").describe()
    assert "DDO design at 16,384 tokens" in text and f"/{43 / 11:.3g} instead of /3 (a, b)" in text
    assert f"about {keep:,} tokens" in text
    fine = config_from_dict(tiny_config(stores, micro_batch_size=1, global_batch_size=1,
                                        ddo={"budgets": [4096, 8192], "multipliers": [3, 3]}))
    assert not design_rounding(fine, inspect_domains(fine), 4096)
    assert "DDO design at" not in MixtureRunner(fine, tmp_path / "out2").describe()


@pytest.mark.parametrize("mult", [[[3, 3], [3]], [[3, 0.5], [3]], [[], [3]]])
def test_bad_multiplier_lists_are_named(stores: Path, mult: list) -> None:
    with pytest.raises(ValueError, match="multiplier_up"):
        config_from_dict(tiny_config(stores, ddo={"budgets": [4096, 8192], "multipliers": mult}))


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
    assert "proxy" in out and "a x3" in out and "c /2.33 (planned /3)" in out and "(after the fits)" in out
    assert "training tokens, estimated" in out
    assert "the data may not determine the optimum" in out  # the paper's 2m+1 design: 3 points, 3 parameters
    assert not (stores.parent / "out" / "ledger.jsonl").exists()  # a dry run trains and records nothing


def test_missing_store_directory_says_to_prepare(tmp_path: Path) -> None:
    cfg = config_from_dict(tiny_config(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="autoscale-data prepare"):
        inspect_domains(cfg)


def _legacy_id(spec) -> str:
    """The id formula from before the anytime schedule existed (settings, sequences, seed, eval points)."""
    import hashlib
    import json

    blob = json.dumps({"settings": spec.settings.to_json(), "sequences": dict(sorted(spec.sequences.items())),
                       "seed": spec.seed, "eval_points": spec.eval_points}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def test_anytime_option_leaves_every_fixed_schedule_id_unchanged(stores: Path) -> None:
    from autoscale_data.runner.planning.specs import RunSpec, id_payload

    plain = config_from_dict(tiny_config(stores, seeds=[0, 1], target={"baselines": ["uniform", "natural"],
                                                                       "seeds": [0, 1]}))
    with_anytime = config_from_dict(tiny_config(stores, seeds=[0, 1], target={
        "baselines": ["uniform", "natural", "autoscale_anytime"], "seeds": [0, 1]}))
    domains = inspect_domains(plain)
    specs = {}
    for cfg in (plain, with_anytime):
        runner = MixtureRunner(cfg, stores.parent / "out")
        runs = [s for n in cfg.ddo.budgets for s in ddo_proxy_specs(cfg, domains, n)]
        runs += runner.target_specs(runner.fixed_target_mixes())
        runs += [target_spec(cfg, domains, "autoscale", {"a": 0.2, "b": 0.5, "c": 0.3}, seed) for seed in (0, 1)]
        specs[cfg.target.baselines] = runs
    a, b = specs.values()
    assert [s.run_id for s in a] == [s.run_id for s in b]  # the option adds runs, it changes none
    for s in a:
        assert s.schedule == "fixed" and s.plan is None
        payload = id_payload(s)
        assert "schedule" not in payload and "plan" not in payload
        assert s.run_id == _legacy_id(s)
        assert "schedule" not in s.to_json() and "plan" not in s.to_json()  # spec.json as before
        assert RunSpec.from_json(s.to_json()) == s


def test_anytime_spec_carries_its_plan_and_hashes_it(stores: Path) -> None:
    from autoscale_data.runner.planning.specs import RunSpec
    from autoscale_data.solver import MixturePlan

    cfg = config_from_dict(tiny_config(stores))
    domains = inspect_domains(cfg)
    plan = MixturePlan.from_scales([(4096, {"a": 2000.0, "b": 1500.0, "c": 596.0}),
                                    (8192, {"a": 2600.0, "b": 3000.0, "c": 2592.0})])
    spec = target_spec(cfg, domains, "autoscale_anytime", None, 0, plan=plan)
    assert spec.schedule == "anytime" and spec.plan is plan
    assert spec.total_sequences == 16384 // 32  # the same budget as every target run
    assert spec.run_id != _legacy_id(spec)
    fixed = target_spec(cfg, domains, "autoscale", spec.weights, 0)
    assert fixed.sequences == spec.sequences and fixed.run_id != spec.run_id  # same final mix, other schedule
    other = MixturePlan.from_scales([(4096, {"a": 1900.0, "b": 1600.0, "c": 596.0}),
                                     (8192, {"a": 2600.0, "b": 3000.0, "c": 2592.0})])
    assert target_spec(cfg, domains, "autoscale_anytime", None, 0, plan=other).run_id != spec.run_id
    back = RunSpec.from_json(spec.to_json())
    assert back == spec and back.plan == spec.plan
    with pytest.raises(ValueError, match="anytime"):
        RunSpec(**{**spec.to_json(), "plan": None})
    with pytest.raises(ValueError, match="schedule"):
        RunSpec(**{**spec.to_json(), "schedule": "sometimes"})


@pytest.mark.parametrize(("ddo", "needle"), [({"min_weight": 0.5}, "min_weight = 0.5"),
                                           ({"max_weight": 0.3}, "max_weight = 0.3"),
                                           ({"objective_weights": {"web": 1.0}}, "objective_weights")])
def test_weight_bounds_the_stores_domains_cannot_meet_fail_before_training(stores: Path, tmp_path: Path,
                                                                           ddo: dict, needle: str) -> None:
    cfg = config_from_dict(tiny_config(stores, ddo=ddo))  # a store folder: its 3 domains are known on opening it
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match=needle):
        runner.describe()  # the dry run
    with pytest.raises(ValueError, match=needle):
        runner.run()
    assert not list((tmp_path / "out" / "runs").glob("*"))  # nothing was trained


def test_a_max_weight_the_small_domains_cannot_fill_fails_before_training(tmp_path: Path) -> None:
    root = tiny_stores(tiny_stores(tmp_path / "stores", ("b", "c")), ("a",), num_tokens=4_000)
    cfg = config_from_dict(tiny_config(root, ddo={"max_weight": 0.35}, target={"budget": 60_000}, max_epochs=3.0))
    text = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False).describe()
    assert "ddo.max_weight 0.35 x target budget 60,000 = 21,000 tokens per domain at most" in text
    assert "make 54,000 tokens, less than the target budget" in text  # a: 3 epochs of 4,000 tokens, b and c 21,000
    roomy = config_from_dict(tiny_config(root, ddo={"max_weight": 0.5}, target={"budget": 60_000}, max_epochs=3.0))
    assert "ddo.max_weight" not in MixtureRunner(roomy, tmp_path / "o2").describe()


def test_data_availability_is_checked_at_plan_time_naming_every_domain(stores: Path, tmp_path: Path) -> None:
    # each tiny store holds 40,000 tokens: a 10M-token target cannot give any domain 5% of it
    cfg = config_from_dict(tiny_config(stores, target={"budget": 10_000_000, "baselines": ["uniform"]}))
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    text = runner.describe()
    for d in ("a", "b", "c"):
        assert f"DATA: domain {d!r} has" in text
    assert "ddo.min_weight 0.05 x target budget 10,000,000" in text and "uniform" in text
    assert "exceeds all the training data" in text and "max_epochs" in text
    with pytest.raises(ValueError, match=r"cannot supply this plan(.|\n)*'a'(.|\n)*'b'(.|\n)*'c'"):
        runner.run()
    assert not list((tmp_path / "out" / "runs").glob("*"))  # nothing was trained
    fine = config_from_dict(tiny_config(stores))
    assert "DATA:" not in MixtureRunner(fine, tmp_path / "fine").describe()
    repeat = config_from_dict(tiny_config(stores, max_epochs=400.0, target={"budget": 10_000_000}))
    assert "DATA:" not in MixtureRunner(repeat, tmp_path / "rep").describe()


def test_the_dry_run_estimate_says_it_assumes_an_idle_machine() -> None:
    from autoscale_data.runner.describe import load_note

    assert load_note(0.5, 2) == "the estimate assumes an idle machine (the 1-minute load average is now 0.5 on 2 CPUs)"
    busy = load_note(4.0, 2)
    assert "load average is now 4.0 on 2 CPUs" in busy and "about 2.5x as long" in busy


@pytest.mark.timeout(300)
def test_run_gives_each_plan_note_once(tmp_path: Path) -> None:
    stores = tiny_stores(tmp_path / "stores")
    cfg = config_from_dict(tiny_config(stores, target={"budget": 12288, "baselines": []}))
    lines: list[str] = []
    with pytest.warns(UserWarning) as caught:
        MixtureRunner(cfg, tmp_path / "out", log=lines.append, progress=False).run()
    notes = [str(w.message) for w in caught if str(w.message).startswith("DDO design at")]
    assert notes and len(notes) == len(set(notes))  # one warning per rounded budget
    logged = "\n".join(lines)
    assert all(note not in logged for note in notes) and "estimate assumes an idle machine" in logged

"""One output folder, one experiment: a changed config is refused (naming what changed) or continued
explicitly, and the report never pools runs of two configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_helpers import tiny_config

from autoscale_data.cli import main
from autoscale_data.demo import prepare_synthetic_stores
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.experiment import ConfigChangedError, check_config, config_changes
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.reporting.report import build_report, write_report


def test_config_changes_names_every_changed_setting_and_ignores_the_executor() -> None:
    old = {"name": "x", "target": {"budget": 131072, "baselines": ["uniform"]}, "executor": {"kind": "local"},
           "base_dir": "/a", "seeds": [0]}
    new = {"name": "x", "target": {"budget": 262144, "baselines": ["uniform", "natural"]},
           "executor": {"kind": "ray"}, "base_dir": "/b", "seeds": (0,)}
    assert config_changes(old, new) == ['target.baselines: ["uniform"] -> ["uniform", "natural"]',
                                        "target.budget: 131072 -> 262144"]
    assert config_changes(old, old) == []
    assert config_changes({"a": 1}, {"b": 2}) == ["a: 1 -> (unset)", "b: (unset) -> 2"]


def test_check_config_refuses_then_records_an_allowed_change(tmp_path: Path) -> None:
    assert check_config(tmp_path, {"target": {"budget": 1}}, allow_change=False) == []
    assert check_config(tmp_path, {"target": {"budget": 1}}, allow_change=False) == []
    with pytest.raises(ConfigChangedError, match=r"target\.budget: 1 -> 2(.|\n)*--out NEW_DIR(.|\n)*"
                                                 r"--allow-config-change"):
        check_config(tmp_path, {"target": {"budget": 2}}, allow_change=False)
    assert json.loads((tmp_path / "config.json").read_text()) == {"target": {"budget": 1}}  # refused: unchanged
    assert check_config(tmp_path, {"target": {"budget": 2}}, allow_change=True) == ["target.budget: 1 -> 2"]
    assert json.loads((tmp_path / "config.json").read_text()) == {"target": {"budget": 2}}
    history = [json.loads(line) for line in (tmp_path / "config_history.jsonl").read_text().splitlines()]
    assert history == [{"config": {"target": {"budget": 1}}, "replaced_by_changes": ["target.budget: 1 -> 2"]}]


def test_a_setting_added_by_a_newer_version_is_compared_at_its_default(tmp_path: Path) -> None:
    from autoscale_data.runner.config import config_to_dict

    cfg = config_to_dict(config_from_dict(tiny_config("data/demo"), tmp_path))
    old = json.loads(json.dumps(cfg))
    del old["ddo"]["repetition"]  # written before the setting existed: its runs were made as with the default
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert check_config(tmp_path, cfg, allow_change=False) == []
    old["ddo"]["budgets"] = [1, 2]  # a real change is still named
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.raises(ConfigChangedError, match=r"ddo\.budgets"):
        check_config(tmp_path, cfg, allow_change=False)


def _config(tmp_path: Path, **overrides) -> dict:
    prepare_synthetic_stores(tmp_path / "data" / "demo", domains=["encyclopedia", "web"], bytes_per_domain=60_000,
                             holdout_every=10)
    raw = tiny_config("data/demo", **overrides)
    return raw


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_changed_config_never_pools_two_experiments(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    first = _config(tmp_path, target={"budget": 16384, "baselines": ["uniform"]})
    out = tmp_path / "out"
    MixtureRunner(config_from_dict(first, tmp_path), out, log=lambda _: None, progress=False).run()
    old_targets = {t["run_id"] for t in json.loads((out / "plan.json").read_text())["targets"]}

    second = _config(tmp_path, target={"budget": 32768, "baselines": ["uniform", "natural"]})
    cfg_path = tmp_path / "second.json"
    cfg_path.write_text(json.dumps(second))
    with pytest.raises(ConfigChangedError) as err:
        MixtureRunner(config_from_dict(second, tmp_path), out, log=lambda _: None, progress=False).run()
    assert "target.budget: 16384 -> 32768" in str(err.value) and "target.baselines" in str(err.value)
    assert main(["run", str(cfg_path), "--out", str(out), "--no-progress"]) == 2  # the CLI says the same
    assert "target.budget: 16384 -> 32768" in capsys.readouterr().err

    lines: list[str] = []
    report = MixtureRunner(config_from_dict(second, tmp_path), out, log=lines.append, progress=False,
                           allow_config_change=True).run()
    assert not any(" done " in line and "proxy@" in line for line in lines)  # the proxies were reused
    assert any("changed config" in line for line in lines)
    assert set(report.targets) == {"autoscale", "uniform", "natural"}
    for label, t in report.targets.items():  # one seed each, all at the new budget: nothing pooled
        assert t.tokens == 32768 and t.seeds == [0] and t.objective_value.n == 1, label
    assert report.stale_runs == len(old_targets - {t["run_id"] for t in
                                                   json.loads((out / "plan.json").read_text())["targets"]})
    assert report.stale_runs >= 1  # the old autoscale and uniform runs at 16,384 tokens (one run when their mixes agree)
    per_seed = report.tokens_saved_per_seed["uniform"]
    assert list(per_seed) == ["0"]
    md = (out / "report.md").read_text()
    assert "## Target runs at 32,768 tokens" in md and "earlier config" in md

    # a folder of an older version (plan.json without the proxies and the config) is filtered by scale
    plan = json.loads((out / "plan.json").read_text())
    (out / "plan.json").unlink()
    fallback = build_report(out)
    assert {t.tokens for t in fallback.targets.values()} == {32768}
    (out / "plan.json").write_text(json.dumps(plan))
    assert write_report(out).targets.keys() == report.targets.keys()


def test_a_config_history_line_is_its_record() -> None:
    from autoscale_data.runner import layout

    cls = layout.record_of(layout.CONFIG_HISTORY)
    line = {"config": {"name": "x", "seq_len": 32}, "replaced_by_changes": ["seq_len: 32 -> 64"]}
    assert cls.from_json(line).to_json() == line
    with pytest.raises(ValueError, match="replaced_by_changes"):
        cls.from_json({"config": {}})

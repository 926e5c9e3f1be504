"""Extending a finished target run: the kept final checkpoint, the continued data stream (the parent's
prefix then the continuation, nothing repeated or skipped), the model it starts from, the errors, and
an extension killed mid-way that a rerun resumes (the same losses as an uninterrupted extension
trained by the local executor's worker processes)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from runner_helpers import dies_after_checkpoints, tiny_config, tiny_stores

from autoscale_data import ScaleAwareMixtureDataset
from autoscale_data.cli import main
from autoscale_data.runner.config import config_from_dict, config_to_dict
from autoscale_data.runner.experiment import check_config
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.data import inspect_domains
from autoscale_data.runner.planning.specs import RunSpec, ddo_proxy_specs, target_spec
from autoscale_data.runner.reporting.report import _markdown, build_report
from autoscale_data.runner.reporting.report_types import Report
from autoscale_data.runner.training import train as train_mod
from autoscale_data.runner.training.extension import LRSchedule, extension_lr_lambda
from autoscale_data.solver import MixturePlan

pytestmark = pytest.mark.timeout(600)

_PLAN = MixturePlan.from_scales([(4096, {"a": 3000.0, "b": 1096.0}), (8192, {"a": 4600.0, "b": 3592.0})])
_EXTENDED = 24576  # tokens: the 16384-token target runs (64 steps) + 32 steps of 8 x 32 tokens


class _Recorder(torch.utils.data.IterableDataset):
    """The run's training dataset, logging every (domain id, sequence id) it yields."""

    def __init__(self, ds: Any, log: list[tuple[int, int]]) -> None:
        self.ds, self.log = ds, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["ds"], name)

    def __iter__(self):
        for batch in self.ds:
            self.log.extend(zip(batch["domain"].tolist(), batch["seq_index"].tolist(), strict=True))
            yield batch


def _recording(logs: dict[str, list[tuple[int, int]]]):
    real = train_mod._datasets

    def datasets(config, spec, domains, info, continue_from=None, micro=None):
        ds, val = real(config, spec, domains, info, continue_from, micro)
        return _Recorder(ds, logs.setdefault(spec.run_id, [])), val

    return datasets


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An output folder with two finished target runs (autoscale from a mixture plan, uniform), their
    data logs, the plan in fits/ and the config recorded, as `autoscale-data run` leaves it."""
    root = tmp_path_factory.mktemp("extend")
    stores = tiny_stores(root / "stores")
    cfg = config_from_dict(tiny_config(stores, checkpoint_every=4))
    domains = inspect_domains(cfg)
    out = root / "out"
    specs = [target_spec(cfg, domains, "autoscale", _PLAN.weights_for_budget(cfg.target.budget), 0),
             target_spec(cfg, domains, "uniform", {"a": 0.5, "b": 0.5}, 0)]
    logs: dict[str, list[tuple[int, int]]] = {}
    with Ledger(out) as ledger, pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_mod, "_datasets", _recording(logs))
        for s in specs:
            ledger.register(s)
            train_mod.train_run(cfg, s, domains, ledger.run_dir(s.run_id), progress=False)
    (out / "fits").mkdir()
    _PLAN.save(out / "fits" / "mixture_plan.json")
    (out / "plan.json").write_text(json.dumps({"proxies": {}, "targets": [s.to_json() for s in specs]}))
    check_config(out, config_to_dict(cfg), allow_change=False)
    return {"out": out, "cfg": cfg, "domains": domains, "specs": {s.label: s for s in specs}, "logs": logs}


def _copy(template: dict[str, Any], dest: Path) -> Path:
    shutil.copytree(template["out"], dest)
    return dest


def _final_model(run_dir: Path) -> dict[str, torch.Tensor]:
    ckpt = run_dir / "final_ckpt"
    tag = json.loads((ckpt / "latest.json").read_text())["tag"]
    return torch.load(ckpt / f"{tag}.pt", map_location="cpu", weights_only=False)["model"]


def test_target_runs_keep_their_final_checkpoint_and_proxies_do_not(template: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    out, cfg, domains = template["out"], template["cfg"], template["domains"]
    for spec in template["specs"].values():
        run_dir = out / "runs" / spec.run_id
        assert not (run_dir / "ckpt").exists() and (run_dir / "result.json").exists()
        state = json.loads((run_dir / "final_ckpt" / "final_state.json").read_text())
        assert state["steps"] == 64 and state["dataset"]["cursor"] == spec.total_sequences == 512
        assert {d: n * 32 for d, n in state["dataset"]["domain_counts"].items()} == spec.tokens
    proxy = ddo_proxy_specs(cfg, domains, 4096)[0]  # 16 steps
    train_mod.train_run(cfg, proxy, domains, tmp_path / "proxy", progress=False)
    assert not (tmp_path / "proxy" / "ckpt").exists() and not (tmp_path / "proxy" / "final_ckpt").exists()
    off = dataclasses.replace(cfg, target=dataclasses.replace(cfg.target, keep_checkpoints=False))
    train_mod.train_run(off, dataclasses.replace(proxy, kind="target"), domains, tmp_path / "off", progress=False)
    assert not (tmp_path / "off" / "ckpt").exists() and not (tmp_path / "off" / "final_ckpt").exists()
    with pytest.raises(ValueError, match=r"target.keep_checkpoints = 'yes'"):
        config_from_dict(tiny_config(tmp_path, target={"keep_checkpoints": "yes"}))


def test_a_run_killed_after_keeping_its_checkpoint_only_writes_its_result(template: dict[str, Any], tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = _copy(template, tmp_path / "out")
    spec = template["specs"]["uniform"]
    run_dir = out / "runs" / spec.run_id
    before = json.loads((run_dir / "result.json").read_text())
    (run_dir / "result.json").unlink()  # the kill landed between final_ckpt/ and result.json
    monkeypatch.setattr(train_mod._Trainer, "_micro_step", lambda *a: pytest.fail("trained again"))
    again = train_mod.train_run(template["cfg"], spec, template["domains"], run_dir, progress=False).to_json()
    assert again["tokens"] == before["tokens"] and again["curve"] == before["curve"]
    assert again["final_train_loss"] == before["final_train_loss"] and (run_dir / "final_ckpt").is_dir()


def test_extension_continues_the_data_stream_and_the_model(template: dict[str, Any], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = _copy(template, tmp_path / "out")
    cfg, domains = template["cfg"], template["domains"]
    parent = template["specs"]["autoscale"]
    logs: dict[str, list[tuple[int, int]]] = {}
    monkeypatch.setattr(train_mod, "_datasets", _recording(logs))
    started: dict[str, Any] = {}
    real_start = train_mod._Trainer._start_from_parent

    def start(self) -> None:
        real_start(self)
        started["model"] = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        started["lr"] = [g["lr"] for g in self.optimizer.param_groups]

    monkeypatch.setattr(train_mod._Trainer, "_start_from_parent", start)
    result = MixtureRunner(cfg, out, log=lambda _: None, progress=False).extend("autoscale", _EXTENDED).to_json()

    spec = RunSpec.from_json(json.loads((out / "runs" / result["run_id"] / "spec.json").read_text()))
    assert spec.kind == "extension" and spec.run_id != parent.run_id and spec.scale == _EXTENDED
    assert spec.extension.parent == parent.run_id and spec.extension.mix == "plan"
    assert result["extension"]["parent"] == parent.run_id and result["extension"]["new_tokens"] == 8192
    # the model starts from the parent's saved weights, at the re-warm-up's first learning rate
    saved = _final_model(out / "runs" / parent.run_id)
    assert saved.keys() == started["model"].keys()
    assert all(torch.equal(saved[k], started["model"][k]) for k in saved)
    factor = extension_lr_lambda(64, 32, LRSchedule().resolved(0.1), 0.0)
    assert started["lr"] == pytest.approx([cfg.optimizer.lr * factor(64)] * 2) and factor(64) == pytest.approx(1 / 3)
    # the data: the parent's consumed prefix, then the dataset's own continuation at the plan's mix for the new budget
    state = json.loads((out / "runs" / parent.run_id / "final_ckpt" / "final_state.json").read_text())["dataset"]
    weights = _PLAN.weights_for_budget(_EXTENDED)
    assert spec.extension.weights == pytest.approx(weights)
    old = ScaleAwareMixtureDataset(domains.paths, parent.weights, parent.total_tokens, 32, 0)
    new = ScaleAwareMixtureDataset(domains.paths, weights, _EXTENDED, 32, 0, continue_from=state)
    prefix = [(s["domain"], s["seq_index"]) for s in old]
    continuation = [(s["domain"], s["seq_index"]) for s in new]
    assert template["logs"][parent.run_id] == prefix and logs[spec.run_id] == continuation
    trained = prefix + continuation
    assert len(trained) == 768 and len(set(trained)) == 768  # nothing repeated, nothing skipped
    names = new.domain_names
    counts = Counter(names[d] for d, _ in trained)
    assert dict(counts) == new.sequences_per_domain == spec.sequences
    assert result["tokens"] == {d: n * 32 for d, n in counts.items()} == spec.tokens
    assert spec.sequences != parent.sequences and new.sequences_per_domain["b"] > parent.sequences["b"]
    # the curve goes on from the parent's: global steps and cumulative tokens per domain
    first, last = result["curve"][0], result["curve"][-1]
    assert first["step"] > 64 and last["step"] == 96 and last["tokens"] == _EXTENDED
    assert last["domain_tokens"] == result["tokens"] and result["steps"] == 96
    # and extended again (by its run id), still at the plan's mix, still nothing repeated
    again = MixtureRunner(cfg, out, log=lambda _: None, progress=False).extend(spec.run_id, 32768).to_json()
    assert again["extension"]["parent"] == spec.run_id and again["extension"]["mix"] == "plan"
    third = logs[again["run_id"]]
    assert len(third) == 256 and len(set(trained + third)) == 1024 and again["total_tokens"] == 32768
    # the report lists both extensions beside their parents and counts none of them as an earlier config's
    report = build_report(out)
    assert report.stale_runs == 0 and set(report.targets) == {"autoscale", "uniform"}
    assert [(e.parent, e.parent_tokens, e.tokens) for e in report.extensions] == [
        (parent.run_id, 16384, _EXTENDED), (spec.run_id, _EXTENDED, 32768)]
    first_ext = report.extensions[0]
    assert first_ext.objective_value == pytest.approx(result["mean_loss"]) and first_ext.lr == "rewarm_decay"
    assert first_ext.parent_value == pytest.approx(report.targets["autoscale"].objective_value.mean)
    assert Report.from_json(report.to_json()) == report
    assert "## Extended target runs" in _markdown(report) and "earlier config" not in _markdown(report)


def test_bad_extensions_name_the_value(template: dict[str, Any], tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    out = _copy(template, tmp_path / "out")
    runner = MixtureRunner(template["cfg"], out, log=lambda _: None, progress=False)
    with pytest.raises(ValueError, match=r"unknown run 'nope'.*autoscale \(seed 0\), uniform \(seed 0\)"):
        runner.extend("nope", _EXTENDED)
    with pytest.raises(ValueError, match=r"budget 16384 is not above .*16,384 tokens"):
        runner.extend("uniform", 16384)
    with pytest.raises(ValueError, match=r"budget 16600 is not above"):  # less than one more global batch
        runner.extend("uniform", 16600)
    with pytest.raises(ValueError, match=r"extend budget must be a positive integer, got 24576.0"):
        runner.extend("uniform", 24576.0)
    with pytest.raises(ValueError, match=r"no run with seed 3: its seeds are \[0\]"):
        runner.extend("uniform", _EXTENDED, seed=3)
    with pytest.raises(ValueError, match=r"lr schedule 'cosine'"):
        runner.extend("uniform", _EXTENDED, lr_schedule="cosine")
    shutil.rmtree(out / "runs" / template["specs"]["uniform"].run_id / "final_ckpt")
    with pytest.raises(FileNotFoundError, match=r"kept no final checkpoint.*set target.keep_checkpoints: true"):
        runner.extend("uniform", _EXTENDED)
    assert main(["extend", str(out), "--run", "nope", "--budget", str(_EXTENDED)]) == 2
    assert "unknown run 'nope'" in capsys.readouterr().err
    assert main(["extend", str(tmp_path / "empty"), "--run", "uniform", "--budget", "1"]) == 2
    assert "not a runner output folder" in capsys.readouterr().err
    assert len(Ledger(out, lock=False).records()) == 2  # nothing but the two target runs was registered


def test_a_killed_extension_resumes_on_rerun(template: dict[str, Any], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture) -> None:
    cfg = template["cfg"]
    local = dataclasses.replace(cfg, executor=dataclasses.replace(cfg.executor, max_parallel=2))  # worker processes
    full = MixtureRunner(local, _copy(template, tmp_path / "full"), log=lambda _: None,
                         progress=False).extend("uniform", _EXTENDED).to_json()
    assert full["resumed_at"] == [] and full["extension"]["mix"] == "same"
    assert Ledger(tmp_path / "full", lock=False).records()[full["run_id"]].executor == "local"
    out = _copy(template, tmp_path / "cut")
    with dies_after_checkpoints(monkeypatch, 2):  # the process dies right after the extension's second checkpoint
        MixtureRunner(cfg, out, log=lambda _: None, progress=False).extend("uniform", _EXTENDED)
    run_dir = out / "runs" / full["run_id"]  # the same content-hash id
    assert json.loads((run_dir / "ckpt" / "latest.json").read_text())["step"] == 8
    assert not (run_dir / "result.json").exists()
    assert main(["extend", str(out), "--run", "uniform", "--budget", str(_EXTENDED), "--no-progress"]) == 0
    assert full["run_id"] in capsys.readouterr().out
    resumed = json.loads((run_dir / "result.json").read_text())
    assert resumed["resumed_at"] == [8] and resumed["tokens"] == full["tokens"]
    for a, b in zip(full["curve"], resumed["curve"], strict=True):
        assert a["tokens"] == b["tokens"] and a["domain_tokens"] == b["domain_tokens"]
        for d in a["losses"]:
            assert b["losses"][d] == pytest.approx(a["losses"][d], abs=1e-5)
    # a second rerun reuses the finished extension
    again = MixtureRunner(cfg, out, log=lambda _: None, progress=False).extend("uniform", _EXTENDED).to_json()
    assert again == resumed


def test_keep_checkpoints_is_no_config_change(tmp_path: Path) -> None:
    from autoscale_data.runner.experiment import config_changes

    on = config_to_dict(config_from_dict(tiny_config(tmp_path)))
    off = config_to_dict(config_from_dict(tiny_config(tmp_path, target={"keep_checkpoints": False})))
    older = json.loads(json.dumps(on))
    del older["target"]["keep_checkpoints"]  # a folder run before the setting existed
    assert on["target"]["keep_checkpoints"] is True
    assert config_changes(on, off) == [] and config_changes(older, on) == []
    assert config_changes(on, {**on, "target": {**on["target"], "budget": 1}}) == ["target.budget: 16384 -> 1"]


def test_an_anytime_run_extends_along_its_plan_path(template: dict[str, Any], tmp_path: Path) -> None:
    cfg, domains = template["cfg"], template["domains"]
    out = tmp_path / "out"
    parent = target_spec(cfg, domains, "autoscale_anytime", None, 0, plan=_PLAN)
    with Ledger(out) as ledger:
        ledger.register(parent)
        train_mod.train_run(cfg, parent, domains, ledger.run_dir(parent.run_id), progress=False)
    result = MixtureRunner(cfg, out, log=lambda _: None, progress=False).extend(parent.run_id, _EXTENDED).to_json()  # by id
    spec = RunSpec.from_json(json.loads((out / "runs" / result["run_id"] / "spec.json").read_text()))
    assert spec.schedule == "anytime" and spec.plan == parent.plan and spec.extension.mix == "anytime"
    whole = ScaleAwareMixtureDataset(domains.paths, _PLAN, _EXTENDED, 32, 0, schedule="anytime")
    assert spec.sequences == whole.sequences_per_domain != parent.sequences  # where a whole anytime run would end
    assert result["tokens"] == spec.tokens and result["curve"][-1]["domain_tokens"] == spec.tokens

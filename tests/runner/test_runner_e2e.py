"""End to end: a tiny plan (the demo's synthetic stores, tiny GPT, CPU) produces a complete report; a
runner killed with SIGKILL mid-plan resumes without losing or retraining runs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import kill_runner_when, tiny_config

from autoscale_data.cli import main
from autoscale_data.demo import prepare_synthetic_stores
from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import Ledger
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.records import LedgerEvent
from autoscale_data.runner.reporting.report_types import Report

pytestmark = pytest.mark.slow


def _demo_config(tmp_path: Path, **overrides) -> dict:
    prepare_synthetic_stores(tmp_path / "data" / "demo", domains=["encyclopedia", "web"], bytes_per_domain=60_000,
                             holdout_every=10)
    return tiny_config("data/demo", **overrides)


@pytest.mark.timeout(300)
def test_tiny_plan_writes_a_complete_report(tmp_path: Path) -> None:
    raw = _demo_config(tmp_path, seeds=[0, 1], target={"baselines": ["uniform", "natural", "ddo_n2",
                                                                     "autoscale_anytime"]})
    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps(raw))
    lines: list[str] = []
    from autoscale_data.runner.config import load_config

    runner = MixtureRunner(load_config(cfg_path), tmp_path / "out", log=lines.append, progress=False)
    report = runner.run()
    out = tmp_path / "out"
    for name in ("report.json", "report.md", "plots/weights.png", "plots/target_losses.png", "plots/curves.png",
                 "plots/train_domains.png",
                 "fits/projection.json", "fits/ddo_4096.json", "fits/ddo_8192.json", "fits/bootstrap_8192.json"):
        assert (out / name).stat().st_size > 0, name
    on_disk = json.loads((out / "report.json").read_text())
    assert Report.from_json(on_disk).to_json() == on_disk == report.to_json()  # a real run's report.json reads back
    assert set(report.targets) == {"autoscale", "uniform", "natural", "ddo_n2", "autoscale_anytime"}
    train = report.targets["autoscale"].train_curve  # per-domain training loss along the target run
    assert len(train.tokens) == 4 and set(train.losses) == set(report.domains)
    assert set(report.tokens_saved) == {"uniform", "natural", "ddo_n2", "autoscale_anytime"}
    plan = json.loads((out / "fits" / "mixture_plan.json").read_text())
    anytime = [t for t in json.loads((out / "plan.json").read_text())["targets"] if t["label"] == "autoscale_anytime"]
    assert [t["seed"] for t in anytime] == [0] and anytime[0]["schedule"] == "anytime" and anytime[0]["plan"] == plan
    fixed_ids = {t["run_id"] for t in json.loads((out / "plan.json").read_text())["targets"]} - {anytime[0]["run_id"]}
    assert all("schedule" not in json.loads((out / "runs" / i / "spec.json").read_text()) for i in fixed_ids)
    comparison = report.anytime_vs_fixed
    assert comparison.available and len(comparison.points) == 4  # every evaluation point of both runs
    for point in comparison.points:  # the anytime run saw about the plan's optimum at every budget
        assert point.other_shares == pytest.approx(point.plan_shares, abs=2 * 8 * 32 / point.tokens)
    for s in report.tokens_saved.values():
        assert s.status in ("reached", "at_first_eval", "not_reached")
        assert (s.saved_fraction is None) == (s.status == "not_reached")
    assert report.bootstrap["8192"].available  # two seeds per point: the bootstrap has a verdict
    assert isinstance(report.bootstrap["8192"].distinguishable_from_base, bool)
    assert report.proxies["4096"]["base"].objective_value.n == 2  # error bars over seeds
    weights = report.targets["autoscale"].weights
    assert weights == pytest.approx(report.projection.weights, abs=2 / (16384 // 32))
    md = (out / "report.md").read_text()
    assert "Tokens saved" in md and "Bootstrap" in md and "data" in md and "## Anytime vs fixed schedule" in md
    assert "- Identifiability at 4,096: NOT identified by the data" in md  # the 2m+1 design: 3 points per law
    target_ids = {t["run_id"] for t in json.loads((out / "plan.json").read_text())["targets"]}
    assert sum(" done " in line for line in lines) == 2 * 2 * 5 + len(target_ids)  # equal mixes train once
    # a second call trains nothing and reproduces the report
    again: list[str] = []
    MixtureRunner(load_config(cfg_path), out, log=again.append, progress=False).run()
    assert not any(" done " in line for line in again)
    assert main(["report", str(out)]) == 0


@pytest.mark.timeout(300)
def test_three_budgets_end_to_end_backtest_in_projection_json_and_the_report(tmp_path: Path) -> None:
    raw = _demo_config(tmp_path, ddo={"budgets": [4096, 8192], "extra_budget": "half"},
                       target={"baselines": ["ddo_n2"]})
    cfg_path = tmp_path / "three.json"
    cfg_path.write_text(json.dumps(raw))
    from autoscale_data.runner.config import load_config

    config = load_config(cfg_path)
    assert config.ddo.budgets == (2048, 4096, 8192)
    out = tmp_path / "out"
    lines: list[str] = []
    report = MixtureRunner(config, out, log=lines.append, progress=False).run()
    assert json.loads((out / "config.json").read_text())["ddo"]["budgets"] == [2048, 4096, 8192]
    for n in (2048, 4096, 8192):
        for name in (f"fits/ddo_{n}.json", f"fits/bootstrap_{n}.json", f"fits/runs_{n}.csv"):
            assert (out / name).stat().st_size > 0, name
    selection = json.loads((out / "fits" / "projection.json").read_text())["selection"]
    assert selection["rule"] == "backtest" and selection["held_back_tokens"] == pytest.approx(8192, rel=0.1)
    assert "objective" in selection["backtest"]["observed"] and selection["noise_source"]
    assert report.projection.selection.to_json() == selection and report.projection.method == selection["chosen"]
    assert set(report.ddo) == {"2048", "4096", "8192"}
    if selection["chosen"] == "observed":  # DDO(N2) as is: the ddo_n2 baseline trains the same mix
        assert report.projection.weights == pytest.approx(report.ddo["8192"].weights, abs=1e-9)
    md = (out / "report.md").read_text()
    assert "### Backtest at 8," in md and f"Chosen: **{selection['chosen']}**" in md
    assert f"{selection['backtest']['observed']['objective']:.4f}" in md
    assert any(line.strip().startswith("backtest at 8,") for line in lines)
    on_disk = json.loads((out / "report.json").read_text())
    assert Report.from_json(on_disk).to_json() == on_disk == report.to_json()
    target_ids = {t["run_id"] for t in json.loads((out / "plan.json").read_text())["targets"]}
    assert sum(" done " in line for line in lines) == 3 * 5 + len(target_ids)
    again: list[str] = []  # resumes: nothing trains twice, the same report
    assert MixtureRunner(load_config(cfg_path), out, log=again.append, progress=False).run().to_json() == \
        report.to_json()
    assert not any(" done " in line for line in again)


@pytest.mark.timeout(300)
def test_a_two_budget_folder_gains_n0_and_trains_only_its_proxies(tmp_path: Path) -> None:
    from autoscale_data.runner.experiment import ConfigChangedError

    raw = _demo_config(tmp_path, target={"baselines": ["ddo_n2"]})
    out = tmp_path / "out"
    first: list[str] = []
    two = MixtureRunner(config_from_dict(raw, tmp_path), out, log=first.append, progress=False).run()
    assert two.projection.selection.rule == "gain" and "Backtest" not in (out / "report.md").read_text()
    kept = {e.run_id for e in _done_events(out)}
    three = config_from_dict({**raw, "ddo": {**raw["ddo"], "extra_budget": "half"}}, tmp_path)
    with pytest.raises(ConfigChangedError, match=r"ddo.budgets: \[4096, 8192\] -> \[2048, 4096, 8192\]"):
        MixtureRunner(three, out, progress=False).run()
    lines: list[str] = []
    report = MixtureRunner(three, out, log=lines.append, progress=False, allow_config_change=True).run()
    trained = {e.run_id for e in _done_events(out)} - kept
    n0 = {s.run_id for s in MixtureRunner(three, out, progress=False).proxy_specs()[2048]}
    assert n0 <= trained and len(n0) == 5  # the N1 and N2 proxies are reused, never trained again
    assert trained - n0 <= {t["run_id"] for t in json.loads((out / "plan.json").read_text())["targets"]
                            if t["label"] == "autoscale"}  # only a moved AutoScale mix trains again
    assert report.projection.selection.rule == "backtest" and "### Backtest at 8," in (out / "report.md").read_text()


def _done_events(out: Path) -> list[LedgerEvent]:
    return [e for e in Ledger(out, lock=False).events() if e.status == "done"]


_EXECUTORS = {
    "inprocess": {},
    "local2": {"kind": "local", "max_parallel": 2},
    "submitit-local2": {"kind": "slurm", "max_parallel": 2, "slurm": {"cluster": "local", "time_min": 20}},
    "ray2": {"kind": "ray", "max_parallel": 2},
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(_EXECUTORS))
def test_sigkill_mid_plan_then_rerun_keeps_every_finished_run(tmp_path: Path, name: str,
                                                              request: pytest.FixtureRequest) -> None:
    executor = dict(_EXECUTORS[name])
    if executor.get("kind") == "slurm":
        pytest.importorskip("submitit")
    if executor.get("kind") == "ray":  # a Ray cluster that outlives the killed runner, as a real one would
        executor["ray"] = {"address": request.getfixturevalue("ray_address")}
    raw = _demo_config(tmp_path, target={"baselines": ["uniform"]}, checkpoint_every=2, executor=executor)
    cfg_path = tmp_path / "kill.json"
    cfg_path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autoscale_data.cli", "run", str(cfg_path), "--out", str(out), "--no-progress"]
    env = kill_runner_when(cmd, lambda: (out / "ledger.jsonl").exists() and len(_done_events(out)) >= 3,
                           settle=0.7)  # land somewhere inside the next run
    finished = {e.run_id: hashlib.sha256((out / "runs" / e.run_id / "result.json").read_bytes()).hexdigest()
                for e in _done_events(out)}
    assert len(finished) >= 3
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=500)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    events = list(Ledger(out, lock=False).events())
    for run_id, digest in finished.items():  # kept byte for byte, never trained again
        assert hashlib.sha256((out / "runs" / run_id / "result.json").read_bytes()).hexdigest() == digest
        assert not any(e.run_id == run_id and e.status == "running" for e in events
                       if e.time > min(d.time for d in events if d.run_id == run_id and d.status == "done"))
    done = [e.run_id for e in events if e.status == "done"]
    assert len(done) == len(set(done))  # every run finished exactly once
    records = Ledger(out, lock=False).records()
    assert all(r.status == "done" for r in records.values())
    assert all(records[run_id].attempts == 1 for run_id in finished)  # submitted once, never again
    assert all(r.attempts <= 2 for r in records.values())  # the interrupted ones: re-attached or resubmitted once
    if executor.get("kind") == "slurm":  # its jobs outlived the runner: the rerun waited for them
        assert "re-attached to slurm job" in rerun.stdout
    plan = json.loads((out / "plan.json").read_text())
    planned = {r["run_id"] for runs in plan["proxies"].values() for r in runs} | {r["run_id"] for r in plan["targets"]}
    assert len(planned) >= 2 * 5 + 1  # proxies at two budgets + autoscale + uniform (one run if their mixes agree)
    assert set(records) == planned
    assert Report.load(out).targets.keys() == {"autoscale", "uniform"}


def test_run_refuses_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg_path = tmp_path / "c.json"
    cfg_path.write_text(json.dumps(tiny_config("missing")))
    assert main(["run", str(cfg_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "autoscale-data prepare" in err and "autoscale-data demo --stores" in err


def test_old_data_section_is_refused_with_the_way_to_build_the_stores(tmp_path: Path) -> None:
    raw = {**tiny_config("missing"), "data": {"synthetic": {"domains": ["web", "code"]}}}
    with pytest.raises(ValueError, match=r"no longer read.*autoscale-data demo --stores DIR"):
        config_from_dict(raw)


@pytest.mark.timeout(120)
def test_demo_stores_verb_builds_what_the_tiny_example_reads(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "stores"
    assert main(["demo", "--stores", str(out), "--domains", "web,code", "--bytes-per-domain", "20000"]) == 0
    assert "ready under" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["code", "web"]
    assert (tmp_path / "stores.corpus" / "web.jsonl").is_file()
    example = tiny_config(str(out))
    assert MixtureRunner(config_from_dict(example), tmp_path / "o").domains.names == ("code", "web")

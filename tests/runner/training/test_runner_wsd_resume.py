"""``ddo.schedule: wsd`` trains through the ledger: one mix's trunk stretches and branches, killed in the middle of
a trunk stretch or of a branch, resume on the rerun from their own checkpoints with nothing finished trained
again, and end with the losses of an uninterrupted plan; the trunk keeps its final checkpoint, a branch does
not."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import dies_after_checkpoints, tiny_config, tiny_stores

from autoscale_data.runner.config import config_from_dict
from autoscale_data.runner.ledger import DONE, Ledger
from autoscale_data.runner.pipeline import MixtureRunner
from autoscale_data.runner.planning.specs import RunSpec
from autoscale_data.runner.planning.wsd import BRANCH, TRUNK

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_stores(tmp_path_factory.mktemp("wsd-resume") / "stores")


def _runner(stores: Path, out: Path) -> MixtureRunner:
    cfg = config_from_dict(tiny_config(stores, ddo={"schedule": "wsd", "budgets": [4096, 8192]}, checkpoint_every=2))
    return MixtureRunner(cfg, out, log=lambda _: None, progress=False)


def _base_waves(runner: MixtureRunner) -> list[list[RunSpec]]:
    """The waves of the base mix alone (its trunk stretches and its two branches): enough for the ledger's part."""
    plan = runner.wsd_plan()
    assert plan is not None
    return [[s for s in wave if s.label == "base"] for wave in plan.waves]


def _train(runner: MixtureRunner) -> None:
    for wave in _base_waves(runner):
        runner.train_runs(wave)


def _dies_in(monkeypatch: pytest.MonkeyPatch, role: str) -> Any:
    """The trainer stops (raises :class:`Stopped`, as a process killed there would) right after the first checkpoint
    it saves in the middle of a run of WSD ``role``; yields the id of that run."""
    return dies_after_checkpoints(monkeypatch, when=lambda trainer, state: trainer.spec.wsd.role == role
                                  and state.step < trainer.steps)


def _done(out: Path) -> Counter[str]:
    return Counter(e.run_id for e in Ledger(out, lock=False).events() if e.status == DONE)


def _results(out: Path, runner: MixtureRunner) -> dict[str, dict[str, Any]]:
    return {s.run_id: json.loads((out / "runs" / s.run_id / "result.json").read_text())
            for wave in _base_waves(runner) for s in wave}


@pytest.fixture(scope="module")
def uninterrupted(stores: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("wsd-full") / "out"
    runner = _runner(stores, out)
    _train(runner)
    for s in _base_waves(runner)[0] + _base_waves(runner)[1]:
        kept = (out / "runs" / s.run_id / "final_ckpt").is_dir()
        assert kept == (s.kind == TRUNK), s.name  # the trunk keeps its model for what follows; a branch does not
    return _results(out, runner)


@pytest.mark.parametrize("role", [TRUNK, BRANCH])
def test_a_kill_in_the_trunk_or_a_branch_resumes_with_nothing_retrained(stores: Path, tmp_path: Path, role: str,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        uninterrupted: dict[str, dict[str, Any]]) -> None:
    out = tmp_path / "out"
    runner = _runner(stores, out)
    with _dies_in(monkeypatch, role) as killed:
        _train(runner)
    (victim,) = killed
    spec = json.loads((out / "runs" / victim / "spec.json").read_text())
    assert spec["kind"] == (TRUNK if role == TRUNK else "proxy")
    assert not (out / "runs" / victim / "result.json").exists()
    before = _done(out)
    finished = {run_id: (out / "runs" / run_id / "result.json").read_text() for run_id in before}
    _train(_runner(stores, out))  # the rerun
    after = _done(out)
    assert all(after[run_id] == 1 for run_id in after), after  # every run trained to its end once
    for run_id, text in finished.items():  # what had finished is untouched
        assert (out / "runs" / run_id / "result.json").read_text() == text
    results = _results(out, runner)
    assert results[victim]["resumed_at"] == [2]  # from its own first checkpoint
    assert all(r["resumed_at"] == [] for run_id, r in results.items() if run_id != victim)
    assert results.keys() == uninterrupted.keys()
    for run_id, r in results.items():  # the same runs, the same losses as the uninterrupted plan
        assert r["tokens"] == uninterrupted[run_id]["tokens"]
        assert r["mean_loss"] == pytest.approx(uninterrupted[run_id]["mean_loss"], abs=1e-5)

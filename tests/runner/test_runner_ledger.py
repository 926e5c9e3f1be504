"""Ledger: statuses fold from an append-only log; torn lines, stale events and locks are handled."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscale_data._io import atomic_write_json
from autoscale_data.runner.ledger import DONE, FAILED, PENDING, RUNNING, Ledger


class _Spec:
    def __init__(self, run_id: str) -> None:
        self.run_id, self.name = run_id, f"run {run_id}"

    def to_json(self) -> dict:
        return {"run_id": self.run_id}


def _finish(ledger: Ledger, run_id: str) -> None:
    atomic_write_json(ledger.result_path(run_id), {"run_id": run_id, "mean_loss": 1.0})


def test_status_lifecycle(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.register(_Spec("r1"))
        ledger.register(_Spec("r1"))  # idempotent
        assert ledger.records()["r1"].status == PENDING
        ledger.mark_running("r1", 1)
        assert ledger.records()["r1"].status == RUNNING
        with pytest.raises(ValueError, match="no readable result"):
            ledger.mark_done("r1", {})
        _finish(ledger, "r1")
        ledger.mark_done("r1", {"mean_loss": 1.0})
        assert ledger.records()["r1"].status == DONE
        ledger.register(_Spec("r2"))
        ledger.mark_running("r2", 1)
        ledger.mark_failed("r2", "diverged: loss nan", terminal=True)
        rec = ledger.records()["r2"]
        assert rec.status == FAILED and rec.terminal and "nan" in rec.reason
        ledger.mark_failed("r2", "crashed", terminal=False)
        assert not ledger.records()["r2"].terminal
    assert [e.status for e in Ledger(tmp_path, lock=False).events() if e.run_id == "r1"] == \
        [PENDING, RUNNING, DONE]


def test_torn_last_line_is_skipped_and_terminated(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.register(_Spec("r1"))
        with open(ledger.path, "ab") as fh:
            fh.write(b'{"run_id": "r1", "status": "do')  # a crash in the middle of a write
        assert ledger.records()["r1"].status == PENDING
        ledger.mark_running("r1", 1)
        assert ledger.records()["r1"].status == RUNNING
        assert ledger.path.read_bytes().count(b"\n") == 3


def test_result_on_disk_wins_over_a_stale_running_event(tmp_path: Path) -> None:
    with Ledger(tmp_path) as ledger:
        ledger.register(_Spec("r1"))
        ledger.mark_running("r1", 1)
        _finish(ledger, "r1")  # the trainer finished; the runner was killed before logging it
        assert ledger.records()["r1"].status == DONE
        ledger.result_path("r1").write_text("{garbage")  # an unreadable result is not a result
        assert ledger.records()["r1"].status == RUNNING


def test_one_runner_per_directory(tmp_path: Path) -> None:
    with Ledger(tmp_path):
        with pytest.raises(ValueError, match="another runner"):
            Ledger(tmp_path)
        Ledger(tmp_path, lock=False)  # read-only use is fine
    Ledger(tmp_path).close()


def test_specs_reads_every_run_folders_spec_and_skips_what_is_not_one(tmp_path: Path) -> None:
    from runner_helpers import fake_run

    for run_id in ("r2", "r1"):
        fake_run(tmp_path, run_id, "uniform", 0, [3.0, 2.0])
    (tmp_path / "runs" / "notes.txt").write_text("a stray file")
    (tmp_path / "runs" / "r3").mkdir()  # a run folder its spec has not reached yet
    assert [s.run_id for s in Ledger(tmp_path, lock=False).specs()] == ["r1", "r2"]

"""An output folder written before the records were typed still loads: its runs, fits and report.

``data/out_before_records`` is a tiny experiment (two domains, DDO at 4096 and 8192 tokens, targets
autoscale / uniform / autoscale_anytime) written by the runner before :mod:`autoscale_data._records`
existed, with its checkpoints, logs and plots left out (and its JSON written compactly).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoscale_data.runner import layout
from autoscale_data.runner.reporting.report import build_report
from autoscale_data.runner.reporting.report_types import Report

OLD = Path(__file__).parent / "data" / "out_before_records"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(OLD, out)
    return out


def test_the_old_report_json_reads_back_unchanged(old: Path) -> None:
    on_disk = json.loads((old / "report.json").read_text())
    assert Report.from_json(on_disk).to_json() == on_disk


def test_the_report_regenerates_from_the_old_runs_and_fits(old: Path) -> None:
    on_disk = json.loads((old / "report.json").read_text())
    again = build_report(old).to_json()
    for key in ("out_dir", "plots"):  # where it was written, and the plots only write_report draws
        on_disk.pop(key), again.pop(key, None)
    assert again == on_disk


def test_every_old_result_json_reads_as_a_run_result_and_writes_back_the_same() -> None:
    from autoscale_data.runner.records import RunResult

    paths = sorted(OLD.glob("runs/*/result.json"))
    assert len(paths) >= 20
    for path in paths:
        on_disk = json.loads(path.read_text())
        result = RunResult.from_json(on_disk)
        assert result.to_json() == on_disk, path
        assert result.curve[-1].losses == result.losses and result.total_tokens == sum(result.tokens.values())


def test_every_old_spec_json_reads_as_a_run_spec_and_writes_back_the_same() -> None:
    from autoscale_data.runner.planning.specs import RunSpec

    paths = sorted(OLD.glob("runs/*/spec.json"))
    assert len(paths) >= 20
    for path in paths:
        on_disk = json.loads(path.read_text())
        assert RunSpec.from_json(on_disk).to_json() == on_disk, path
    anytime = [RunSpec.from_json(json.loads(p.read_text())) for p in paths]
    assert {s.schedule for s in anytime} == {"fixed", "anytime"}  # both shapes of the JSON are in the folder


@pytest.mark.parametrize(("pattern", "name"), [
    ("fits/ddo_*.json", layout.DDO), ("fits/bootstrap_*.json", layout.BOOTSTRAP),
    ("fits/projection.json", layout.PROJECTION), ("plan.json", layout.RUN_LIST), ("runs/*/job.json", layout.JOB),
    ("fits/repetition.json", layout.REPETITION), ("fits/methods.json", layout.METHODS_FILE),
    ("reference_losses.json", layout.REFERENCE_LOSSES)])
def test_every_old_file_reads_as_its_record_and_writes_back_the_same(pattern: str, name: str) -> None:
    from autoscale_data._records import from_json, to_json

    cls = layout.record_of(name)
    paths = sorted(OLD.glob(pattern))
    assert paths
    for path in paths:
        on_disk = json.loads(path.read_text())
        if layout.RECORDS[name].startswith("dict["):  # a mapping of records: {method: record}, {domain: record}
            assert to_json(from_json(dict[str, cls], on_disk)) == on_disk, path
        else:  # a record, or the union of a file's two shapes (a bootstrap that ran | why it did not)
            assert to_json(from_json(cls, on_disk)) == on_disk, path


def test_layout_names_the_record_of_every_json_file_and_each_reads_the_old_one() -> None:
    from autoscale_data._records import from_json
    from autoscale_data.runner import layout
    from autoscale_data.runner.experiment import load_folder_config

    for path in sorted(OLD.rglob("*.json")):
        kind = path.stem.split("_")[0] if path.stem.split("_")[-1].isdigit() else path.name
        assert kind in layout.RECORDS, f"{path.relative_to(OLD)} has no record in layout.RECORDS"
        obj = json.loads(path.read_text())
        spec = layout.RECORDS[kind]
        if kind == layout.CONFIG:
            assert load_folder_config(OLD).name == obj["name"]
        elif kind == layout.TARGET_MIXES_FILE:
            from_json(dict[str, dict[str, float]], obj)
        elif spec.startswith("dict[str, "):
            from_json(dict[str, layout.record_of(kind)], obj)
        else:
            from_json(layout.record_of(kind), obj)
    with pytest.raises(ValueError, match="plain mapping"):
        layout.record_of(layout.TARGET_MIXES_FILE)
    with pytest.raises(ValueError, match="not a JSON file"):
        layout.record_of("nothing.json")
    assert layout.record_of(layout.RESULT).__name__ == "RunResult"


def test_every_line_of_the_old_ledger_reads_as_its_event_and_writes_back_the_same() -> None:
    cls = layout.record_of(layout.LEDGER)
    lines = (OLD / layout.LEDGER).read_text().splitlines()
    assert len(lines) >= 40
    for line in lines:
        on_disk = json.loads(line)
        assert cls.from_json(on_disk).to_json() == on_disk, line


def test_the_old_fit_files_read_as_the_solvers_records() -> None:
    """The fit files are the solver's records (no runner copy): the DDO file's ``fit`` (parameters) and
    ``fit_mode`` keys are ``DDOResult.fit`` and ``DDOResult.fit_mode``; files without the keys later versions
    added still read; a bootstrap that could not run reads as its own record."""
    from dataclasses import replace

    from autoscale_data._records import from_json
    from autoscale_data.runner.records import BootstrapUnavailable, ProjectionFile
    from autoscale_data.solver import (
        BootstrapResult,
        DDOResult,
        JointFit,
        Observed,
        Projection,
        RobustProjection,
    )

    for path in sorted(OLD.glob("fits/ddo_*.json")):
        on_disk = json.loads(path.read_text())
        ddo = DDOResult.from_json(on_disk)
        assert ddo.fit_mode == on_disk["fit_mode"] == "default"
        assert ddo.fit == on_disk["fit"] == {d: {k: getattr(f, k) for k in "abc"} for d, f in ddo.fits.items()}
        assert ddo.domains == tuple(on_disk["weights"]) and ddo.identifiability is not None
        assert ddo.identifiability.summary == on_disk["identifiability"]["summary"]
        alloc = ddo.optimize_at(ddo.budget_tokens)
        assert alloc == pytest.approx(on_disk["allocation_tokens"], rel=1e-6)
        older = {k: v for k, v in on_disk.items() if k not in ("fit_mode", "identifiability")}  # before Nov 25
        assert DDOResult.from_json(older) == replace(ddo, identifiability=None)
    for path in sorted(OLD.glob("fits/bootstrap_*.json")):
        on_disk = json.loads(path.read_text())
        boot = from_json(layout.record_of(layout.BOOTSTRAP), on_disk)
        assert isinstance(boot, BootstrapResult) and boot.summary == on_disk["summary"] and boot.point is None
    failed = {"available": False, "reason": "too few runs"}
    assert from_json(layout.record_of(layout.BOOTSTRAP), failed) == BootstrapUnavailable("too few runs")
    assert BootstrapUnavailable("too few runs").to_json() == failed
    on_disk = json.loads((OLD / "fits" / layout.PROJECTION).read_text())
    proj = ProjectionFile.from_json(on_disk)
    assert isinstance(proj.geometric, Projection) and isinstance(proj.robust, RobustProjection)
    assert isinstance(proj.observed, Observed) and isinstance(proj.joint, JointFit)
    assert proj.joint.budget_tokens == on_disk["joint"]["budget_tokens"]
    assert proj.joint.n0 == {d: law["n0"] for d, law in on_disk["joint"]["law"].items()}
    assert proj.joint.weights_at(proj.joint.budget_tokens) == pytest.approx(on_disk["joint"]["weights"], rel=1e-6)
    assert proj.computed("joint") is proj.joint and proj.failure("joint") is None


def test_the_old_anytime_run_is_found_for_the_same_run_planned_now() -> None:
    """Its plan named the tokenizer as the stores did ("bytes"), and its id hashed that; the runner's plan names it
    by its fingerprint now: the run planned now (another id) finds the old one, and no other run."""
    from dataclasses import replace

    from autoscale_data.runner.planning.specs import RunSpec, recorded_anytime_spec, run_fingerprint

    recorded = [RunSpec.from_json(json.loads(p.read_text())) for p in sorted(OLD.glob("runs/*/spec.json"))]
    (old,) = [s for s in recorded if s.schedule == "anytime"]
    plan = replace(old.plan, tokenizer="0f" * 32)
    now = replace(old, plan=plan, run_id=run_fingerprint(replace(old, plan=plan)))
    assert now.run_id != old.run_id and recorded_anytime_spec(now, recorded) is old
    other = replace(now, run_id=run_fingerprint(replace(now, seed=old.seed + 1)))
    assert recorded_anytime_spec(other, recorded) is other

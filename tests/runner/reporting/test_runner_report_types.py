"""The report's declared shape: ``Report.to_json`` is report.json's content, ``from_json`` reads it back
(older files too), and a missing or bad key is a ``ValueError`` that names it.

The same round trip on a report.json of a real tiny run is in ``test_runner_e2e.py``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runner_helpers import fake_config, fake_domains, fake_run

from autoscale_data.runner.reporting.metrics import tokens_saved
from autoscale_data.runner.reporting.report import _markdown, write_report
from autoscale_data.runner.reporting.report_types import Curve, Report, TokensSaved
from autoscale_data.runner.reporting.summary import format_summary

_OLD_DDO = Path(__file__).parents[1] / "data" / "out_before_records" / "fits" / "ddo_4096.json"


def _folder(out: Path) -> Path:
    """A finished experiment written by hand: proxies at two budgets, fits, targets (two seeds, training
    losses), uniform, the anytime schedule and one failed run."""
    from autoscale_data.solver import MixturePlan

    for scale in (512, 1024):  # 1024 sorts before 512 as a string: from_json must keep the budget order
        for label, seed, values in (("base", 0, [5.0]), ("base", 1, [5.2]), ("a_up", 0, [4.9])):
            fake_run(out, f"p{scale}{label}{seed}", label, seed, values, kind="proxy", scale=scale)
    plan = MixturePlan.from_scales([(1000, {"a": 800.0, "b": 200.0}), (2000, {"a": 1000.0, "b": 1000.0})]).to_json()
    for run_id, label, seed, values in (("f0", "autoscale", 0, [5.0, 4.5, 4.0]), ("f1", "autoscale", 1, [5.2, 4.7, 4.2]),
                                        ("u0", "uniform", 0, [5.5, 5.0, 4.6]), ("u1", "uniform", 1, [5.4, 4.9, 4.1])):
        fake_run(out, run_id, label, seed, values, train_losses=True)
    for run_id, seed, values in (("a0", 0, [4.8, 4.4, 4.1]), ("a1", 1, [4.8, 4.6, 4.2])):
        fake_run(out, run_id, "autoscale_anytime", seed, values, "anytime", plan)
    broken = out / "runs" / "x0"
    broken.mkdir()
    (broken / "spec.json").write_text(json.dumps({"run_id": "x0", "kind": "target", "scale": 4000, "label": "natural",
                                                  "seed": 0, "sequences": {"a": 1, "b": 3}, "seq_len": 1,
                                                  "eval_points": 1}))
    (broken / "failure.json").write_text(json.dumps({"run_id": "x0", "reason": "out of memory"}))
    fits = out / "fits"
    fits.mkdir()
    for n, w in ((4096, 0.6), (16384, 0.55)):
        ddo = json.loads(_OLD_DDO.read_text().replace('"encyclopedia"', '"a"').replace('"web"', '"b"'))
        ddo.update(weights={"a": w, "b": 1 - w}, status="ok", aar=0.01, budget_tokens=float(n),
                   allocation_tokens={"a": w * n, "b": (1 - w) * n})  # a DDO result of the solver, its numbers set
        (fits / f"ddo_{n}.json").write_text(json.dumps(ddo))
        (fits / f"bootstrap_{n}.json").write_text(json.dumps({"available": False, "reason": "one seed"}))
    (fits / "projection.json").write_text(json.dumps({"budget_tokens": 4000.0, "weights": {"a": 0.5, "b": 0.5},
                                                      "method": "geometric", "t": 1.5}))
    (fits / "target_mixes.json").write_text(json.dumps({"autoscale": {"a": 0.5, "b": 0.5},
                                                        "uniform": {"a": 0.5, "b": 0.5}}))
    fake_config(out, ["uniform", "autoscale_anytime"], (512, 1024), name="typed")
    fake_domains(out)
    (out / "ledger.jsonl").write_text("")
    return out


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, Report]:
    out = _folder(tmp_path / "out")
    return out, write_report(out)


def test_report_json_is_to_json_and_reads_back(written: tuple[Path, Report]) -> None:
    out, report = written
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk == report.to_json()
    loaded = Report.load(out)
    assert loaded == report and loaded.to_json() == on_disk  # to_json -> from_json -> to_json: unchanged
    assert list(loaded.proxies) == ["512", "1024"]
    assert _markdown(loaded) == (out / "report.md").read_text()  # report.md renders from the file alone
    assert format_summary(loaded) == format_summary(report)
    # every part is there, typed
    assert report.failed_runs[0].reason == "out of memory" and report.missing_targets == []
    assert report.proxies["512"]["base"].objective_value.n == 2
    auto = report.targets["autoscale"]
    assert auto.train_curve.tokens == [1000, 2000, 3000] and auto.train_curve.losses["a"] == pytest.approx([5.2, 4.7, 4.2])
    assert report.anytime_vs_fixed.available and report.anytime_vs_fixed.points[0].plan_shares is not None
    assert report.vs_uniform["autoscale"].final["mean_loss"].n == 2
    assert set(report.tokens_saved) == {"uniform", "autoscale_anytime"}
    assert set(report.tokens_saved_per_seed["uniform"]) == {"0", "1"}
    assert report.throughput.runs == 12 and report.plots
    assert report.target_budget == 4000 and report.name == "typed"


def test_an_older_report_without_the_later_keys_reads(written: tuple[Path, Report]) -> None:
    _, report = written
    old = report.to_json()
    for key in ("stale_runs", "target_budget", "vs_uniform", "tokens_saved_per_seed", "anytime_vs_fixed", "plots",
                "verdicts"):
        del old[key]
    for t in old["targets"].values():
        del t["train_curve"]
    loaded = Report.from_json(old)
    assert loaded.stale_runs == 0 and loaded.vs_uniform == {} and loaded.anytime_vs_fixed is None
    assert loaded.targets["autoscale"].train_curve.tokens == [] and loaded.plots is None and loaded.verdicts == {}
    assert "Tokens saved" in format_summary(loaded) and "## Target runs" in _markdown(loaded)


@pytest.mark.parametrize(("path", "value", "match"), [
    (("targets",), None, "'targets' is missing"),
    (("targets", "autoscale", "losses"), None, "'targets.autoscale.losses' is missing"),
    (("targets", "autoscale", "mean_loss"), None, "'targets.autoscale.mean_loss' is missing"),
    (("proxies", "512", "base", "losses", "a", "std"), None, "'proxies.512.base.losses.a.std' is missing"),
    (("throughput", "runs"), "twelve", "'throughput.runs' = 'twelve' is invalid: expected an integer"),
    (("tokens_saved", "uniform", "status"), 3, "'tokens_saved.uniform.status' = 3 is invalid: expected a string"),
    (("anytime_vs_fixed", "points"), None, "'anytime_vs_fixed.points' is missing"),
    (("targets", "uniform", "curve", "mean"), [1.0, "x"], r"'targets.uniform.curve.mean\[1\]'"),
    (("domains",), "a,b", "'domains' = 'a,b' is invalid: expected a list"),
    (("failed_runs",), [{"run_id": "x0"}], r"'failed_runs\[0\].name' is missing"),
])
def test_a_missing_or_bad_key_is_named(written: tuple[Path, Report], path: tuple[str, ...], value, match: str) -> None:
    bad = copy.deepcopy(written[1].to_json())
    parent = bad
    for key in path[:-1]:
        parent = parent[key]
    if value is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    with pytest.raises(ValueError, match=match):
        Report.from_json(bad)


def test_bad_files_and_bad_budgets(written: tuple[Path, Report], tmp_path: Path) -> None:
    out, report = written
    with pytest.raises(ValueError, match="expected an object"):
        Report.from_json([report.to_json()])
    bad = report.to_json()
    bad["proxies"]["N1"] = bad["proxies"].pop("512")
    with pytest.raises(ValueError, match="'proxies.N1' is invalid: expected a budget"):
        Report.from_json(bad)
    with pytest.raises(FileNotFoundError, match="report.json"):
        Report.load(tmp_path / "nothing")
    (out / "report.json").write_text("{not json")
    with pytest.raises(ValueError, match="report.json.*not valid JSON"):
        Report.load(out)
    missing = report.to_json()
    del missing["targets"]
    (out / "report.json").write_text(json.dumps(missing))
    with pytest.raises(ValueError, match="report.json.*'targets' is missing"):
        Report.load(out)


_curve = st.lists(st.floats(0.5, 10.0), min_size=1, max_size=5)


@given(_curve, _curve, st.booleans())
def test_tokens_saved_round_trips_whatever_the_status(a: list[float], b: list[float], empty: bool) -> None:
    auto = Curve(tokens=[1000.0 * (i + 1) for i in range(len(a))], mean=sorted(a, reverse=True), std=[0.0] * len(a),
                 n=1)
    base = Curve(tokens=[] if empty else [1000.0 * (i + 1) for i in range(len(b))], mean=sorted(b, reverse=True),
                 std=[0.0] * len(b), n=1)
    saved = tokens_saved(auto, base)
    assert TokensSaved.from_json(saved.to_json()) == saved

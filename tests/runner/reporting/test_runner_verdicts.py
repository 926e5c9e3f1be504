"""Every target comparison carries a verdict against seed noise, stated before its percentage, in
report.md, the console summary and report.json; seeds that disagree are NOT distinguishable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_helpers import fake_config, fake_domains, fake_run

from autoscale_data.runner.reporting.metrics import paired_verdict
from autoscale_data.runner.reporting.report import write_report
from autoscale_data.runner.reporting.report_types import Report
from autoscale_data.runner.reporting.summary import format_summary


def _targets(out: Path, autoscale: list[list[float]], uniform: list[list[float]]) -> Path:
    for seed, values in enumerate(autoscale):
        fake_run(out, f"f{seed}", "autoscale", seed, values)
    for seed, values in enumerate(uniform):
        fake_run(out, f"u{seed}", "uniform", seed, values)
    fake_config(out, ["uniform"], name="v")
    fake_domains(out)
    (out / "ledger.jsonl").write_text("")
    return out


def test_seeds_that_disagree_are_not_distinguishable_and_say_so_first(tmp_path: Path) -> None:
    # seed 0: AutoScale ends 0.25 lower, seed 1: 0.15 higher; the seed-mean curves alone show a saving
    out = _targets(tmp_path, [[5.0, 4.4, 3.95], [5.2, 4.6, 4.35]], [[5.5, 5.0, 4.2], [5.4, 4.9, 4.2]])
    report = write_report(out)
    v = report.verdicts["uniform"]
    assert v.verdict == "not_distinguishable" and v.seeds == [0, 1] and v.method_wins == 1
    assert v.difference.mean == pytest.approx(-0.05) and v.difference.std == pytest.approx(0.2828, abs=1e-3)
    assert v.ci_low < 0 < v.ci_high
    assert report.tokens_saved["uniform"].saved_fraction > 0  # a positive percentage exists, and comes after
    md = (out / "report.md").read_text()
    assert "AutoScale is **NOT** distinguishable from uniform" in md
    saved = md[md.index("## Tokens saved"):]
    assert saved.index("**NOT** distinguishable") < saved.index("| uniform |")
    row = next(line for line in saved.splitlines() if line.startswith("| uniform |"))
    assert row.index("NOT distinguishable from seed noise") < row.index("%")
    console = format_summary(report)
    verdict_at = console.index("AutoScale is NOT distinguishable from uniform")
    assert verdict_at < console.index("vs uniform ") and "1 of 2 seeds" in console
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["verdicts"]["uniform"]["verdict"] == "not_distinguishable"
    assert Report.load(out) == report


def test_one_seed_cannot_be_judged(tmp_path: Path) -> None:
    report = write_report(_targets(tmp_path, [[5.0, 4.4, 4.0]], [[5.5, 5.0, 4.3]]))
    v = report.verdicts["uniform"]
    assert v.verdict == "cannot_judge" and v.ci_low is None and v.difference.n == 1
    assert "AutoScale vs uniform CANNOT be judged against seed noise: one paired seed" in format_summary(report)
    assert "**CANNOT** be judged" in (tmp_path / "report.md").read_text()


def test_consistent_seeds_are_judged_better_or_worse() -> None:
    auto = {s: 4.0 + 0.01 * s for s in range(3)}
    base = {s: 4.3 + 0.012 * s for s in range(3)}
    better = paired_verdict("autoscale", auto, "uniform", base)
    assert better.verdict == "better" and (better.method, better.baseline) == ("autoscale", "uniform")
    assert paired_verdict("uniform", base, "autoscale", auto).verdict == "worse"
    only_shared = paired_verdict("autoscale", auto, "uniform", {0: base[0]})
    assert only_shared.verdict == "cannot_judge" and only_shared.seeds == [0]
    with pytest.raises(ValueError, match="level = 1.5"):
        paired_verdict("autoscale", auto, "uniform", base, level=1.5)

"""The zero-shot tasks in the runner (config ``eval.tasks``): the report's "Downstream tasks" table with its
verdicts from hand-written results (fast), and a tiny experiment end to end (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_helpers import fake_config, fake_domains, fake_run, tiny_config, tiny_stores

from autoscale_data.cli import main
from autoscale_data.evaluation import DownstreamResult, TaskScore
from autoscale_data.runner import MixtureRunner, Report, config_from_dict, layout, write_report


def _downstream(out: Path, run_id: str, bpb: dict[str, float], acc: float) -> None:
    tasks = {t: TaskScore(task=t, examples=10, acc=acc, acc_norm=acc, bpb=b, chance=0.5, seconds=0.1)
             for t, b in bpb.items()}
    result = DownstreamResult(model=run_id, tokenizer="bytes", limit=10, seed=0, tasks=tasks)
    (out / "runs" / run_id / layout.DOWNSTREAM).write_text(json.dumps(result.to_json()))


def test_report_has_the_downstream_rows_and_verdicts(tmp_path: Path) -> None:
    out = tmp_path
    # autoscale lower bpb than uniform on both seeds by a steady 0.2: better beyond seed noise; ddo_n2 disagrees
    for seed in (0, 1, 2):
        fake_run(out, f"a{seed}", "autoscale", seed, [5.0, 4.0])
        fake_run(out, f"u{seed}", "uniform", seed, [5.0, 4.1])
        fake_run(out, f"d{seed}", "ddo_n2", seed, [5.0, 4.1])
        _downstream(out, f"a{seed}", {"boolq": 3.0 + 0.01 * seed, "piqa": 2.0}, 0.6)
        _downstream(out, f"u{seed}", {"boolq": 3.2 + 0.01 * seed, "piqa": 2.2}, 0.5)
        _downstream(out, f"d{seed}", {"boolq": 3.2 + (0.5 if seed == 1 else -0.5), "piqa": 2.2}, 0.5)
    fake_config(out, ["uniform", "ddo_n2"], name="v", eval={"tasks": ["boolq", "piqa"]})
    fake_domains(out)
    (out / "ledger.jsonl").write_text("")
    report = write_report(out)
    d = report.downstream
    assert d is not None and d.tasks == ["boolq", "piqa"] and set(d.rows) == {"autoscale", "uniform", "ddo_n2"}
    a = d.rows["autoscale"]
    assert a.tasks["boolq"].bpb.mean == pytest.approx(3.01) and a.tasks["boolq"].bpb.n == 3
    assert a.mean_bpb.mean == pytest.approx(2.505) and a.mean_acc.mean == pytest.approx(0.6)
    assert a.vs_uniform.verdict == "better" and a.vs_autoscale is None
    assert d.rows["uniform"].vs_autoscale.verdict == "worse" and d.rows["uniform"].vs_uniform is None
    assert d.rows["ddo_n2"].vs_uniform.verdict == "not_distinguishable"
    md = (out / "report.md").read_text()
    section = md[md.index("## Downstream tasks"):]
    row = next(line for line in section.splitlines() if line.startswith("| autoscale |"))
    assert "3.010 ± 0.010" in row and "better beyond seed noise (-0.200)" in row
    ddo = next(line for line in section.splitlines() if line.startswith("| ddo_n2 |"))
    assert ddo.count("NOT distinguishable from seed noise") == 2
    uniform = next(line for line in section.splitlines() if line.startswith("| uniform |"))
    assert uniform.endswith("| – | WORSE beyond seed noise (+0.200) |")
    assert "| chance | 0.500 | 0.500 | 0.500 |" in section
    assert Report.load(out) == report


def test_unknown_task_in_the_config_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"eval.tasks = \('boolq', 'nope'\) is invalid: expected task names \(unknown task\(s\) \['nope'\]"):
        config_from_dict(tiny_config(tmp_path, eval={"tasks": ["boolq", "nope"]}))
    with pytest.raises(ValueError, match=r"eval.tasks = \['boolq'\] is invalid: expected none for the masked LM 'bert-tiny'"):
        config_from_dict(tiny_config(tmp_path, model={"preset": "bert-tiny", "overrides": {}}, eval={"tasks": ["boolq"]}))


@pytest.mark.heavy  # a whole tiny experiment with 2 seeds (45-90 s): test_report_has_the_downstream_rows_and_verdicts is its sibling
@pytest.mark.timeout(600)
def test_tiny_experiment_scores_every_target_run_and_reports_it(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    stores = tiny_stores(tmp_path / "stores")
    cfg = config_from_dict(tiny_config(stores, target={"budget": 16384, "baselines": ["uniform"], "seeds": [0, 1]},
                                       eval={"tasks": ["winogrande", "arc_easy"], "task_limit": 6}))
    runner = MixtureRunner(cfg, tmp_path / "out", log=lambda _: None, progress=False)
    assert "downstream: 2 zero-shot tasks on each of 4 target runs' final models (questions: winogrande 6, " \
           "arc_easy 6)" in runner.describe()
    report = runner.run()
    d = report.downstream
    assert d is not None and set(d.rows) == {"autoscale", "uniform"} and d.examples == {"winogrande": 6, "arc_easy": 6}
    assert d.rows["autoscale"].mean_bpb.n == 2 and d.rows["autoscale"].vs_uniform is not None
    files = sorted((tmp_path / "out" / "runs").glob(f"*/{layout.DOWNSTREAM}"))
    assert len(files) == 4
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Downstream tasks" in md and "| winogrande bpb | arc_easy bpb | mean bpb | vs uniform | vs AutoScale |" in md
    assert "downstream bpb | downstream acc |" in md  # the comparison of methods carries the averages
    stamp = files[0].stat().st_mtime_ns
    runner.run()  # nothing to score again
    assert files[0].stat().st_mtime_ns == stamp
    # the CLI on one run folder scores it the same way (the same questions: the same numbers)
    assert main(["evaluate", str(files[0].parent), "--tasks", "winogrande", "arc_easy", "--limit", "6", "--json"]) == 0
    again = DownstreamResult.from_json(json.loads(capsys.readouterr().out))
    kept = DownstreamResult.from_json(json.loads(files[0].read_text()))
    assert again.tasks["arc_easy"].bpb == pytest.approx(kept.tasks["arc_easy"].bpb, rel=1e-6)
    assert main(["evaluate", str(tmp_path / "out")]) != 0
    assert "is a runner output folder: give one of its run folders" in capsys.readouterr().err

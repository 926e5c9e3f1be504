"""Tokens saved: interpolation in log-tokens, 'not reached', negative savings, seed means; the anytime-vs-fixed
comparison and its report section."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runner_helpers import fake_config, fake_curve, fake_run

from autoscale_data.runner.records import EvalPoint, RunResult
from autoscale_data.runner.reporting.metrics import mean_curve, tokens_saved, tokens_to_reach
from autoscale_data.runner.reporting.report_types import Curve, CurveComparison


def test_interpolates_in_log_tokens() -> None:
    t, status = tokens_to_reach([100, 10_000], [4.0, 2.0], 3.0)
    assert status == "reached" and t == pytest.approx(1_000)


def test_first_eval_and_never() -> None:
    assert tokens_to_reach([100, 200], [1.0, 0.5], 2.0) == (100.0, "at_first_eval")
    assert tokens_to_reach([100, 200], [3.0, 2.5], 2.0) == (None, "not_reached")


def _curve(mean: list[float]) -> Curve:
    return Curve(tokens=[1e3, 1e4, 1e5], mean=mean, std=[0.0] * len(mean), n=1)


def test_saving_positive_when_autoscale_is_better() -> None:
    s = tokens_saved(_curve([5.0, 3.0, 2.0]), _curve([5.0, 3.5, 3.0]))
    assert s.status == "reached"
    assert s.saved_fraction == pytest.approx(1 - 1e4 / 1e5) and s.signed_fraction == s.saved_fraction


def test_not_reached_gives_no_number_and_the_honest_reverse() -> None:
    s = tokens_saved(_curve([5.0, 3.5, 3.0]), _curve([5.0, 3.0, 2.0]))
    assert s.status == "not_reached" and s.saved_fraction is None
    assert s.baseline_saved_fraction == pytest.approx(1 - 1e4 / 1e5) and s.signed_fraction == -s.baseline_saved_fraction


@given(st.lists(st.floats(0.1, 10), min_size=2, max_size=8))
def test_reached_point_lies_between_evaluations(values: list[float]) -> None:
    values = sorted(values, reverse=True)
    tokens = [1000.0 * 2**i for i in range(len(values))]
    level = (values[0] + values[-1]) / 2
    t, status = tokens_to_reach(tokens, values, level)
    if values[0] <= level:
        assert status == "at_first_eval"
    else:
        assert status == "reached" and tokens[0] <= t <= tokens[-1]


def test_mean_curve_over_seeds() -> None:
    c1 = [EvalPoint(tokens=10, mean_loss=2.0), EvalPoint(tokens=20, mean_loss=1.0)]
    c2 = [EvalPoint(tokens=10, mean_loss=4.0), EvalPoint(tokens=20, mean_loss=3.0)]
    m = mean_curve([c1, c2], "mean_loss")
    assert m.tokens == [10.0, 20.0] and m.mean == [3.0, 2.0] and m.n == 2
    assert m.std[0] == pytest.approx(math.sqrt(2))


def test_compare_curves_pairs_by_seed() -> None:
    from autoscale_data.runner.reporting.metrics import compare_curves

    def run(seed: int, values: list[float], shares: list[dict[str, int]] | None = None) -> RunResult:
        return RunResult(run_id=f"r{seed}", seed=seed,
                         curve=[EvalPoint.from_json(p) for p in fake_curve(values, shares)])

    fixed = [run(0, [5.0, 4.0]), run(1, [5.2, 4.4]), run(7, [9.0, 9.0])]  # seed 7 has no partner: left out
    anytime = [run(1, [5.0, 4.5], [{"a": 900, "b": 100}, {"a": 1000, "b": 1000}]),
               run(0, [4.6, 4.0], [{"a": 700, "b": 300}, {"a": 1000, "b": 1000}])]
    c = compare_curves(fixed, anytime, "mean_loss")
    assert c.seeds == [0, 1] and [p.tokens for p in c.points] == [1000.0, 2000.0]
    first, last = c.points
    assert first.reference.mean == pytest.approx(5.1) and first.other.mean == pytest.approx(4.8)
    assert first.difference.mean == pytest.approx(-0.3) and first.difference.n == 2
    assert first.difference.std == pytest.approx(math.sqrt(0.02))  # differences -0.4 and -0.2
    assert last.difference.mean == pytest.approx(0.05)
    assert first.other_shares == pytest.approx({"a": 0.8, "b": 0.2}) and first.reference_shares is None
    assert compare_curves(fixed, [], "mean_loss") == CurveComparison(seeds=[], points=[])


def test_report_has_the_anytime_section(tmp_path) -> None:
    import json

    from autoscale_data.runner.reporting.report import write_report
    from autoscale_data.solver import MixturePlan

    out = tmp_path / "out"
    plan = MixturePlan.from_scales([(1000, {"a": 800.0, "b": 200.0}), (2000, {"a": 1000.0, "b": 1000.0})]).to_json()
    runs = [("f0", "autoscale", 0, [5.0, 4.5, 4.0]), ("f1", "autoscale", 1, [5.2, 4.7, 4.2]),
            ("u0", "uniform", 0, [5.5, 5.0, 4.6])]
    for run_id, label, seed, values in runs:
        fake_run(out, run_id, label, seed, values)
    fake_config(out, ["uniform", "autoscale_anytime"])
    (out / "ledger.jsonl").write_text("")
    report = write_report(out)
    assert report.anytime_vs_fixed.to_json() == {"available": False,
                                                 "reason": "the autoscale_anytime runs are not finished yet"}
    assert "Not available: the autoscale_anytime runs are not finished yet" in (out / "report.md").read_text()
    for run_id, seed, values in (("a0", 0, [4.8, 4.4, 4.1]), ("a1", 1, [4.8, 4.6, 4.2])):
        fake_run(out, run_id, "autoscale_anytime", seed, values, "anytime", plan)
    report = write_report(out)
    a = report.anytime_vs_fixed
    assert a.available and a.seeds == [0, 1] and len(a.points) == 3
    assert [p.difference.mean for p in a.points] == pytest.approx([-0.3, -0.1, 0.05])
    assert a.points[0].plan_shares == pytest.approx(MixturePlan.from_json(plan).weights_for_budget(1000))
    assert "autoscale_anytime" in report.tokens_saved  # compared like any other mix
    md = (out / "report.md").read_text()
    assert "## Anytime vs fixed schedule" in md
    assert "| 1,000 | 5.1000 ± 0.1414 | 4.8000 ± 0.0000 | -0.3000 ± 0.1414 | a 0.25, b 0.75 | a 0.80, b 0.20 |" in md
    assert "lower mean at 2 of 3 evaluation points" in md
    assert (out / "plots" / "curves.png").stat().st_size > 0
    (out / "fits").mkdir()
    (out / "fits" / "mixture_plan_error.json").write_text(json.dumps({"error": "allocations of ['b'] decrease"}))
    for run_id in ("a0", "a1"):
        (out / "runs" / run_id / "result.json").unlink()
    assert "no mixture plan could be fitted" in write_report(out).anytime_vs_fixed.reason


def test_each_mix_minus_uniform_paired_by_seed_in_the_report_and_plots(tmp_path) -> None:

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoscale_data.runner.reporting.plots import _plot_curves, _plot_losses
    from autoscale_data.runner.reporting.report import write_report

    out = tmp_path / "out"
    for run_id, label, seed, values in (("m0", "autoscale", 0, [5.0, 4.5, 4.00]), ("m1", "autoscale", 1, [5.1, 4.6, 4.30]),
                                        ("u0", "uniform", 0, [5.2, 4.6, 4.05]), ("u1", "uniform", 1, [5.2, 4.7, 4.25])):
        fake_run(out, run_id, label, seed, values)
    fake_config(out, ["uniform"])
    (out / "ledger.jsonl").write_text("")
    report = write_report(out)
    final = report.vs_uniform["autoscale"].final
    assert final["mean_loss"].mean == pytest.approx(0.0) and final["mean_loss"].n == 2  # -0.05, +0.05
    assert final["mean_loss"].std == pytest.approx(0.1 / 2 ** 0.5)
    assert [p.difference.mean for p in report.vs_uniform["autoscale"].curve.points] == \
        pytest.approx([-0.15, -0.1, 0.0])
    fig = _plot_losses(plt, report)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo <= 0 <= hi and "minus uniform" in ax.get_ylabel() and "std over seeds" in ax.get_title()
    curves = _plot_curves(plt, report)
    assert len(curves.axes) == 2 and "minus uniform" in curves.axes[1].get_title()
    plt.close("all")
    for run_id in ("m1", "u1"):  # one seed: no error bars, and the plots say so
        (out / "runs" / run_id / "result.json").unlink()
    report = write_report(out)
    assert "one seed: no error bars" in _plot_losses(plt, report).axes[0].get_title()
    assert "one seed: no band" in _plot_curves(plt, report).axes[1].get_title()
    plt.close("all")
    (out / "runs" / "u0" / "result.json").unlink()  # no uniform: the losses themselves, on an axis from 0
    report = write_report(out)
    assert report.vs_uniform == {}
    ax = _plot_losses(plt, report).axes[0]
    assert ax.get_ylim()[0] <= 0 and ax.get_ylabel() == "validation loss (nats/token)"
    plt.close("all")

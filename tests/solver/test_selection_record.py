"""``Selection``, the typed answer of ``method="auto"``, read from the ``projection.json`` of every version: the
words the report, the log and the CLI print from an old file are those the code of its time printed."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscale_data.runner.reporting.report import _predicted_md
from autoscale_data.solver import CandidateError, Selection
from autoscale_data.solver.gain import GainEstimate

pytestmark = pytest.mark.timeout(60)

#: Before the law score (no ``score`` key, no gain written, a failure as ``error``).
BEFORE_LAW = {"chosen": "observed", "reason": "backtest at 8e+06 tokens: no projection passed", "rule": "backtest",
              "held_back_tokens": 8e6, "noise": 0.002, "noise_source": "replicates",
              "backtest": {"observed": {"objective": 3.1, "run": "base", "distance": 0.0},
                           "geometric": {"objective": 3.05, "run": "r1", "distance": 0.031},
                           "joint": {"error": "no joint law"}}}
#: With the law score, before the scores were one way for all (``nearest_run``, no tolerance, no law check).
BEFORE_ONE_WAY = {"chosen": "robust", "reason": "backtest: robust beat it", "rule": "backtest",
                  "held_back_tokens": 8e6, "noise": 0.002, "noise_source": "replicates", "law_noise": 0.003,
                  "law_noise_source": "laws", "law_margin": 0.009,
                  "backtest": {"observed": {"objective": 3.1, "score": "law", "run": "base", "distance": 0.0},
                               "robust": {"objective": 3.08, "score": "law", "run": "r2", "distance": 0.05,
                                          "gain": 0.02},
                               "joint": {"objective": 3.2, "score": "nearest_run", "run": "r3", "distance": 0.2,
                                         "gain": -0.1, "law_note": "outside the design's range: a x9"},
                               "geometric": {"error": "path cannot reach the target"}}}


def test_old_backtests_read_and_say_what_they_said() -> None:
    # the lines the code before the typed Selection printed for these files (solver/scores.py backtest_lines)
    assert Selection.from_json(BEFORE_LAW).backtest_lines() == [
        "backtest at 8,000,000 tokens (every candidate refitted without it): run scores: noise 0.002, margin 2 x "
        "0.002 (replicates)",
        "observed: objective 3.1000 at the nearest run base, L1 distance 0.000",
        "geometric: objective 3.0500 at the nearest run r1, L1 distance 0.031, +0.05 vs observed",
        "joint: not scored (no joint law)", "chosen: observed"]
    assert Selection.from_json(BEFORE_ONE_WAY).backtest_lines() == [
        "backtest at 8,000,000 tokens (every candidate refitted without it): law scores: noise 0.003, margin 0.009 "
        "(laws); run scores: noise 0.002, margin 2 x 0.002 (replicates)",
        "observed: objective 3.1000 by the DDO law at the held-back budget (nearest run base, L1 distance 0.000)",
        "robust: objective 3.0800 by the DDO law at the held-back budget (nearest run r2, L1 distance 0.050), "
        "+0.02 vs observed",
        "joint: objective 3.2000 at the nearest run r3, L1 distance 0.200; not by the law: outside the design's "
        "range: a x9, -0.1 vs observed",
        "geometric: not scored (path cannot reach the target)", "chosen: robust"]


def test_a_trend_file_writes_back_the_keys_it_had() -> None:
    old = {"backtest": {}, "chosen": "observed", "held_back_tokens": None, "noise": None, "noise_source": "",
           "reason": "two budgets: no share trend", "rule": "trend"}
    assert Selection.from_json(old).to_json() == old


def test_the_first_two_budget_predictions_read_and_report_as_they_did() -> None:
    sel = Selection.from_json({"chosen": "observed", "reason": "two budgets: no", "rule": "gain", "predicted": {
        "joint": {"gain": 0.0123, "sd": None, "z": 0.0, "noise": 0.002, "determined": False},
        "robust": {"error": "no joint law (x)"}}})
    joint, robust = sel.predicted["joint"], sel.predicted["robust"]
    assert isinstance(joint, GainEstimate) and joint.sd == math.inf and not joint.determined
    assert robust == CandidateError("no joint law (x)")
    rows = [line for line in _predicted_md(sel) if line.startswith(("| joint", "| robust"))]
    assert rows == ["| joint | +0.0123 | not determined | 0.00 | 0.002 |  |",
                    "| robust | not predicted: no joint law (x) | | | |  |"]


finite = st.floats(-10, 10, allow_nan=False)


@given(gain=finite, sd=st.one_of(st.floats(0, 10), st.just(math.inf)), noise=st.floats(0, 1),
       trust=st.sampled_from(["", "beyond the shares run"]))
def test_a_gain_estimate_reads_back_from_its_json(gain: float, sd: float, noise: float, trust: str) -> None:
    e = GainEstimate(gain=gain, sd=sd, noise=noise, free_parameters=3, points=9, replicate_dof=2, trust=trust)
    text = json.dumps(e.to_json(), allow_nan=False)  # JSON without infinities
    back = GainEstimate.from_json(json.loads(text))
    assert back.to_json() == e.to_json() and back.sd == e.sd and (back.z == e.z or not math.isfinite(e.z))

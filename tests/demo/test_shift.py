"""The shift case: its config, its record and verdict, and the small case end to end."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from autoscale_data.demo.shift import (
    SHIFT_PRESETS,
    GridPoint,
    ShiftCase,
    ShiftCaseResult,
    _unchosen,
    format_shift_table,
    run_shift_case,
    shift_config,
)


def test_config_is_the_runners_three_budget_design(tmp_path: Path) -> None:
    case = SHIFT_PRESETS["full"]
    cfg = shift_config(tmp_path, case)
    assert cfg.ddo.budgets == case.budgets and len(case.budgets) == 3 and cfg.ddo.projection == "auto"
    assert cfg.target.budget == case.target == 8 * case.n2 and cfg.target.seeds == (0, 1, 2)
    assert set(cfg.target.baselines) == {"uniform", "ddo_n2"}
    assert case.grid_mix(5 / 15) == pytest.approx({"motifs": 1 / 3, "markov8": 1 / 3, "markov12": 1 / 3})
    assert case.grid_mix(0.2) == pytest.approx({"motifs": 0.2, "markov8": 1 / 3, "markov12": 2 / 3 - 0.2})
    assert shift_config(tmp_path, replace(case, projection="robust")).ddo.projection == "robust"
    late = SHIFT_PRESETS["late"]  # the same corpus, target and grid; DDO budgets 4x larger
    assert late.budgets == tuple(4 * b for b in case.budgets) and late.target == 2 * late.n2
    assert (late.grid, late.bytes_per_domain, late.target_seeds) == (case.grid, case.bytes_per_domain, case.target_seeds)
    control = SHIFT_PRESETS["control"]  # late's DDO budgets, a target 8x N2, enough text that no target run repeats
    assert control.budgets == late.budgets and control.target == 8 * control.n2 == 1_048_576
    assert 5 / 15 in control.grid and 9 / 15 in control.grid and control.target_seeds == (0, 1)
    most = max(control.grid_mix(w)[control.saturating] for w in control.grid)
    assert most * control.target < 0.95 * control.bytes_per_domain  # one byte, one token; 1 doc in 20 held out
    assert shift_config(tmp_path, control).target.budget == 1_048_576


def test_zipf_preset_is_two_power_law_domains(tmp_path: Path) -> None:
    case = SHIFT_PRESETS["zipf"]
    assert case.domains == ("zipf_fast", "zipf_slow") and (case.saturating, case.paying) == case.domains
    assert case.line_share == 1.0 and case.grid_mix(0.25) == pytest.approx({"zipf_fast": 0.25, "zipf_slow": 0.75})
    assert case.target == 8 * case.n2 and len(case.budgets) == 3 and case.train_projections
    assert case.grid == (0.125, 0.25, 0.5) and case.target_seeds == (0, 1, 2)
    cfg = shift_config(tmp_path, case)
    assert list(cfg.ddo.budgets) == list(case.budgets) and cfg.target.budget == case.target
    assert cfg.seq_len == 32 and cfg.ddo.projection == "auto"
    # enough text that no target run repeats a domain (one byte, one token; 1 document in 20 held out)
    assert 0.8 * case.target < 0.95 * case.bytes_per_domain
    wide = SHIFT_PRESETS["zipf16"]  # the same target runs (one folder shares them), DDO budgets halved
    assert wide.target == case.target == 16 * wide.n2 and wide.budgets == tuple(b // 2 for b in case.budgets)
    assert (wide.grid, wide.target_seeds, wide.seq_len, wide.domains) == (case.grid, case.target_seeds, case.seq_len,
                                                                        case.domains)
    assert SHIFT_PRESETS["full"].domains == ("motifs", "markov8", "markov12")  # the other presets are unchanged


def test_unchosen_projections_are_the_computed_ones() -> None:
    mix = {"zipf_fast": 0.3, "zipf_slow": 0.7}
    record = SimpleNamespace(geometric=SimpleNamespace(weights=mix), joint=SimpleNamespace(weights={}), robust=None)
    assert _unchosen(record, "observed") == {"geometric (not chosen)": mix}
    assert _unchosen(record, "geometric") == {}


@pytest.mark.parametrize("kwargs", [{"saturating": "web"}, {"paying": "motifs"}, {"budgets": (100, 50)},
                                    {"budgets": (100, 300_000)}, {"grid": (0.0, 0.5)}, {"grid": (0.7,)},
                                    {"grid": ()}, {"projection": "best"},
                                    {"domains": ("zipf_fast", "zipf_slow")},
                                    {"domains": ("zipf_fast", "zipf_slow"), "saturating": "zipf_fast",
                                     "paying": "zipf_slow", "grid": (1.0,)}])
def test_bad_cases_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ShiftCase(**kwargs)


def _point(label: str, budget: int, losses: list[float]) -> GridPoint:
    return GridPoint(label, budget, {"motifs": 0.2, "markov8": 0.4, "markov12": 0.4}, dict(enumerate(losses)))


def test_the_record_says_whether_the_optimum_moves() -> None:
    n2 = [_point("a", 10, [2.0, 2.02]), _point("b", 10, [2.1, 2.12])]
    target = [_point("a", 80, [1.50, 1.52, 1.51]), _point("b", 80, [1.40, 1.41, 1.42])]
    result = ShiftCaseResult(case={"name": "t"}, grid_n2=n2, grid_target=target, chosen="observed: why")
    gap, noise = result.moved()
    assert gap == pytest.approx(0.1) and noise == pytest.approx(2 * math.sqrt(2 * 0.01 ** 2 / 3))
    assert ShiftCaseResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    table = format_shift_table(result)
    assert "| 80 | b | 0.200 | 0.400 | 0.400 | 1.4000 | 1.4100 | 1.4200 | 1.4100 | 0.0100 |" in table
    assert "best grid mix at N2 (10): a; at the target (80): b" in table and "the optimum moves" in table
    assert "AutoScale chose observed: why" in table
    one_seed = replace(result, grid_target=[replace(p, losses={0: p.losses[0]}) for p in target])
    assert math.isnan(one_seed.moved()[1]) and "one seed cannot tell" in format_shift_table(one_seed)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_small_case_end_to_end(tmp_path: Path) -> None:
    case = SHIFT_PRESETS["small"]
    result = run_shift_case(tmp_path, case, log=lambda _: None)
    assert [p.budget for p in result.grid_n2] == [case.n2] * len(case.grid)
    assert [p.budget for p in result.grid_target] == [case.target] * len(case.grid)
    assert {p.label for p in result.mixes} == {"autoscale", "ddo_n2", "uniform"} and result.chosen
    assert ShiftCaseResult.from_json(json.loads((tmp_path / "shift_case_small.json").read_text())) == result
    assert (tmp_path / "report.md").is_file() and "best grid mix at N2" in (tmp_path / "shift_case_small.md").read_text()

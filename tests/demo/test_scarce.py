"""The scarce-domain case: its configs, its record, the grid's best weight, and the small case end to end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autoscale_data.demo.scarce import (
    SCARCE_PRESETS,
    MixOutcome,
    ScarceCase,
    ScarceCaseResult,
    _best_weight,
    format_scarce_table,
    main,
    plan_budgets,
    run_scarce_case,
    scarce_config,
)


def test_configs_differ_only_in_the_proxies_repetition(tmp_path: Path) -> None:
    case = SCARCE_PRESETS["full"]
    off, on = scarce_config(tmp_path, case, "off"), scarce_config(tmp_path, case, "match")
    assert (off.ddo.repetition, on.ddo.repetition) == ("off", "match")
    assert off.target == on.target and off.max_epochs == on.max_epochs == case.max_epochs
    assert set(off.target.baselines) == {"uniform", "natural", "ddo_n2"}
    assert case.grid_mix(0.25) == {"code": 0.25, "encyclopedia": 0.375, "web": 0.375}
    with pytest.raises(ValueError, match="repetition must be one of"):
        scarce_config(tmp_path, case, "on")


@pytest.mark.parametrize("kwargs", [{"scarce": "web"}, {"budgets": (100, 50)}, {"grid": (0.0, 0.5)}, {"grid": ()},
                                    {"projection": "best"}, {"budgets": (16_384,)}, {"budgets": (0, 100, 200)},
                                    {"budgets": (100, 300, 200)}, {"budgets": (8_192, 16_384, 262_144)}])
def test_bad_cases_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        ScarceCase(**kwargs)


def _mix(label: str, w: float, loss: float) -> MixOutcome:
    return MixOutcome(label, w, 10 * w, {0: loss, 1: loss + 0.01})


def test_grid_best_weight_and_the_record() -> None:
    # a parabola in log w with its minimum at w = 0.2 through the points 0.1, 0.2, 0.4 (and 0.8)
    import math

    grid = [_mix(f"grid {w}", w, (math.log(w) - math.log(0.2)) ** 2) for w in (0.1, 0.2, 0.4, 0.8)]
    assert _best_weight(grid) == pytest.approx(0.2)
    assert _best_weight(grid[1:]) == pytest.approx(0.2)  # the best at the edge of the grid stays there
    result = ScarceCaseResult(case={"name": "t"}, scarce="code", grid=grid, mixes=[_mix("autoscale", 0.3, 1.0)],
                              best_weight=0.2, proxy_tokens={"plain": 100, "matched": 100}, target_tokens=400,
                              chosen={"plain": "observed: two budgets, no replicate runs"})
    assert result.errors() == {"autoscale": pytest.approx(0.1)}
    assert ScarceCaseResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    table = format_scarce_table(result)
    assert "| autoscale | 0.300 | 3.00 | 1.0000 | 1.0100 | 1.0050 | 0.100 |" in table
    assert "proxy tokens (plain): 100 = 0.25 target runs of 400 tokens" in table
    assert "AutoScale (plain) chose observed: two budgets, no replicate runs" in table


def test_the_default_projection_is_the_runners(tmp_path: Path) -> None:
    case = SCARCE_PRESETS["full"]
    assert scarce_config(tmp_path, case, "off").ddo.projection == "auto"
    forced = scarce_config(tmp_path, replace(case, projection="robust"), "match")
    assert forced.ddo.projection == "robust"


def test_the_plan_of_three_budgets(tmp_path: Path) -> None:
    case = SCARCE_PRESETS["full"]
    # 3: N0 = N1 / 2 below the preset's budgets (the runner's extra_budget: half); 2: the preset's as they are
    assert plan_budgets("3", case) == (8_192, 16_384, 32_768)
    assert plan_budgets("2", case) == case.budgets
    assert plan_budgets("4096,8192,16384", case) == (4_096, 8_192, 16_384)
    three = replace(case, budgets=plan_budgets("3", case))
    for mode in ("off", "match"):
        cfg = scarce_config(tmp_path, three, mode)
        assert cfg.ddo.budgets == (8_192, 16_384, 32_768) and cfg.ddo.largest == 32_768
        # the targets (and so the grid's and the baselines' run ids) are the two-budget case's
        assert cfg.target == scarce_config(tmp_path, case, mode).target
    assert scarce_config(tmp_path, case, "off").ddo.budgets == case.budgets


@pytest.mark.parametrize("text", ["1", "5", "16384", "a,b", ""])
def test_bad_budget_flags_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--budgets"):
        plan_budgets(text, SCARCE_PRESETS["full"])


def test_the_budgets_flag_is_checked_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for bad in ("5", "32768,16384"):
        with pytest.raises(SystemExit):
            main(["--out", str(tmp_path / "x"), "--budgets", bad])
        assert "budgets" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_small_case_end_to_end(tmp_path: Path) -> None:
    case = replace(SCARCE_PRESETS["small"], projection="robust")  # a projection, so the effective law sets the mix
    result = run_scarce_case(tmp_path, case, log=lambda _: None)
    assert {m.label for m in result.grid} == {f"grid {w:.3g}" for w in case.grid}
    both = {"autoscale (matched, effective law)", "autoscale (matched, raw law)", "autoscale (plain, raw law)",
            "ddo_n2 (plain)", "ddo_n2 (matched)", "uniform", "natural"}  # + the plain proxies' effective law
    assert both <= {m.label for m in result.mixes} <= both | {"autoscale (plain, effective law)"}
    assert all(len(m.losses) == len(case.target_seeds) for m in result.grid + result.mixes)
    trained = [m.scarce_weight for m in result.grid]  # the grid's weights in whole sequences
    assert min(trained) <= result.best_weight <= max(trained)
    assert ScarceCaseResult.from_json(json.loads((tmp_path / "scarce_case.json").read_text())) == result
    # the matched proxies drew from pools (recorded in the plan), the plain ones did not
    plan = json.loads((tmp_path / "report_match.json").read_text())
    repetition = json.loads((tmp_path / "fits" / "repetition.json").read_text())
    assert plan["name"] == "scarce-small-match" and repetition["matched"] is True
    law = json.loads((tmp_path / "fits" / "projection.json").read_text())["repetition_law"]
    assert law["used"] and law["projection"]["budget_tokens"] == case.target  # the matched run set its mix
    uniform = next(m for m in result.mixes if m.label == "uniform")
    assert uniform.scarce_epochs > 1  # the target repeats the scarce domain
    assert "## Repetition at the target" in (tmp_path / "report_match.md").read_text()

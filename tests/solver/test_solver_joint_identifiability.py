"""The joint law's identifiability is a typed record, as DDO's is: its JSON, its words, its use by the robust path."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autoscale_data.solver import JointIdentifiability
from autoscale_data.solver.joint import JointFit, fit_joint
from autoscale_data.solver.robust import log_share_sd
from autoscale_data.solver.synthetic import synthetic_budget_runs

#: The keys of ``projection.json``'s / ``fit_joint(...).to_json()``'s ``identifiability``, in order.
KEYS = ["identified", "weight_range", "spread", "undetermined_directions", "points", "parameters", "noise_variance",
        "noise_source", "level", "weight_tol", "fits_evaluated", "summary", "per_budget"]


@pytest.fixture(scope="module")
def fit() -> JointFit:
    tables = synthetic_budget_runs((4e6, 1.2e7, 3.6e7), [2e5, 5e4, 1e6], [0.3, 0.8, 0.5], [1.0, 0.5, 2.0],
                                   scale=[1e6] * 3, seeds=2, noise=1e-3, multipliers=(3.0, 1 / 3, 2.0))
    return fit_joint(tables, target_tokens=3e8, objective="mean_loss")


def test_the_json_keeps_its_keys_and_words_the_record(fit: JointFit) -> None:
    ident = fit.identifiability
    assert isinstance(ident, JointIdentifiability)
    out = fit.to_json()["identifiability"]
    assert list(out) == KEYS
    assert out["summary"] == ident.describe()
    assert set(out["per_budget"]) == {f"{b:.17g}" for b in fit.budgets}
    assert all(isinstance(pair, list) and len(pair) == 2 for pair in out["weight_range"].values())
    assert JointIdentifiability.from_json(json.loads(json.dumps(out))) == ident


def test_the_words_follow_the_fields(fit: JointFit) -> None:
    ident = replace(fit.identifiability, identified=True, spread=0.004)
    assert ident.describe() == (f"Identified: {ident.points} runs for {ident.parameters} parameters, and the fits "
                                "within the noise move no weight by more than 0.004.")
    wide = {"web": (0.1, 0.3), "code": (0.2, 0.2002), "books": (0.5, 0.6)}
    loose = replace(ident, identified=False, undetermined_directions=2, spread=0.2, weight_range=wide)
    text = loose.describe()
    assert text.startswith("NOT identified by the data: 2 parameter combination(s) are not determined by the runs; "
                           "fits within the noise (95% profile) move a weight by 0.200 > 0.01.")
    assert "web 0.100-0.300, books 0.500-0.600." in text and "code" not in text  # code moves by < 5e-4


def test_a_record_written_before_per_budget_still_loads(fit: JointFit) -> None:
    old = {k: v for k, v in fit.to_json()["identifiability"].items() if k != "per_budget"}
    back = JointIdentifiability.from_json(old)
    assert back.per_budget is None and back.at_budget(fit.budgets[0]) is None
    assert list(back.to_json()) == KEYS[:-1]
    with pytest.raises(ValueError, match="'spread' is missing"):
        JointIdentifiability.from_json({k: v for k, v in old.items() if k != "spread"})
    with pytest.raises(ValueError, match="expected an object"):
        JointIdentifiability.from_json([1, 2])


def test_at_a_fitted_budget_the_range_is_that_budgets(fit: JointFit) -> None:
    n = fit.budgets[1]
    at = fit.identifiability.at_budget(n)
    assert at.pooled and at.per_budget is None
    assert at.weight_range == fit.identifiability.per_budget[f"{n:.17g}"]
    assert at.to_json()["pooled"] is True and JointIdentifiability.from_json(at.to_json()) == at
    assert fit.identifiability.at_budget(1.0) is None


def test_the_robust_path_reads_every_form_of_the_range(fit: JointFit) -> None:
    sd = log_share_sd(fit)
    assert log_share_sd(fit.identifiability) == sd
    assert log_share_sd(fit.identifiability.to_json()) == sd
    assert log_share_sd(fit.identifiability.weight_range) == sd
    with pytest.raises(ValueError, match="no weight range"):
        log_share_sd(replace(fit, identifiability=None))
    with pytest.raises(ValueError, match="no weight range"):
        log_share_sd(object())

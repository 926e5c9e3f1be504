"""The robust projection: each domain's share trend shrunk by its uncertainty."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscale_data.solver.allocation_path import project
from autoscale_data.solver.ddo import fit_ddo
from autoscale_data.solver.robust import log_share_sd, robust_project
from autoscale_data.solver.scores import CandidateError
from autoscale_data.solver.synthetic import synthetic_ddo_runs

SCALES = [(1e6, {"web": 5e5, "code": 3e5, "books": 2e5}), (4e6, {"web": 1.6e6, "code": 1.6e6, "books": 8e5})]


def test_zero_uncertainty_is_the_plain_geometric_projection():
    r = robust_project(SCALES, 5e7, {"web": 0.0, "code": 0.0, "books": 0.0})
    plain = project(SCALES, 5e7)
    for d in plain.weights:
        assert r.weights[d] == pytest.approx(plain.weights[d], rel=1e-9)
        assert r.plain_weights[d] == pytest.approx(plain.weights[d], rel=1e-9)
    assert r.moved["total_variation"] == pytest.approx(0.0, abs=1e-9)
    assert all(k == 1.0 for k in r.shrink.values())
    assert robust_project(SCALES, 5e7, None).weights == pytest.approx(r.weights)


def test_undetermined_trends_fall_back_to_the_largest_budgets_shares():
    r = robust_project(SCALES, 5e7, {"web": 1e3, "code": 1e3, "books": 1e3})
    w2 = {d: v / 4e6 for d, v in SCALES[1][1].items()}
    for d, v in w2.items():
        assert r.weights[d] == pytest.approx(v, abs=1e-5)
    assert r.moved["total_variation"] > 0.05  # the plain projection extrapolates code's growth
    assert sum(r.allocation_tokens.values()) == pytest.approx(5e7)


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_more_uncertainty_moves_further_from_the_plain_projection(s_small, extra):
    small = robust_project(SCALES, 5e7, dict.fromkeys(("web", "code", "books"), s_small))
    large = robust_project(SCALES, 5e7, dict.fromkeys(("web", "code", "books"), s_small + extra))
    assert large.moved["total_variation"] >= small.moved["total_variation"] - 1e-9
    for d in small.shrink:
        assert 0.0 <= large.shrink[d] <= small.shrink[d] + 1e-12


def test_per_scale_sds_combine_in_quadrature():
    a = robust_project(SCALES, 5e7, [{"web": 0.3, "code": 0.4, "books": 0.0}, {"web": 0.4, "code": 0.3, "books": 0.0}])
    b = robust_project(SCALES, 5e7, {"web": 0.5, "code": 0.5, "books": 0.0})
    assert a.weights == pytest.approx(b.weights) and a.sd == pytest.approx(b.sd)


def test_log_share_sd_from_ranges_and_fits():
    sd = log_share_sd({"a": (0.1, 0.1 * np.exp(2 * 1.959963984540054)), "b": (0.2, 0.2)})
    assert sd["a"] == pytest.approx(1.0) and sd["b"] == 0.0
    assert log_share_sd({"weight_range": {"a": [0.0, 1.0]}})["a"] == pytest.approx(np.log(1e4) / (2 * 1.959963984540054))
    runs = synthetic_ddo_runs({"web": 1e6, "code": 1e6, "books": 1e6}, [1, 2, 3], [0.4, 0.6, 0.9])
    res = fit_ddo(runs)
    assert set(log_share_sd(res)) == {"web", "code", "books"}
    with pytest.raises(ValueError, match="no weight range"):
        log_share_sd(object())
    with pytest.raises(ValueError, match="lo <= hi"):
        log_share_sd({"a": (0.5, 0.1)})


def test_bad_sd_is_refused():
    with pytest.raises(ValueError, match="lacks domains"):
        robust_project(SCALES, 5e7, {"web": 0.1})
    with pytest.raises(ValueError, match=">= 0"):
        robust_project(SCALES, 5e7, {"web": -0.1, "code": 0.1, "books": 0.1})


def test_projections_reports_the_robust_projection_beside():
    from autoscale_data.solver.projections import Projections

    plain = project(SCALES, 5e7)
    r = robust_project(SCALES, 5e7, {"web": 0.2, "code": 0.2, "books": 0.2})
    out = Projections("geometric", plain, CandidateError("no joint here"), r).record().to_json()
    assert out["method"] == "geometric" and out["weights"] == plain.weights
    assert out["robust"]["moved"] == r.moved and out["robust"]["method"] == "robust"
    assert Projections("geometric", plain, CandidateError("x"), CandidateError("failed")).record().to_json()["robust"] == {"error": "failed"}
    assert "robust" not in Projections("geometric", plain, CandidateError("x")).record().to_json()


def test_projections_can_use_the_robust_projection():
    from autoscale_data.solver.projections import Projections

    plain = project(SCALES, 5e7)
    r = robust_project(SCALES, 5e7, {"web": 0.2, "code": 0.2, "books": 0.2})
    out = Projections("robust", plain, CandidateError("no joint"), r).record().to_json()
    assert out["method"] == "robust" and out["weights"] == r.weights and out["geometric"]["weights"] == plain.weights
    with pytest.raises(ValueError, match="robust projection was not computed"):
        Projections("robust", plain, CandidateError("no joint")).record().to_json()
    with pytest.raises(ValueError, match="robust projection failed: boom"):
        Projections("robust", plain, CandidateError("no joint"), CandidateError("boom")).record().to_json()
    with pytest.raises(ValueError, match="one of"):
        Projections("other", plain, CandidateError("no joint"), r).record().to_json()

"""The online controllers: update rules against hand-computed steps, state round trips, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from autoscale_data.online import ADO, ODM, PresetWeights, Replay, Window, check_proposal, replay_phases

NAMES = ("a", "b")


def window(t: int, losses, tokens=(10.0, 10.0), seen=(0, 0)) -> Window:
    return Window(step=t, update=t, loss_sums=np.asarray(losses) * np.asarray(tokens), tokens=tokens, seen=seen)


def test_odm_matches_exp3_by_hand() -> None:
    odm = ODM(NAMES)
    assert odm.initial_weights() == {"a": 0.5, "b": 0.5}
    # update 1: eps_1 = min(1/2, sqrt(ln 2 / 2)) = 1/2, so pi stays uniform; R = (3/10/0.5, 1/10/0.5)
    assert odm.update(window(1, (3.0, 1.0))) == pytest.approx({"a": 0.5, "b": 0.5})
    assert odm.rewards.tolist() == pytest.approx([0.6, 0.2])
    # update 2: R = (1.2, 0.4); eps_2 = sqrt(ln 2 / 4); pi = (1 - 2 eps_2) softmax(eps_1 R) + eps_2
    eps2 = math.sqrt(math.log(2) / 4)
    soft_a = math.exp(0.6) / (math.exp(0.6) + math.exp(0.2))
    got = odm.update(window(2, (3.0, 1.0)))
    assert got["a"] == pytest.approx((1 - 2 * eps2) * soft_a + eps2, rel=1e-12)
    assert got["b"] == pytest.approx((1 - 2 * eps2) * (1 - soft_a) + eps2, rel=1e-12)
    # update 3: only a has tokens; its importance weight is 1 / pi_a
    pa = got["a"]
    odm.update(window(3, (2.0, 0.0), tokens=(10.0, 0.0)))
    assert odm.rewards.tolist() == pytest.approx([1.2 + 0.2 / pa, 0.4])


def test_odm_raises_the_domain_whose_loss_stays_high() -> None:
    odm = ODM(("easy", "hard", "mid"))
    for t in range(1, 60):
        w = odm.update(window(t, (1.0, 5.0, 2.5), tokens=(1.0, 1.0, 1.0), seen=(0, 0, 0)))
    assert w["hard"] > w["mid"] > w["easy"]
    assert w["hard"] > 0.5


def test_ado_target_and_averages_by_hand() -> None:
    ado = ADO(NAMES, {"a": 0.25, "b": 0.75}, min_prob=0.0)
    ado.params = np.array([[2.0, 10.0, 0.5, 1.0], [4.0, 0.0, 0.02, 0.5]])  # A, a, b, c
    seen = np.array([90, 400])
    # slope_k = max(b, 0.05) A (n + a)^(-b) / (n + a); rho ∝ slope mu sqrt(h), h = prior
    s_a = 0.5 * 2.0 * 100 ** -0.5 / 100
    s_b = 0.05 * 4.0 * 400 ** -0.02 / 400
    ra, rb = s_a * 0.25 * 0.5, s_b * 0.75 * math.sqrt(0.75)
    assert ado.target(seen).tolist() == pytest.approx([ra / (ra + rb), rb / (ra + rb)], rel=1e-12)
    clipped = ADO(NAMES, {"a": 0.25, "b": 0.75}, min_prob=0.45)
    clipped.params = ado.params
    lo, hi = sorted([ra / (ra + rb), rb / (ra + rb)])  # the smaller share is raised to 0.45, then renormalised
    assert sorted(clipped.target(seen).tolist()) == pytest.approx([0.45 / (0.45 + hi), hi / (0.45 + hi)], rel=1e-12)


def test_ado_fits_the_laws_and_moves_towards_the_steeper_domain() -> None:
    ado = ADO(("a", "b", "c"), warmup=1)
    for t in range(1, 12):
        seen = np.array([100, 200, 300]) * t
        losses = 1.0 + 5.0 * seen.astype(float) ** -0.3
        w = ado.update(window(t, losses, tokens=(10.0, 10.0, 10.0), seen=seen))
        if t < ado.fit_after:
            assert w == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})
    assert ado.params is not None
    amp, off, b, c = ado.params.T
    far = 2.0 * seen
    assert amp * (far + off) ** -b + c == pytest.approx(1.0 + 5.0 * far ** -0.3, rel=1e-2)  # extrapolate 2x (coarse grid)
    assert w["a"] > w["b"] > w["c"]  # the fewest sequences seen: the steepest slope
    # p = 0.9 p_avg + 0.1 rho with p_avg the running average: replay the last step by hand
    before = ADO(("a", "b", "c"), warmup=1)
    before.load_state_dict(json.loads(json.dumps(ado.state_dict())))
    assert before.update(window(12, losses, tokens=(10.0,) * 3, seen=seen * 12 // 11)) == ado.update(
        window(12, losses, tokens=(10.0,) * 3, seen=seen * 12 // 11))


@pytest.mark.parametrize("make", [lambda: ODM(NAMES), lambda: ADO(NAMES, warmup=0),
                                  lambda: PresetWeights(NAMES, [(0, {"a": 1, "b": 0}), (3, {"a": 0.5, "b": 0.5})]),
                                  lambda: Replay(NAMES, [{"a": 0.1, "b": 0.9}] * 20)])
def test_state_round_trip_continues_identically(make) -> None:
    rng = np.random.default_rng(0)
    wins = [window(t, rng.uniform(1, 4, 2), seen=(50 * t + int(rng.integers(20)), 60 * t)) for t in range(1, 16)]
    full = make()
    ref = [full.update(w) for w in wins]
    for cut in (0, 4, 9):
        first = make()
        for w in wins[:cut]:
            first.update(w)
        resumed = make()
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        assert [resumed.update(w) for w in wins[cut:]] == ref[cut:]


def test_fixed_schedule_and_replay() -> None:
    fs = PresetWeights(NAMES, [(0, {"a": 1, "b": 0}), (2, {"a": 0.25, "b": 0.75})])
    assert fs.initial_weights() == {"a": 1.0, "b": 0.0}
    assert [fs.update(window(t, (1, 1)))["a"] for t in (1, 2, 3)] == [1.0, 0.25, 0.25]
    rp = Replay(NAMES, [[0.5, 0.5], [0.5, 0.5], [0.2, 0.8]], lookahead=2)
    assert rp.update(window(1, (1, 1))) == {"a": 0.2, "b": 0.8}
    with pytest.raises(ValueError, match="step 2: the replayed log has 3 segments"):
        rp.update(window(2, (1, 1)))
    assert replay_phases(NAMES, [[3, 1], [0, 4]], 8) == [(32, {"a": 0.75, "b": 0.25}), (32, {"a": 0.0, "b": 1.0})]


@pytest.mark.parametrize(("weights", "match"), [
    ({"a": float("nan"), "b": 1.0}, "step 7: weight nan of domain 'a'"),
    ({"a": -0.5, "b": 1.5}, "step 7: weight -0.5 of domain 'a'"),
    ({"a": 0.5, "b": 0.6}, "step 7: the weights .* sum to 1.1"),
    ({"a": 0.5, "b": 0.25, "zz": 0.25}, r"step 7: the controller named unknown domain\(s\) \['zz'\]"),
    ({"a": 1.0}, r"step 7: the controller gave no weight for domain\(s\) \['b'\]"),
    ([0.5, 0.25, 0.25], "step 7: the controller returned"),
])
def test_bad_proposals_name_the_step_and_value(weights, match) -> None:
    with pytest.raises(ValueError, match=match):
        check_proposal(7, weights, NAMES)


def test_bad_settings_and_states() -> None:
    with pytest.raises(ValueError, match="fit_after must be an integer >= 6"):
        ADO(NAMES, warmup=2, fit_after=3)
    with pytest.raises(ValueError, match="min_prob must be in"):
        ADO(NAMES, min_prob=0.6)
    with pytest.raises(ValueError, match="reward_scale"):
        ODM(NAMES, reward_scale=0)
    with pytest.raises(ValueError, match="not a state of the 'odm' controller: 'ado'"):
        ODM(NAMES).load_state_dict(ADO(NAMES).state_dict())
    with pytest.raises(ValueError, match="over the domains"):
        ODM(("x", "y")).load_state_dict(ODM(NAMES).state_dict())
    with pytest.raises(ValueError, match="non-finite per-domain losses"):
        window(3, (float("nan"), 1.0))

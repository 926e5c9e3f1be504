"""The loss simulator with known laws: ADO tracks the best allocation, ODM raises a domain whose loss stays high."""

from __future__ import annotations

import numpy as np
import pytest

from autoscale_data.online import ADO, ODM, PresetWeights
from autoscale_data.online.simulate import KnownLaws, simulate

NAMES = ("a", "b", "c", "d")
# steep to flat: the best allocation gives little to the domain that saturates fast (a)
LAWS = KnownLaws([3.0, 3.0, 3.0, 3.0], [0.6, 0.3, 0.15, 0.05], [1.0, 1.0, 2.0, 3.0])
TOTAL, SEGMENT = 100_000, 2_000


def test_best_allocation_equalises_the_marginal_gains() -> None:
    n = LAWS.best_allocation(TOTAL)
    assert n.sum() == pytest.approx(TOTAL)
    gains = LAWS.amplitude * LAWS.exponent * (n + 1) ** (-LAWS.exponent - 1)
    assert gains == pytest.approx(np.full(4, gains[0]), rel=1e-6)
    for k in range(4):  # moving 1% of the budget between any two domains does not help
        for j in range(4):
            if j != k:
                m = n.copy()
                m[k] -= 0.01 * TOTAL
                m[j] += 0.01 * TOTAL
                if m[k] >= 0:
                    assert LAWS.objective(m) >= LAWS.objective(n)


def test_simulated_segments_are_exact() -> None:
    sim = simulate(PresetWeights(NAMES, [(0, dict.fromkeys(NAMES, 0.25)), (5, {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4})]),
                   LAWS, 10_001, 1_000)
    assert int(sim.seen.sum()) == 10_001 and len(sim.counts) == 11
    target = np.cumsum(np.asarray(sim.weights) * np.asarray([sum(c) for c in sim.counts])[:, None], axis=0)
    assert np.abs(target - np.cumsum(sim.counts, axis=0)).max() < 1


@pytest.mark.timeout(120)
def test_ado_tracks_the_best_allocation() -> None:
    best = LAWS.best_allocation(TOTAL)
    uniform = np.full(4, TOTAL / 4)
    sim = simulate(ADO(NAMES, refit_every=4), LAWS, TOTAL, SEGMENT, noise=0.005, seed=1)
    gap_uniform = LAWS.objective(uniform) - LAWS.objective(best)
    gap_ado = LAWS.objective(sim.seen) - LAWS.objective(best)
    assert gap_ado < 0.5 * gap_uniform  # at least half of uniform's excess loss recovered
    assert np.abs(sim.seen - best).sum() < 0.6 * np.abs(uniform - best).sum()  # closer to the best allocation
    assert np.argsort(sim.seen).tolist() == np.argsort(best).tolist()  # the same order of the domains


@pytest.mark.timeout(60)
def test_odm_raises_the_domain_whose_loss_stays_high() -> None:
    sim = simulate(ODM(NAMES), LAWS, TOTAL, SEGMENT, noise=0.005, seed=1)
    final = np.asarray(sim.weights[-1])
    assert int(np.argmax(final)) == 3  # d: the highest floor, its loss stays high
    assert final[3] > 0.4 and sim.seen[3] == max(sim.seen)

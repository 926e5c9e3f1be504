"""ODM: online data mixing as a multi-armed bandit, EXP3 as published (Albalak et al., 2023).

Each domain is an arm; its reward is its training loss (a domain whose loss stays high is the one
still to learn). At update ``t`` (1, 2, ...) with ``K`` domains::

    eps_t   = min(1/K, sqrt(ln K / (K t)))
    R_i    += (loss_i / reward_scale) / pi_i          for every domain with tokens in the window
    pi_i    = (1 - K eps_t) softmax(eps_{t-1} R)_i + eps_t

(``eps_0 = 1/K``; the published code scales rewards by 1/10 and updates every domain present in a
mixed batch with its own importance weight ``1 / pi_i``). The exact sampler then realises ``pi``
exactly instead of drawing arms, so the controller draws no random numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import check_number
from .controller import Window, check_proposal, check_state

__all__ = ["ODM"]


class ODM:
    """The EXP3 mixing controller.

    Args:
        initial: the weights before the first update (default uniform).
        reward_scale: rewards are ``loss / reward_scale`` (10 in the published code).
    """

    name = "odm"

    def __init__(self, domain_names: Sequence[str], initial: Mapping[str, float] | None = None, *,
                 reward_scale: float = 10.0) -> None:
        self.domain_names = tuple(domain_names)
        k = len(self.domain_names)
        if k < 1:
            raise ValueError("ODM needs at least one domain")
        check_number("reward_scale", reward_scale)
        self.reward_scale = float(reward_scale)
        start = np.full(k, 1.0 / k) if initial is None else check_proposal(0, initial, self.domain_names)
        self._initial = start
        self.probabilities = start.copy()
        self.rewards = np.zeros(k)
        self.eps = 1.0 / k
        self.t = 0

    def initial_weights(self) -> dict[str, float]:
        return dict(zip(self.domain_names, self._initial.tolist(), strict=True))

    def update(self, window: Window) -> dict[str, float]:
        k = len(self.domain_names)
        means = window.means
        present = window.tokens > 0
        self.t += 1
        prev_eps = self.eps
        self.eps = min(1.0 / k, math.sqrt(math.log(k) / (k * self.t))) if k > 1 else 1.0
        self.rewards[present] += means[present] / self.reward_scale / self.probabilities[present]
        z = prev_eps * self.rewards
        soft = np.exp(z - z.max())
        w = (1.0 - k * self.eps) * soft / soft.sum() + self.eps
        self.probabilities = w / w.sum()
        return dict(zip(self.domain_names, self.probabilities.tolist(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {"controller": self.name, "domains": list(self.domain_names), "t": self.t, "eps": self.eps,
                "rewards": self.rewards.tolist(), "probabilities": self.probabilities.tolist(),
                "initial": self._initial.tolist(), "reward_scale": self.reward_scale}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_state(state, self.name, self.domain_names)
        self.t, self.eps = int(state["t"]), float(state["eps"])
        self.rewards = np.asarray(state["rewards"], dtype=np.float64)
        self.probabilities = np.asarray(state["probabilities"], dtype=np.float64)
        self._initial = np.asarray(state["initial"], dtype=np.float64)
        self.reward_scale = float(state["reward_scale"])


"""The trivial controllers: a fixed schedule of weights, and the replay of an online run's log.

:class:`PresetWeights` proposes weights given in advance (phases decided before the run, through
the online machinery); :class:`Replay` proposes an online run's realised weights again, in order,
and :func:`replay_phases` writes them as static phases for a re-run without a controller (the
ablation of every online-mixing method: the same data, in the same order, with no feedback).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .controller import Window, check_proposal, check_state

__all__ = ["PresetWeights", "Replay", "replay_phases"]


class PresetWeights:
    """Weights by update: ``schedule = [(0, w0), (u1, w1), ...]``: update ``u >= u_i`` proposes ``w_i``.

    Args:
        schedule: ``(first update, weights)`` pairs, the first at update 0 (the initial weights),
            in increasing order.
    """

    name = "fixed"

    def __init__(self, domain_names: Sequence[str],
                 schedule: Sequence[tuple[int, Mapping[str, float]]]) -> None:
        self.domain_names = tuple(domain_names)
        entries = [(int(u), check_proposal(int(u), w, self.domain_names)) for u, w in schedule]
        if not entries or entries[0][0] != 0:
            raise ValueError("a fixed schedule starts at update 0, got first updates "
                             f"{[u for u, _ in entries]}")
        if any(b[0] <= a[0] for a, b in zip(entries, entries[1:], strict=False)):
            raise ValueError(f"the schedule's updates must increase, got {[u for u, _ in entries]}")
        self.firsts = [u for u, _ in entries]
        self.weights = [w for _, w in entries]
        self.t = 0

    def _at(self, update: int) -> dict[str, float]:
        i = int(np.searchsorted(self.firsts, update, side="right")) - 1
        return dict(zip(self.domain_names, self.weights[i].tolist(), strict=True))

    def initial_weights(self) -> dict[str, float]:
        return self._at(0)

    def update(self, window: Window) -> dict[str, float]:
        self.t += 1
        return self._at(self.t)

    def state_dict(self) -> dict[str, Any]:
        return {"controller": self.name, "domains": list(self.domain_names), "t": self.t}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_state(state, self.name, self.domain_names)
        self.t = int(state["t"])


class Replay:
    """Proposes a logged run's weights again: ``log[j]`` for segment ``j``.

    Args:
        log: per segment, the weights (mappings or vectors), e.g. an :class:`OnlineMixture`'s
            ``segment_log()["weights"]``; its first ``lookahead`` entries are the initial weights.
        lookahead: the segments decided before the first update (the logged run's).
    """

    name = "replay"

    def __init__(self, domain_names: Sequence[str], log: Sequence[Any], lookahead: int = 1) -> None:
        self.domain_names = tuple(domain_names)
        self.log = [check_proposal(j, w, self.domain_names) for j, w in enumerate(log)]
        if not self.log:
            raise ValueError("the replayed log is empty")
        self.lookahead = int(lookahead)
        self.t = 0

    def initial_weights(self) -> dict[str, float]:
        return dict(zip(self.domain_names, self.log[0].tolist(), strict=True))

    def update(self, window: Window) -> dict[str, float]:
        self.t += 1
        j = self.lookahead + self.t - 1
        if j >= len(self.log):
            raise ValueError(f"step {window.step}: the replayed log has {len(self.log)} segments, update "
                             f"{self.t} asks for segment {j}")
        return dict(zip(self.domain_names, self.log[j].tolist(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {"controller": self.name, "domains": list(self.domain_names), "t": self.t}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_state(state, self.name, self.domain_names)
        self.t = int(state["t"])


def replay_phases(names: Sequence[str], counts: Sequence[Sequence[int]],
                  seq_len: int) -> list[tuple[int, dict]]:
    """An online run's realised segments as ``(budget_tokens, weights)`` phases of a static dataset.

    Each segment becomes a phase of ``len × seq_len`` tokens whose weights are its realised shares
    ``count / len``; a dataset built from them (``ScaleAwareMixtureDataset(stores, phases,
    sum of budgets, seq_len, seed)``) yields the online run's stream again, sequence for sequence.
    """
    out = []
    for j, row in enumerate(counts):
        c = np.asarray(row, dtype=np.int64)
        n = int(c.sum())
        if c.size != len(names) or n <= 0 or np.any(c < 0):
            raise ValueError(f"segment {j}: counts {c.tolist()} are not non-negative counts of {list(names)}")
        out.append((n * int(seq_len),
                    {name: float(x) / n for name, x in zip(names, c.tolist(), strict=True)}))
    return out

"""A stand-in mixture plan whose shares move with the budget (for the anytime schedule's tests)."""

from __future__ import annotations

import numpy as np

__all__ = ["PathPlan"]


class PathPlan:
    """Shares move from (0.2, 0.6, 0.2) at tiny budgets to (0.7, 0.2, 0.1) at 400 sequences of
    ``seq_len`` tokens (domains ``a``, ``b``, ``c``), along a geometric path."""

    def __init__(self, seq_len: int) -> None:
        self.seq_len = seq_len

    def _alloc(self, n: float) -> dict[str, float]:
        seq_len = self.seq_len
        x = min(1.0, max(0.0, np.log(max(n, seq_len) / seq_len) / np.log(400)))
        a1, a2 = np.array([0.2, 0.6, 0.2]) * seq_len, np.array([0.7, 0.2, 0.1]) * 400 * seq_len
        v = a1 * (a2 / a1) ** x
        return dict(zip("abc", v / v.sum() * n, strict=True))

    def weights_for_budget(self, n: float) -> dict[str, float]:
        return {k: v / n for k, v in self._alloc(n).items()}

    def allocation_for_budget(self, n: float) -> dict[str, float]:
        return self._alloc(n)

"""The closed-form stream of one fixed mix: one phase, whose weights matter only through its counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._phased import PhasedStream
from ._state import fingerprint

__all__ = ["FixedStream"]


class FixedStream(PhasedStream):
    """One fixed mix (fixed schedule, no phases): a state of a config other only in weights may be its own."""

    def same_stream(self, saved: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether ``saved`` differs from ``config`` only in weights that give every domain the same sequences
        (a plan's weights, then the report's rounded ones): the stream is built from the counts."""
        rest = [fingerprint({k: v for k, v in c.items() if k != "weights"}) for c in (saved, config)]
        return rest[0] == rest[1]

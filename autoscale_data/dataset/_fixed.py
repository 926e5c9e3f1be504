"""The closed-form stream of one fixed mix: a phased stream of one phase whose weights matter only through its counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._phased import PhasedStream
from ._state import fingerprint

__all__ = ["FixedStream"]


class FixedStream(PhasedStream):
    """One fixed mix (fixed schedule, no phases): a state whose config differs only in weights is of this stream."""

    def same_stream(self, saved: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        """Whether ``saved`` differs from ``config`` only in weights that give every domain the same sequences (a
        plan's weights, then the report's rounded ones): the stream is built from those counts, so it is this one."""
        rest = [fingerprint({k: v for k, v in c.items() if k != "weights"}) for c in (saved, config)]
        return rest[0] == rest[1]

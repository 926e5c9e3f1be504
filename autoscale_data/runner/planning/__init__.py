"""Planning: which runs an experiment trains, with how many tokens of each domain.

The stores as the plan sees them (``data``: :class:`~.data.DomainInfo`), the run specs and their ids
(``specs``), repetition-matched proxies (``repetition``) and time estimates (``estimate``).
"""

from __future__ import annotations

__all__ = ["data", "estimate", "repetition", "specs"]

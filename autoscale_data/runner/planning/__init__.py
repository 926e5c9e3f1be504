"""Planning: which runs an experiment trains, with how many tokens of each domain.

The stores as the plan sees them (``data``: :class:`~.data.DomainInfo`), the run specs and their ids
(``specs``), their hashed training settings as records (``settings``), repetition-matched proxies (``repetition``) and time estimates (``estimate``).
"""

from __future__ import annotations

__all__ = ["data", "estimate", "repetition", "settings", "specs"]

"""Planning: which runs an experiment trains, with how many tokens of each domain.

The stores as the plan sees them (``data``: :class:`~.data.DomainInfo`), the run specs and their ids
(``specs``), their hashed training settings as records (``settings``), repetition-matched proxies
(``repetition``), time estimates (``estimate``), the cheap design the dry run recommends (``cheap``) and the
DDO proxies of ``ddo.schedule: wsd``, one run per mix with cooldown branches (``wsd``).
"""

from __future__ import annotations

__all__ = ["cheap", "data", "estimate", "repetition", "settings", "specs", "wsd"]

"""The mixing methods: how each target mix is chosen, what runs that needs, and its cost.

The registry (``methods``), AutoScale's fits and projection (``fitting``), online mixing
(``online``) and the step hooks the methods' runs train with (``hooks``: DoReMi, online controllers).
"""

from __future__ import annotations

__all__ = ["fitting", "hooks", "methods", "online"]

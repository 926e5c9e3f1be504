"""The mixing methods: how each target mix is chosen, what runs that needs, and its cost.

The methods (``methods``; their declarations are :mod:`autoscale_data.runner.registry`), AutoScale's
fits and projection (``fitting``), online mixing (``online``: its methods and step hook) and DoReMi's
step hook (``hooks``; the protocol is :mod:`autoscale_data.runner.training.hooks`).
"""

from __future__ import annotations

__all__ = ["fitting", "hooks", "methods", "online"]

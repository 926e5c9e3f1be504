"""The mixing methods: how each target mix is chosen, what runs that needs, and its cost.

The methods (``methods``; their declarations are :mod:`autoscale_data.runner.registry`), AutoScale's
fits and projection (``fitting``), online mixing (``online_method``: its methods and step hook) and DoReMi's
step hook (``doremi_hook``; the protocol is :mod:`autoscale_data.runner.training.hooks`).
"""

from __future__ import annotations

__all__ = ["doremi_hook", "fitting", "methods", "online_method"]

"""The mixing methods: how each target mix is chosen, what runs that needs, and its cost.

The methods (``methods``; the registry's types are :mod:`autoscale_data.runner.registry`, the built-in
declarations ``builtin_methods``), AutoScale's
fits and projection (``fitting``), online mixing (``online_method``: its methods and step hook) and DoReMi's
step hook (``doremi_hook``; the protocol is :mod:`autoscale_data.runner.training.hooks`).
"""

from __future__ import annotations

__all__ = ["builtin_methods", "doremi_hook", "fitting", "methods", "online_method"]

"""The runner's configuration: :class:`RunnerConfig`, loaded from YAML or JSON, and its sections.

Every section is a frozen dataclass checked in ``__post_init__``; a bad value raises ``ValueError``
naming the field, the value and what was expected. ``runner_config`` holds :class:`RunnerConfig` and
its loaders, ``sections`` the model, optimizer, DDO, target, eval, DeepSpeed and executor sections,
``method_sections`` those of the built-in methods beside AutoScale (each registered method names its own),
``docs`` the config table of ``docs/runner.md``, rendered from the fields' attribute docstrings.
"""

from __future__ import annotations

from .runner_config import RunnerConfig, config_from_dict, config_to_dict, load_config

__all__ = ["RunnerConfig", "config_from_dict", "config_to_dict", "load_config"]

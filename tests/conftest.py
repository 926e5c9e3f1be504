"""Shared pytest fixtures.

Helpers shared by the test folders live in ``tests/common/`` (on ``sys.path`` from here).

Token-store fixtures (see ``tests/common/helpers_store.py`` for the writer behind them):

- ``make_store(name, num_tokens, **kw) -> TokenStore``: a synthetic domain store written under
  this test's ``tmp_path / "stores"`` (keyword arguments as ``write_synthetic_store``).
- ``store_root``: that directory (``tmp_path / "stores"``), usable as a ``prepare`` output
  directory once stores are in it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "common"))  # tests/common: helpers shared by every folder

from helpers_store import write_synthetic_store  # noqa: E402
from hypothesis import settings

from autoscale_data.store import TokenStore

# Property tests draw the same examples on every run (a red CI is then a regression, not a new
# random draw); HYPOTHESIS_PROFILE=explore searches fresh examples.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """The directory that ``make_store`` writes into (created on demand)."""
    return tmp_path / "stores"


@pytest.fixture
def make_store(store_root: Path) -> Callable[..., TokenStore]:
    """A factory writing synthetic stores: ``make_store("web", 10_000, val_tokens=500)``."""

    def _make(name: str, num_tokens: int, **kwargs: Any) -> TokenStore:
        return write_synthetic_store(store_root, name, num_tokens, **kwargs)

    return _make


@pytest.fixture(scope="session")
def ray_address() -> Any:
    """The address of a local Ray cluster owned by this test session (shut down at its end)."""
    ray = pytest.importorskip("ray")
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        yield context.address_info["address"]
    finally:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _method_registry_restored():
    """A test (or a docs snippet) that registers a mixing method leaves the registry as it found it (without
    importing the runner, and so torch, into tests that never touch it)."""
    name = "autoscale_data.runner.registry"
    registry = sys.modules.get(name)
    before = None if registry is None else dict(registry.MIXING_METHODS)
    yield
    registry = sys.modules.get(name)
    if registry is not None:
        registry.MIXING_METHODS.clear()
        builtin = sys.modules["autoscale_data.runner.mixes.builtin_methods"].BUILTINS
        registry.MIXING_METHODS.update(before if before is not None else {m.name: m for m in builtin})

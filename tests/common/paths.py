"""Paths of the repository, for tests in any folder below ``tests/``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["BENCHMARKS", "EXAMPLES", "REPO", "SHARED"]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BENCHMARKS = REPO / "benchmarks"
SHARED = REPO.parent / "shared"  # the published runs and references beside the checkout (not committed)

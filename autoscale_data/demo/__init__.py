"""The built-in demo: a synthetic multi-domain corpus, its prepared stores, and the AutoScale pipeline run on
them.

Needs the runner (``pip install 'autoscale-data[runner]'``): the demo hands the runner a config that
points at the stores it prepared.
"""

from __future__ import annotations

from .corpus import (
    DEMO_DOMAINS,
    DOMAIN_DESCRIPTIONS,
    SHIFT_DOMAINS,
    SyntheticWorld,
    generate_corpus,
    generate_documents,
)
from .demo import DEMO_PRESETS, DemoSettings, demo_config, format_demo_table, prepare_demo_data, run_demo
from .shift import SHIFT_PRESETS, ShiftCase, ShiftCaseResult, run_shift_case
from .stores import STORES_DOMAINS, prepare_synthetic_stores

__all__ = [
    "DEMO_DOMAINS",
    "DEMO_PRESETS",
    "DOMAIN_DESCRIPTIONS",
    "DemoSettings",
    "SHIFT_DOMAINS",
    "SHIFT_PRESETS",
    "STORES_DOMAINS",
    "ShiftCase",
    "ShiftCaseResult",
    "SyntheticWorld",
    "demo_config",
    "format_demo_table",
    "generate_corpus",
    "generate_documents",
    "prepare_demo_data",
    "prepare_synthetic_stores",
    "run_demo",
    "run_shift_case",
]

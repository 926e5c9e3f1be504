"""The built-in demo: a synthetic multi-domain corpus and the AutoScale pipeline run on it."""

from __future__ import annotations

from .corpus import DEMO_DOMAINS, DOMAIN_DESCRIPTIONS, SyntheticWorld, generate_corpus, generate_documents
from .demo import DEMO_PRESETS, DemoSettings, demo_config, format_demo_table, prepare_demo_data, run_demo

__all__ = [
    "DEMO_DOMAINS",
    "DEMO_PRESETS",
    "DOMAIN_DESCRIPTIONS",
    "DemoSettings",
    "SyntheticWorld",
    "demo_config",
    "format_demo_table",
    "generate_corpus",
    "generate_documents",
    "prepare_demo_data",
    "run_demo",
]

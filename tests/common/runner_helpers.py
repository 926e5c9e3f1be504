"""Shared helpers for the runner tests: tiny configs over synthetic stores."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from helpers_store import write_synthetic_store

__all__ = ["tiny_config", "tiny_stores"]


def tiny_stores(root: Path, names: tuple[str, ...] = ("a", "b"), num_tokens: int = 40_000,
                val_tokens: int = 2_048) -> Path:
    """Synthetic byte-vocabulary stores ``root/<name>`` (a prepare-style directory)."""
    for i, name in enumerate(names):
        if not (root / name / "manifest.json").exists():
            write_synthetic_store(root, name, num_tokens, seed=i, val_tokens=val_tokens)
    return root


def tiny_config(domains: str | os.PathLike[str], **overrides: Any) -> dict[str, Any]:
    """A config dict small enough to train in a second or two per run on one CPU thread."""
    cfg: dict[str, Any] = {
        "name": "test",
        "domains": os.fspath(domains),
        "model": {"preset": "gpt2-tiny", "overrides": {"n_layer": 1, "n_embd": 32, "n_head": 2}},
        "seq_len": 32,
        "micro_batch_size": 4,
        "global_batch_size": 8,
        "optimizer": {"lr": 3e-3},
        "ddo": {"budgets": [4096, 8192], "min_weight": 0.05, "objective": "mean_loss"},
        "target": {"budget": 16384, "baselines": ["uniform", "ddo_n2"]},
        "eval": {"heldout_tokens_per_domain": 512, "proxy_points": 1, "target_points": 4},
        "checkpoint_every": 4,
        "cpu_threads": 1,
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg

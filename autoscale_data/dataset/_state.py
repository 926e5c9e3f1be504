"""The mixture's config fingerprint, JSON-able resume states, and sample conversion."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..store import TokenStore

__all__ = [
    "BASE_KEY",
    "BLOCK_KEY",
    "CONFIG_KEY",
    "CURSOR_KEY",
    "DOMAIN_COUNTS_KEY",
    "FINGERPRINT_KEY",
    "FORMAT_KEY",
    "NEXT_UNIT_KEY",
    "NUM_WORKERS_KEY",
    "ONLINE_KEY",
    "PHASE_KEY",
    "RANK_KEY",
    "STATE_FORMAT",
    "STEP_KEY",
    "TOTAL_SEQUENCES_KEY",
    "VERSION_KEY",
    "WORKER_ID_KEY",
    "WORKER_KEY",
    "WORLD_SIZE_KEY",
    "compact_dtype",
    "config_diff",
    "fingerprint",
    "store_summary",
    "to_output",
]

STATE_FORMAT = "autoscale-mixture-state"

# The keys of a mixture's resume state (``ScaleAwareMixtureDataset.state_dict``), each spelt here only.
FORMAT_KEY = "format"  # STATE_FORMAT
VERSION_KEY = "version"  # the state version
FINGERPRINT_KEY = "fingerprint"  # the config's fingerprint
CONFIG_KEY = "config"  # the config itself
CURSOR_KEY = "cursor"  # the global stream position before which every sample has been yielded
DOMAIN_COUNTS_KEY = "domain_counts"  # domain name -> samples of that domain before the cursor
TOTAL_SEQUENCES_KEY = "total_sequences"  # the stream's length
RANK_KEY = "rank"
WORLD_SIZE_KEY = "world_size"
WORKER_KEY = "worker"  # a DataLoader worker's own progress, or None
PHASE_KEY = "phase"  # the phase of the position at the cursor
# The training loop's global step at which the state was saved (state_dict(step=...)), or None when unknown
# (saved with samples_taken, from the iterator, or by an earlier autoscale_data, whose states lack the key).
STEP_KEY = "step"
ONLINE_KEY = "online"  # the online mixture's state, when the weights are adapted during training
# The keys of a DataLoader worker's own progress (the state's WORKER_KEY), besides RANK_KEY and
# WORLD_SIZE_KEY.
WORKER_ID_KEY = "id"
NUM_WORKERS_KEY = "num_workers"
BLOCK_KEY = "block"  # samples per unit (the batch size, or 1)
BASE_KEY = "base"  # the cursor the worker's pass started from
NEXT_UNIT_KEY = "next_unit"  # the worker's next unit of that pass


def store_summary(store: TokenStore) -> dict[str, Any]:
    """What identifies a store's training content: token count, tokenizer and shard checksums."""
    digest = hashlib.sha256()
    for shard in store.manifest.splits["train"].shards:
        digest.update(f"{shard.num_tokens}:{shard.sha256}\n".encode())
    return {
        "tokens": int(store.num_tokens),
        "tokenizer": store.manifest.tokenizer.fingerprint,
        "content": digest.hexdigest()[:16],
    }


def fingerprint(config: Mapping[str, Any]) -> str:
    """A short hash of a JSON-able config."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def config_diff(saved: Mapping[str, Any], current: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Human-readable lines naming every key whose value differs between two configs."""
    lines: list[str] = []
    for key in sorted(set(saved) | set(current)):
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            lines.extend(config_diff(a, b, f"{prefix}{key}."))
        elif a != b:
            lines.append(f"{prefix}{key}: saved {a!r}, now {b!r}")
    return lines


def to_output(tokens: np.ndarray, output: str) -> Any:
    """A copy of a (read-only, memory-mapped) token array as the requested output type.

    ``torch``: ``int64`` tensor; ``numpy``: ``int64`` array; ``compact``: a tensor of the store's
    dtype (``torch.uint16``, ``int32``, ``int64``) or ``int32`` for ``uint32`` stores.
    """
    if output == "torch":
        return torch.from_numpy(tokens.astype(np.int64))
    if output == "numpy":
        return tokens.astype(np.int64)
    tokens = np.array(tokens)
    if tokens.dtype == np.uint32:
        tokens = tokens.view(np.int32)
    return torch.from_numpy(tokens)


def compact_dtype(store_dtype: np.dtype) -> torch.dtype:
    """The tensor dtype of ``output="compact"`` tokens: ``uint16``, ``int32``, ``int64`` as is, ``uint32`` as
    ``int32`` (same bits)."""
    return {2: torch.uint16, 4: torch.int32, 8: torch.int64}[np.dtype(store_dtype).itemsize]

"""autoscale_data: scale-aware data mixing for LLM pre-training.

Public names are imported lazily (PEP 562), so ``import autoscale_data`` stays cheap and the pure
numpy/scipy parts (``solver``, ``mixing``, ``store``) never pull in torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (add new exports here AND to __all__, keeping both sorted)
_EXPORTS: dict[str, str] = {
    "StoreWriter": "autoscale_data.store",
    "TokenStore": "autoscale_data.store",
    "Tokenizer": "autoscale_data.store",
    "TokenizerInfo": "autoscale_data.store",
    "check_compatible": "autoscale_data.store",
    "find_domain_stores": "autoscale_data.store",
    "load_tokenizer": "autoscale_data.store",
    "prepare": "autoscale_data.store",
    "train_bpe_tokenizer": "autoscale_data.store",
}

__all__ = [
    "StoreWriter",
    "TokenStore",
    "Tokenizer",
    "TokenizerInfo",
    "__version__",
    "check_compatible",
    "find_domain_stores",
    "load_tokenizer",
    "prepare",
    "train_bpe_tokenizer",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'autoscale_data' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

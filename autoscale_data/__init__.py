"""autoscale_data: scale-aware data mixing for LLM pre-training."""

from .store import StoreWriter, TokenizerInfo, TokenStore

__version__ = "0.1.0"

__all__ = [
    "StoreWriter",
    "TokenStore",
    "TokenizerInfo",
    "__version__",
]

"""autoscale_data: scale-aware data mixing for LLM pre-training.

The top level holds what a user of the sampler and the solver needs; everything else lives in the
subpackages (``store``, ``mixing``, ``solver``, ``dataset``; ``runner`` and ``demo`` with the
``runner`` extra). Names are imported lazily (PEP 562): ``import autoscale_data`` stays cheap, and a
solver or store name never pulls in torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "BootstrapResult",
    "DDOResult",
    "DomainLossMeter",
    "JointFit",
    "MissingExtraError",
    "MixturePlan",
    "MixtureValidationDataset",
    "Projection",
    "Run",
    "RunTable",
    "ScaleAwareMixtureDataset",
    "TokenStore",
    "__version__",
    "baseline_weights",
    "bootstrap_ddo",
    "ddo_runs_plan",
    "fit_ddo",
    "fit_joint",
    "load_tokenizer",
    "open_store",
    "prepare",
    "project",
]

# Where a name of __all__ is looked up: the first of these modules whose own __all__ lists it.
# Cheapest first, so that a store or solver name never imports torch (the dataset does).
_PARTS = ("autoscale_data._extras", "autoscale_data.store", "autoscale_data.solver", "autoscale_data.dataset")


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'autoscale_data' has no attribute {name!r}")
    for part in _PARTS:
        module = importlib.import_module(part)
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"autoscale_data.__all__ lists {name!r} but none of {_PARTS} exports it")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

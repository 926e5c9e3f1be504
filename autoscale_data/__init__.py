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
    "BootstrapResult": "autoscale_data.solver",
    "DDOResult": "autoscale_data.solver",
    "MixturePlan": "autoscale_data.solver",
    "MixtureRunner": "autoscale_data.runner",
    "MixtureValidationDataset": "autoscale_data.dataset",
    "PowerLawFit": "autoscale_data.solver",
    "Projection": "autoscale_data.solver",
    "Run": "autoscale_data.solver",
    "RunTable": "autoscale_data.solver",
    "RunnerConfig": "autoscale_data.runner",
    "ScaleAwareMixtureDataset": "autoscale_data.dataset",
    "StoreWriter": "autoscale_data.store",
    "TokenStore": "autoscale_data.store",
    "Tokenizer": "autoscale_data.store",
    "TokenizerInfo": "autoscale_data.store",
    "baseline_weights": "autoscale_data.solver",
    "bootstrap_ddo": "autoscale_data.solver",
    "bootstrap_projection": "autoscale_data.solver",
    "check_compatible": "autoscale_data.store",
    "ddo_runs_plan": "autoscale_data.solver",
    "export_webdataset": "autoscale_data.store",
    "find_domain_stores": "autoscale_data.store",
    "fit_ddo": "autoscale_data.solver",
    "fit_power_law": "autoscale_data.solver",
    "heldout_scale_check": "autoscale_data.solver",
    "import_webdataset": "autoscale_data.store",
    "load_tokenizer": "autoscale_data.store",
    "open_store": "autoscale_data.store",
    "prepare": "autoscale_data.store",
    "project": "autoscale_data.solver",
    "sample_mixtures": "autoscale_data.solver",
    "train_bpe_tokenizer": "autoscale_data.store",
}

__all__ = [
    "BootstrapResult",
    "DDOResult",
    "MixturePlan",
    "MixtureRunner",
    "MixtureValidationDataset",
    "PowerLawFit",
    "Projection",
    "Run",
    "RunTable",
    "RunnerConfig",
    "ScaleAwareMixtureDataset",
    "StoreWriter",
    "TokenStore",
    "Tokenizer",
    "TokenizerInfo",
    "__version__",
    "baseline_weights",
    "bootstrap_ddo",
    "bootstrap_projection",
    "check_compatible",
    "ddo_runs_plan",
    "export_webdataset",
    "find_domain_stores",
    "fit_ddo",
    "fit_power_law",
    "heldout_scale_check",
    "import_webdataset",
    "load_tokenizer",
    "open_store",
    "prepare",
    "project",
    "sample_mixtures",
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

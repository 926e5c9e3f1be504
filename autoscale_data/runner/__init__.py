"""MixtureRunner: plan -> proxy runs (torch or DeepSpeed) -> DDO fits -> projection -> target runs -> report.

The only layer that knows about models, optimisers and DeepSpeed; installed by the ``runner`` extra
(``pip install 'autoscale-data[runner]'``: transformers, matplotlib), and importing it without them
raises :class:`~autoscale_data._extras.MissingExtraError`. Start with
``MixtureRunner(load_config("examples/tiny-cpu.yaml"), "runs/tiny").run()`` or the CLI
``autoscale-data run CONFIG``.
"""

from __future__ import annotations

from .._extras import require

require("runner", "autoscale_data.runner")

from .config import RunnerConfig, config_from_dict, config_to_dict, load_config
from .config.sections import REPETITION_MATCH, REPETITION_MODES
from .experiment import ConfigChangedError, load_folder_config
from .ledger import Ledger
from .mixes import builtin_methods  # noqa: F401  (registers the built-in mixing methods before any is read)
from .models import PRESETS as MODEL_PRESETS
from .pipeline import MixtureRunner
from .planning.specs import RunSpec, target_spec
from .records import RunResult
from .reporting.metrics import tokens_saved, tokens_to_reach
from .reporting.report import build_report, write_report
from .reporting.report_types import Report
from .reporting.summary import format_summary
from .training.downstream import evaluate_run_dir

__all__ = [
    "ConfigChangedError",
    "Ledger",
    "MODEL_PRESETS",
    "MixtureRunner",
    "REPETITION_MATCH",
    "REPETITION_MODES",
    "Report",
    "RunResult",
    "RunSpec",
    "RunnerConfig",
    "build_report",
    "config_from_dict",
    "config_to_dict",
    "evaluate_run_dir",
    "format_summary",
    "load_config",
    "load_folder_config",
    "target_spec",
    "tokens_saved",
    "tokens_to_reach",
    "write_report",
]

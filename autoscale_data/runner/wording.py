"""Sentences the report (``report.md``) and the console summary share, written once.

Each function takes the report's parts (the fits' plain JSON, or :mod:`.report_types` objects) and returns text without markup; the markdown
renderer adds its own emphasis around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report_types import TokensSaved

__all__ = ["bootstrap_verdict", "bounds_moved", "objective_key", "signed_per_seed", "stale_runs"]


def objective_key(objective: str | None) -> str:
    """The report field that holds the objective: ``"mean_ppl"`` or ``"mean_loss"``."""
    return "mean_ppl" if objective == "mean_ppl" else "mean_loss"


def bootstrap_verdict(boot: Mapping[str, Any]) -> str:
    """What the bootstrap at one budget says about the DDO weights (a clause, no budget)."""
    if boot.get("available") and boot.get("method") == "consistent_fits":
        return ("the runs carry no estimate of noise (one run per point): the intervals are the range over the "
                "fits consistent with the data, and no verdict is given")
    if boot.get("available"):
        verdict = "distinguishable from" if boot.get("distinguishable_from_base") else "NOT distinguishable from"
        return f"the DDO weights are {verdict} the base mix ({boot.get('method')}, {boot.get('level', 0.95):.0%} CI)"
    return f"not available ({boot.get('reason')})"


def bounds_moved(proj: Mapping[str, Any], arrow: str = "->") -> str | None:
    """The sentence on weight bounds applied at the target, or ``None`` when the projection kept them."""
    moved = proj.get("bounds_applied")
    if not moved:
        return None
    lo, hi = proj["weight_bounds"]
    what = ", ".join(f"{d} {a:.3f} {arrow} {b:.3f}" for d, (a, b) in moved.items())
    return (f"the projection left the weight bounds [{lo:g}, {hi:g}] (ddo.min_weight / max_weight; the paper's "
            f"projection is unbounded): the target mix applies them and the other domains keep their ratios: {what}")


def stale_runs(count: int) -> str | None:
    """The note on runs of an earlier config in the folder, or ``None``."""
    if not count:
        return None
    return (f"{count} runs in this folder belong to an earlier config of the experiment and are not reported "
            "(the old config is in config_history.jsonl)")


def signed_per_seed(per_seed: Mapping[str, TokensSaved]) -> str:
    """``"s0 +9.9%, s1 -3.1%"``: the signed saving of each seed (``n/a`` where neither curve reaches the other)."""
    def one(s: TokensSaved) -> str:
        return "n/a" if s.signed_fraction is None else f"{s.signed_fraction:+.1%}"
    return ", ".join(f"s{seed} {one(s)}" for seed, s in per_seed.items()) or "–"

"""Sentences the report (``report.md``) and the console summary share, written once.

Each function takes the report's parts (the fits' plain JSON, or :mod:`.report_types` objects) and returns
text without markup; the markdown renderer adds its own emphasis around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...solver import BootstrapResult
from .. import layout

if TYPE_CHECKING:
    from ..records import BootstrapUnavailable, ProjectionFile
    from .report_types import Report, TokensSaved, Verdict

__all__ = [
    "VERDICT_TAGS",
    "bootstrap_verdict",
    "bounds_moved",
    "comparison_verdict",
    "mlm_coverage",
    "signed_per_seed",
    "stale_runs",
    "unigram_warnings",
    "verdict_tag",
]


def bootstrap_verdict(boot: BootstrapResult | BootstrapUnavailable) -> str:
    """What the bootstrap at one budget says about the DDO weights (a clause, no budget)."""
    if not isinstance(boot, BootstrapResult):
        return f"not available ({boot.reason})"
    if boot.method == "consistent_fits":
        return ("the runs carry no estimate of noise (one run per point): the intervals are the range over "
                "the fits consistent with the data, and no verdict is given")
    verdict = "distinguishable from" if boot.distinguishable_from_base else "NOT distinguishable from"
    return f"the DDO weights are {verdict} the base mix ({boot.method}, {boot.level:.0%} CI)"


def bounds_moved(proj: ProjectionFile, arrow: str = "->") -> str | None:
    """The sentence on weight bounds applied at the target, or ``None`` when the projection kept them."""
    moved = proj.bounds_applied
    if not moved or not proj.weight_bounds:
        return None
    lo, hi = proj.weight_bounds
    what = ", ".join(f"{d} {a:.3f} {arrow} {b:.3f}" for d, (a, b) in moved.items())
    return (f"the projection left the weight bounds [{lo:g}, {hi:g}] (ddo.min_weight / max_weight; the "
            "paper's projection is unbounded): the target mix applies them and the other domains keep their "
            f"ratios: {what}")


def stale_runs(count: int) -> str | None:
    """The note on runs of an earlier config in the folder, or ``None``."""
    if not count:
        return None
    return (f"{count} runs in this folder belong to an earlier config of the experiment and are not reported "
            "(the old config is in config_history.jsonl)")


def signed_per_seed(per_seed: Mapping[str, TokensSaved]) -> str:
    """``"s0 +9.9%, s1 -3.1%"``: the signed saving of each seed (``n/a`` where neither curve reaches the
    other)."""
    return ", ".join(f"s{seed} " + ("n/a" if s.signed_fraction is None else f"{s.signed_fraction:+.1%}")
                     for seed, s in per_seed.items()) or "–"


def _mix_name(label: str) -> str:
    return "AutoScale" if label == layout.AUTOSCALE else label


# : A paired verdict (:func:`~autoscale_data.runner.reporting.metrics.paired_verdict`) in a few words, as
# plain as the proxies'.
VERDICT_TAGS = {"better": "better beyond seed noise", "worse": "WORSE beyond seed noise",
                "not_distinguishable": "NOT distinguishable from seed noise",
                "cannot_judge": "CANNOT be judged (one seed: no estimate of seed noise)"}


def verdict_tag(v: Verdict) -> str:
    """The verdict in a few words, as plain as the proxies': ``"NOT distinguishable from seed noise"``."""
    return VERDICT_TAGS.get(v.verdict, v.verdict)


def comparison_verdict(v: Verdict, key: str) -> str:
    """One sentence: the verdict of ``v.method`` against ``v.baseline`` and the paired numbers behind it.

    ``key`` names the objective compared (``mean_loss``). The sentence leads with the verdict, so a
    percentage printed after it reads in its light.
    """
    name, base = _mix_name(v.method), _mix_name(v.baseline)
    d = v.difference
    if v.verdict == "cannot_judge":
        seeds = "no seed in common" if d.n == 0 else (f"one paired seed, final {key} difference "
                                                        f"{d.mean:+.4f}, so any tokens-saved percentage is "
                                                        "one seed's draw")
        return (f"{name} vs {base} CANNOT be judged against seed noise: {seeds}. Train two or more seeds "
                "(config `target.seeds`) to judge it")
    head = {"better": f"{name} is better than {base} beyond seed noise",
            "worse": f"{name} is WORSE than {base} beyond seed noise",
            "not_distinguishable": f"{name} is NOT distinguishable from "
                                   f"{base}"}.get(v.verdict, f"{name} vs {base}")
    holds = "holds 0" if v.verdict == "not_distinguishable" else "leaves out 0"
    return (f"{head}: final {key} difference {d.mean:+.4f} ± {d.std:.4f} over {d.n} paired seeds "
            f"({v.level:.0%} CI [{v.ci_low:+.4f}, {v.ci_high:+.4f}] {holds}; {name} lower on {v.method_wins} "
            f"of {d.n} seeds)")


def unigram_warnings(report: Report) -> list[str]:
    """One sentence per target mix whose final loss does not beat the held-out data's unigram loss."""
    out = []
    for label, domains in report.not_beating_unigram.items():
        t = report.targets.get(label)
        if t is None:
            continue
        what = ", ".join(f"{d} {t.losses[d].mean:.4f} >= "
                         f"{report.reference_losses[d].unigram:.4f}" for d in domains)
        out.append(f"{label} does not beat the unigram loss of the held-out tokens ({what}): on these "
                   "domains the model predicts worse than token frequencies alone, so which mix won there "
                   "says nothing yet (train longer, or a larger model)")
    return out


def mlm_coverage(report: Report) -> list[str]:
    """For a masked LM, the note on how few held-out tokens each evaluation scores (empty for a causal LM)."""
    ref = report.reference_losses
    if not ref or all(r.scored_tokens >= r.tokens for r in ref.values()):
        return []
    scored = ", ".join(f"{d} ~{r.scored_tokens:,.0f} of {r.tokens:,}" for d, r in ref.items())
    return [f"  masked-LM evaluation scores only the masked share of the held-out tokens ({scored} per "
            "domain): raise eval.mlm_passes (more masks over the same tokens) or "
            "eval.heldout_tokens_per_domain for steadier losses"]

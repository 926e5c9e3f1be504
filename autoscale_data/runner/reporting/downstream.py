"""The report's "Downstream tasks" section: the zero-shot tasks of every target mix (config ``eval.tasks``).

Each mix is judged against uniform and AutoScale on the task-mean bits per byte, paired by seed, with the same
test and words as the loss table (:func:`~.metrics.paired_verdict`, :data:`~.wording.VERDICT_TAGS`).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from ...evaluation import DownstreamResult
from .. import layout
from ..planning.specs import RunSpec
from .metrics import mean_std, paired_verdict
from .report_types import Downstream, DownstreamRow, Report, TaskMean, Verdict
from .wording import verdict_tag

__all__ = ["build_downstream", "downstream_cells", "downstream_markdown"]

def _verdict(bpb: dict[str, dict[int, float]], method: str, baseline: str) -> Verdict | None:
    if method == baseline or baseline not in bpb:
        return None
    return paired_verdict(method, bpb[method], baseline, bpb[baseline])


def build_downstream(out: Path, finished: list[RunSpec], labels: dict[str, list[str]],
                     tasks: list[str]) -> Downstream | None:
    """The section's numbers from the finished runs' target runs (``labels``: run id -> the target mixes it
    stands for); ``None`` without ``tasks`` or any result."""
    if not tasks:
        return None
    found: dict[str, list[tuple[int, DownstreamResult]]] = {}
    for spec in finished:
        if spec.kind != "target":
            continue
        result: DownstreamResult | None = layout.read(out / layout.RUNS / spec.run_id, layout.DOWNSTREAM)
        # other tasks (an earlier config): not comparable
        if result is None or sorted(result.tasks) != sorted(tasks):
            continue
        for label in labels.get(spec.run_id) or [spec.label]:
            found.setdefault(label, []).append((spec.seed, result))
    if not found:
        return None
    bpb = {label: {s: r.mean_bpb for s, r in sorted(rs, key=lambda x: x[0])} for label, rs in found.items()}
    rows = {}
    for label, rs in sorted(found.items()):
        scores = [r for _, r in rs]
        per_task = {t: TaskMean(**{m: mean_std([getattr(r.tasks[t], m) for r in scores])
                                   for m in ("acc", "acc_norm", "bpb")}) for t in tasks}
        rows[label] = DownstreamRow(
            tasks=per_task, mean_acc=mean_std([r.mean_acc for r in scores]),
            mean_bpb=mean_std([r.mean_bpb for r in scores]),
            per_seed_bpb={str(s): v for s, v in bpb[label].items()},
            vs_uniform=_verdict(bpb, label, layout.UNIFORM),
            vs_autoscale=_verdict(bpb, label, layout.AUTOSCALE))
    first = next(iter(found.values()))[0][1]
    return Downstream(tasks=tasks, examples={t: first.tasks[t].examples for t in tasks},
                      chance={t: first.tasks[t].chance for t in tasks}, rows=rows)


def _tag(v: Verdict | None) -> str:
    if v is None:
        return "–"
    if v.verdict == "cannot_judge":
        return verdict_tag(v)
    return f"{verdict_tag(v)} ({v.difference.mean:+.3f})"


def downstream_markdown(r: Report) -> list[str]:
    """``report.md``'s section "Downstream tasks" (empty without ``eval.tasks`` results)."""
    d = r.downstream
    if d is None or not d.rows:
        return []
    tasks = d.tasks
    counts = ", ".join(f"{t} {d.examples[t]}" for t in tasks)
    lines = ["## Downstream tasks", "",
             f"Zero-shot ranked classification of each target run's final model on {len(tasks)} tasks "
             f"(questions per task: {counts}; the same questions for every run), mean ± std over seeds. Bits "
             "per byte (bpb) of the gold answer: lower is better, and it moves long before accuracy leaves "
             "chance at small scale. The verdicts compare the task-mean bpb paired by seed (Student-t, "
             "95%), as the loss table does; the difference in parentheses is this mix minus the other.", "",
             "| mix | " + " | ".join(f"{t} bpb" for t in tasks) + " | mean bpb | vs uniform | vs AutoScale |",
             "|---|" + "---:|" * (len(tasks) + 1) + "---|---|"]
    for label, row in d.rows.items():
        lines.append(f"| {label} | " + " | ".join(row.tasks[t].bpb.text(3) for t in tasks)
                     + f" | {row.mean_bpb.text(3)} | {_tag(row.vs_uniform)} | {_tag(row.vs_autoscale)} |")
    lines += ["", "Accuracy (length-normalised accuracy in parentheses, per character as lm-eval's "
                  "acc_norm):", "",
              "| mix | " + " | ".join(tasks) + " | mean acc |", "|---|" + "---:|" * (len(tasks) + 1)]
    for label, row in d.rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{row.tasks[t].acc.text(3)} "
                                                  f"({row.tasks[t].acc_norm.mean:.3f})"
                                                  for t in tasks) + f" | {row.mean_acc.text(3)} |")
    lines.append("| chance | " + " | ".join(f"{d.chance[t]:.3f}" for t in tasks)
                 + f" | {statistics.fmean(d.chance.values()):.3f} |")
    return lines + [""]


def downstream_cells(r: Report, label: str) -> str:
    """The comparison table's cells of one method: `` bpb | acc |`` of the task means (empty without
    tasks)."""
    d = r.downstream
    if d is None or not d.rows:
        return ""
    row = d.rows.get(label)
    return " – | – |" if row is None else f" {row.mean_bpb.text(3)} | {row.mean_acc.text(3)} |"

"""Import/export of the ``ratios.csv`` + ``metrics.csv`` pair used by other mixture tools (Olmix).

``ratios.csv``: one row per run; columns ``run`` (id), optional ``name``/``index`` and an unnamed
pandas index column, then one column per training domain holding its mixture weight.
``metrics.csv``: same ``run`` ids; one column per metric (validation domain). Ratios carry no token
counts, so reading needs ``total_tokens`` (one number for all runs, or per run id).
"""

from __future__ import annotations

import csv
import io
import math
import os
import warnings
from collections.abc import Mapping, Sequence

from .._io import atomic_write_text
from .runs import Run, RunTable

__all__ = ["SHARE_SUM_TOL", "read_olmix", "write_olmix"]

SHARE_SUM_TOL = 0.05
"""A run's ratios may sum to 1 within this (rounding; published tables sum to 1.02) without a warning."""

_META = ("", "run", "name", "index")


def _read(path: str | os.PathLike[str], what: str) -> tuple[list[str], list[dict[str, str]]]:
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = [(h or "").strip() for h in (reader.fieldnames or [])]
        rows = [{(k or "").strip(): (v or "").strip() for k, v in r.items()} for r in reader]
    if "run" not in header:
        raise ValueError(f"{path}: missing column 'run' (columns: {header})")
    ids = [r["run"] for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"{path}: duplicate run ids {dup}")
    return header, rows


def _num(row: dict[str, str], col: str, where: str) -> float:
    s = row.get(col, "")
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"{where}: column {col!r} must be a number, got {s!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{where}: column {col!r} is {s!r} (NaN/inf)")
    return v


def read_olmix(ratios: str | os.PathLike[str], metrics: str | os.PathLike[str], *,
               total_tokens: float | Mapping[str, float], metric: str = "loss",
               metric_columns: Sequence[str] | None = None) -> RunTable:
    """Read an Olmix ratio/metric pair into a :class:`RunTable`.

    Args:
        ratios: path of ``ratios.csv`` (mixture weights per run).
        metrics: path of ``metrics.csv`` (one column per validation metric).
        total_tokens: tokens of every run, or a mapping run id -> tokens.
        metric: ``"loss"`` (values used as-is, e.g. nats or bits-per-byte) or ``"ppl"`` (log taken).
        metric_columns: which metric columns to use (default: all but run/name/index).

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: the two files list different runs, bad numbers, negative weights, missing
            columns or totals.
    """
    if metric not in ("loss", "ppl"):
        raise ValueError(f"metric must be 'loss' or 'ppl', got {metric!r}")
    rh, rrows = _read(ratios, "ratios")
    mh, mrows = _read(metrics, "metrics")
    domains = [h for h in rh if h not in _META]
    if not domains:
        raise ValueError(f"{os.fspath(ratios)}: no domain columns")
    cols = [h for h in mh if h not in _META] if metric_columns is None else list(metric_columns)
    missing = [c for c in cols if c not in mh]
    if missing or not cols:
        raise ValueError(f"{os.fspath(metrics)}: metric columns {missing or cols} not found (have {mh})")
    mrow = {r["run"]: r for r in mrows}
    rids, mids = [r["run"] for r in rrows], set(mrow)
    if set(rids) != mids:
        raise ValueError(
            f"ratios and metrics list different runs: only in ratios {sorted(set(rids) - mids)}, "
            f"only in metrics {sorted(mids - set(rids))}"
        )
    runs = []
    for r in rrows:
        rid = r["run"]
        w, s = _weights(r, domains, f"{os.fspath(ratios)} run {rid!r}")
        if isinstance(total_tokens, Mapping) and rid not in total_tokens:
            raise ValueError(f"total_tokens has no entry for run {rid!r}")
        n = float(total_tokens[rid] if isinstance(total_tokens, Mapping) else total_tokens)
        if not (math.isfinite(n) and n > 0):
            raise ValueError(f"total_tokens for run {rid!r} must be > 0, got {n}")
        vals = _values(mrow[rid], cols, metric, f"{os.fspath(metrics)} run {rid!r}")
        runs.append(Run(rid, {d: v / s * n for d, v in w.items()}, vals, label=r.get("name", "")))
    return RunTable(runs)


def _values(row: dict[str, str], cols: Sequence[str], metric: str, where: str) -> dict[str, float]:
    """A metrics row's values as losses (the log of perplexities)."""
    vals = {c: _num(row, c, where) for c in cols}
    if metric == "ppl":
        bad = [c for c, v in vals.items() if v <= 0]
        if bad:
            raise ValueError(f"{where}: perplexities must be > 0 in {bad}")
        vals = {c: math.log(v) for c, v in vals.items()}
    return vals


def _weights(row: dict[str, str], domains: Sequence[str], where: str) -> tuple[dict[str, float], float]:
    """A ratios row's weights and their sum (> 0; a sum away from 1 is warned of, as the caller
    renormalises)."""
    w = {d: _num(row, d, where) for d in domains}
    neg = [d for d, v in w.items() if v < 0]
    if neg:
        raise ValueError(f"{where}: negative weights for {neg}")
    s = sum(w.values())
    if s <= 0:
        raise ValueError(f"{where}: weights sum to {s}")
    if abs(s - 1.0) > SHARE_SUM_TOL:
        warnings.warn(f"{where}: weights sum to {s:.4g}, not 1 (more than rounding): renormalised to sum 1; "
                      "check the ratios file", stacklevel=3)
    return w, s


def write_olmix(table: RunTable, ratios: str | os.PathLike[str], metrics: str | os.PathLike[str], *,
                metric: str = "loss") -> None:
    """Write ``table`` as an Olmix pair: weights (tokens / run total) and losses (or perplexities)."""
    if metric not in ("loss", "ppl"):
        raise ValueError(f"metric must be 'loss' or 'ppl', got {metric!r}")
    rb, mb = io.StringIO(), io.StringIO()
    rw, mw = csv.writer(rb, lineterminator="\n"), csv.writer(mb, lineterminator="\n")
    rw.writerow(["", "run", "name", "index", *table.train_domains])
    mw.writerow(["", "run", "name", "index", *table.val_domains])
    for i, r in enumerate(table.runs):
        tot = r.total_tokens
        if tot <= 0:
            raise ValueError(f"run {r.run_id!r} has no tokens; cannot write ratios")
        rw.writerow([i, r.run_id, r.label, i, *(repr(r.tokens[d] / tot) for d in table.train_domains)])
        vals = (r.loss[d] if metric == "loss" else math.exp(r.loss[d]) for d in table.val_domains)
        mw.writerow([i, r.run_id, r.label, i, *(repr(v) for v in vals)])
    atomic_write_text(ratios, rb.getvalue())
    atomic_write_text(metrics, mb.getvalue())

"""Run records: tokens per training domain and per-domain validation loss of each proxy run.

CSV layout (one row per run)::

    run,seed,label,tokens.code,tokens.web,loss.code,loss.web
    base,0,,1000000,1000000,3.21,4.02

``loss.<domain>`` is mean validation loss in nats/token; ``ppl.<domain>`` (perplexity) is accepted
instead and converted with ``log``. ``seed`` and ``label`` are optional. Olmix's
``ratios.csv`` + ``metrics.csv`` pair is read and written by :mod:`autoscale_data.solver.olmix`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .._io import atomic_write_text

__all__ = ["Run", "RunTable", "check_same_columns"]

SHARE_MAX = 1.5  # a tokens.<domain> column whose every value is at most this reads as shares, not tokens


def _finite(value: float, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return v


@dataclass(frozen=True)
class Run:
    """One training run.

    Attributes:
        run_id: unique id of the run.
        tokens: training tokens per training domain (>= 0).
        loss: validation loss per validation domain, nats/token.
        seed: optional seed (runs at one allocation with different seeds are replicates).
        label: free text.
    """

    run_id: str
    tokens: dict[str, float]
    loss: dict[str, float]
    seed: int | None = None
    label: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id.strip():
            raise ValueError(f"run_id must be a non-empty string, got {self.run_id!r}")
        if not self.tokens:
            raise ValueError(f"run {self.run_id!r}: no training domains in tokens")
        if not self.loss:
            raise ValueError(f"run {self.run_id!r}: no validation losses")
        tokens = {}
        for d, v in self.tokens.items():
            v = _finite(v, f"run {self.run_id!r} tokens.{d}")
            if v < 0:
                raise ValueError(f"run {self.run_id!r}: tokens.{d} = {v:g} is negative")
            tokens[str(d)] = v
        loss = {str(d): _finite(v, f"run {self.run_id!r} loss.{d}") for d, v in self.loss.items()}
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "loss", loss)
        if self.seed is not None and not isinstance(self.seed, (int, np.integer)):
            raise ValueError(f"run {self.run_id!r}: seed must be an int or None, got {self.seed!r}")

    @property
    def total_tokens(self) -> float:
        """Sum of training tokens over domains."""
        return float(sum(self.tokens.values()))


def _domain_diff(a: Sequence[str], b: Sequence[str]) -> str:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    return f"missing {only_b} / extra {only_a}"


def _check_columns(source: str, tok: Sequence[str], loss: Sequence[str], ppl: Sequence[str]) -> None:
    """A table's domain columns: some ``tokens.*``, and ``loss.*`` or ``ppl.*`` (never both for a domain)."""
    if not tok:
        raise ValueError(f"{source}: no 'tokens.<domain>' columns")
    if not loss and not ppl:
        raise ValueError(f"{source}: no 'loss.<domain>' or 'ppl.<domain>' columns")
    both = sorted(set(loss) & set(ppl))
    if both:
        raise ValueError(f"{source}: domains {both} have both loss.* and ppl.* columns")


def _refuse_shares(source: str, domains: Sequence[str], runs: Sequence[Run]) -> None:
    """A ``tokens.<d>`` column whose every value is in ``(0, SHARE_MAX]`` holds shares (no run trains on 1
    token)."""
    for d in domains:
        values = [r.tokens[d] for r in runs]
        if max(values) > 0 and max(values) <= SHARE_MAX:
            lo, hi = min(r.total_tokens for r in runs), max(r.total_tokens for r in runs)
            totals = f"{hi:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g}"
            raise ValueError(
                f"{source}: column 'tokens.{d}' looks like shares, not tokens: every value is at most "
                f"{SHARE_MAX:g} (largest {max(values):.4g}; the runs' totals: {totals} tokens); expected the "
                f"number of training tokens each run took from {d!r} (e.g. 4e6): multiply each share by the "
                "run's total training tokens")


def check_same_columns(tables: Sequence[RunTable], names: Sequence[str],
                       val_domains: Sequence[str] | Mapping[str, float] | None = None) -> None:
    """Refuse tables (one per budget) whose ``tokens.<d>`` or objective's ``loss.<d>`` columns differ.

    A ``loss.<d>`` column missing from one budget's file would silently change the objective between
    budgets. With ``val_domains`` (the objective's domains) only those loss columns must be in every file.

    Raises:
        ValueError: naming the file (``names[k]``) and the column missing or extra, against ``names[0]``.
    """
    if not tables:
        return
    first, wanted = tables[0], None if val_domains is None else sorted({str(d) for d in val_domains})
    for k, (table, name) in enumerate(zip(tables, names, strict=True)):
        for prefix, have, ref in (("tokens", table.train_domains, first.train_domains),
                                  ("loss", table.val_domains, first.val_domains)):
            if prefix == "loss" and wanted is not None:  # only the objective's columns must be everywhere
                missing, extra = sorted(set(wanted) - set(have)), []
            else:
                missing, extra = sorted(set(ref) - set(have)), sorted(set(have) - set(ref))
            for what, cols, other in (("missing", missing, "has it"), ("extra", extra, "lacks it")):
                if cols:
                    against = "the objective reads it" if k == 0 or wanted is not None and prefix == "loss" \
                        else f"{names[0]} {other}"
                    shown = ", ".join(f"'{prefix}.{d}'" for d in cols)
                    raise ValueError(
                        f"{name}: column(s) {shown} {what} ({against}); every budget's file needs the same "
                        f"{prefix}.<domain> columns, else the {'objective' if prefix == 'loss' else 'mix'} "
                        "changes between budgets: add or drop the column (or name the objective's domains "
                        "with --objective-weights / val_domains)")


@dataclass(frozen=True)
class RunTable:
    """A validated table of runs sharing the same training and validation domains.

    Raises:
        ValueError: empty table, duplicate run ids, or runs whose domains differ.
    """

    runs: tuple[Run, ...]
    train_domains: tuple[str, ...] = field(init=False)
    val_domains: tuple[str, ...] = field(init=False)

    def __init__(self, runs: Sequence[Run]) -> None:
        runs = tuple(runs)
        if not runs:
            raise ValueError("a RunTable needs at least one run")
        seen: set[str] = set()
        for r in runs:
            if not isinstance(r, Run):
                raise ValueError(f"expected Run objects, got {type(r).__name__}")
            if r.run_id in seen:
                raise ValueError(f"duplicate run id {r.run_id!r}")
            seen.add(r.run_id)
        train, val = tuple(runs[0].tokens), tuple(runs[0].loss)
        for r in runs[1:]:
            if set(r.tokens) != set(train):
                raise ValueError(
                    f"run {r.run_id!r} has training domains {sorted(r.tokens)}, run "
                    f"{runs[0].run_id!r} has {sorted(train)} ({_domain_diff(r.tokens, train)})"
                )
            if set(r.loss) != set(val):
                raise ValueError(
                    f"run {r.run_id!r} has validation domains {sorted(r.loss)}, run "
                    f"{runs[0].run_id!r} has {sorted(val)} ({_domain_diff(r.loss, val)})"
                )
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "train_domains", train)
        object.__setattr__(self, "val_domains", val)

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[Run]:
        return iter(self.runs)

    def __getitem__(self, run_id: str) -> Run:
        for r in self.runs:
            if r.run_id == run_id:
                return r
        raise KeyError(run_id)

    def tokens_matrix(self) -> np.ndarray:
        """Tokens, shape ``(runs, train domains)`` in ``train_domains`` order."""
        return np.array([[r.tokens[d] for d in self.train_domains] for r in self.runs], dtype=np.float64)

    def loss_matrix(self) -> np.ndarray:
        """Validation loss (nats), shape ``(runs, val domains)`` in ``val_domains`` order."""
        return np.array([[r.loss[d] for d in self.val_domains] for r in self.runs], dtype=np.float64)

    # ------------------------------------------------------------------ CSV
    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> RunTable:
        """Read runs from a CSV with ``run``, ``tokens.<d>``, ``loss.<d>``/``ppl.<d>`` [, ``seed``,
        ``label``].

        Raises:
            FileNotFoundError: no such file.
            ValueError: missing/unknown columns, empty cells, NaN, negative tokens, duplicate ids.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"runs file not found: {path}")
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            rows = list(reader)
        return cls.from_rows(header, rows, source=path)

    @classmethod
    def from_rows(cls, header: Sequence[str], rows: Sequence[Mapping[str, str]], *,
                  source: str = "<rows>") -> RunTable:
        """Build a table from CSV-like string rows (see :meth:`from_csv`)."""
        if "run" not in header:
            raise ValueError(f"{source}: missing column 'run' (columns: {list(header)})")
        tok = [h[len("tokens."):] for h in header if h.startswith("tokens.")]
        loss = [h[len("loss."):] for h in header if h.startswith("loss.")]
        ppl = [h[len("ppl."):] for h in header if h.startswith("ppl.")]
        unknown = [h for h in header if h not in ("run", "seed", "label")
                   and not h.startswith(("tokens.", "loss.", "ppl."))]
        if unknown:
            raise ValueError(f"{source}: unknown columns {unknown}; expected run, seed, label, "
                             "tokens.<domain>, loss.<domain> or ppl.<domain>")
        _check_columns(source, tok, loss, ppl)
        runs = []
        for i, row in enumerate(rows, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
            rid = row.get("run", "")
            where = f"{source} line {i} (run {rid!r})"
            if not rid:
                raise ValueError(f"{source} line {i}: empty run id")
            for col in [f"tokens.{d}" for d in tok] + [f"loss.{d}" for d in loss] + [f"ppl.{d}" for d in ppl]:
                if row.get(col, "") == "":
                    raise ValueError(f"{where}: empty value in column {col!r}")
            tokens = {d: _finite(row[f"tokens.{d}"], f"{where} tokens.{d}") for d in tok}
            losses = {d: _finite(row[f"loss.{d}"], f"{where} loss.{d}") for d in loss}
            for d in ppl:
                p = _finite(row[f"ppl.{d}"], f"{where} ppl.{d}")
                if p <= 0:
                    raise ValueError(f"{where}: ppl.{d} = {p:g} must be > 0")
                losses[d] = math.log(p)
            seed_s = row.get("seed", "")
            try:
                seed = int(seed_s) if seed_s != "" else None
            except ValueError:
                raise ValueError(f"{where}: seed must be an integer, got {seed_s!r}") from None
            try:
                runs.append(Run(rid, tokens, losses, seed=seed, label=row.get("label", "")))
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
        if not runs:
            raise ValueError(f"{source}: no runs")
        table = cls(runs)
        _refuse_shares(source, tok, runs)
        return table

    def to_csv(self, path: str | os.PathLike[str], *, metric: str = "loss") -> None:
        """Write the table as CSV (atomically); ``metric="ppl"`` writes ``ppl.<d>`` = exp(loss)."""
        if metric not in ("loss", "ppl"):
            raise ValueError(f"metric must be 'loss' or 'ppl', got {metric!r}")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["run", "seed", "label"] + [f"tokens.{d}" for d in self.train_domains]
                   + [f"{metric}.{d}" for d in self.val_domains])
        for r in self.runs:
            vals = [r.loss[d] if metric == "loss" else math.exp(r.loss[d]) for d in self.val_domains]
            w.writerow([r.run_id, "" if r.seed is None else r.seed, r.label]
                       + [repr(r.tokens[d]) for d in self.train_domains] + [repr(v) for v in vals])
        atomic_write_text(path, buf.getvalue())

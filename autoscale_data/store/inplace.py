"""Tokenized data read in place: a manifest that describes existing token files without copying them.

:func:`register_in_place` writes ``STORE_DIR/manifest.json`` for data in one of the formats of
:mod:`autoscale_data.store.formats`; :func:`register_domains` registers several as the domains of a
``prepare`` output directory. User guide (documents without inserted EOS, the checks): docs/prepare.md.

Validation split: the format's separate validation data when given; otherwise the last
``num_documents // holdout_every`` documents (at least one of two or more), a contiguous tail.
Shards are byte ranges of at most ``shard_tokens`` tokens, each with its own SHA-256 (a ``datasets``
record batch is never merged with the next one); a split's ``data_dir`` is relative to ``store_dir``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int
from .._io import atomic_write_json, fsync_dir
from .._options import build_options
from .formats import FORMATS, FORMER_NAMES, InPlaceFormat, InPlaceSource, Segment, detect_format, get_format
from .manifest import MANIFEST_NAME, Manifest, ShardInfo, SplitInfo, write_manifest
from .prepare import (
    DEFAULT_HOLDOUT_EVERY,
    PREPARE_INDEX,
    DomainResult,
    check_domain_name,
    check_out_dir,
    unchanged_store,
)
from .tokenizers import Tokenizer, load_tokenizer
from .writer import DEFAULT_SHARD_TOKENS

__all__ = ["InPlaceDomain", "InPlaceOptions", "register_domains", "register_in_place"]

_SCAN_TOKENS = 1 << 24


@dataclass(frozen=True)
class InPlaceOptions:
    """Settings of a registration, the same for every format (validated on creation).

    Args:
        holdout_every: without separate validation data, the last ``num_documents // holdout_every``
            documents are held out (module docstring); at least 2.
        shard_tokens: the most tokens of one shard (a byte range with its own SHA-256).
        progress: show a progress bar (only on a terminal).
        workers: threads that read the shards (None: the number of CPUs).
    """

    holdout_every: int = DEFAULT_HOLDOUT_EVERY
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    progress: bool = False
    workers: int | None = None

    def __post_init__(self) -> None:
        check_int("holdout_every", self.holdout_every, minimum=2)
        check_int("shard_tokens", self.shard_tokens)
        check_int("workers", self.workers, allow_none=True)


@dataclass(frozen=True)
class InPlaceDomain:
    """One domain's data read in place: its path, its format and the format's options.

    Args:
        source: the data (a Megatron prefix, a ``save_to_disk`` directory, ...).
        format: a name of :data:`~autoscale_data.store.formats.FORMATS`; None: the format of
            ``options`` when given, else the one format that recognises ``source``.
        options: the format's options dataclass (e.g. ``MegatronOptions(val_prefix=...)``);
            None: its defaults.
    """

    source: str | os.PathLike[str]
    format: str | None = None
    options: Any = None

    def __post_init__(self) -> None:
        if self.format is None and self.options is not None:
            owner = next((f.name for f in FORMATS.values() if isinstance(self.options, f.options)), None)
            if owner is None:
                raise ValueError(f"options {self.options!r} are not the options of an in-place format; "
                                 f"expected one of {[f.options.__name__ for f in FORMATS.values()]}")
            object.__setattr__(self, "format", owner)
        if self.format is not None:
            fmt = get_format(self.format)
            if self.options is not None and not isinstance(self.options, fmt.options):
                raise ValueError(f"options {self.options!r} given for format {fmt.name!r}, which takes "
                                 f"{fmt.options.__name__}")

    def open(self) -> tuple[InPlaceSource, InPlaceSource | None]:
        """(train data, separate validation data or None), read by the format (found from ``source`` when
        not given) with its options (defaults when not given)."""
        fmt = get_format(self.format) if self.format is not None else detect_format(self.source)
        return fmt.open(Path(self.source), self.options if self.options is not None else fmt.options())


def _take_documents(segments: Sequence[Segment], first: int, stop: int, itemsize: int) -> list[Segment]:
    """The parts of ``segments`` holding documents ``[first, stop)`` (numbered across all segments)."""
    out: list[Segment] = []
    at = 0
    for seg in segments:
        n = int(seg.doc_lengths.size)
        lo, hi = max(first - at, 0), min(stop - at, n)
        if lo < hi:
            skip = int(seg.doc_lengths[:lo].sum())
            out.append(Segment(seg.file, seg.offset + skip * itemsize, seg.doc_lengths[lo:hi],
                               seg.file_bytes))
        at += n
    return out


@dataclass(frozen=True)
class _Range:
    """A shard to be: ``num_tokens`` tokens of ``path`` from byte ``offset``; ``ends`` are its documents'
    ends."""

    path: Path
    offset: int
    num_tokens: int
    num_documents: int
    file_bytes: int
    ends: np.ndarray


def _plan(segments: Sequence[Segment], itemsize: int, shard_tokens: int, directory: Path) -> list[_Range]:
    """Cut ``segments`` into ranges of at most ``shard_tokens`` tokens (a document counts where it ends)."""
    ranges: list[_Range] = []
    for seg in segments:
        ends = np.cumsum(seg.doc_lengths)
        total = int(ends[-1]) if ends.size else 0
        for a in range(0, total, shard_tokens):
            b = min(a + shard_tokens, total)
            before = int(np.searchsorted(ends, a, side="right")) if a else 0  # from 0: empty documents too
            docs = int(np.searchsorted(ends, b, side="right")) - before
            ranges.append(_Range(directory / seg.file, seg.offset + a * itemsize, b - a, docs, seg.file_bytes,
                                 ends[(ends > a) & (ends <= b)] - a))
    return ranges


def _scan(r: _Range, dtype: np.dtype, tokenizer: Tokenizer, progress: Any) -> tuple[ShardInfo, int]:
    """Read a range once: its shard (with SHA-256) and how many of its documents end with EOS.

    Raises:
        ValueError: a token id outside the tokenizer's vocabulary.
    """
    tokens = np.memmap(r.path, dtype=dtype, mode="r", offset=r.offset, shape=(r.num_tokens,))
    digest = hashlib.sha256()
    for c in range(0, r.num_tokens, _SCAN_TOKENS):
        chunk = tokens[c : c + _SCAN_TOKENS]
        digest.update(memoryview(np.ascontiguousarray(chunk)).cast("B"))  # hashlib and numpy release the GIL
        lo, hi = int(chunk.min()), int(chunk.max())
        if lo < 0 or hi >= tokenizer.vocab_size:
            bad = hi if hi >= tokenizer.vocab_size else lo
            raise ValueError(f"{os.fspath(r.path)!r} holds token id {bad} (bytes {r.offset}.."
                             f"{r.offset + r.num_tokens * dtype.itemsize}), outside the vocabulary "
                             f"[0, {tokenizer.vocab_size}) of tokenizer {tokenizer.spec!r}: was it tokenized "
                             "by another tokenizer?")
        progress.update(chunk.size)
    eos_ended = int(np.count_nonzero(tokens[r.ends - 1] == tokenizer.eos_id)) if r.ends.size else 0
    shard = ShardInfo(r.path.name, r.num_tokens, r.num_documents, digest.hexdigest(), r.offset, r.file_bytes)
    return shard, eos_ended


def _relative_dir(directory: Path, store_dir: Path) -> str:
    target, here = directory.resolve(), store_dir.resolve()
    if target == here:
        return ""
    try:
        return os.path.relpath(target, here)
    except ValueError:  # pragma: no cover - another drive (Windows)
        return os.fspath(target)


def _fingerprint(train: InPlaceSource, val: InPlaceSource | None, tokenizer: Tokenizer,
                 holdout: dict[str, Any], shard_tokens: int, version_1: bool = False) -> str:
    """The manifest's ``source["fingerprint"]`` for this data and these settings."""
    source = train.description
    if version_1:  # a version 1 manifest recorded the format's former name
        source = {**source,
                  "format": next(old for old, new in FORMER_NAMES.items() if new == source["format"])}
    files = [[os.fspath(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns]
             for src in (train, val) if src is not None for f in src.inputs]
    desc = {"files": files, "tokenizer": tokenizer.fingerprint, "holdout": holdout,
            "shard_tokens": shard_tokens,
            "source": source}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode("utf-8")).hexdigest()


def _holdout_rule(val: InPlaceSource | None, holdout_every: int) -> dict[str, Any]:
    if val is not None:
        return {"rule": "separate_validation_data", "path": os.fspath(val.directory)}
    return {"rule": "last_documents", "every": holdout_every,
            "val_when": "document_index >= num_documents - num_documents // every",
            "fallback": "the last document when that holds out none and there are >= 2 documents"}


def _check_data(name: str, train: InPlaceSource, val: InPlaceSource | None, tok: Tokenizer) -> None:
    if val is not None and val.dtype != train.dtype:
        raise ValueError(f"train data has {train.dtype} tokens but validation data has {val.dtype}")
    if train.num_tokens == 0:
        raise ValueError(f"domain {name!r} has no tokens in {os.fspath(train.directory)!r}")
    # before reading any token (the manifest checks it too)
    if tok.vocab_size > int(np.iinfo(train.dtype).max) + 1:
        raise ValueError(f"vocab_size {tok.vocab_size} does not fit dtype {train.dtype} of the data in "
                         f"{os.fspath(train.directory)!r}: was it tokenized by tokenizer {tok.spec!r}?")


def _split_ranges(train: InPlaceSource, val: InPlaceSource | None, itemsize: int,
                  opts: InPlaceOptions) -> dict[str, tuple[InPlaceSource, list[_Range]]]:
    """Each split's data and its shards to be (the held-out tail of ``train`` when ``val`` is None)."""
    if val is None:
        n = train.num_documents
        n_val = n // opts.holdout_every or (1 if n >= 2 else 0)
        parts = {"train": (train, _take_documents(train.segments, 0, n - n_val, itemsize)),
                 "val": (train, _take_documents(train.segments, n - n_val, n, itemsize))}
    else:
        parts = {"train": (train, list(train.segments)), "val": (val, list(val.segments))}
    return {split: (src, _plan(segs, itemsize, opts.shard_tokens, src.directory))
            for split, (src, segs) in parts.items()}


def _scan_splits(name: str, plans: Mapping[str, tuple[InPlaceSource, list[_Range]]], dtype: np.dtype,
                 tok: Tokenizer, out: Path, opts: InPlaceOptions) -> tuple[dict[str, SplitInfo], int, int]:
    """Read every range once on ``opts.workers`` threads: (splits, documents ending with EOS, documents)."""
    from tqdm.auto import tqdm

    total = sum(r.num_tokens for _, ranges in plans.values() for r in ranges)
    bar = tqdm(desc=f"register {name}", total=total, unit="tok", unit_scale=True,
               disable=None if opts.progress else True)
    splits: dict[str, SplitInfo] = {}
    eos_ended = num_docs = 0
    try:
        with ThreadPoolExecutor(max_workers=opts.workers or os.cpu_count() or 1) as pool:
            for split, (src, ranges) in plans.items():
                scanned = list(pool.map(lambda r: _scan(r, dtype, tok, bar), ranges))
                eos_ended += sum(ended for _, ended in scanned)
                num_docs += sum(r.num_documents for r in ranges)
                splits[split] = SplitInfo(tuple(shard for shard, _ in scanned),
                                          _relative_dir(src.directory, out))
    finally:
        bar.close()
    return splits, eos_ended, num_docs


def _register(name: str, domain: InPlaceDomain, out: Path, tok: Tokenizer,
              opts: InPlaceOptions) -> DomainResult:
    """Write ``out/manifest.json`` for ``domain`` (or keep it when nothing changed); see the module
    docstring."""
    start = time.perf_counter()
    check_domain_name(name)
    train, val = domain.open()
    _check_data(name, train, val, tok)
    holdout = _holdout_rule(val, opts.holdout_every)
    fingerprint = _fingerprint(train, val, tok, holdout, opts.shard_tokens)
    kept = unchanged_store(out, fingerprint,
                           partial(_fingerprint, train, val, tok, holdout, opts.shard_tokens, True))
    if kept is not None:
        return DomainResult(name, kept, True, time.perf_counter() - start)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    dtype = np.dtype(train.dtype).newbyteorder("<")
    plans = _split_ranges(train, val, dtype.itemsize, opts)
    splits, eos_ended, num_docs = _scan_splits(name, plans, dtype, tok, out, opts)
    source = {**train.description, "fingerprint": fingerprint, "documents": num_docs,
              "documents_ending_with_eos": eos_ended}
    if val is not None:
        source["validation"] = val.description
    manifest = Manifest(name=name, dtype=train.dtype, tokenizer=tok.info, splits=splits, holdout=holdout,
                        source=source)
    fsync_dir(out)
    write_manifest(out, manifest)
    if eos_ended < num_docs:
        warnings.warn(f"domain {name!r}: {num_docs - eos_ended} of {num_docs} documents do not end with the "
                      f"EOS id {tok.eos_id}; sequences run across those document boundaries without a "
                      "separator (Megatron: preprocess with --append-eod)", UserWarning, stacklevel=3)
    return DomainResult(name, manifest, False, time.perf_counter() - start)


def _split_settings(fmt: InPlaceFormat, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``settings`` as (those of :class:`InPlaceOptions`, those of the format's options).

    Raises:
        TypeError: a setting of neither (naming it and both lists of fields).
    """
    common = [f.name for f in dataclasses.fields(InPlaceOptions)]
    own = [f.name for f in dataclasses.fields(fmt.options)]
    unknown = sorted(set(settings) - set(common) - set(own))
    if unknown:
        raise TypeError(f"register_in_place() got unknown setting(s) {unknown}; format {fmt.name!r} takes "
                        f"{own}, every format takes {common}")
    return ({k: v for k, v in settings.items() if k in common},
            {k: v for k, v in settings.items() if k in own})


def register_in_place(
    source: str | os.PathLike[str],
    store_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    *,
    format: str | None = None,
    name: str | None = None,
    eos: str | int | None = None,
    options: InPlaceOptions | None = None,
    **settings: Any,
) -> DomainResult:
    """Register tokenized data read in place as the store ``store_dir`` (its manifest; the data is not
    copied).

    Args:
        source: the data in one of the formats of ``FORMATS`` (a Megatron prefix, a ``save_to_disk``
            directory).
        store_dir: where the manifest goes (created; the data's directory is fine).
        tokenizer: the tokenizer that made the data (a spec for ``load_tokenizer`` or a loaded one):
            its vocabulary bounds the ids, its fingerprint decides which stores mix.
        format: a name of ``FORMATS``; None: the one format that recognises ``source``.
        name: the domain name (default: ``store_dir``'s name).
        eos: the EOS token (text or id) of a tokenizer whose files name none.
        options: an :class:`InPlaceOptions` (``holdout_every``, ``shard_tokens``, ``progress``, ``workers``).
        **settings: those settings as keywords (they override ``options``), and the fields of the
            format's options (``val_prefix=``, ``column=``).

    Returns:
        What was done: the manifest written, or kept (``skipped``) when the data and settings are unchanged.

    Raises:
        TypeError: a setting that neither ``InPlaceOptions`` nor the format's options has.
        ValueError: an unknown format, an invalid name or setting, token ids outside the tokenizer's
            vocabulary, a dtype too small for it, or train and val data of different dtypes.
        FileNotFoundError: missing data, or data of no known format (with ``format=None``).
    """
    fmt = get_format(format) if format is not None else detect_format(source)
    common, own = _split_settings(fmt, settings)
    opts = build_options(InPlaceOptions, options, common, caller="register_in_place")
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer, eos=eos)
    out = Path(store_dir)
    domain = InPlaceDomain(source, fmt.name, fmt.options(**own))
    return _register(name or out.resolve().name, domain, out, tok, opts)


def register_domains(
    out_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    domains: Mapping[str, InPlaceDomain | str | os.PathLike[str]],
    *,
    eos: str | int | None = None,
    options: InPlaceOptions | None = None,
    **settings: Any,
) -> dict[str, DomainResult]:
    """Register data read in place as domains ``out_dir/NAME/`` of a ``prepare`` output directory.

    ``out_dir/prepare.json`` lists them next to the domains already there (which must share the
    tokenizer), so ``out_dir`` can be given to the mixture dataset as is.

    Args:
        out_dir: the output directory (created).
        tokenizer: the tokenizer that made the data.
        domains: domain name -> its data: an :class:`InPlaceDomain` (a path, a format, the format's
            options), or a path alone (its format found from it, default options).
        eos: the EOS token (text or id) of a tokenizer whose files name none.
        options: an :class:`InPlaceOptions`, or its settings as keywords (``**settings``).
    """
    opts = build_options(InPlaceOptions, options, settings, caller="register_domains")
    specs = {name: d if isinstance(d, InPlaceDomain) else InPlaceDomain(d) for name, d in domains.items()}
    if not specs:
        raise ValueError("no domains given: pass at least one domain's data in one of the formats "
                         f"{sorted(FORMATS)}")
    for name in specs:
        check_domain_name(name)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer, eos=eos)
    out = Path(out_dir)
    kept = check_out_dir(out, list(specs), tok)
    out.mkdir(parents=True, exist_ok=True)
    results = {name: _register(name, spec, out / name, tok, opts) for name, spec in specs.items()}
    index_path = out / PREPARE_INDEX
    try:
        index = json.loads(index_path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        index = {}
    domains_listed = {**kept, **dict(index.get("domains", {})), **{n: n for n in results}}
    index.update({"format": "autoscale-data-prepare", "version": 1, "tokenizer": asdict(tok.info),
                  "domains": domains_listed})
    index.setdefault("holdout", _holdout_rule(None, opts.holdout_every))
    atomic_write_json(index_path, index)
    return results

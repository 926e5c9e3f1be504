"""``prepare``: tokenize each domain's documents into its own token store, ``OUT/NAME/``.

Every non-empty document is encoded and followed by the tokenizer's EOS id. Tokens are uint16
when the vocabulary fits, else uint32 (see :mod:`autoscale_data.store.manifest`).

Validation holdout (fixed and documented, recorded in each manifest's ``holdout``): the
documents of a domain are numbered ``j = 0, 1, 2, ...`` in input order (empty documents are
skipped and not numbered); document ``j`` goes to the ``val`` split when
``j % holdout_every == holdout_every - 1`` (default ``holdout_every = 100``: 1% of documents).
If that gives a domain no validation document and it has at least two documents, its last
document goes to ``val`` instead. A domain of one document has no validation split.

Workers (byte-identical output for any count), atomic writes and re-runs: docs/prepare.md. A re-run skips
a domain whose ``manifest.source["fingerprint"]`` is unchanged: it hashes the input files (paths relative to
the input, sizes, mtimes), the tokenizer fingerprint, the holdout rule, the text field and the shard size.
``OUT/prepare.json`` (written atomically at the end) lists the prepared domains.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int
from .._io import atomic_write_json
from .._options import build_options
from ._encode import encoded_batches, init_worker
from .manifest import MANIFEST_NAME, Manifest, read_manifest
from .reader import TokenStore
from .sources import input_files, iter_documents, text_extensions
from .tokenizers import Tokenizer, load_tokenizer
from .writer import DEFAULT_SHARD_TOKENS, StoreWriter

__all__ = [
    "DEFAULT_HOLDOUT_EVERY",
    "DomainResult",
    "PREPARE_INDEX",
    "PrepareOptions",
    "check_domain_name",
    "check_out_dir",
    "find_domain_stores",
    "parse_domain_args",
    "prepare",
    "prepare_domains",
    "unchanged_store",
]

DEFAULT_HOLDOUT_EVERY = 100
PREPARE_INDEX = "prepare.json"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class PrepareOptions:
    """Settings of one ``prepare`` call (validated on creation).

    Args:
        text_field: the field / column holding the text (JSONL, parquet, datasets, tar ``.json``).
        text_ext: extra file extensions read as plain text, one document per file (``(".py", ".md")``;
            a comma-separated string is accepted).
        holdout_every: every k-th document goes to validation (module docstring); at least 2.
        workers: tokenizing processes (None: the number of CPUs); 1 tokenizes in this process.
        shard_tokens: tokens per shard file.
        progress: show a progress bar (only on a terminal).
    """

    text_field: str = "text"
    text_ext: tuple[str, ...] = ()
    holdout_every: int = DEFAULT_HOLDOUT_EVERY
    workers: int | None = None
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.text_field or not isinstance(self.text_field, str):
            raise ValueError(f"text_field must be a non-empty field name, got {self.text_field!r}")
        object.__setattr__(self, "text_ext", text_extensions(self.text_ext))
        check_int("holdout_every", self.holdout_every, minimum=2)  # 1 would hold out everything
        check_int("workers", self.workers, allow_none=True)
        check_int("shard_tokens", self.shard_tokens)

    @property
    def processes(self) -> int:
        """How many processes tokenize: ``workers``, else the number of CPUs."""
        return self.workers or os.cpu_count() or 1

    @property
    def holdout(self) -> dict[str, Any]:
        """The holdout rule as recorded in manifests."""
        return {"rule": "every_kth_document", "every": self.holdout_every,
                "val_when": "document_index % every == every - 1",
                "fallback": "last document when no other is held out and the domain has >= 2 documents"}


@dataclass(frozen=True)
class DomainResult:
    """What ``prepare`` did for one domain."""

    name: str
    manifest: Manifest
    skipped: bool
    seconds: float

    @property
    def val_tokens(self) -> int:
        """Tokens held out for validation."""
        val = self.manifest.splits.get("val")
        return val.num_tokens if val else 0

    def holdout_warning(self, holdout_every: int) -> str | None:
        """A sentence when the held-out share of tokens is far (over 3x either way) from the rule's
        ``1 / holdout_every`` (holding out by documents, a few long documents skew it), else ``None``."""
        val = self.val_tokens
        total = self.manifest.splits["train"].num_tokens + val
        intended = 1.0 / holdout_every
        share = val / total if total else 0.0
        if intended / 3 <= share <= 3 * intended:
            return None
        docs = sum(split.num_documents for split in self.manifest.splits.values())
        why = ("so its validation loss will be noisy" if share < intended
               else "which takes that much from training and weighs a few documents heavily")
        if val == 0 and docs < 2:
            return (f"domain {self.name!r}: nothing of its {total:,} tokens is held out for validation: it "
                    "is one document, and holding out needs two or more, so it has no validation data (the "
                    "runner and MixtureValidationDataset refuse a domain without held-out sequences): split "
                    "it into several documents")
        cause = (f"only {docs:,} documents, fewer than --holdout-every {holdout_every}, so the last one is "
                 "held out"
                 if docs < holdout_every else
                 f"every {holdout_every}-th of {docs:,} documents, and the documents differ in length")
        return (f"domain {self.name!r}: {val:,} of {total:,} tokens ({share:.2%}) are held out for "
                f"validation, far from the rule's {intended:.2%} ({cause}), {why}: split long documents into "
                "several, or choose --holdout-every")


def parse_domain_args(items: Sequence[str]) -> dict[str, str]:
    """Parse ``NAME=PATH`` strings (``--domain``) into an ordered mapping.

    Raises:
        ValueError: bad syntax, an invalid name, or a name given twice.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise ValueError(f"bad --domain {item!r}: expected NAME=PATH, e.g. web=data/web.jsonl")
        check_domain_name(name)
        if name in out:
            raise ValueError(f"domain {name!r} is given twice: {out[name]!r} and {path!r}")
        out[name] = path
    return out


def check_domain_name(name: str) -> None:
    """Refuse a domain name that is not a plain directory name (it names ``OUT/NAME/``)."""
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid domain name {name!r}: use letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit")


def _source(path: Path, store_dir: Path, tok: Tokenizer, opts: PrepareOptions,
            version_1: bool = False) -> dict[str, Any]:
    """The manifest's ``source`` (module docstring); a version 1 manifest recorded absolute paths."""
    where = (lambda f: os.fspath(f.resolve())) if version_1 else (lambda f: os.path.relpath(f, path))
    files = [[where(f), f.stat().st_size, f.stat().st_mtime_ns] for f in input_files(path, opts.text_ext)]
    desc = {"files": files, "tokenizer": tok.fingerprint, "holdout": opts.holdout,
            "text_field": opts.text_field, "shard_tokens": opts.shard_tokens}
    digest = hashlib.sha256(json.dumps(desc, sort_keys=True).encode("utf-8")).hexdigest()
    at = os.fspath(path.resolve()) if version_1 else os.path.relpath(path.resolve(), store_dir.resolve())
    return {"path": at, "num_files": len(files), "text_field": opts.text_field, "fingerprint": digest}


def _clear_store_dir(store_dir: Path) -> None:
    """Make ``store_dir`` hold no (partial) store: manifest first, then shards and temporaries."""
    (store_dir / MANIFEST_NAME).unlink(missing_ok=True)
    if store_dir.is_dir():
        for f in store_dir.iterdir():
            if f.is_file() and (f.name.endswith(".tmp") or re.match(r"^(train|val)-\d+\.bin$", f.name)):
                f.unlink()


def unchanged_store(store_dir: Path, fingerprint: str, version_1: Callable[[], str]) -> Manifest | None:
    """The manifest in ``store_dir`` when its ``source["fingerprint"]`` is ``fingerprint`` (``version_1()``
    for a version 1 manifest: it was written from these inputs and settings) and its files still have their
    sizes."""
    try:
        manifest = read_manifest(store_dir)
        if manifest.source.get("fingerprint") == (version_1() if manifest.version == 1 else fingerprint):
            TokenStore(store_dir, verify="size")
            return manifest
    except (FileNotFoundError, ValueError):
        pass
    return None


def _prepare_one(name: str, path: Path, store_dir: Path, tokenizer: Tokenizer, opts: PrepareOptions,
                 get_pool: Callable[[], Executor | None]) -> DomainResult:
    from tqdm.auto import tqdm

    start = time.perf_counter()
    source = _source(path, store_dir, tokenizer, opts)
    done = unchanged_store(store_dir, source["fingerprint"],
                           lambda: _source(path, store_dir, tokenizer, opts, version_1=True)["fingerprint"])
    if done is not None:
        return DomainResult(name, done, True, time.perf_counter() - start)
    _clear_store_dir(store_dir)
    k = opts.holdout_every
    writer = StoreWriter(store_dir, name, tokenizer.info, shard_tokens=opts.shard_tokens,
                         holdout=opts.holdout, source=source)
    bar = tqdm(desc=f"prepare {name}", unit="tok", unit_scale=True, disable=None if opts.progress else True)
    held: tuple[np.ndarray, np.ndarray] | None = None  # the latest train document, while no val yet
    num_docs = num_val = 0
    try:
        for tokens, lengths in encoded_batches(tokenizer, get_pool(),
                                               iter_documents(path, opts.text_field, opts.text_ext),
                                               2 * opts.processes):
            is_val = (np.arange(num_docs, num_docs + lengths.size) % k) == k - 1
            num_docs += lengths.size
            num_val += int(is_val.sum())
            if held is not None:
                writer.add_tokens("train", held[0], document_lengths=held[1])
                held = None
            if num_val == 0:  # keep the last document back: it may become the fallback val document
                last = int(lengths[:-1].sum())
                writer.add_tokens("train", tokens[:last], document_lengths=lengths[:-1])
                held = (tokens[last:], lengths[-1:])
            else:
                mask = np.repeat(is_val, lengths)
                writer.add_tokens("train", tokens[~mask], document_lengths=lengths[~is_val])
                writer.add_tokens("val", tokens[mask], document_lengths=lengths[is_val])
            bar.update(int(lengths.sum()))
        if num_docs == 0:
            raise ValueError(f"domain {name!r} has no documents: {os.fspath(path)!r} yielded no non-empty "
                             f"text (text field {opts.text_field!r})")
        if held is not None:
            writer.add_tokens("val" if num_docs >= 2 else "train", held[0], document_lengths=held[1])
        manifest = writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    return DomainResult(name, manifest, False, time.perf_counter() - start)


def check_out_dir(out: Path, names: Sequence[str], tokenizer: Tokenizer) -> dict[str, Any]:
    """Other domains already in ``out`` must share the tokenizer; returns their index entries."""
    kept: dict[str, Any] = {}
    existing = sorted(p for p in out.iterdir() if (p / MANIFEST_NAME).is_file()) if out.is_dir() else []
    for store_dir in existing:
        if store_dir.name in names:
            continue
        try:
            info = read_manifest(store_dir).tokenizer
        except (FileNotFoundError, ValueError):
            continue
        if info.fingerprint != tokenizer.fingerprint:
            raise ValueError(
                f"{os.fspath(out)!r} already holds domain {store_dir.name!r} tokenized by {info.spec!r} "
                f"(fingerprint {info.fingerprint[:16]}…), but this prepare uses {tokenizer.spec!r} "
                f"(fingerprint {tokenizer.fingerprint[:16]}…): use another --out directory")
        kept[store_dir.name] = store_dir.name
    return kept


def prepare_domains(
    domains: Mapping[str, str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer = "bytes",
    *,
    eos: str | int | None = None,
    options: PrepareOptions | None = None,
    **settings: Any,
) -> dict[str, DomainResult]:
    """Like :func:`prepare`, but returns per-domain results (skipped or not, seconds taken)."""
    opts = build_options(PrepareOptions, options, settings, caller="prepare")
    if not domains:
        raise ValueError("no domains given: pass at least one NAME=PATH")
    paths: dict[str, Path] = {}
    lowered: dict[str, str] = {}
    for name, path in domains.items():
        check_domain_name(name)
        if name.lower() in lowered:
            raise ValueError(f"domain names {lowered[name.lower()]!r} and {name!r} differ only in case")
        lowered[name.lower()] = name
        paths[name] = Path(path)
        if not paths[name].exists():
            raise FileNotFoundError(f"input of domain {name!r} does not exist: {os.fspath(path)!r}")
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer, eos=eos)
    out = Path(out_dir)
    kept = check_out_dir(out, list(paths), tok)
    out.mkdir(parents=True, exist_ok=True)
    pools: list[ProcessPoolExecutor] = []

    def pool() -> Executor | None:  # started on first use: nothing to start when every domain is done
        if opts.processes > 1 and not pools:
            pools.append(ProcessPoolExecutor(opts.processes, mp_context=get_context("spawn"),
                                             initializer=init_worker, initargs=(tok,)))
        return pools[0] if pools else None

    results: dict[str, DomainResult] = {}
    try:
        for name, path in paths.items():
            results[name] = _prepare_one(name, path, out / name, tok, opts, pool)
    finally:
        for p in pools:
            p.shutdown(wait=True, cancel_futures=True)
    for r in results.values():
        note = r.holdout_warning(opts.holdout_every)
        if note:
            warnings.warn(note, UserWarning, stacklevel=2)
    index = {"format": "autoscale-data-prepare", "version": 1, "tokenizer": asdict(tok.info),
             "holdout": opts.holdout, "domains": {**kept, **{n: n for n in results}}}
    atomic_write_json(out / PREPARE_INDEX, index)
    return results


def prepare(domains: Mapping[str, str | os.PathLike[str]], out_dir: str | os.PathLike[str],
            tokenizer: str | os.PathLike[str] | Tokenizer = "bytes", **kwargs: Any) -> dict[str, Manifest]:
    """Tokenize each domain's documents into ``out_dir/NAME/`` (one token store per domain).

    Args:
        domains: domain name -> input path (a ``.jsonl``/``.txt``/``.parquet``/``.tar`` file, a
            dataset saved with ``save_to_disk``, or a directory of these).
        out_dir: the output directory; afterwards it can be passed as ``domains=`` to the dataset.
        tokenizer: a spec for :func:`~autoscale_data.store.tokenizers.load_tokenizer` or a loaded
            tokenizer.
        **kwargs: keywords of :func:`prepare_domains`: ``eos=`` (EOS token, text or id, for a path
            tokenizer whose files name none), ``options=`` (a :class:`PrepareOptions`:
            ``text_field``, ``holdout_every``, ``workers``, ``shard_tokens``, ``progress``), or those
            settings as keywords (``prepare(..., workers=4)``; they override ``options``).

    Returns:
        Each domain's manifest, in the order given.

    Raises:
        ValueError: bad names or options, unknown tokenizer, unreadable or malformed input, an empty
            domain, or an output directory holding domains of another tokenizer.
        FileNotFoundError: a missing input path.
    """
    results = prepare_domains(domains, out_dir, tokenizer, **kwargs)
    return {name: r.manifest for name, r in results.items()}


def find_domain_stores(root: str | os.PathLike[str]) -> dict[str, Path]:
    """The domain stores of a prepare output directory, name -> store directory.

    Reads ``root/prepare.json`` when present (its domains, in order), else takes every
    sub-directory holding a ``manifest.json`` (sorted by name).

    Raises:
        FileNotFoundError: ``root`` is missing, holds no store, or a listed store has no manifest.
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"prepared data directory {os.fspath(base)!r} does not exist")
    index = base / PREPARE_INDEX
    if index.is_file():
        try:
            listed = json.loads(index.read_text("utf-8"))["domains"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{os.fspath(index)!r} is malformed: {exc!r}") from exc
        found = {name: base / sub for name, sub in listed.items()}
        for name, path in found.items():
            if not (path / MANIFEST_NAME).is_file():
                raise FileNotFoundError(f"domain {name!r} listed in {os.fspath(index)!r} has no finished "
                                        f"store at {os.fspath(path)!r}: re-run `autoscale-data prepare`")
        return found
    found = {p.name: p for p in sorted(base.iterdir()) if (p / MANIFEST_NAME).is_file()}
    if not found:
        raise FileNotFoundError(f"{os.fspath(base)!r} holds no token store (no sub-directory with a "
                                f"{MANIFEST_NAME}): run `autoscale-data prepare --out {os.fspath(base)}`")
    return found

"""Tokenized data read in place: a Megatron indexed dataset or a ``datasets`` dataset saved to disk.

:func:`register_megatron` and :func:`register_hf_dataset` write a manifest (``STORE_DIR/manifest.json``)
that describes existing token files without copying them; :class:`~autoscale_data.store.TokenStore`
and the mixture dataset then read those files through the same memory maps and checks as a store
written by ``prepare`` (sizes on open, SHA-256 on a shard's first read, dtype and vocabulary).

Layouts read:

* **Megatron** (``PREFIX.bin`` + ``PREFIX.idx``, written by Megatron's ``IndexedDatasetBuilder`` /
  ``tools/preprocess_data.py``): the ``.idx`` holds the token dtype (``uint16`` or ``int32``;
  ``int64`` is read too), every sequence's length and byte pointer, and the document boundaries
  (``document_indices``). The ``.bin`` holds the sequences back to back; it is read as the one
  token array it is (the pointers must be contiguous, which is what the builder writes). Sentence-
  split data (several sequences per document) reads the same: a document is its sequences.
* **datasets** (``Dataset.save_to_disk``; a ``DatasetDict`` directory gives its ``train`` and
  ``validation`` splits): the Arrow stream files listed in ``state.json``, column ``input_ids``
  (a list of ``int32``, ``int64``, ``uint16`` or ``uint32``, without nulls; the files must not be
  compressed). Each record batch's token values are one contiguous byte range of its file; one
  row is one document.

How documents become sequences (the same rule as a ``prepare`` store): the documents of a split are
concatenated in file order and training sequence ``k`` of length ``L`` is tokens
``[k*L, (k+1)*L)`` of that concatenation; sequences cross document boundaries and the last
``num_tokens % L`` tokens are unused. No token is inserted: a document ends with the tokenizer's
EOS only if the data already has it (Megatron's ``--append-eod``; for ``datasets``, if the
tokenizing map appended it). Registration counts the documents that end with EOS (the manifest's
``source.documents_ending_with_eos``) and warns when some do not.

Validation split: a ``DatasetDict``'s ``validation`` split (or ``val_prefix=`` for Megatron) when
given; otherwise the last ``num_documents // holdout_every`` documents (at least one when there are
two or more), a contiguous tail like Megatron's own ``--split``. If the data is ordered (by source,
by date), give a separate validation set instead.

Shards: the train and val token ranges are cut into shards of at most ``shard_tokens`` tokens (byte
ranges of the files, each with its own SHA-256, so a first read hashes one shard, not the whole
file); a ``datasets`` record batch is never merged with the next one. Registration reads every
token once (SHA-256, id range, EOS count); opening the store afterwards reads the manifest and
stats the files, nothing else (the ``.idx`` is not read again).

Where the manifest goes: any directory (``store_dir``); the data is never written to. A split's
``data_dir`` is recorded relative to ``store_dir`` (so moving both together keeps the store valid);
``store_dir`` may be the data's own directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._checks import check_int
from .._io import atomic_write_json, fsync_dir
from .manifest import MANIFEST_NAME, Manifest, ShardInfo, SplitInfo, read_manifest, write_manifest
from .prepare import DEFAULT_HOLDOUT_EVERY, PREPARE_INDEX, DomainResult, check_domain_name, check_out_dir
from .reader import TokenStore
from .tokenizers import Tokenizer, load_tokenizer
from .writer import DEFAULT_SHARD_TOKENS

__all__ = [
    "HF_FORMAT",
    "MEGATRON_FORMAT",
    "InPlaceSource",
    "MegatronIndex",
    "Segment",
    "hf_source",
    "megatron_source",
    "read_megatron_index",
    "register_domains",
    "register_hf_dataset",
    "register_in_place",
    "register_megatron",
]

MEGATRON_FORMAT = "megatron-indexed"
HF_FORMAT = "hf-datasets"
_MEGATRON_HEADER = b"MMIDIDX\x00\x00"
_MEGATRON_HEAD_BYTES = 9 + 8 + 1 + 8 + 8
# Megatron's DType codes (megatron/core/datasets/indexed_dataset.py)
_MEGATRON_CODES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64", 7: "float32",
                   8: "uint16"}
_READABLE = ("uint16", "uint32", "int32", "int64")
_SCAN_TOKENS = 1 << 24


@dataclass(frozen=True)
class Segment:
    """Whole documents stored back to back in one file: ``doc_lengths`` tokens from byte ``offset``."""

    file: str
    offset: int
    doc_lengths: np.ndarray
    file_bytes: int

    @property
    def num_tokens(self) -> int:
        return int(self.doc_lengths.sum())


@dataclass(frozen=True)
class InPlaceSource:
    """Token data found in place: its dtype, its directory and its segments, in document order.

    ``inputs`` are the files whose sizes and modification times identify the data (the token
    files and their index or ``state.json``); ``description`` goes into the manifest's ``source``.
    """

    kind: str
    dtype: str
    directory: Path
    segments: tuple[Segment, ...]
    inputs: tuple[Path, ...]
    description: dict[str, Any] = field(default_factory=dict)

    @property
    def num_documents(self) -> int:
        return sum(int(s.doc_lengths.size) for s in self.segments)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.segments)


# ------------------------------------------------------------------------------------------- Megatron
@dataclass(frozen=True)
class MegatronIndex:
    """The arrays of a Megatron ``.idx`` file (see the module docstring)."""

    dtype: str
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray
    multimodal: bool


def _megatron_paths(prefix: str | os.PathLike[str]) -> tuple[Path, Path]:
    text = os.fspath(prefix)
    if Path(text).is_dir():
        found = sorted(os.fspath(p.with_suffix("")) for p in Path(text).glob("*.idx"))
        there = (f"; it holds {', '.join(repr(f) for f in found[:5])}{' ...' if len(found) > 5 else ''}" if found
                 else "; it holds no .idx file")
        raise FileNotFoundError(f"Megatron prefix {text!r} is a directory: give the path prefix of one dataset's "
                                f".bin/.idx pair (PREFIX.bin and PREFIX.idx, without the suffix){there}")
    for suffix in (".bin", ".idx"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return Path(text + ".idx"), Path(text + ".bin")


def read_megatron_index(idx_path: str | os.PathLike[str]) -> MegatronIndex:
    """Read a Megatron ``.idx`` file (header, dtype code, sequence lengths and pointers, document indices).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: not a Megatron index, an unsupported version, or a size that disagrees with its counts.
    """
    path = Path(idx_path)
    if not path.is_file():
        raise FileNotFoundError(f"Megatron index {os.fspath(path)!r} does not exist")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(_MEGATRON_HEAD_BYTES)
        if len(head) < _MEGATRON_HEAD_BYTES or head[:9] != _MEGATRON_HEADER:
            raise ValueError(f"{os.fspath(path)!r} is not a Megatron indexed-dataset index (no MMIDIDX header)")
        version, code, n_seq, n_doc = struct.unpack("<QBQQ", head[9:])
        if version != 1:
            raise ValueError(f"{os.fspath(path)!r} has index version {version}; only version 1 is known")
        if code not in _MEGATRON_CODES:
            raise ValueError(f"{os.fspath(path)!r} has unknown dtype code {code}")
        plain = _MEGATRON_HEAD_BYTES + n_seq * (4 + 8) + n_doc * 8
        if size not in (plain, plain + n_seq):
            raise ValueError(f"{os.fspath(path)!r} is {size} bytes; {n_seq} sequences and {n_doc} document "
                             f"indices need {plain} (or {plain + n_seq} with sequence modes): truncated?")
        lengths = np.fromfile(fh, dtype="<i4", count=n_seq)
        pointers = np.fromfile(fh, dtype="<i8", count=n_seq)
        documents = np.fromfile(fh, dtype="<i8", count=n_doc)
    return MegatronIndex(_MEGATRON_CODES[code], lengths, pointers, documents, size != plain)


def _check_dtype_agrees(where: str, index: MegatronIndex, starts: np.ndarray, bin_path: Path) -> None:
    """Raise the dtype mismatch when the index's pointers or the ``.bin``'s size fit another token width.

    An ``.idx`` written with one dtype for a ``.bin`` of another has pointers (and a file size) that step
    by the other width per token: say so, rather than that the sequences are not back to back.
    """
    itemsize = np.dtype(index.dtype).itemsize
    tokens, bin_bytes = int(starts[-1]), bin_path.stat().st_size
    for width in (1, 2, 4, 8):
        if width == itemsize:
            continue
        by_pointers = starts.size > 2 and np.array_equal(index.sequence_pointers, starts[:-1] * width)
        if by_pointers or (tokens and bin_bytes == tokens * width):
            evidence = (f"its sequence pointers step by {width} bytes per token" if by_pointers else
                        f"its size, {bin_bytes} bytes for {tokens} tokens, is {width} bytes per token")
            raise ValueError(
                f"{where}: the .idx's dtype disagrees with the .bin: the .idx says {index.dtype} tokens ({itemsize} "
                f"bytes each), but the .bin {os.fspath(bin_path)!r} holds {width}-byte tokens ({evidence}). Write "
                "the .idx with the dtype the .bin was written with (megatron-core's "
                "IndexedDatasetBuilder(..., dtype=...)), or re-run preprocess_data.py")


def megatron_source(prefix: str | os.PathLike[str]) -> InPlaceSource:
    """The Megatron dataset ``PREFIX.bin`` / ``PREFIX.idx`` as one segment of whole documents.

    Raises:
        FileNotFoundError: a missing ``.bin`` or ``.idx``.
        ValueError: an unsupported dtype, sequences that are not stored back to back, document
            indices that do not cover the sequences, or a ``.bin`` of the wrong size.
    """
    idx_path, bin_path = _megatron_paths(prefix)
    if not bin_path.is_file():
        raise FileNotFoundError(f"Megatron data file {os.fspath(bin_path)!r} does not exist")
    index = read_megatron_index(idx_path)
    where = os.fspath(idx_path)
    if index.dtype not in _READABLE:
        raise ValueError(f"{where}: tokens of dtype {index.dtype} cannot be read in place "
                         f"(expected one of {_READABLE})")
    itemsize = np.dtype(index.dtype).itemsize
    lengths = index.sequence_lengths.astype(np.int64)
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError(f"{where}: negative sequence lengths")
    starts = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    if not np.array_equal(index.sequence_pointers, starts[:-1] * itemsize):
        _check_dtype_agrees(where, index, starts, bin_path)
        raise ValueError(f"{where}: the sequences are not stored back to back in the .bin (their pointers are "
                         "not the running sum of their lengths), so the file is not one token array")
    docs = index.document_indices
    if docs.size == 0 or docs[0] != 0 or docs[-1] != lengths.size or np.any(np.diff(docs) < 0):
        raise ValueError(f"{where}: document indices must rise from 0 to the sequence count {lengths.size}")
    bin_bytes = bin_path.stat().st_size
    if bin_bytes != int(starts[-1]) * itemsize:
        _check_dtype_agrees(where, index, starts, bin_path)
        raise ValueError(f"{os.fspath(bin_path)!r} is {bin_bytes} bytes; its index says {int(starts[-1])} "
                         f"{index.dtype} tokens ({int(starts[-1]) * itemsize} bytes)")
    doc_lengths = starts[docs[1:]] - starts[docs[:-1]]
    segment = Segment(bin_path.name, 0, doc_lengths, bin_bytes)
    return InPlaceSource(MEGATRON_FORMAT, index.dtype, bin_path.parent, (segment,), (idx_path, bin_path),
                         {"format": MEGATRON_FORMAT, "prefix": os.fspath(bin_path.resolve().with_suffix("")),
                          "sequences": int(lengths.size), "multimodal": index.multimodal})


# ------------------------------------------------------------------------------------------- datasets
def _hf_split_dirs(path: Path) -> tuple[Path, Path | None]:
    """(train dir, validation dir or None) of a saved ``Dataset`` or ``DatasetDict``."""
    if (path / "state.json").is_file():
        return path, None
    dict_file = path / "dataset_dict.json"
    if not dict_file.is_file():
        raise FileNotFoundError(f"{os.fspath(path)!r} is not a dataset saved with save_to_disk "
                                "(no state.json or dataset_dict.json)")
    splits = json.loads(dict_file.read_text("utf-8")).get("splits", [])
    if "train" not in splits:
        raise ValueError(f"the DatasetDict at {os.fspath(path)!r} has no 'train' split (splits: {splits})")
    val = next((s for s in ("validation", "valid", "val") if s in splits), None)
    return path / "train", (path / val if val else None)


def hf_source(path: str | os.PathLike[str], column: str = "input_ids") -> InPlaceSource:
    """A saved ``Dataset`` directory's token column as segments (one per Arrow record batch).

    Raises:
        FileNotFoundError: no ``state.json`` or a missing data file.
        ImportError: pyarrow is not installed.
        ValueError: a missing or unsupported column, nulls, compressed buffers, or an indices mapping.
    """
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - pyarrow comes with the formats extra
        raise ImportError("reading a datasets directory needs pyarrow: pip install 'autoscale-data[formats]'") from exc
    directory = Path(path)
    state_path = directory / "state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{os.fspath(directory)!r} is not a Dataset saved with save_to_disk (no state.json)")
    state = json.loads(state_path.read_text("utf-8"))
    if any("indices" in key and state[key] for key in state):
        raise ValueError(f"{os.fspath(directory)!r} has an indices mapping (a select/shuffle that was not "
                         "flattened): call dataset.flatten_indices() before save_to_disk")
    files = [directory / entry["filename"] for entry in state.get("_data_files", [])]
    if not files:
        raise ValueError(f"{os.fspath(state_path)!r} lists no data files")
    segments: list[Segment] = []
    dtype: str | None = None
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"data file {os.fspath(file)!r} listed in {os.fspath(state_path)!r} is missing")
        file_bytes = file.stat().st_size
        with pa.memory_map(os.fspath(file)) as mm:
            base = mm.read_buffer(1).address if file_bytes else 0
            mm.seek(0)
            reader = pa.ipc.open_stream(mm)
            if column not in reader.schema.names:
                raise ValueError(f"{os.fspath(file)!r} has no column {column!r} (columns: {reader.schema.names})")
            for batch in reader:
                col = batch.column(column)
                if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} is {col.type}, expected a list "
                                     "of token ids")
                values = col.values
                name = str(values.type)
                if name not in _READABLE:
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} holds {name} ids; "
                                     f"expected one of {_READABLE}")
                if dtype is not None and dtype != name:
                    raise ValueError(f"{os.fspath(directory)!r} mixes token dtypes {dtype} and {name}")
                dtype = name
                if col.null_count or values.null_count:
                    raise ValueError(f"column {column!r} of {os.fspath(file)!r} has null rows or ids")
                if batch.num_rows == 0:
                    continue
                offsets = col.offsets.to_numpy().astype(np.int64)
                first, last = int(offsets[0]), int(offsets[-1])
                itemsize = np.dtype(name).itemsize
                buf = values.buffers()[1]
                start = (buf.address - base) if buf is not None else 0
                start += (values.offset + first) * itemsize
                if last > first and (buf is None or not 0 <= start <= file_bytes - (last - first) * itemsize):
                    raise ValueError(f"the token ids of {os.fspath(file)!r} are not stored in the file as is "
                                     "(a compressed Arrow file?); save it uncompressed to read it in place")
                segments.append(Segment(file.name, start, np.diff(offsets), file_bytes))
    return InPlaceSource(HF_FORMAT, dtype or "int32", directory, tuple(segments), (state_path, *files),
                         {"format": HF_FORMAT, "path": os.fspath(directory), "column": column})


# ------------------------------------------------------------------------------------------- manifest
def _take_documents(segments: Sequence[Segment], first: int, stop: int, itemsize: int) -> list[Segment]:
    """The parts of ``segments`` holding documents ``[first, stop)`` (numbered across all segments)."""
    out: list[Segment] = []
    at = 0
    for seg in segments:
        n = int(seg.doc_lengths.size)
        lo, hi = max(first - at, 0), min(stop - at, n)
        if lo < hi:
            skip = int(seg.doc_lengths[:lo].sum())
            out.append(Segment(seg.file, seg.offset + skip * itemsize, seg.doc_lengths[lo:hi], seg.file_bytes))
        at += n
    return out


@dataclass(frozen=True)
class _Range:
    """A shard to be: ``num_tokens`` tokens of ``path`` from byte ``offset``; ``ends`` are its documents' ends."""

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
            docs = int(np.searchsorted(ends, b, side="right") - np.searchsorted(ends, a, side="right"))
            if a == 0:
                docs += int(np.searchsorted(ends, 0, side="right"))
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
                             f"[0, {tokenizer.vocab_size}) of tokenizer {tokenizer.spec!r}: was it tokenized by "
                             "another tokenizer?")
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
                 holdout: dict[str, Any], shard_tokens: int) -> str:
    files = []
    for src in (train, val):
        for f in src.inputs if src is not None else ():
            st = f.stat()
            files.append([os.fspath(f.resolve()), st.st_size, st.st_mtime_ns])
    desc = {"files": files, "tokenizer": tokenizer.fingerprint, "holdout": holdout, "shard_tokens": shard_tokens,
            "source": train.description}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode("utf-8")).hexdigest()


def _holdout_rule(val: InPlaceSource | None, holdout_every: int) -> dict[str, Any]:
    if val is not None:
        return {"rule": "separate_validation_data", "path": os.fspath(val.directory)}
    return {"rule": "last_documents", "every": holdout_every,
            "val_when": "document_index >= num_documents - num_documents // every",
            "fallback": "the last document when that holds out none and there are >= 2 documents"}


def register_in_place(
    name: str,
    train: InPlaceSource,
    store_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    *,
    val: InPlaceSource | None = None,
    holdout_every: int = DEFAULT_HOLDOUT_EVERY,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    progress: bool = False,
    eos: str | int | None = None,
    workers: int | None = None,
) -> DomainResult:
    """Write ``store_dir/manifest.json`` describing ``train`` (and ``val``) in place; see the module docstring.

    Shards are read (hashed, their ids checked) by ``workers`` threads (default: the number of CPUs).
    Re-running with unchanged inputs and settings keeps the existing manifest (``skipped``).

    Raises:
        ValueError: an invalid name, token ids outside the tokenizer's vocabulary, a dtype too
            small for it, or train and val data of different dtypes.
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    check_domain_name(name)
    check_int("holdout_every", holdout_every, minimum=2)
    check_int("shard_tokens", shard_tokens)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer, eos=eos)
    if val is not None and val.dtype != train.dtype:
        raise ValueError(f"train data has {train.dtype} tokens but validation data has {val.dtype}")
    if train.num_tokens == 0:
        raise ValueError(f"domain {name!r} has no tokens in {os.fspath(train.directory)!r}")
    if tok.vocab_size > int(np.iinfo(train.dtype).max) + 1:  # before reading any token (the manifest checks it too)
        raise ValueError(f"vocab_size {tok.vocab_size} does not fit dtype {train.dtype} of the data in "
                         f"{os.fspath(train.directory)!r}: was it tokenized by tokenizer {tok.spec!r}?")
    out = Path(store_dir)
    holdout = _holdout_rule(val, holdout_every)
    fingerprint = _fingerprint(train, val, tok, holdout, shard_tokens)
    try:
        existing = read_manifest(out)
        if existing.source.get("fingerprint") == fingerprint:
            TokenStore(out, verify="size")
            return DomainResult(name, existing, True, time.perf_counter() - start)
    except (FileNotFoundError, ValueError):
        pass
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    dtype = np.dtype(train.dtype).newbyteorder("<")
    if val is None:
        n = train.num_documents
        n_val = n // holdout_every or (1 if n >= 2 else 0)
        parts = {"train": (train, _take_documents(train.segments, 0, n - n_val, dtype.itemsize)),
                 "val": (train, _take_documents(train.segments, n - n_val, n, dtype.itemsize))}
    else:
        parts = {"train": (train, list(train.segments)), "val": (val, list(val.segments))}
    plans = {split: (src, _plan(segs, dtype.itemsize, shard_tokens, src.directory))
             for split, (src, segs) in parts.items()}
    total = sum(r.num_tokens for _, ranges in plans.values() for r in ranges)
    bar = tqdm(desc=f"register {name}", total=total, unit="tok", unit_scale=True,
               disable=None if progress else True)
    splits: dict[str, SplitInfo] = {}
    eos_ended = num_docs = 0
    try:
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            for split, (src, ranges) in plans.items():
                scanned = list(pool.map(lambda r: _scan(r, dtype, tok, bar), ranges))
                eos_ended += sum(ended for _, ended in scanned)
                num_docs += sum(r.num_documents for r in ranges)
                splits[split] = SplitInfo(tuple(shard for shard, _ in scanned), _relative_dir(src.directory, out))
    finally:
        bar.close()
    source = {**train.description, "fingerprint": fingerprint, "documents": num_docs,
              "documents_ending_with_eos": eos_ended}
    if val is not None:
        source["validation"] = val.description
    manifest = Manifest(name=name, dtype=train.dtype, tokenizer=tok.info, splits=splits, holdout=holdout,
                        source=source)
    fsync_dir(out)
    write_manifest(out, manifest)
    if eos_ended < num_docs:
        warnings.warn(f"domain {name!r}: {num_docs - eos_ended} of {num_docs} documents do not end with the EOS id "
                      f"{tok.eos_id}; sequences run across those document boundaries without a separator "
                      "(Megatron: preprocess with --append-eod)", UserWarning, stacklevel=2)
    return DomainResult(name, manifest, False, time.perf_counter() - start)


def register_megatron(
    prefix: str | os.PathLike[str],
    store_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    *,
    name: str | None = None,
    val_prefix: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> Manifest:
    """Register the Megatron dataset ``PREFIX.bin`` / ``PREFIX.idx`` as the store ``store_dir`` (read in place).

    Args:
        prefix: the dataset's path prefix (``.bin`` / ``.idx`` may be given too).
        store_dir: where the manifest goes (created; the data's directory is fine).
        tokenizer: the tokenizer that made the data (a spec for ``load_tokenizer`` or a loaded one):
            its vocabulary bounds the ids, its fingerprint decides which stores mix.
        name: the domain name (default: ``store_dir``'s name).
        val_prefix: a separate Megatron dataset to validate on (default: hold out the last documents).
        **kwargs: ``holdout_every``, ``shard_tokens``, ``progress``, ``eos``, ``workers`` of :func:`register_in_place`.

    Returns:
        The manifest written (or kept, when the data and settings are unchanged).
    """
    val = megatron_source(val_prefix) if val_prefix is not None else None
    return register_in_place(name or Path(store_dir).resolve().name, megatron_source(prefix), store_dir,
                             tokenizer, val=val, **kwargs).manifest


def register_hf_dataset(
    path: str | os.PathLike[str],
    store_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    *,
    name: str | None = None,
    column: str = "input_ids",
    **kwargs: Any,
) -> Manifest:
    """Register a tokenized ``datasets`` directory (``save_to_disk``) as the store ``store_dir`` (read in place).

    Args:
        path: a saved ``Dataset`` (its rows are the train documents) or ``DatasetDict`` (its
            ``train`` split, and its ``validation`` split if it has one).
        store_dir: where the manifest goes (created).
        tokenizer: the tokenizer that made ``column`` (see :func:`register_megatron`).
        name: the domain name (default: ``store_dir``'s name).
        column: the token-id column (a list of integers per row).
        **kwargs: ``holdout_every``, ``shard_tokens``, ``progress``, ``eos``, ``workers`` of :func:`register_in_place`.

    Returns:
        The manifest written (or kept, when the data and settings are unchanged).
    """
    train_dir, val_dir = _hf_split_dirs(Path(path))
    val = hf_source(val_dir, column) if val_dir is not None else None
    return register_in_place(name or Path(store_dir).resolve().name, hf_source(train_dir, column), store_dir,
                             tokenizer, val=val, **kwargs).manifest


def register_domains(
    out_dir: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | Tokenizer,
    *,
    megatron: Mapping[str, str | os.PathLike[str]] | None = None,
    hf: Mapping[str, str | os.PathLike[str]] | None = None,
    column: str = "input_ids",
    megatron_val: Mapping[str, str | os.PathLike[str]] | None = None,
    **kwargs: Any,
) -> dict[str, DomainResult]:
    """Register data read in place as domains ``out_dir/NAME/`` of a ``prepare`` output directory.

    ``out_dir/prepare.json`` lists them next to the domains already there (which must share the
    tokenizer), so ``out_dir`` can be given to the mixture dataset as is.

    Args:
        out_dir: the output directory (created).
        tokenizer: the tokenizer that made the data.
        megatron: domain name -> Megatron path prefix.
        hf: domain name -> ``save_to_disk`` directory.
        column: the token-id column of the ``datasets`` domains.
        megatron_val: domain name -> a separate Megatron dataset to validate that domain on (default:
            hold out its last documents), as ``register_megatron``'s ``val_prefix``.
        **kwargs: ``holdout_every``, ``shard_tokens``, ``progress``, ``eos``, ``workers`` of :func:`register_in_place`.
    """
    megatron, hf, megatron_val = dict(megatron or {}), dict(hf or {}), dict(megatron_val or {})
    unknown = sorted(set(megatron_val) - set(megatron))
    if unknown:
        raise ValueError(f"validation prefixes given for {unknown}, which are not Megatron domains "
                         f"(those are {sorted(megatron)}): give each as --from-megatron NAME=PREFIX too")
    both = sorted(set(megatron) & set(hf))
    if both:
        raise ValueError(f"domains {both} are given both as Megatron and as datasets data")
    if not megatron and not hf:
        raise ValueError("no domains given: pass at least one Megatron prefix or datasets directory")
    for name in (*megatron, *hf):
        check_domain_name(name)
    eos = kwargs.pop("eos", None)
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer, eos=eos)
    out = Path(out_dir)
    kept = check_out_dir(out, [*megatron, *hf], tok)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, DomainResult] = {}
    for name, prefix in megatron.items():
        val = megatron_source(megatron_val[name]) if name in megatron_val else None
        results[name] = register_in_place(name, megatron_source(prefix), out / name, tok, val=val, **kwargs)
    for name, path in hf.items():
        train_dir, val_dir = _hf_split_dirs(Path(path))
        val = hf_source(val_dir, column) if val_dir is not None else None
        results[name] = register_in_place(name, hf_source(train_dir, column), out / name, tok, val=val, **kwargs)
    index_path = out / PREPARE_INDEX
    index: dict[str, Any] = {}
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text("utf-8"))
        except json.JSONDecodeError:
            index = {}
    domains = {**kept, **dict(index.get("domains", {})), **{n: n for n in results}}
    index.update({"format": "autoscale-data-prepare", "version": 1, "tokenizer": asdict(tok.info),
                  "domains": domains})
    index.setdefault("holdout", _holdout_rule(None, kwargs.get("holdout_every", DEFAULT_HOLDOUT_EVERY)))
    atomic_write_json(index_path, index)
    return results

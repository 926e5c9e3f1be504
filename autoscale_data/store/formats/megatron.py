"""Megatron indexed datasets (``PREFIX.bin`` + ``PREFIX.idx``) read in place.

The ``.idx`` (written by Megatron's ``IndexedDatasetBuilder`` / ``tools/preprocess_data.py``) holds
the token dtype (``uint16`` or ``int32``; ``int64`` is read too), every sequence's length and byte
pointer, and the document boundaries (``document_indices``). The ``.bin`` holds the sequences back to
back; it is read as the one token array it is (the pointers must be contiguous, which is what the
builder writes). Sentence-split data (several sequences per document) reads the same: a document is
its sequences. A separate validation dataset is given by :class:`MegatronOptions`' ``val_prefix``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import READABLE_DTYPES, InPlaceFormat, InPlaceSource, Segment

__all__ = ["FORMAT", "MegatronIndex", "MegatronOptions", "megatron_hint", "megatron_source",
           "read_megatron_index"]

_HEADER = b"MMIDIDX\x00\x00"
_HEAD_BYTES = 9 + 8 + 1 + 8 + 8
# Megatron's DType codes (megatron/core/datasets/indexed_dataset.py)
_CODES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64", 7: "float32", 8: "uint16"}


@dataclass(frozen=True)
class MegatronOptions:
    """Options of the Megatron format.

    Attributes:
        val_prefix: a separate Megatron dataset to validate on (default: hold out the last documents).
    """

    val_prefix: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if self.val_prefix is not None and not isinstance(self.val_prefix, (str, os.PathLike)):
            raise ValueError("val_prefix must be the path prefix of a Megatron dataset, got "
                             f"{self.val_prefix!r}")


@dataclass(frozen=True)
class MegatronIndex:
    """The arrays of a Megatron ``.idx`` file (see the module docstring)."""

    dtype: str
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray
    multimodal: bool


def _paths(prefix: str | os.PathLike[str]) -> tuple[Path, Path]:
    text = os.fspath(prefix)
    if Path(text).is_dir():
        found = sorted(os.fspath(p.with_suffix("")) for p in Path(text).glob("*.idx"))
        there = ("; it holds "
                 f"{', '.join(repr(f) for f in found[:5])}{' ...' if len(found) > 5 else ''}" if found
                 else "; it holds no .idx file")
        raise FileNotFoundError(f"Megatron prefix {text!r} is a directory: give the path prefix of one "
                                f"dataset's .bin/.idx pair (PREFIX.bin and PREFIX.idx, without the "
                                f"suffix){there}")
    text = text.removesuffix(".bin").removesuffix(".idx")
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
        head = fh.read(_HEAD_BYTES)
        if len(head) < _HEAD_BYTES or head[:9] != _HEADER:
            raise ValueError(f"{os.fspath(path)!r} is not a Megatron indexed-dataset index (no MMIDIDX "
                             "header)")
        version, code, n_seq, n_doc = struct.unpack("<QBQQ", head[9:])
        if version != 1:
            raise ValueError(f"{os.fspath(path)!r} has index version {version}; only version 1 is known")
        if code not in _CODES:
            raise ValueError(f"{os.fspath(path)!r} has unknown dtype code {code}")
        plain = _HEAD_BYTES + n_seq * (4 + 8) + n_doc * 8
        if size not in (plain, plain + n_seq):
            raise ValueError(f"{os.fspath(path)!r} is {size} bytes; {n_seq} sequences and {n_doc} document "
                             f"indices need {plain} (or {plain + n_seq} with sequence modes): truncated?")
        lengths = np.fromfile(fh, dtype="<i4", count=n_seq)
        pointers = np.fromfile(fh, dtype="<i8", count=n_seq)
        documents = np.fromfile(fh, dtype="<i8", count=n_doc)
    return MegatronIndex(_CODES[code], lengths, pointers, documents, size != plain)


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
                f"{where}: the .idx's dtype disagrees with the .bin: the .idx says {index.dtype} tokens "
                f"({itemsize} bytes each), but the .bin {os.fspath(bin_path)!r} holds {width}-byte tokens "
                f"({evidence}). Write "
                "the .idx with the dtype the .bin was written with (megatron-core's "
                "IndexedDatasetBuilder(..., dtype=...)), or re-run preprocess_data.py")


def megatron_source(prefix: str | os.PathLike[str]) -> InPlaceSource:
    """The Megatron dataset ``PREFIX.bin`` / ``PREFIX.idx`` as one segment of whole documents.

    Raises:
        FileNotFoundError: a missing ``.bin`` or ``.idx``.
        ValueError: an unsupported dtype, sequences that are not stored back to back, document
            indices that do not cover the sequences, or a ``.bin`` of the wrong size.
    """
    idx_path, bin_path = _paths(prefix)
    if not bin_path.is_file():
        raise FileNotFoundError(f"Megatron data file {os.fspath(bin_path)!r} does not exist")
    index = read_megatron_index(idx_path)
    where = os.fspath(idx_path)
    if index.dtype not in READABLE_DTYPES:
        raise ValueError(f"{where}: tokens of dtype {index.dtype} cannot be read in place "
                         f"(expected one of {READABLE_DTYPES})")
    itemsize = np.dtype(index.dtype).itemsize
    lengths = index.sequence_lengths.astype(np.int64)
    if lengths.size and int(lengths.min()) < 0:
        raise ValueError(f"{where}: negative sequence lengths")
    starts = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    if not np.array_equal(index.sequence_pointers, starts[:-1] * itemsize):
        _check_dtype_agrees(where, index, starts, bin_path)
        raise ValueError(f"{where}: the sequences are not stored back to back in the .bin (their pointers "
                         "are not the running sum of their lengths), so the file is not one token array")
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
    return InPlaceSource(index.dtype, bin_path.parent, (segment,), (idx_path, bin_path),
                         {"format": FORMAT.name, "prefix": os.fspath(bin_path.resolve().with_suffix("")),
                          "sequences": int(lengths.size), "multimodal": index.multimodal})


def _open(path: Path, options: MegatronOptions) -> tuple[InPlaceSource, InPlaceSource | None]:
    val = megatron_source(options.val_prefix) if options.val_prefix is not None else None
    return megatron_source(path), val


def _detect(path: Path) -> bool:
    text = os.fspath(path)
    return text.endswith((".bin", ".idx")) and path.is_file() or Path(text + ".idx").is_file()


FORMAT = InPlaceFormat("megatron", MegatronOptions, _open, _detect,
                       "a Megatron dataset prefix (PREFIX.bin + PREFIX.idx)", "PREFIX",
                       {"val_prefix": ("--megatron-val", "--val-prefix")})


def megatron_hint(store_dir: str | os.PathLike[str]) -> str:
    """``": ... register it first with prepare --from-megatron ..."`` when ``store_dir`` is a Megatron prefix
    (``PREFIX.bin``/``.idx`` exist) or a folder holding ``.idx`` files; ``""`` otherwise."""
    store_dir = Path(store_dir)
    text = os.fspath(store_dir).removesuffix(".bin").removesuffix(".idx")
    if Path(text + ".bin").is_file() or Path(text + ".idx").is_file():
        prefixes = [text]
    elif store_dir.is_dir():
        prefixes = sorted(os.fspath(p.with_suffix("")) for p in store_dir.glob("*.idx"))
    else:
        return ""
    if not prefixes:
        return ""
    name = Path(prefixes[0]).name.replace("_text_document", "") or "NAME"
    more = f" (and the other prefixes there: {', '.join(prefixes[1:4])}{' ...' if len(prefixes) > 4 else ''})" \
        if len(prefixes) > 1 else ""
    return (f": {prefixes[0]!r} is a Megatron dataset (.bin/.idx), which is read through a manifest: "
            f"register it first with `autoscale-data prepare --from-megatron {name}={prefixes[0]}{more} "
            f"--out STORES --tokenizer TOKENIZER`, then give STORES (or STORES/{name}) as the domains")

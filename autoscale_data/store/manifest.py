"""The on-disk format of a token store: one directory per domain.

Layout of ``DIR/`` (one domain)::

    manifest.json          written last, atomically: a store without it is not a store
    train-00000.bin        raw little-endian tokens (uint16 or uint32), np.memmap-able
    train-00001.bin
    val-00000.bin          the held-out part of the domain (validation)

Documents are concatenated, each followed by the tokenizer's EOS id. A training sequence ``k`` of
length ``L`` is the token range ``[k*L, (k+1)*L)`` of the concatenated train split (it may cross a
shard boundary); the last ``num_tokens % L`` tokens are never used.

:func:`store_fingerprint` (in every run id) hashes the data: dtype, tokenizer and every shard's counts and
SHA-256, not where the source text or the files lay. Version 1 manifests (before 2026-11-28) keep the one
they had: the SHA-256 of the manifest's bytes.

Data read in place (:mod:`autoscale_data.store.inplace`: a Megatron ``.bin``, a ``datasets`` Arrow
file) uses three optional fields that our own stores leave at their defaults (and out of the JSON):
a split's ``data_dir`` (where its files are: absolute, or relative to the manifest's directory;
``""`` = beside the manifest), a shard's ``offset`` (the byte where its tokens start in the file)
and ``file_bytes`` (the whole file's size, checked instead of ``num_tokens * itemsize``). A shard is
then a token range of a file; several shards may be ranges of one file.

Shard file names are plain names: not ``.`` or ``..``, no ``/`` or ``\\``, no control characters,
at most :data:`MAX_FILE_NAME_BYTES` bytes of UTF-8 (the file system allows 255; the writer and the
remote cache add up to 21 bytes: ``.NAME.sha256.<random>.tmp``). A manifest breaking this is
refused when it is read, before any file is opened or fetched.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._checks import check_int
from .._io import atomic_write_json
from .._records import Record, omitted, required
from .formats import megatron_hint

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "MAX_FILE_NAME_BYTES",
    "Manifest",
    "ShardInfo",
    "SplitInfo",
    "TokenizerInfo",
    "check_file_name",
    "dtype_for_vocab",
    "read_manifest",
    "store_fingerprint",
    "write_manifest",
]

FORMAT_NAME = "autoscale-data-store"
FORMAT_VERSION = 2
_VERSIONS = (1, FORMAT_VERSION)  # 1: the fingerprint is of the manifest's bytes (module docstring)
MANIFEST_NAME = "manifest.json"
MAX_FILE_NAME_BYTES = 224
# uint16 / uint32: what the writer produces; int32 / int64: tokens read in place (Megatron, Arrow)
_DTYPES = ("uint16", "uint32", "int32", "int64")
_DTYPE_LIMIT = {"uint16": 1 << 16, "uint32": 1 << 32, "int32": 1 << 31, "int64": 1 << 63}


def check_file_name(name: object, what: str = "shard file name") -> str:
    """Return ``name`` if it is a plain file name (see the module docstring), else raise ``ValueError``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}")
    if name in (".", ".."):
        raise ValueError(f"{what} {name!r} names a directory, not a file")
    if "/" in name or "\\" in name:
        raise ValueError(f"{what} {name!r} must not contain a path separator ('/' or '\\')")
    bad = sorted({c for c in name if unicodedata.category(c) in ("Cc", "Cs")})
    if bad:
        raise ValueError(f"{what} {name!r} contains control or unencodable characters {bad!r}")
    size = len(name.encode("utf-8"))
    if size > MAX_FILE_NAME_BYTES:
        raise ValueError(f"{what} {name[:40]!r}… is {size} bytes long; at most {MAX_FILE_NAME_BYTES} bytes "
                         "are allowed (file systems allow 255, and suffixes are added to it)")
    return name


def dtype_for_vocab(vocab_size: int) -> str:
    """The smallest supported token dtype that holds ids ``0 .. vocab_size-1``."""
    check_int("vocab_size", vocab_size)
    if vocab_size <= _DTYPE_LIMIT["uint16"]:
        return "uint16"
    if vocab_size <= _DTYPE_LIMIT["uint32"]:
        return "uint32"
    raise ValueError(f"vocab_size {vocab_size} does not fit in uint32 tokens")


@dataclass(frozen=True)
class TokenizerInfo(Record):
    """What tokenized a store. Two stores mix only if their fingerprints are equal."""

    spec: str
    fingerprint: str
    vocab_size: int
    eos_id: int

    def __post_init__(self) -> None:
        check_int("tokenizer vocab_size", self.vocab_size)
        if not 0 <= self.eos_id < self.vocab_size:
            raise ValueError(f"tokenizer eos_id {self.eos_id} is outside the vocabulary [0, "
                             f"{self.vocab_size})")
        if not self.fingerprint:
            raise ValueError("tokenizer fingerprint must be a non-empty string")


@dataclass(frozen=True)
class ShardInfo(Record):
    """One shard of a split: a whole file, or (data read in place) ``num_tokens`` tokens from byte ``offset``.

    ``sha256`` is the digest of the shard's bytes (the whole file, or its range); ``file_bytes`` is
    the file's size when the shard is a range of it (None: the file holds exactly this shard).
    """

    file: str
    num_tokens: int
    num_documents: int
    sha256: str
    offset: int = omitted(default=0)
    file_bytes: int | None = omitted(default=None)

    def __post_init__(self) -> None:
        check_file_name(self.file)
        check_int(f"shard {self.file!r} num_tokens", self.num_tokens, minimum=0)
        check_int(f"shard {self.file!r} num_documents", self.num_documents, minimum=0)
        check_int(f"shard {self.file!r} offset", self.offset, minimum=0)
        check_int(f"shard {self.file!r} file_bytes", self.file_bytes, minimum=0, allow_none=True)
        if not isinstance(self.sha256, str) or len(self.sha256) != 64:
            raise ValueError(f"shard {self.file!r} sha256 must be 64 hex digits, got {self.sha256!r}")

    @property
    def in_place(self) -> bool:
        """Whether the shard is a range of a larger file (data read in place)."""
        return self.offset != 0 or self.file_bytes is not None

    def expected_file_bytes(self, itemsize: int) -> int:
        """The size the shard's file must have."""
        return self.file_bytes if self.file_bytes is not None else self.offset + self.num_tokens * itemsize


@dataclass(frozen=True)
class SplitInfo(Record):
    """A split (``train`` or ``val``): an ordered list of shards, in ``data_dir`` (module docstring)."""

    shards: tuple[ShardInfo, ...] = ()
    data_dir: str = omitted(default="")

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, str) or "\x00" in self.data_dir:
            raise ValueError(f"split data_dir must be a path string, got {self.data_dir!r}")

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.shards)

    @property
    def num_documents(self) -> int:
        return sum(s.num_documents for s in self.shards)


@dataclass(frozen=True)
class Manifest(Record):
    """Everything needed to read and check one domain's store.

    A record (:mod:`autoscale_data._records`), as are its parts: ``manifest.json`` has one key per field; the
    in-place fields (a split's ``data_dir``, a shard's ``offset`` and ``file_bytes``) are left out at their
    defaults, and ``format`` and ``version`` must be present.
    """

    name: str
    dtype: str
    tokenizer: TokenizerInfo
    splits: dict[str, SplitInfo]
    holdout: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    format: str = required(default=FORMAT_NAME)
    version: int = required(default=FORMAT_VERSION)

    def __post_init__(self) -> None:
        if self.format != FORMAT_NAME:
            raise ValueError(f"not an autoscale-data store manifest: format {self.format!r}, "
                             f"expected {FORMAT_NAME!r}")
        if self.version not in _VERSIONS:
            raise ValueError(f"unsupported store format version {self.version}, expected one of {_VERSIONS}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"unsupported token dtype {self.dtype!r}, expected one of {_DTYPES}")
        if self.tokenizer.vocab_size > _DTYPE_LIMIT[self.dtype]:
            raise ValueError(f"vocab_size {self.tokenizer.vocab_size} does not fit dtype {self.dtype}")
        if "train" not in self.splits:
            raise ValueError(f"store {self.name!r} manifest has no 'train' split")
        itemsize = 8 if self.dtype == "int64" else 4 if self.dtype.endswith("32") else 2
        for split in self.splits.values():
            for s in split.shards:
                if s.offset + s.num_tokens * itemsize > s.expected_file_bytes(itemsize):
                    raise ValueError(f"shard {s.file!r}: {s.num_tokens} {self.dtype} tokens from byte "
                                     f"{s.offset} overrun the file's {s.file_bytes} bytes")

    @property
    def in_place(self) -> bool:
        """Whether any split reads files elsewhere or ranges of files (data read in place)."""
        return any(split.data_dir or any(s.in_place for s in split.shards) for split in self.splits.values())

    @property
    def num_tokens(self) -> int:
        """Training tokens (the held-out split is not counted)."""
        return self.splits["train"].num_tokens


def read_manifest(store_dir: str | os.PathLike[str]) -> Manifest:
    """Read ``store_dir/manifest.json``; clear errors when it is missing or malformed."""
    path = Path(store_dir) / MANIFEST_NAME
    if not Path(store_dir).is_dir():
        raise FileNotFoundError(f"token store directory {os.fspath(store_dir)!r} does not exist"
                                f"{megatron_hint(store_dir)}")
    if not path.is_file():
        hint = megatron_hint(store_dir)
        what = (f"a token store{hint}" if hint else
                "a finished token store (run `autoscale-data prepare`, or re-run it if it was interrupted)")
        raise FileNotFoundError(f"{os.fspath(path)!r} is missing: {os.fspath(store_dir)!r} is not {what}")
    try:
        obj = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"store manifest {os.fspath(path)!r} is not valid JSON: {exc}") from exc
    try:
        return Manifest.from_json(obj)
    except ValueError as exc:
        raise ValueError(f"malformed store manifest {os.fspath(path)!r}: {exc}") from None


def store_fingerprint(store_dir: str | os.PathLike[str], manifest: Manifest | None = None) -> str:
    """16 hex digits that stand for the store's data in run ids (module docstring); ``manifest``: the store's,
    when already read."""
    m = read_manifest(store_dir) if manifest is None else manifest
    if m.version == 1:
        data = (Path(store_dir) / MANIFEST_NAME).read_bytes()
    else:
        shards = {name: [[s.num_tokens, s.num_documents, s.sha256] for s in split.shards]
                  for name, split in m.splits.items()}
        tok = m.tokenizer
        data = json.dumps([m.dtype, tok.fingerprint, tok.vocab_size, tok.eos_id, shards],
                          sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def write_manifest(store_dir: str | os.PathLike[str], manifest: Manifest) -> None:
    """Atomically write the manifest (the last step of writing a store)."""
    atomic_write_json(Path(store_dir) / MANIFEST_NAME, manifest.to_json())

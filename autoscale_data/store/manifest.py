"""The on-disk format of a token store: one directory per domain.

Layout of ``DIR/`` (one domain)::

    manifest.json          written last, atomically: a store without it is not a store
    train-00000.bin        raw little-endian tokens (uint16 or uint32), np.memmap-able
    train-00001.bin
    val-00000.bin          the held-out part of the domain (validation)

Documents are concatenated, each followed by the tokenizer's EOS id. A training sequence ``k`` of
length ``L`` is the token range ``[k*L, (k+1)*L)`` of the concatenated train split (it may cross a
shard boundary); the last ``num_tokens % L`` tokens are never used.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._checks import check_int
from .._io import atomic_write_json

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MANIFEST_NAME",
    "Manifest",
    "ShardInfo",
    "SplitInfo",
    "TokenizerInfo",
    "dtype_for_vocab",
    "read_manifest",
    "write_manifest",
]

FORMAT_NAME = "autoscale-data-store"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
_DTYPES = ("uint16", "uint32")


def dtype_for_vocab(vocab_size: int) -> str:
    """The smallest supported token dtype that holds ids ``0 .. vocab_size-1``."""
    check_int("vocab_size", vocab_size)
    if vocab_size <= 1 << 16:
        return "uint16"
    if vocab_size <= 1 << 32:
        return "uint32"
    raise ValueError(f"vocab_size {vocab_size} does not fit in uint32 tokens")


@dataclass(frozen=True)
class TokenizerInfo:
    """What tokenized a store. Two stores mix only if their fingerprints are equal."""

    spec: str
    fingerprint: str
    vocab_size: int
    eos_id: int

    def __post_init__(self) -> None:
        check_int("tokenizer vocab_size", self.vocab_size)
        if not 0 <= self.eos_id < self.vocab_size:
            raise ValueError(f"tokenizer eos_id {self.eos_id} is outside the vocabulary [0, {self.vocab_size})")
        if not self.fingerprint:
            raise ValueError("tokenizer fingerprint must be a non-empty string")


@dataclass(frozen=True)
class ShardInfo:
    """One shard file of a split."""

    file: str
    num_tokens: int
    num_documents: int
    sha256: str

    def __post_init__(self) -> None:
        check_int(f"shard {self.file!r} num_tokens", self.num_tokens, minimum=0)
        check_int(f"shard {self.file!r} num_documents", self.num_documents, minimum=0)
        if os.path.basename(self.file) != self.file:
            raise ValueError(f"shard file name must not contain a directory, got {self.file!r}")


@dataclass(frozen=True)
class SplitInfo:
    """A split (``train`` or ``val``): an ordered list of shards."""

    shards: tuple[ShardInfo, ...] = ()

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.shards)

    @property
    def num_documents(self) -> int:
        return sum(s.num_documents for s in self.shards)


@dataclass(frozen=True)
class Manifest:
    """Everything needed to read and check one domain's store."""

    name: str
    dtype: str
    tokenizer: TokenizerInfo
    splits: dict[str, SplitInfo]
    holdout: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if self.format != FORMAT_NAME:
            raise ValueError(f"not an autoscale-data store manifest: format {self.format!r}, "
                             f"expected {FORMAT_NAME!r}")
        if self.version != FORMAT_VERSION:
            raise ValueError(f"unsupported store format version {self.version}, expected {FORMAT_VERSION}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"unsupported token dtype {self.dtype!r}, expected one of {_DTYPES}")
        if self.tokenizer.vocab_size > (1 << 16) and self.dtype == "uint16":
            raise ValueError(f"vocab_size {self.tokenizer.vocab_size} does not fit dtype uint16")
        if "train" not in self.splits:
            raise ValueError(f"store {self.name!r} manifest has no 'train' split")

    @property
    def num_tokens(self) -> int:
        """Training tokens (the held-out split is not counted)."""
        return self.splits["train"].num_tokens

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Manifest:
        try:
            splits = {
                name: SplitInfo(tuple(ShardInfo(**s) for s in split["shards"]))
                for name, split in obj["splits"].items()
            }
            return cls(
                name=obj["name"],
                dtype=obj["dtype"],
                tokenizer=TokenizerInfo(**obj["tokenizer"]),
                splits=splits,
                holdout=dict(obj.get("holdout", {})),
                source=dict(obj.get("source", {})),
                format=obj.get("format", ""),
                version=obj.get("version", -1),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed store manifest: {exc!r}") from exc


def read_manifest(store_dir: str | os.PathLike[str]) -> Manifest:
    """Read ``store_dir/manifest.json``; clear errors when it is missing or malformed."""
    path = Path(store_dir) / MANIFEST_NAME
    if not Path(store_dir).is_dir():
        raise FileNotFoundError(f"token store directory {os.fspath(store_dir)!r} does not exist")
    if not path.is_file():
        raise FileNotFoundError(
            f"{os.fspath(path)!r} is missing: {os.fspath(store_dir)!r} is not a finished token store "
            "(run `autoscale-data prepare`, or re-run it if it was interrupted)")
    try:
        obj = json.loads(path.read_text("utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"store manifest {os.fspath(path)!r} is not valid JSON: {exc}") from exc
    return Manifest.from_json(obj)


def write_manifest(store_dir: str | os.PathLike[str], manifest: Manifest) -> None:
    """Atomically write the manifest (the last step of writing a store)."""
    atomic_write_json(Path(store_dir) / MANIFEST_NAME, manifest.to_json())

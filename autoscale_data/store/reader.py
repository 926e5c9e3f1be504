"""Reading a token store: memory-mapped shards, checked against the manifest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from .._io import file_sha256
from .manifest import Manifest, SplitInfo, read_manifest

__all__ = ["TokenSplit", "TokenStore", "Verify"]

Verify = Literal["checksum", "size", "none"]
_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def _check_shard(path: Path, expected_tokens: int, itemsize: int, sha256: str, verify: Verify) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"shard {os.fspath(path)!r} listed in the manifest is missing")
    if verify == "none":
        return
    stat = path.stat()
    expected_bytes = expected_tokens * itemsize
    if stat.st_size != expected_bytes:
        raise ValueError(f"shard {os.fspath(path)!r} is truncated or has the wrong size: {stat.st_size} bytes "
                         f"on disk, manifest says {expected_bytes} ({expected_tokens} tokens)")
    if verify == "checksum":
        key = (os.fspath(path.resolve()), stat.st_size, stat.st_mtime_ns)
        digest = _VERIFIED.get(key) or file_sha256(path)
        if digest != sha256:
            raise ValueError(f"shard {os.fspath(path)!r} is corrupted: sha256 {digest[:16]}… does not match "
                             f"the manifest's {sha256[:16]}…")
        _VERIFIED[key] = digest


class TokenSplit:
    """One split of a store as a single virtual token array (shards memory-mapped, never loaded)."""

    def __init__(self, store_dir: Path, split: SplitInfo, dtype: np.dtype, verify: Verify) -> None:
        self.dtype = dtype
        self.shards: list[np.ndarray] = []
        offsets = [0]
        for shard in split.shards:
            path = store_dir / shard.file
            _check_shard(path, shard.num_tokens, dtype.itemsize, shard.sha256, verify)
            if shard.num_tokens:
                self.shards.append(np.memmap(path, dtype=dtype, mode="r", shape=(shard.num_tokens,)))
                offsets.append(offsets[-1] + shard.num_tokens)
        self.offsets = np.asarray(offsets, dtype=np.int64)  # start of each shard, then the total
        self.num_tokens = int(self.offsets[-1])

    def num_sequences(self, seq_len: int) -> int:
        """How many whole sequences of ``seq_len`` tokens the split holds."""
        if seq_len <= 0:
            raise ValueError(f"seq_len must be positive, got {seq_len}")
        return self.num_tokens // seq_len

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the split: a memmap view when inside one shard, else a copy."""
        if not 0 <= start <= stop <= self.num_tokens:
            raise IndexError(f"token range [{start}, {stop}) outside [0, {self.num_tokens})")
        if start == stop:
            return np.empty(0, dtype=self.dtype)
        k = int(np.searchsorted(self.offsets, start, side="right")) - 1
        base = int(self.offsets[k]) if self.shards else 0
        if k < len(self.shards) and stop - base <= self.shards[k].shape[0]:
            return self.shards[k][start - base : stop - base]
        parts = []
        while start < stop:
            k = int(np.searchsorted(self.offsets, start, side="right")) - 1
            base = int(self.offsets[k])
            end = min(stop, int(self.offsets[k + 1]))
            parts.append(self.shards[k][start - base : end - base])
            start = end
        return np.concatenate(parts)

    def sequence(self, index: int, seq_len: int) -> np.ndarray:
        """Sequence ``index`` (tokens ``[index*seq_len, (index+1)*seq_len)``)."""
        start = index * seq_len
        return self.tokens(start, start + seq_len)


class TokenStore:
    """A finished domain store: ``TokenStore("store/web").train.sequence(3, 2048)``.

    Args:
        path: the store directory (holding ``manifest.json``).
        verify: ``"checksum"`` (default) checks every shard's size and SHA-256 once per process;
            ``"size"`` only sizes; ``"none"`` only that the files exist.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: Verify = "checksum") -> None:
        if verify not in ("checksum", "size", "none"):
            raise ValueError(f"verify must be 'checksum', 'size' or 'none', got {verify!r}")
        self.path = Path(path)
        self.manifest: Manifest = read_manifest(self.path)
        self.name = self.manifest.name
        self.dtype = np.dtype(self.manifest.dtype).newbyteorder("<")
        self._verify = verify
        self.train = self._open_split(self.manifest.splits["train"])
        self._val: TokenSplit | None = None

    def _open_split(self, split: SplitInfo) -> TokenSplit:
        """How this store reads a split (a remote store fetches shards on first touch instead)."""
        return TokenSplit(self.path, split, self.dtype, self._verify)

    @property
    def val(self) -> TokenSplit:
        """The held-out split (opened on first use)."""
        if self._val is None:
            split = self.manifest.splits.get("val", SplitInfo())
            self._val = self._open_split(split)
        return self._val

    @property
    def num_tokens(self) -> int:
        return self.train.num_tokens

    def num_sequences(self, seq_len: int) -> int:
        return self.train.num_sequences(seq_len)

    def __repr__(self) -> str:
        t = self.manifest.tokenizer
        return (f"TokenStore({os.fspath(self.path)!r}, name={self.name!r}, tokens={self.num_tokens}, "
                f"dtype={self.manifest.dtype}, tokenizer={t.spec!r})")

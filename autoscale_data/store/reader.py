"""Reading a token store: one lazily memory-mapped reader per split, checked against the manifest.

:class:`TokenSplit` is the one reader of token data (the mixture and validation datasets read
through it too). Its shards are memory-mapped on first touch, never loaded, one map per shard per
process; a token range that crosses a shard boundary is assembled here and nowhere else. Where the
shard files are is a :class:`ShardFiles` object's business: a local store's directory, or (see
:mod:`autoscale_data.store.remote`) a cache that downloads a shard when it is first touched.

Verification (``verify``):

* ``"none"``: a local store's shard files must exist (checked on open);
* ``"size"``: and have the manifest's size (checked on open for a local store, on first touch for a
  cached remote shard);
* ``"checksum"`` (default): and, on a shard's first read, the manifest's SHA-256 (of the file, or of
  the shard's byte range for data read in place). A mismatch raises
  ``ValueError`` naming the shard, the expected and the actual digest. Each shard is hashed once:
  per process (a memo keyed by path, size and mtime) and across the DataLoader workers of one
  reader (flags in shared memory, and a lock on the shard file while it is hashed). A freshly
  downloaded remote shard was verified while it arrived. :meth:`TokenStore.verify` checks every
  shard now.
"""

from __future__ import annotations

import bisect
import ctypes
import hashlib
import itertools
import multiprocessing
import multiprocessing.context
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._checks import check_int
from ._cache import locked
from .manifest import Manifest, ShardInfo, SplitInfo, read_manifest

__all__ = ["ShardFiles", "TokenSplit", "TokenStore", "Verify"]

Verify = Literal["checksum", "size", "none"]
VERIFY_MODES = ("checksum", "size", "none")
# (path, size, mtime_ns, offset, nbytes) -> sha256, per process
_VERIFIED: dict[tuple[str, int, int, int, int], str] = {}
_HASH_CHUNK = 1 << 22


def check_verify(verify: Any) -> None:
    """Raise ``ValueError`` unless ``verify`` is one of :data:`VERIFY_MODES`."""
    if verify not in VERIFY_MODES:
        raise ValueError(f"verify must be 'checksum', 'size' or 'none', got {verify!r}")


def _check_file(path: Path, shard: ShardInfo, itemsize: int, verify: Verify) -> None:
    """The cheap checks: the file exists and (unless ``verify == "none"``) has the manifest's size."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"shard {os.fspath(path)!r} listed in the manifest is missing") from None
    expected = shard.expected_file_bytes(itemsize)
    if verify != "none" and size != expected:
        change = "grew" if size > expected else "is truncated or shrank"
        raise ValueError(f"shard {os.fspath(path)!r} {change}: it has the wrong size, {size} bytes on disk, "
                         f"manifest says {expected} ({shard.num_tokens} tokens from byte {shard.offset}). "
                         "The data changed after the store was written: for data read in place (Megatron "
                         ".bin/.idx, a datasets directory) register it again (`autoscale-data prepare "
                         "--from-megatron NAME=PREFIX` / `--from-hf NAME=DIR` with the same --out); for a "
                         "prepared store re-run `autoscale-data prepare`")


def _sha256_of(fh: Any, nbytes: int | None = None) -> str:
    """SHA-256 of the next ``nbytes`` bytes of ``fh`` (all of the rest when None)."""
    digest = hashlib.sha256()
    left = -1 if nbytes is None else nbytes
    while left and (chunk := fh.read(_HASH_CHUNK if left < 0 else min(_HASH_CHUNK, left))):
        digest.update(chunk)
        left -= len(chunk) if left > 0 else 0
    return digest.hexdigest()


def _check_checksum(path: Path, shard: ShardInfo, itemsize: int) -> None:
    """Raise ``ValueError`` unless the SHA-256 of the shard (its file, or its byte range) is the manifest's.

    Each (file, range) is hashed at most once per process. While hashing, the file is locked
    (``flock``), so processes checking the same shard at the same time hash it once between them
    when they share flags (see :class:`TokenSplit`).
    """
    offset, nbytes = shard.offset, shard.num_tokens * itemsize if shard.in_place else None
    with open(path, "rb") as fh:
        stat = os.fstat(fh.fileno())
        key = (os.fspath(path.resolve()), stat.st_size, stat.st_mtime_ns, offset,
               -1 if nbytes is None else nbytes)
        digest = _VERIFIED.get(key)
        if digest is None:
            fh.seek(offset)
            digest = _sha256_of(fh, nbytes)
        if digest != shard.sha256:
            where = "" if nbytes is None else f" (bytes {offset}..{offset + nbytes})"
            raise ValueError(f"shard {os.fspath(path)!r}{where} is corrupted: its sha256 is {digest}, "
                             f"the manifest says {shard.sha256}")
        _VERIFIED[key] = digest


class ShardFiles:
    """Where a split's shard files are on this machine: here, ``directory / file`` (a local store).

    The remote store's cache subclasses it (:meth:`local_path` downloads on first request,
    :meth:`opened` pins a mapped file against eviction).
    """

    #: whether :meth:`local_path` can be asked again after a file vanished (a cache re-downloads)
    refetches = False

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def check_on_open(self, shards: Sequence[ShardInfo], itemsize: int, verify: Verify) -> None:
        """The checks made when a split is opened: every local file exists (and has its size)."""
        for shard in shards:
            _check_file(self.directory / shard.file, shard, itemsize, verify)

    def local_path(self, shard: ShardInfo) -> tuple[Path, bool]:
        """The shard's file, and whether it was verified against its SHA-256 just now (a download)."""
        return self.directory / shard.file, False

    def opened(self, path: Path, mapping: np.ndarray) -> None:
        """Called when ``path`` has been memory-mapped as ``mapping``."""


def _shared_flags(n: int) -> Any:
    """``n`` zeroed bytes in shared memory: inherited by forked DataLoader workers, sent to spawned ones."""
    return multiprocessing.RawArray(ctypes.c_uint8, max(n, 1))


class TokenSplit:
    """One split of a store as a single virtual token array (shards mapped on first touch, never loaded).

    Args:
        files: where the shard files are (:class:`ShardFiles`).
        split: the split's shards, from the manifest.
        dtype: the token dtype (little-endian).
        verify: see the module docstring.

    Pickling (e.g. into DataLoader workers) sends where the files are, never token data; maps are
    made again in the receiving process, and the verification flags stay shared with it when it is a
    spawned worker.
    """

    def __init__(self, files: ShardFiles, split: SplitInfo, dtype: np.dtype, verify: Verify) -> None:
        check_verify(verify)
        files.check_on_open(split.shards, dtype.itemsize, verify)
        self.dtype = dtype
        self._files = files
        self._verify: Verify = verify
        self._infos = tuple(s for s in split.shards if s.num_tokens)
        # shard starts, then the end
        self._bounds = [0, *itertools.accumulate(s.num_tokens for s in self._infos)]
        self.num_tokens = self._bounds[-1]
        self._maps: list[np.ndarray | None] = [None] * len(self._infos)
        self._only: np.ndarray | None = None  # the map, once mapped, when the split has exactly one shard
        self._checked = _shared_flags(len(self._infos)) if verify == "checksum" else None

    # ----------------------------------------------------------------- shards
    @property
    def num_shards(self) -> int:
        """Non-empty shards of the split."""
        return len(self._infos)

    def shard(self, k: int) -> np.ndarray:
        """Shard ``k``'s tokens (a read-only array over its memory map; mapped, checked, fetched on first
        use)."""
        m = self._maps[k]
        return m if m is not None else self._map(k)

    def _map(self, k: int) -> np.ndarray:
        info = self._infos[k]
        # a cache may lose the file between fetch and map (another process evicts it)
        for attempt in range(2):
            path, fresh = self._files.local_path(info)
            try:
                if fresh:
                    self._mark_checked(k)
                else:
                    self._check(k, path, info)
                mm = np.memmap(path, dtype=self.dtype, mode="r", shape=(info.num_tokens,), offset=info.offset)
                break
            except FileNotFoundError:
                if attempt or not self._files.refetches:
                    raise
        self._files.opened(path, mm)
        # a plain-ndarray view (the map stays alive as its base): slicing an np.memmap builds a memmap
        # subclass object each time, a few microseconds per sequence
        arr = mm.view(np.ndarray)
        self._maps[k] = arr
        if len(self._maps) == 1:
            self._only = arr
        return arr

    def _mark_checked(self, k: int) -> None:
        if self._checked is not None:
            self._checked[k] = 1

    def _check(self, k: int, path: Path, info: ShardInfo) -> None:
        _check_file(path, info, self.dtype.itemsize, "size" if self._verify == "checksum" else self._verify)
        flags = self._checked
        if flags is None or flags[k]:
            return
        with locked(path):
            if not flags[k]:  # another worker may have checked it while this one waited
                _check_checksum(path, info, self.dtype.itemsize)
                flags[k] = 1

    def verify(self) -> None:
        """Check every shard's size and SHA-256 now (a remote store downloads what is not cached).

        Raises:
            ValueError: a shard is truncated or corrupted (naming it, the expected and actual digest).
            FileNotFoundError: a shard is missing.
        """
        for k, info in enumerate(self._infos):
            path, fresh = self._files.local_path(info)
            if not fresh:
                _check_file(path, info, self.dtype.itemsize, "size")
                _check_checksum(path, info, self.dtype.itemsize)
            self._mark_checked(k)

    # ----------------------------------------------------------------- tokens
    def num_sequences(self, seq_len: int) -> int:
        """How many whole sequences of ``seq_len`` tokens the split holds."""
        check_int("seq_len", seq_len)
        return self.num_tokens // seq_len

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the split: a view of one shard's map when inside it, else a copy.

        This is the one place where token ranges are cut across shard boundaries.
        """
        if not 0 <= start <= stop <= self.num_tokens:
            raise IndexError(f"token range [{start}, {stop}) outside [0, {self.num_tokens})")
        if start == stop:
            return np.empty(0, dtype=self.dtype)
        bounds = self._bounds
        k = bisect.bisect_right(bounds, start) - 1
        if stop <= bounds[k + 1]:
            return self.shard(k)[start - bounds[k] : stop - bounds[k]]
        parts = []
        while start < stop:
            k = bisect.bisect_right(bounds, start) - 1
            end = min(stop, bounds[k + 1])
            parts.append(self.shard(k)[start - bounds[k] : end - bounds[k]])
            start = end
        return np.concatenate(parts)

    def sequence(self, index: int, seq_len: int) -> np.ndarray:
        """Sequence ``index`` (tokens ``[index*seq_len, (index+1)*seq_len)``): a view, or a copy across
        shards."""
        start = index * seq_len
        only = self._only
        if only is not None and 0 <= start and start + seq_len <= self.num_tokens:
            return only[start : start + seq_len]
        return self.tokens(start, start + seq_len)

    # ----------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"] = [None] * len(self._maps)
        state["_only"] = None
        if self._checked is not None and multiprocessing.context.get_spawning_popen() is None:
            state["_checked"] = None  # plain pickling: the copy checks again (fresh flags)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._verify == "checksum" and self._checked is None:
            self._checked = _shared_flags(len(self._infos))


class TokenStore:
    """A finished domain store: ``TokenStore("store/web").train.sequence(3, 2048)``.

    Args:
        path: the store directory (holding ``manifest.json``).
        verify: ``"checksum"`` (default), ``"size"`` or ``"none"``; see the module docstring. Opening
            checks that the shard files exist and have their sizes; checksums are checked on each
            shard's first read (or all at once by :meth:`verify`).
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: Verify = "checksum") -> None:
        check_verify(verify)
        self.path = Path(path)
        self.manifest: Manifest = self._load_manifest()
        self.name = self.manifest.name
        self.dtype = np.dtype(self.manifest.dtype).newbyteorder("<")
        self._verify: Verify = verify
        self._files = self._shard_files()
        self.train = self._open_split("train")
        self._val: TokenSplit | None = None

    def _load_manifest(self) -> Manifest:
        """Hook: where the manifest comes from (a remote store has it already)."""
        return read_manifest(self.path)

    def _shard_files(self) -> ShardFiles:
        """Hook: where the shard files are (a remote store's cache fetches them on first touch)."""
        return ShardFiles(self.path)

    def _open_split(self, name: str) -> TokenSplit:
        split = self.manifest.splits.get(name, SplitInfo())
        files = self._files
        if split.data_dir:  # data read in place: the split's files are elsewhere (relative to the manifest)
            files = ShardFiles(self.path / split.data_dir)
        return TokenSplit(files, split, self.dtype, self._verify)

    @property
    def val(self) -> TokenSplit:
        """The held-out split (opened on first use)."""
        if self._val is None:
            self._val = self._open_split("val")
        return self._val

    @property
    def num_tokens(self) -> int:
        return self.train.num_tokens

    def num_sequences(self, seq_len: int) -> int:
        return self.train.num_sequences(seq_len)

    def verify(self) -> TokenStore:
        """Check every shard of both splits (size and SHA-256) now; returns ``self``.

        Raises:
            ValueError: a truncated or corrupted shard (naming it, the expected and actual digest).
            FileNotFoundError: a missing shard.
        """
        self.train.verify()
        self.val.verify()
        return self

    def __repr__(self) -> str:
        t = self.manifest.tokenizer
        return (f"{type(self).__name__}({os.fspath(self.path)!r}, name={self.name!r}, "
                f"tokens={self.num_tokens}, dtype={self.manifest.dtype}, tokenizer={t.spec!r})")
